"""The ``sovseal`` command line: a thin shell over the same ``Sovseal`` API the library exposes.

Commands parse arguments and render results; what they do lives in the SDK and in
:mod:`sovseal.sdk` (shared with the MCP server), so there is no logic that exists only here.
Human output is plain lines that never wrap (``rich`` draws only the recall table, ``mind`` and
progress bars), with short snapshot ids; ``--json`` prints machine-readable JSON on stdout instead, ids in
full. Progress bars and notes go to stderr, so stdout stays clean for pipes. Every
:class:`SovsealError` becomes one line on stderr, in CLI words, and a documented exit code
(``EXIT_CODES``), never a traceback.

Start-up is part of the interface: a command that neither recalls nor embeds imports no vector
index, model runtime or server library (tests/cli/test_startup.py), so it starts in a few tenths
of a second; the imports that need them sit inside the functions that use them.
"""

from __future__ import annotations

import errno
import json
import os
import re
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn, TypeVar

import click

from sovseal.cli.graph import draw_graph
from sovseal.errors import (
    EXIT_BUSY,  # noqa: F401 -- sovseal.cli.EXIT_* and EXIT_CODES stay importable from here
    EXIT_CODES,  # noqa: F401
    EXIT_ERROR,
    EXIT_INTEGRITY,
    EXIT_KEY,  # noqa: F401
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_USAGE,
    PASS_KEY_CLI,
    RUN_VERIFY,
    IntegrityError,
    InvalidInputError,
    KeyUnavailableError,
    MemoryNotFoundError,
    ModelCallError,
    ReplicationError,
    SovsealError,
    StoreNotFoundError,
)
from sovseal.models import Progress
from sovseal.paths import ENV_HOME, store_dir, store_exists
from sovseal.sdk import maintenance
from sovseal.sdk.backup import export_backup, import_backup, read_backup_header
from sovseal.sdk.keyrotation import retire_old_project, rotate_key
from sovseal.sdk.opening import ENV_BRANCH, ENV_KEY, open_store, resolve_key
from sovseal.sdk.views import (
    GraphNode,
    branch_heads,
    branch_table,
    jsonable,
    recurring_patterns,
    require_memory,
    resolve_snapshot,
    snapshot_graph,
)
from sovseal.storage.entries import MEMORY_TYPES, PROVENANCES

if TYPE_CHECKING:  # the store and the keychain load when a command opens one, so `--help` is quick
    from sovseal.models import Memory
    from sovseal.replication.status import ReplicationStatus
    from sovseal.sdk.client import EmbedFn, Sovseal

F = TypeVar("F", bound=Callable[..., Any])

# -- exit codes -----------------------------------------------------------------------------------

# EXIT_OK ... EXIT_ERROR and EXIT_CODES are the catalogue's (sovseal.errors), where each error class
# carries its own exit_code; an OS error is EXIT_ERROR.
EXIT_INTERRUPTED = 130  # Ctrl-C (SIGINT), as shells report 128 + the signal's number (not an error: not in EXIT_CODES)


def exit_code(exc: BaseException) -> int:
    """The exit code for an error (see ``EXIT_CODES``): a sovseal error's class carries it."""
    return exc.exit_code if isinstance(exc, SovsealError) else EXIT_ERROR


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


# -- errors in CLI words ---------------------------------------------------------------------------
#
# Every sovseal error carries its advice twice (sovseal.errors): in Python words, which str(exc)
# appends to its message, and in CLI words (cli_advice). The CLI prints the message alone and then
# the CLI words; a key error's depend on where the key came from (see :class:`_KeyOrigin`).

_PASS_KEY = PASS_KEY_CLI


@dataclass
class _KeyOrigin:
    """How the CLI got, or looked for, a store's key: what a key error has to tell the user to fix."""

    directory: Path
    given: str | None  # "--key-file FILE" or "SOVSEAL_KEY": a key the user passed; None: looked up
    create: bool = False  # a new key may be made (a new store)
    backend: str | None = None  # where the key was found; None while it has not been

    def shown(self) -> str:
        """Where the key came from, for humans: the option or variable, else the backend."""
        return self.given or self.backend or "-"

    def advice(self) -> str:
        if self.backend is not None:  # a key was found, and it did not open the store
            if self.given == ENV_KEY:
                return (
                    f"the key came from {ENV_KEY}: set it to this store's exported key, "
                    "or unset it to use the key saved for the store"
                )
            if self.given:
                return f"the key came from {self.given}: pass the file `sovseal key export` wrote for this store"
            kind, _, where = self.backend.partition(":")
            if kind == "file":
                return f"the key came from the key file {where}: restore the store's own key file from a backup, or {_PASS_KEY}"
            return f"the key came from the OS keychain ({self.backend}): {_PASS_KEY}"
        from sovseal.crypto.keychain import FALLBACK_ENV, key_file_path

        fallback_on = os.environ.get(FALLBACK_ENV, "").strip().lower() == "file"
        if not fallback_on and key_file_path(self.directory).exists():
            return f"set {FALLBACK_ENV}=file to use the store's key file, or {_PASS_KEY}"
        if self.create:
            return (
                f"set {FALLBACK_ENV}=file to keep the key in a 0600 file inside the store, pass --key-file FILE or "
                "SOVSEAL_KEY with a key from `sovseal key export`, or install and unlock an OS keychain"
            )
        where = "" if fallback_on else f" (and set {FALLBACK_ENV}=file on a machine without an OS keychain)"
        return f"save the store's exported key with `sovseal key import --path {self.directory}`{where}, or {_PASS_KEY}"


_ORIGIN = "sovseal.key_origin"  # where commands leave their _KeyOrigin in click's shared ctx.meta


def _advice(exc: SovsealError, origin: _KeyOrigin | None) -> str | None:
    """What to do next about ``exc`` in CLI words, or None when the CLI has nothing to add: its
    ``cli_advice``, said for the key this command used when it is about passing the key."""
    if isinstance(exc, KeyUnavailableError) and exc.cli_advice and origin is not None:
        return origin.advice()
    return exc.cli_advice or None


def _cli_message(exc: SovsealError, advice: str | None) -> str:
    """``exc``'s message on one line, without its Python advice, followed by ``advice`` (CLI words)."""
    text = _one_line(exc.message)
    if not advice:
        return text
    return f"{text} {advice}" if text.endswith(":") else f"{text.rstrip(' .;')}; {advice}"


def _verify_problem(problem: str) -> str:
    """A problem ``verify`` found, without the core's advice to run verify (this is verify)."""
    return _one_line(problem).removesuffix(f"; {RUN_VERIFY}")


class SovsealGroup(click.Group):
    """A click group that turns sovseal and OS errors into one line and an exit code."""

    ORDER = (
        "init", "status", "store", "recall", "get", "delete", "purge", "log", "branches", "fork", "rollback",
        "verify", "compact", "mind", "export", "import", "key", "rebuild-index", "consolidate", "serve", "restore", "mcp", "demo",
    )

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = super().list_commands(ctx)
        rank = {name: i for i, name in enumerate(self.ORDER)}
        return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:  # the group's own options: `sovseal --bogus`
            _usage_failure(exc)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:  # a command's arguments and options, or an unknown command
            _usage_failure(exc)
        except (KeyboardInterrupt, click.exceptions.Abort):  # Ctrl-C; click turns it into Abort in a prompt
            _interrupt_exit(ctx)
        except Exception as exc:
            if _by_interrupt(exc):  # e.g. a native module whose import Ctrl-C cut short: ImportError
                _interrupt_exit(ctx)
            if isinstance(exc, SovsealError):
                message = _cli_message(exc, _advice(exc, ctx.meta.get(_ORIGIN)))
                click.echo(f"error: {message}", err=True)
                sys.exit(exit_code(exc))
            if isinstance(exc, OSError):
                click.echo(f"error: {_os_error_message(exc)}", err=True)
                sys.exit(EXIT_ERROR)
            raise


def _by_interrupt(exc: BaseException) -> bool:
    """Whether Ctrl-C is behind ``exc``: a KeyboardInterrupt anywhere in its chain of causes."""
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        if isinstance(at, KeyboardInterrupt):
            return True
        seen.add(id(at))
        at = at.__cause__ or at.__context__
    return False


def _interrupt_exit(ctx: click.Context) -> NoReturn:
    """Exit 130 with the one line that says whether the command's write was committed."""
    click.echo(_interrupted(ctx.meta.get(_WRITE)), err=True)
    sys.exit(EXIT_INTERRUPTED)


#: click's "no arguments: here is the help" (click >= 8.2) is a UsageError too, and must stay the help.
_HELP_INSTEAD = getattr(click.exceptions, "NoArgsIsHelpError", ())


def _usage_failure(exc: click.UsageError) -> NoReturn:
    """Exit 2 with click's usage error as one line and the help to read, instead of click's
    multi-line block (usage, hint, then "Error: ..."), so every error has the documented form."""
    if isinstance(exc, _HELP_INSTEAD):
        raise exc
    message = _one_line(exc.format_message()).rstrip(".")
    if message[:1].isupper() and message[1:2].islower():  # "Missing argument", not "PATH ..."
        message = message[0].lower() + message[1:]
    click.echo(f"error: {message} (see '{_command_words(exc.ctx)} --help')", err=True)
    sys.exit(exc.exit_code)


def _command_words(ctx: click.Context | None) -> str:
    """``sovseal key rotate``: the command as the user types it, whatever name the program ran under
    (``python -m sovseal``, a test runner's)."""
    names: list[str] = []
    while ctx is not None and ctx.parent is not None:
        names.insert(0, ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(["sovseal", *names])


#: What to do about an OS error, by errno (the path it names is given before it).
_OS_ADVICE = {
    errno.EACCES: "check the permissions of that path and of its directory, or pick another path",
    errno.EPERM: "check the permissions of that path and of its directory, or pick another path",
    errno.EROFS: "that file system is read-only: pick a path on a writable one",
    errno.ENOSPC: "the disk is full: free some space, then run the command again",
    errno.EDQUOT: "the disk quota is used up: free some space, then run the command again",
    errno.ENOENT: "check the path: a directory on the way to it does not exist",
    errno.EISDIR: "that is a directory: pass a file",
    errno.ENAMETOOLONG: "pick a shorter path",
    errno.ELOOP: "a symlink on that path loops: fix or remove it",
}


def _os_error_message(exc: OSError) -> str:
    """An OS error as the path it concerns, what went wrong and what to do next, on one line
    (instead of Python's "[Errno 20] Not a directory: '...'", which says neither)."""
    what = (exc.strerror or _one_line(str(exc))).lower()
    if exc.filename is None:
        return f"{what}; check the paths given (--path, FILE) and the disk, then run the command again"
    path = os.fsdecode(exc.filename)
    if exc.errno == errno.ENOTDIR:
        blocking = _first_file_on(Path(path))
        if blocking is not None:
            return f"cannot use {path}: {blocking} is a file, not a directory; pick another path, or move that file away"
    advice = _OS_ADVICE.get(exc.errno or 0, "check that path and the disk, then run the command again")
    return f"cannot use {path}: {what}; {advice}"


def _first_file_on(path: Path) -> Path | None:
    """The first component of ``path`` that exists and is not a directory (what ENOTDIR is about)."""
    for part in reversed(path.parents):
        if part.exists() and not part.is_dir():
            return part
    return None


# -- Ctrl-C: say whether the write was committed ---------------------------------------------------
#
# An interrupt can land anywhere: before a command writes, inside the SDK call that appends and
# fsyncs, or after it returned (while the store closes and replication drains). What to report is
# read from the store, never guessed: a command that writes registers the write (``_will_write``),
# ``_open`` records the store's state before it, the command marks it done when the SDK call
# returns; interrupted in between, a fresh read-only handle shows whether the write landed.

_WRITE = "sovseal.write"  # the command's _Write, in click's shared ctx.meta


@dataclass
class _Write:
    """A write a command is about to make, and what is known of whether it committed."""

    what: str  # "the memory", "the deletion", ...: the subject of "... was committed"
    #: The store's state the write changes, read before it (by ``_open``) and again after an interrupt.
    state: Callable[[Sovseal], Any]
    #: How the write shows in the state read again after an interrupt ("snapshot snap_..."), or None
    #: when it does not: ``landed(before, after)``.
    landed: Callable[[Any, Any], str | None]
    directory: Path | None = None
    key: bytes | None = None
    branch: str = "main"
    before: Any = None
    watching: bool = False  # the state before the write was recorded: it can be checked
    done: str | None = None  # "the memory was committed (snapshot ...)": the SDK call returned

    def committed(self, detail: str) -> None:
        self.done = f"{self.what} was committed ({detail})"


def _will_write(
    what: str, state: Callable[[Sovseal], Any] | None = None, landed: Callable[[Any, Any], str | None] | None = None
) -> _Write:
    """Register the write the current command is about to make (see ``_interrupted``); without
    ``state``, any change of a branch head, of the snapshot count or of the erasures shows it."""
    write = _Write(what, state or _fingerprint, landed or _store_changed)
    click.get_current_context().meta[_WRITE] = write
    return write


def _fingerprint(mem: Sovseal) -> tuple[dict[str, str | None], int, int]:
    """What any write changes: a branch head, the number of snapshots, or the number erased."""
    return mem.heads(), mem.status().records, mem.erasures()


def _store_changed(before: Any, after: Any) -> str | None:
    """How the store changed between two ``_fingerprint``s, or None when it did not."""
    (old_heads, old_records, old_erased), (heads, records, erased) = before, after
    changes = [
        f"branch {name} at {_short(head)}" if name not in old_heads else f"{name}: HEAD {_short(old_heads[name])} -> {_short(head)}"
        for name, head in sorted(heads.items())
        if name not in old_heads or old_heads[name] != head
    ]
    changes += [f"branch {name} deleted" for name in sorted(set(old_heads) - set(heads))]
    if records != old_records:
        changes.append(f"{old_records} -> {records} snapshots")
    if erased != old_erased:
        changes.append(f"{erased - old_erased} erased")
    return "; ".join(changes) or None


_UNREADABLE = "(unreadable)"


def _held_at(path: Callable[[], str]) -> Callable[[Sovseal], tuple[str | None, str | None, int]]:
    """The state a ``store`` or ``delete`` of ``path()`` (read from stdin maybe, so called late)
    changes: the branch's HEAD, and the snapshot and reinforcement count of the memory at the path."""

    def state(mem: Sovseal) -> tuple[str | None, str | None, int]:
        try:
            held = mem.get(path())
        except SovsealError:  # a damaged record there: a write shows as another snapshot all the same
            return mem.snapshot(), _UNREADABLE, 0
        return mem.snapshot(), None if held is None else held.snapshot_id, 0 if held is None else held.reinforce_count

    return state


def _memory_landed(before: tuple[str | None, str | None, int], after: tuple[str | None, str | None, int]) -> str | None:
    """A store shows as the path's new snapshot at HEAD, or as one more reinforcement."""
    head, snapshot, reinforced = after
    if snapshot is not None and snapshot != before[1] and snapshot == head:
        return f"snapshot {_short(snapshot)}"
    if snapshot is not None and snapshot == before[1] and reinforced > before[2]:
        return f"reinforced, snapshot {_short(snapshot)}"
    return None


def _deletion_landed(before: tuple[str | None, str | None, int], after: tuple[str | None, str | None, int]) -> str | None:
    """A delete shows as a path held before and gone, with HEAD moved (to the tombstone)."""
    head, snapshot, _ = after
    return f"snapshot {_short(head)}" if before[1] is not None and snapshot is None and head != before[0] else None


def _watch(mem: Sovseal, directory: Path, key: bytes) -> None:
    """Record the store's state before the registered write, if the command registered one."""
    write = click.get_current_context().meta.get(_WRITE)
    if write is None or write.watching:
        return
    write.directory, write.key, write.branch = directory, key, mem.branch
    write.before = write.state(mem)
    write.watching = True


def _interrupted(write: _Write | None) -> str:
    """The one line Ctrl-C prints: whether the command's write was committed, read from the store."""
    if write is None:
        return "interrupted"
    if write.done is not None:
        return f"interrupted: {write.done}"
    if not write.watching or write.directory is None:
        return "interrupted before anything was committed"
    from sovseal.sdk.client import Sovseal

    try:
        with Sovseal(write.directory, key=write.key, branch=write.branch, read_only=True, endpoint="", lock_timeout=2.0) as fresh:
            landed = write.landed(write.before, write.state(fresh))
    except (KeyboardInterrupt, Exception) as exc:  # noqa: BLE001 - whatever stops the check, say that it was not made
        why = "interrupted again" if isinstance(exc, KeyboardInterrupt) else _one_line(str(exc)) or type(exc).__name__
        return f"interrupted: could not check whether {write.what} was committed ({why}); see `sovseal log`"
    if landed is None:
        return "interrupted before anything was committed"
    return f"interrupted: {write.what} was committed ({landed})"


# -- shared options and helpers ------------------------------------------------------------------

#: The embedder the CLI hands to ``Sovseal`` (None: the SDK's default on-device model). Tests and
#: embedding applications may set it to share one loaded model across invocations.
EMBEDDER: EmbedFn | None = None


def path_option(f: F) -> F:
    return click.option(
        "--path",
        type=click.Path(file_okay=False),
        envvar=ENV_HOME,
        default=None,
        help="Store directory.  [env: SOVSEAL_HOME; default: ~/.sovseal]",
    )(f)


def key_option(f: F) -> F:
    return click.option(
        "--key-file",
        type=click.Path(dir_okay=False, exists=True, allow_dash=True),
        envvar="SOVSEAL_KEY_FILE",
        default=None,
        help="Read the store's key from this file (as printed by `sovseal key export`) instead of the "
        "OS keychain / key file; `-` reads it from stdin (its first line).  "
        "[env: SOVSEAL_KEY_FILE; or the key itself in SOVSEAL_KEY]",
    )(f)


def branch_option(f: F) -> F:
    return click.option(
        "--branch",
        "-b",
        envvar=ENV_BRANCH,
        default="main",
        show_default=True,
        help="Branch to act on.  [env: SOVSEAL_BRANCH]",
    )(f)


def store_options(f: F) -> F:
    return path_option(branch_option(key_option(f)))


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON (for scripts) instead of the human view.")(f)


# -- secrets off the command line -----------------------------------------------------------------
#
# Every argument of every process is readable by every local user (`ps`, /proc/PID/cmdline), and
# lands in shell history. So each argument that may hold something private (a PAYLOAD, a QUERY, a
# memory PATH, the key) also takes `-`, which reads it from stdin instead; API keys come from the
# environment, and a command warns when one is given on its command line. Several values can come
# from stdin at once, always in this order: the key (one line), PATH (one line), then PAYLOAD or
# QUERY (the rest).

STDIN = "-"
_STDIN_KEY = "sovseal.stdin_key"  # the key read for `--key-file -`, kept in ctx.meta: stdin is read once


def _stdin_key() -> str:
    """The key given as ``--key-file -``: stdin's first line, or a hidden prompt on a terminal.

    Cached in the command's context: some commands look their key up twice, and stdin can be read
    only once.
    """
    meta = click.get_current_context().meta
    if _STDIN_KEY not in meta:
        meta[_STDIN_KEY] = click.prompt("key", hide_input=True) if sys.stdin.isatty() else sys.stdin.readline()
    return str(meta[_STDIN_KEY])


def _from_stdin(value: str, key_file: str | None, what: str, *, line: bool = False) -> str:
    """``value``, or when it is ``-`` the next value on stdin: one line (``line``, without its line
    ending) or all that is left. A key given as ``--key-file -`` comes first on stdin, so it is
    read before anything else. Either way it must be UTF-8 text (``what`` names it in the error)."""
    if value != STDIN:
        return _utf8_text(value, what)
    if key_file == STDIN:
        _stdin_key()
    try:
        text = sys.stdin.readline().rstrip("\r\n") if line else sys.stdin.read()
    except UnicodeDecodeError as exc:  # a stdin decoded strictly
        raise _not_utf8(what, exc.object[exc.start], exc.start) from None
    return _utf8_text(text, what)


def _utf8_text(text: str, what: str) -> str:
    """``text``, refused when it holds a byte that is not UTF-8: Python hands such bytes from argv
    and stdin over as lone surrogates (U+DC80-U+DCFF), which would be reported as invalid Unicode."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        char = ord(text[exc.start])
        raise _not_utf8(what, char - 0xDC00 if 0xDC80 <= char <= 0xDCFF else None, exc.start) from None
    return text


def _not_utf8(what: str, byte: int | None, offset: int) -> InvalidInputError:
    shown = f"byte 0x{byte:02x}" if byte is not None else "a character that is not"
    return InvalidInputError(
        f"{what} is not UTF-8 text ({shown} at offset {offset}); convert it first, e.g. with `iconv -f latin1 -t utf-8`"
    )


def _warn_inline(name: str, what: str, instead: str) -> None:
    """Warn on stderr when the secret option ``name`` was typed on the command line (not taken from
    the environment), where every local user can read it in the process list."""
    if click.get_current_context().get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE:
        _note(f"warning: {what} is visible to other local users in the process list; {instead}")


def _key_text(key_file: str | None) -> str | None:
    if key_file is None:
        return None
    if key_file == STDIN:
        return _stdin_key().strip()
    try:
        return Path(key_file).read_text(encoding="utf-8").strip()
    except UnicodeDecodeError:
        raise InvalidInputError(f"--key-file {key_file} is not text: pass the file `sovseal key export` wrote") from None


def _store_key(directory: Path, key_file: str | None, *, create: bool = False) -> tuple[bytes, _KeyOrigin]:
    """The store's key (:func:`resolve_key`), and where it came from, which is also left in
    click's ``ctx.meta`` so that a key error raised later in the command can say what to fix."""
    given: str | None
    if key_file is not None:
        given = "--key-file - (stdin)" if key_file == STDIN else f"--key-file {key_file}"
    else:
        given = ENV_KEY if os.environ.get(ENV_KEY) else None
    origin = _KeyOrigin(directory, given, create)
    click.get_current_context().meta[_ORIGIN] = origin
    try:
        key, origin.backend = resolve_key(directory, key_text=_key_text(key_file), create=create)
    except InvalidInputError as exc:  # a malformed key: say which option or variable held it
        if given is None or given in str(exc):
            raise
        raise InvalidInputError(f"{given}: {exc}") from None
    return key, origin


@contextmanager
def _open(
    path: str | None, branch: str = "main", key_file: str | None = None, *, create: bool = False, embedder: EmbedFn | None = None
) -> Iterator[tuple[Sovseal, _KeyOrigin]]:
    """The store at ``path`` (created with ``create``) and where its key came from."""
    directory = store_dir(path)
    exists = store_exists(directory)
    if not (exists or create):
        raise StoreNotFoundError.at(directory)  # before any key lookup: the store is what is missing
    key, origin = _store_key(directory, key_file, create=create and not exists)
    mem, _ = open_store(directory, branch=branch, key=key, create=create, embedder=embedder or EMBEDDER)
    with mem:
        _watch(mem, directory, key)
        yield mem, origin
        write = click.get_current_context().meta.get(_WRITE)
        if write is not None and write.done is not None and mem.replication is not None:
            _warn_if_failing(replication_state(mem))


def replication_state(mem: Sovseal) -> dict[str, Any] | None:
    """Replication as ``Sovseal.status()`` reports it once the worker has tried to send what is
    queued (what ``close`` would do anyway), plus ``queued`` (items in the outbox) and ``since``
    (when the oldest of them was written); None when replication is off.

    A command is a fresh process: read at once, the worker has not tried yet and would say
    ``sending`` with no error while the server is down; after the attempt it says ``backoff``
    with the error, as a long-running SDK process does.
    """
    if mem.replication is None:
        return None
    mem.replication.flush(mem.replication.config.drain_on_close, stop_on_failure=True)
    status = mem.status()
    info: dict[str, Any] = jsonable(getattr(status, "replication", None)) or {}
    info["queued"] = status.outbox_records
    # SDK gap: the outbox's oldest item is read through the store's private handle.
    oldest = mem._store.outbox(1) if status.outbox_records else []
    info["since"] = jsonable(datetime.fromtimestamp(oldest[0].created_at, UTC)) if oldest else None
    return info


def _warn_if_failing(info: dict[str, Any] | None) -> None:
    """Warn on stderr that the write is not replicated yet because replication is failing."""
    if info is None or (info.get("state") not in ("backoff", "paused") and not info.get("last_error")):
        return
    since = f" since {_human(info['since'])}" if info.get("since") else ""
    _note(
        f"warning: replication to {info.get('endpoint')} is failing ({info.get('state')}): {_one_line(str(info.get('last_error')))}; "
        f"{_count(info['queued'], 'item')} queued{since} stay in the outbox and are sent once it answers (see `sovseal status`)"
    )


@contextmanager
def _model_loading() -> Iterator[EmbedFn | None]:
    """The on-device model, loading in a thread from now on: a command that embeds a query loads
    it while the store opens (both take a few hundred milliseconds) instead of after.

    Leaving the block waits for the thread, also when the command fails first: an interpreter that
    exits while the thread is inside onnxruntime's native code aborts the process (SIGABRT, exit
    134) instead of exiting with the command's code.
    """
    if EMBEDDER is not None:
        yield EMBEDDER
        return
    import threading

    from sovseal.embed import Embedder

    embedder = Embedder()
    loader = threading.Thread(target=_load_quietly, args=(embedder,), name="sovseal-model", daemon=True)
    loader.start()
    try:
        yield embedder
    finally:
        loader.join()


def _load_quietly(embedder: Any) -> None:
    """Load ``embedder`` ahead of its first use. A failure is left for that use to raise again, in
    the command's thread, where it becomes one line and an exit code (here it would be a traceback)."""
    try:
        embedder.ready()
    except Exception:  # noqa: BLE001 - the first embed loads again and reports the error properly
        return


def _emit_json(data: Any) -> None:
    click.echo(json.dumps(jsonable(data), indent=2, ensure_ascii=False))


def _console(err: bool = False) -> Any:
    from rich.console import Console

    return Console(stderr=err, highlight=False, soft_wrap=False)


def _note(text: str) -> None:
    """A human note on stderr (never mixed into stdout, which scripts may read)."""
    click.echo(text, err=True)


#: Control characters a terminal acts on instead of showing (C0, DEL, C1): in stored text they could
#: set the window title, clear the screen or hide what follows. Multi-line text keeps tab and newline.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")
_CONTROL_IN_TEXT = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")
_ESCAPE_NAMES = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _visible(value: str, *, text: bool = False) -> str:
    """``value`` for human output, its control characters shown as escapes (``\\x1b``, ``\\n``).

    Paths, payloads and branch names come from agents, other devices and backups: printed as they
    are, they would drive the terminal; click strips only some of them, and only on a pipe, so the
    output would also differ between a terminal and a pipe. ``text``: a multi-line payload, which
    keeps its newlines and tabs. ``--json`` output is never passed through this.
    """
    pattern = _CONTROL_IN_TEXT if text else _CONTROL
    return pattern.sub(lambda m: _ESCAPE_NAMES.get(m.group(), f"\\x{ord(m.group()):02x}"), value)


def _short(sid: str | None) -> str:
    """A snapshot id as human output shows it: ``snap_`` and 12 hex digits, like git's short ids
    (commands take any unique prefix back; ``--json`` prints ids in full)."""
    return sid[:17] if sid else "-"


def _human(value: Any, sep: str = ", ") -> str:
    """A value of ``status`` on one line: snapshot ids short, lists joined by ``sep``, mappings as
    ``k=v`` (their lists joined by spaces), None as -."""
    if value is None:
        return "-"
    if isinstance(value, str):
        return _short(value) if re.fullmatch(r"snap_[0-9a-f]{64}", value) else _visible(value)
    if isinstance(value, list):
        return sep.join(_human(v) for v in value)
    if isinstance(value, dict):
        return ", ".join(f"{k}={_human(v, ' ')}" for k, v in value.items())
    return str(value)


def _count(n: int, noun: str, plural: str | None = None) -> str:
    """``1 branch``, ``2 branches``: ``plural`` defaults to ``noun`` + s."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def _size(n: int) -> str:
    """A byte count for humans: ``512 bytes``, ``3.4 KiB``, ``12.0 MiB``."""
    if abs(n) < 1024:
        return _count(n, "byte")
    value = float(n)
    for unit in ("KiB", "MiB", "GiB"):  # noqa: B007 - the unit is read after the loop, where it stopped
        value /= 1024
        if abs(value) < 1024:
            break
    return f"{value:.1f} {unit}"


def _reclaimed(n: int) -> str:
    """What a compaction freed: a skeleton is padded like any sealed record, so erasing a record
    smaller than that frees nothing (the journal may even grow by a few bytes)."""
    return f"{_size(n)} reclaimed" if n > 0 else "nothing reclaimed (the erased records were no larger than their skeletons)"


def _fields(rows: list[tuple[str, str]], *, label_style: dict[str, Any]) -> None:
    """Print label/value pairs as aligned lines, each on one line however long (never wrapped)."""
    width = max((len(label) for label, _ in rows), default=0)
    for label, value in rows:
        click.echo(f"{click.style(label.ljust(width), **label_style)}  {_visible(value)}")


def _compact(value: Any, limit: int = 160) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _when(dt: Any) -> str:
    return "-" if dt is None else f"{dt:%Y-%m-%d %H:%M:%S}"


@contextmanager
def _progress(label: str) -> Iterator[Progress]:
    """A rich progress bar on stderr, drawn only when stderr is a terminal (else rich is not even
    imported: it would cost a script's every call a tenth of a second)."""
    if not sys.stderr.isatty():
        yield lambda done, total: None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    console = _console(err=True)
    with Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=console,
    ) as bar:
        task = bar.add_task(label, total=None)

        def update(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)

        yield update


def _parse_json(text: str, what: str, hint: str) -> Any:
    """``text`` as JSON, or bad input (exit 2) saying why: malformed, nested deeper than Python's
    parser recurses (RecursionError), or a number longer than Python converts (ValueError)."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInputError(f"{what} is not valid JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); {hint}") from None
    except RecursionError:
        raise InvalidInputError(f"{what} is JSON nested too deeply to read (arrays or objects hundreds of levels deep); {hint}") from None
    except ValueError as exc:  # e.g. an integer of more than 4300 digits
        raise InvalidInputError(f"{what} is JSON that cannot be read ({_one_line(str(exc)).split(':')[0]}); {hint}") from None


def _parse_payload(text: str, mode: str) -> Any:
    if mode == "text":
        return text
    stripped = text.strip()
    if mode == "json" or stripped[:1] in ("{", "[", '"'):
        return _parse_json(stripped, "PAYLOAD", "fix it, or pass --as text to store it as a plain string")
    return text


def _parse_object(text: str | None, what: str, example: str) -> dict[str, Any] | None:
    if text is None:
        return None
    value = _parse_json(text, what, f"pass a JSON object such as '{example}'")
    if not isinstance(value, dict):
        raise InvalidInputError(f"{what} must be a JSON object such as '{example}', not {type(value).__name__}")
    return value


# -- the group ---------------------------------------------------------------------------------


@click.group(cls=SovsealGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="sovseal")
def main() -> None:
    """sovseal: local-first, encrypted, lineage-tracked memory for LLM agents.

    Every memory is canonicalized, embedded on this device, sealed with AES-256-GCM and appended
    to a tamper-evident lineage of snapshots. Branches, fork and rollback work like git; nothing
    is rewritten except by `sovseal purge`, which erases a path for good, and reads never touch
    the network.

    \b
    Quick start:
      sovseal init                                   create ~/.sovseal and its key
      sovseal store user.editor "The user edits code in neovim"
      sovseal store user.prefs '{"theme": "dark"}' --type procedural
      sovseal recall "which editor does the user use?"
      sovseal log --graph                            the snapshot DAG with its branches
      sovseal verify                                 decrypt everything, re-derive every id

    \b
    Where:    --path DIR or SOVSEAL_HOME (default ~/.sovseal)
    Branch:   --branch NAME or SOVSEAL_BRANCH (default main); nothing else is remembered between runs
    Key:      the OS keychain; headless: SOVSEAL_KEY_FALLBACK=file (a 0600 key file in the store),
              or --key-file FILE / SOVSEAL_KEY with a key from `sovseal key export`
    Scripts:  --json on every command that prints results
    Secrets:  every argument shows in the process list; `-` reads PAYLOAD, QUERY, PATH or
              --key-file from stdin instead, and API keys belong in SOVSEAL_API_KEY

    \b
    Exit codes: 0 ok, 1 integrity failure, 2 bad input, 3 not found (store, path, snapshot,
                branch), 4 key unavailable, 5 store busy, 6 other error
    """
    os.environ.setdefault("LANCEDB_LOG", "error")  # LanceDB's Rust warnings would clutter the output


# -- init and status ---------------------------------------------------------------------------


@main.command(short_help="Create a store and its master key.")
@path_option
@key_option
@json_option
def init(path: str | None, key_file: str | None, as_json: bool) -> None:
    """Create a store and its master key (safe to run again on an existing store).

    The key goes to the OS keychain, or with SOVSEAL_KEY_FALLBACK=file to a 0600 file inside the
    store. With --key-file / SOVSEAL_KEY the given key is used and saved nowhere: pass it every
    time, or save it with `sovseal key import`. Back the key up: without it nothing can be read.

    \b
      sovseal init --path ./memories
    """
    directory = store_dir(path or None)
    existed = store_exists(directory)
    with _open(str(directory), key_file=key_file, create=True) as (mem, origin):
        status = mem.status()
    data = {"path": str(directory.absolute()), "created": not existed, "key_backend": origin.backend, "key_id": status.key_id}
    if as_json:
        _emit_json(data)
        return
    verb = "Reinitialised existing" if existed else "Initialised empty"
    click.echo(f"{verb} sovseal store in {directory.absolute()}")
    click.echo(f"key: {origin.shown()} (key id {status.key_id})")
    if not existed:
        _note(_key_backup_advice(origin, directory))


def _key_backup_advice(origin: _KeyOrigin, directory: Path) -> str:
    """What to do about the new store's key: back up the key sovseal keeps, or, for a key passed with
    --key-file or SOVSEAL_KEY (saved nowhere, so `sovseal key export` cannot find it), keep that."""
    if origin.given is None:
        return f"Back up the key now (anyone holding it can read the store): sovseal key export --path {directory} > sovseal-key.txt"
    return (
        f"The key from {origin.given} is saved nowhere: keep a copy of it (without it nothing can be read, and sovseal keeps "
        f"none); pass it every time, or save it for this store with `sovseal key import --path {directory}`"
    )


@main.command(short_help="Store, branch, HEAD, counts, key backend, replication.")
@store_options
@json_option
def status(path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """Store, branch, HEAD, counts, key backend, and replication with its outbox.

    The outbox (what is not yet replicated) is shown when replication is on; --json always has it.

    \b
      sovseal status --json | jq .outbox_records
    """
    with _open(path, branch, key_file) as (mem, origin):
        replicating = replication_state(mem)
        info = jsonable(mem.status())
        if replicating is not None:
            info["replication"] = replicating
        info["conflicts"] = jsonable([c for name in mem.branches() for c in mem.conflicts(branch=name)])
    info["key_backend"] = origin.backend
    if as_json:
        _emit_json(info)
        return
    labels = {
        "path": "store",
        "head": "HEAD",
        "records": "snapshots (all branches)",
        "visible": "memories visible at HEAD",
        "outbox_records": "outbox (not yet replicated)",
        "seals": "encryptions per subkey",
        "index_pending": "vectors not yet written to the index",
        "recovery": "recovery on open",
    }
    replication = info.pop("replication", None)
    hidden = {"outbox_bytes"} if replication is not None else {"outbox_records", "outbox_bytes"}
    rows: list[tuple[str, str]] = []
    for name, value in info.items():
        if name in hidden or (value in (None, [], {}) and name != "head") or (name == "index_pending" and not value):
            continue
        if name == "key_backend":
            shown = origin.shown()
        elif name == "heads":
            shown = ", ".join(
                f"{b}: {_count(len(h), 'head')}" + (" (the next write merges them)" if len(h) > 1 else "") for b, h in value.items()
            )
        elif name == "conflicts":
            shown = "; ".join(
                f"{c['path']} on {c['branch']} ({_count(len(c['versions']), 'version')}, showing {_short(c['chosen'])})" for c in value
            )
        elif name == "outbox_records":
            shown = f"{_count(value, 'item')}, {_count(info['outbox_bytes'], 'byte')}"
        else:
            shown = _human(value)
        rows.append((labels.get(name, name.replace("_", " ")), shown))
    if replication is None:
        rows.append(("replication", "off (set SOVSEAL_ENDPOINT and SOVSEAL_API_KEY to replicate)"))
    else:
        rows.append(("replication", f"{replication.get('state')} -> {replication.get('endpoint')}"))
        rows += [
            (f"  {name.replace('_', ' ')}", _human(value))
            for name, value in replication.items()
            if name not in ("state", "endpoint") and value not in (None, 0, "", [], {})
        ]
    _fields(rows, label_style={"bold": True})


# -- writing -----------------------------------------------------------------------------------


@main.command(short_help="Store a memory (text or JSON) at a path.")
@click.argument("memory_path", metavar="PATH")
@click.argument("payload", metavar="PAYLOAD")
@click.option(
    "--as",
    "mode",
    type=click.Choice(["auto", "json", "text"]),
    default="auto",
    show_default=True,
    help="How to read PAYLOAD: auto = JSON when it starts with { [ or \", else plain text.",
)
@click.option("--metadata", "-m", default=None, help='A JSON object stored (sealed) with the memory, e.g. \'{"source": "chat"}\'.')
@click.option(
    "--type",
    "-t",
    "type_",
    type=click.Choice(MEMORY_TYPES),
    default="semantic",
    show_default=True,
    help="Memory type: sets its recall decay.",
)
@click.option(
    "--provenance",
    type=click.Choice(PROVENANCES),
    default="explicit",
    show_default=True,
    help="Asked to remember (explicit) or inferred (observed).",
)
@click.option("--parent", default=None, help="Snapshot id (or unique prefix) to use as parent instead of the branch HEAD.")
@store_options
@json_option
def store(
    memory_path: str,
    payload: str,
    mode: str,
    metadata: str | None,
    type_: str,
    provenance: str,
    parent: str | None,
    path: str | None,
    branch: str,
    key_file: str | None,
    as_json: bool,
) -> None:
    """Store PAYLOAD at PATH (a logical key such as user.preferences.editor).

    PAYLOAD is text or JSON. Storing the value a path already holds adds no snapshot: it
    reinforces the memory (see `sovseal mind`).

    Arguments are visible to every local user in the process list: for anything private, pass
    `-` as PAYLOAD to read it from stdin, and `-` as PATH to read the path from stdin's first
    line (before the payload).

    \b
      sovseal store user.editor "The user edits code in neovim"
      sovseal store user.testing '{"framework": "vitest"}' -m '{"source": "chat"}'
      sovseal store notes.today - < notes.txt
      printf '%s\\n%s' user.health "$NOTE" | sovseal store - -
    """
    write = _will_write("the memory", _held_at(lambda: memory_path), _memory_landed)
    memory_path = _from_stdin(memory_path, key_file, "PATH", line=True)
    value = _parse_payload(_refuse_empty(_from_stdin(payload, key_file, "PAYLOAD"), payload), mode)
    _refuse_empty(value if isinstance(value, str) else "-", payload)  # a JSON string that is empty: '""'
    meta = _parse_object(metadata, "--metadata", '{"source": "chat"}')
    with _open(path, branch, key_file) as (mem, _):
        parent_id = resolve_snapshot(mem, parent) if parent is not None else None
        result = mem.store(memory_path, value, metadata=meta, type=type_, provenance=provenance, parent=parent_id)
        write.committed(("reinforced, " if result.reinforced else "") + f"snapshot {_short(result.snapshot_id)}")
    data = {"path": memory_path, "branch": branch, **jsonable(result)}
    if as_json:
        _emit_json(data)
    elif result.reinforced:
        click.echo(f"reinforced {_visible(memory_path)} ({_short(result.snapshot_id)} on {_visible(branch)}): it already held this value")
    else:
        click.echo(f"stored {_visible(memory_path)} -> {_short(result.snapshot_id)} on {_visible(branch)}")


def _refuse_empty(text: str, given: str) -> str:
    """``text``, refused (exit 2, nothing stored) when it is empty or only whitespace: an empty
    payload is almost always a mistake (an unset shell variable, an empty file or pipe), and a
    memory nothing can recall would be stored silently in its place."""
    if text.strip():
        return text
    where = "stdin held nothing" if given == STDIN else "the argument is empty"
    raise InvalidInputError(
        f"PAYLOAD is empty ({where}); nothing was stored: pass the text or JSON to store, as an argument or on "
        "stdin with `-` (check the variable or file that should hold it); to remove PATH, use `sovseal delete PATH`"
    )


@main.command(short_help="Delete a path (a tombstone; history is kept).")
@click.argument("memory_path", metavar="PATH")
@store_options
@json_option
def delete(memory_path: str, path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """Delete PATH on the branch: a tombstone snapshot, so the path stops appearing in recall.

    Its history stays in the lineage (`sovseal rollback` brings it back). Exits 3 if nothing is
    stored at PATH. `-` reads PATH from stdin, off the process list.

    \b
      sovseal delete chat.2026-05-21
      echo user.health | sovseal delete -
    """
    write = _will_write("the deletion", _held_at(lambda: memory_path), _deletion_landed)
    memory_path = _from_stdin(memory_path, key_file, "PATH", line=True)
    with _open(path, branch, key_file) as (mem, _):
        result = mem.delete(memory_path)
        if result is None:
            raise MemoryNotFoundError(f"no memory at path {memory_path!r} on branch {branch!r}; nothing was deleted")
        write.committed(f"snapshot {_short(result.snapshot_id)}")
    if as_json:
        _emit_json({"path": memory_path, "branch": branch, "deleted": True, **jsonable(result)})
    else:
        click.echo(f"deleted {_visible(memory_path)} -> {_short(result.snapshot_id)} on {_visible(branch)}")


def _stdin_is_tty() -> bool:
    """Whether a person can answer a question on stdin (tests replace it to play one)."""
    return sys.stdin.isatty()


def _replication_note(mem: Sovseal) -> str:
    """Where else an erasure goes: the server and the other devices, or (replication off) nowhere."""
    if mem.replication is not None:
        return (
            "replication: the erasure is queued for the server, which drops the sealed bodies; every other "
            "device erases them on its next pull"
        )
    return "replication is off: only this store was erased; backups made with `sovseal export` before now still hold it"


@main.command(short_help="Erase every version of a path for good (irreversible).")
@click.argument("memory_path", metavar="PATH")
@click.option(
    "--prefix", "is_prefix", is_flag=True, help="Erase every path that starts with PATH, as a string: end it with the dot (customer.42.)."
)
@click.option("--reason", default="", help="Why: sealed into the redaction record (it shows in the process list: no secrets).")
@click.option(
    "--no-compact",
    is_flag=True,
    help="Leave the journal rewrite to a later `sovseal compact` (reads treat the content as erased at once).",
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation (needed when stdin is not a terminal).")
@path_option
@key_option
@json_option
def purge(
    memory_path: str, is_prefix: bool, reason: str, no_compact: bool, yes: bool, path: str | None, key_file: str | None, as_json: bool
) -> None:
    """Erase every version of PATH (with --prefix: of every path under PATH) on every branch, for good.

    Unlike `delete`, which appends a tombstone and keeps the history, a purge makes the content
    unrecoverable, to the key holder too: each erased snapshot keeps only its skeleton (ids and
    parents), so the lineage still verifies, and the journal is rewritten without it (unless
    --no-compact). With replication on, the server drops the sealed bodies and every other device
    erases them on its next pull. It cannot be undone: on a terminal it asks first; otherwise pass
    --yes. Exits 3 when nothing is stored at PATH on any branch. `-` reads PATH from stdin.

    \b
      sovseal purge user.secret --reason "stored by mistake" --yes
      sovseal purge customer.42. --prefix --yes
      echo user.health | sovseal purge - --yes
    """
    write = _will_write("the erasure")
    memory_path = _from_stdin(memory_path, key_file, "PATH", line=True)
    what = f"every path under {memory_path!r}" if is_prefix else f"every version of {memory_path!r}"
    with _open(path, key_file=key_file) as (mem, _):
        if not yes:
            if not _stdin_is_tty():
                raise InvalidInputError(f"purge erases {what} for good and cannot be undone; pass --yes to confirm")
            if not click.confirm(f"Erase {what} on every branch, for good? This cannot be undone", default=False, err=True):
                _note("nothing was purged")
                sys.exit(EXIT_USAGE)
        if is_prefix:
            result = mem.purge(prefix=memory_path, reason=reason, compact=not no_compact)
        else:
            result = mem.purge(memory_path, reason=reason, compact=not no_compact)
        write.committed(f"{_count(len(result.erased), 'snapshot')} erased" + ("" if result.compacted else ", not compacted yet"))
        replicating = mem.replication is not None
        note = _replication_note(mem)
    if as_json:
        _emit_json(
            {
                "path": None if is_prefix else memory_path,
                "prefix": memory_path if is_prefix else None,
                "reason": reason,
                "erased": result.erased,
                "compacted": result.compacted,
                "bytes_reclaimed": result.bytes_reclaimed,
                "replication": replicating,
            }
        )
        return
    if not result.erased:
        click.echo(f"nothing left to erase: {what} was already erased")
        if result.compacted:  # erased, but still sealed in the journal (an interrupted purge, or compact=False)
            click.echo(f"journal compacted now: {_reclaimed(result.bytes_reclaimed)}; no sealed copy of it is left")
        return
    click.echo(f"erased {_count(len(result.erased), 'snapshot')} ({what}) on every branch")
    if result.compacted:
        click.echo(f"journal compacted: {_reclaimed(result.bytes_reclaimed)}; no sealed copy of it is left")
    else:
        click.echo("not compacted yet: reads, recall and exports no longer see it; `sovseal compact` removes its sealed bytes")
    _note(note)


@main.command(short_help="Create a branch at a snapshot; prints its name.")
@click.argument("snapshot", required=False)
@click.option("--name", "-n", default=None, help="Name of the new branch (default: fork-<random>).")
@store_options
@json_option
def fork(snapshot: str | None, name: str | None, path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """Create a branch at SNAPSHOT (default: the HEAD of --branch) and print its name.

    The new branch shares history up to SNAPSHOT; act on it with --branch NAME.

    \b
      sovseal fork snap_4f3ad8 --name experiment
      B=$(sovseal fork) && sovseal store --branch "$B" user.editor "helix"
    """
    write = _will_write("the new branch")
    with _open(path, branch, key_file) as (mem, _):
        at = resolve_snapshot(mem, snapshot) if snapshot is not None else mem.snapshot()
        if at is None:
            raise InvalidInputError(f"branch {branch!r} has no snapshot yet; store something first, or name a SNAPSHOT")
        new = mem.fork(at, branch=name)
        write.committed(f"branch {new}")
    if as_json:
        _emit_json({"branch": new, "snapshot_id": at, "from_branch": branch})
        return
    click.echo(new)
    _note(f"forked {branch} at {_short(at)} into branch {new!r}; use it with --branch {new}")


@main.command(short_help="Move the branch HEAD to a snapshot (non-destructive).")
@click.argument("snapshot")
@store_options
@json_option
def rollback(snapshot: str, path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """Move the branch's HEAD to SNAPSHOT (a full id or a unique prefix).

    Nothing is deleted: the snapshots after it stay in the lineage, and rolling back to the old
    HEAD undoes the rollback.

    \b
      sovseal rollback snap_4f3ad8
    """
    write = _will_write("the rollback")
    with _open(path, branch, key_file) as (mem, _):
        target = resolve_snapshot(mem, snapshot)
        previous = mem.snapshot()
        mem.rollback(target)
        write.committed(f"{branch}: HEAD {_short(previous)} -> {_short(target)}")
    if as_json:
        _emit_json({"branch": branch, "head": target, "previous_head": previous})
        return
    click.echo(f"{_visible(branch)}: HEAD {_short(previous)} -> {_short(target)}")
    if previous and previous != target:
        _note(f"nothing was deleted; undo with: sovseal rollback {previous} --branch {branch}")


# -- reading -----------------------------------------------------------------------------------


def _memory_table(memories: list[Any], *, scores: bool) -> Any:
    from rich.table import Table
    from rich.text import Text

    table = Table(show_lines=False, pad_edge=False, box=None, header_style="bold")
    if scores:
        table.add_column("score", justify="right")
    table.add_column("path", overflow="fold")
    table.add_column("type")
    table.add_column("payload", overflow="fold", ratio=1)
    table.add_column("snapshot", no_wrap=True)
    for m in memories:
        kind = m.type + (f" x{m.reinforce_count + 1}" if m.reinforce_count else "")
        row = [Text(_visible(m.path)), Text(kind), Text(_visible(_compact(m.payload), text=True)), Text(_short(m.snapshot_id))]
        if scores:
            row.insert(0, Text("-" if m.score is None else f"{m.score:.3f}"))
        table.add_row(*row)
    return table


def _check_filter(filter_: dict[str, Any] | None) -> None:
    """Refuse a malformed ``--filter`` (exit 2) before the model starts loading for nothing."""
    from sovseal.recall.filters import parse

    parse(filter_)


@main.command(short_help="Find the memories that best match a query.")
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(1, 1000), default=5, show_default=True, help="How many memories to return.")
@click.option(
    "--filter",
    "filter_json",
    default=None,
    help="A JSON filter passed to recall: path prefix, type, provenance, metadata (see docs/cli.md).",
)
@store_options
@json_option
def recall(query: str, k: int, filter_json: str | None, path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """The K memories visible on the branch that best match QUERY (on-device, offline).

    `-` reads QUERY from stdin, which keeps it off the process list that every local user can read.

    \b
      sovseal recall "what does the user write code with?" -k 3
      sovseal recall "deploy steps" --json | jq '.[0].payload'
      sovseal recall - < question.txt
    """
    query = _from_stdin(query, key_file, "QUERY").strip()
    filter_ = _parse_object(filter_json, "--filter", '{"type": "procedural"}')
    _check_filter(filter_)
    with _model_loading() as embedder, _open(path, branch, key_file, embedder=embedder) as (mem, _):
        found = mem.recall(query, k=k, filter=filter_)
    if as_json:
        _emit_json(found)
    elif not found:
        _note(f"no memories on branch {branch!r} match")
    else:
        _console().print(_memory_table(found, scores=True))


@main.command(short_help="Show the memory stored at a path.")
@click.argument("memory_path", metavar="PATH")
@store_options
@json_option
def get(memory_path: str, path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """The memory stored at PATH on the branch (exits 3 if there is none).

    `-` reads PATH from stdin, off the process list that every local user can read.

    \b
      sovseal get user.editor
      sovseal get user.testing --json | jq .payload
      echo user.health | sovseal get -
    """
    memory_path = _from_stdin(memory_path, key_file, "PATH", line=True)
    with _open(path, branch, key_file) as (mem, _):
        found = require_memory(mem, memory_path)
    if as_json:
        _emit_json(found)
        return
    shown = found.payload if isinstance(found.payload, str) else json.dumps(found.payload, indent=2, ensure_ascii=False)
    click.echo(_visible(shown, text=True))
    reinforced = f"{_count(found.reinforce_count, 'time')}, last {_when(found.last_reinforced)}"
    rows = [
        ("path", found.path),
        ("type", found.type),
        ("provenance", found.provenance),
        ("metadata", json.dumps(found.metadata, ensure_ascii=False) if found.metadata else None),
        ("snapshot", _short(found.snapshot_id)),
        ("stored", _when(found.created_at)),
        ("reinforced", reinforced if found.reinforce_count else None),
    ]
    _fields([(name, value) for name, value in rows if value is not None], label_style={"dim": True})


@main.command(short_help="Snapshots newest first; --graph draws the DAG.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most this many snapshots.")
@click.option("--graph", is_flag=True, help="Draw the snapshot DAG of every branch, like `git log --graph --all`.")
@store_options
@json_option
def log(limit: int | None, graph: bool, path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """The snapshots of the branch, newest first (with --graph: all branches as a DAG).

    \b
      sovseal log --limit 10
      sovseal log --graph
    """
    with _open(path, branch, key_file) as (mem, _):
        if not graph:
            entries = mem.log(limit=limit, damaged="mark")
        else:
            nodes = snapshot_graph(mem)
            heads = branch_heads(mem)
    _warn_damaged(sum(1 for e in (entries if not graph else nodes) if e.op == "damaged"))
    if not graph:
        if as_json:
            _emit_json(entries)
            return
        for entry in entries:
            click.echo(
                f"{_short(entry.snapshot_id)}  #{entry.seq:<4} {_when(entry.created_at)}  {entry.op:<6} {_log_path(entry.op, entry.path)}"
            )
        return
    if limit is not None:
        nodes = nodes[:limit]
    if as_json:
        _emit_json({"current": branch, "branches": heads, "snapshots": nodes})
        return
    _draw_graph(nodes, branch)


#: What ``log`` shows in place of the path of a snapshot a purge erased (its path is gone with it).
ERASED_PATH = "(purged)"


def _log_path(op: str, path: str) -> str:
    if op == "damaged":
        return f"{_visible(path)} {DAMAGED_NOTE}" if path else DAMAGED_NOTE
    return ERASED_PATH if op == "erased" else _visible(path)


#: What ``log`` shows beside a record that fails authentication (its path, when another version names it).
DAMAGED_NOTE = "(fails authentication)"


def _warn_damaged(count: int) -> None:
    """One line on stderr when the history shown holds damaged records, with the way out."""
    if count:
        click.echo(
            f"warning: {_count(count, 'record')} in this history failed authentication (marked damaged): "
            "`sovseal delete PATH` hides a damaged memory from HEAD, a replica or backup brings its content back, "
            "and `sovseal verify` lists every damaged record",
            err=True,
        )


_LANE_COLORS = ("red", "green", "yellow", "blue", "magenta", "cyan")


def _draw_graph(nodes: list[GraphNode], current: str) -> None:
    for prefix, node in draw_graph(nodes):
        lanes = "".join(
            click.style(c, fg=_LANE_COLORS[((i + 1) // 2) % len(_LANE_COLORS)]) if c != " " else c for i, c in enumerate(prefix)
        )
        if node is None:
            click.echo(lanes)
            continue
        line = [lanes, " " * (1 + max(0, 8 - len(prefix))), click.style(_short(node.snapshot_id), fg="yellow")]
        if node.branches:
            labels = ", ".join(f"HEAD -> {_visible(b)}" if b == current else _visible(b) for b in node.branches)
            line += [" (", click.style(labels, fg="green", bold=True), ")"]
        line += [f" {node.op} {_log_path(node.op, node.path)}  ", click.style(_when(node.created_at), dim=True)]
        click.echo("".join(line))


@main.command(short_help="List branches with their HEADs; --delete removes one.")
@click.option(
    "--delete",
    "delete_name",
    metavar="NAME",
    help="Delete branch NAME first (not --branch, not main); its snapshots stay in the lineage.",
)
@store_options
@json_option
def branches(delete_name: str | None, path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """Every branch with its HEAD and memory count; * marks --branch.

    With --delete NAME, the branch NAME is deleted first (a journaled, replicated event: a write
    another device made to it meanwhile brings it back), then the remaining branches are listed.
    """
    write = _will_write("the branch deletion") if delete_name is not None else None
    with _open(path, branch, key_file) as (mem, _):
        if delete_name is not None:
            mem.delete_branch(delete_name)
            if write is not None:
                write.committed(f"branch {delete_name} deleted")
            if not as_json:
                click.echo(f"deleted branch {delete_name}", err=True)
        rows = branch_table(mem)
    if as_json:
        _emit_json(rows)
        return
    for row in rows:
        mark = "*" if row["current"] else " "
        click.echo(f"{mark} {_visible(row['name']):<24} {_short(row['head'])}  {_count(row['visible'], 'memory', 'memories')}")


#: sovseal.consolidate.layout.RESERVED, written out: importing sovseal.consolidate loads the recall
#: stack (numpy, the index), which a reading command like `mind` must not (tests/cli/test_startup.py).
_RESERVED = "_sovseal/"


@main.command(short_help="Recurring Patterns: reinforced memories by type.")
@click.option("--min", "min_count", type=click.IntRange(min=0), default=1, show_default=True, help="Least reinforce count shown.")
@click.option("--all", "show_all", is_flag=True, help="Show every memory, reinforced or not (same as --min 0).")
@store_options
@json_option
def mind(min_count: int, show_all: bool, path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """Recurring Patterns: the memories stored again and again, grouped by type.

    Storing a fact a path already holds reinforces it instead of adding a snapshot; reinforced
    memories rank higher in recall. This shows what the store holds most strongly. sovseal's own
    records (under _sovseal/, e.g. consolidation's audit trail) are not listed.
    """
    with _open(path, branch, key_file) as (mem, _):
        groups = recurring_patterns(mem, min_count=0 if show_all else min_count)
    # sovseal's own records (consolidation's runs, steps, retention scores) are not the user's
    # memories: recall leaves them out, and so does mind.
    groups = {kind: [m for m in items if not m.path.startswith(_RESERVED)] for kind, items in groups.items()}
    if as_json:
        _emit_json({"branch": branch, "recurring_patterns": groups})
        return
    from rich.text import Text

    console = _console()
    title = "Memories" if show_all or min_count == 0 else "Recurring Patterns"
    console.print(Text(f"{title} on {_visible(branch)}", style="bold"))
    if not any(groups.values()):
        console.print(Text("  nothing reinforced yet: storing the same fact again reinforces it", style="dim"))
        return
    for kind, items in groups.items():
        if not items:
            continue
        console.print(Text(f"\n{kind.capitalize()} ({len(items)})", style="bold cyan"))
        for m in items:
            line = Text(f"  x{m.reinforce_count + 1:<3} ", style="green")
            line.append(_visible(m.path), style="bold")
            line.append(f"  {_visible(_compact(m.payload, 100), text=True)}")
            console.print(line)


@main.command(short_help="Decrypt every record, re-derive every snapshot id.")
@path_option
@key_option
@json_option
def verify(path: str | None, key_file: str | None, as_json: bool) -> None:
    """Open every record and re-derive every snapshot id, on every branch.

    A record erased by `sovseal purge` is checked as its skeleton, named by an authentic redaction,
    and counted as erased. Exits 0 when everything authenticates, 1 when anything does not (the
    problems are listed).
    """
    with _open(path, key_file=key_file) as (mem, _), _progress("verifying") as progress:
        report = mem.verify(progress=progress)
    if as_json:
        _emit_json(report)
    else:
        erased = f", {report.erased} of them erased by a purge (skeletons checked)" if report.erased else ""
        click.echo(
            f"{'ok' if report.ok else 'FAILED'}: {_count(report.records, 'record')}, "
            f"{_count(report.branches, 'branch', 'branches')}{erased}"
        )
        for problem in report.problems:  # without the core's advice to run verify: this is verify
            click.echo(f"  {_verify_problem(problem)}")
        for repair in report.repairs:
            click.echo(f"  repaired on open: {repair}")
    sys.exit(EXIT_OK if report.ok else EXIT_INTEGRITY)


@main.command(short_help="Rewrite the journal without erased content.")
@path_option
@key_option
@json_option
def compact(path: str | None, key_file: str | None, as_json: bool) -> None:
    """Rewrite the journal without the content `sovseal purge --no-compact` (or a pull) erased.

    Crash-safe (a new file, fsynced, renamed over the old one). Other processes keep reading and
    writing meanwhile; writers wait only while the new journal takes the old one's place (the
    pause printed). Purge compacts by itself, and so does a store whose erased bytes pass the
    threshold, so this is needed only after `purge --no-compact`.

    \b
      sovseal compact
      sovseal compact --json | jq .reclaimed
    """
    with _open(path, key_file=key_file) as (mem, _):
        report = mem.compact()
    if as_json:
        _emit_json({**jsonable(report), "reclaimed": report.reclaimed})
        return
    if report.seconds == 0.0:
        click.echo(f"nothing to compact: no erased content is left in the journal ({_size(report.bytes_before)})")
        return
    click.echo(
        f"compacted the journal: {_size(report.bytes_before)} -> {_size(report.bytes_after)}, {_reclaimed(report.reclaimed)}, "
        f"{_count(report.skeletons, 'skeleton')} written"
    )
    click.echo(f"took {report.seconds:.2f} s; writers paused {report.paused * 1000:.1f} ms")


@main.command("rebuild-index", short_help="Re-embed everything into a fresh vector index.")
@path_option
@key_option
@json_option
def rebuild_index(path: str | None, key_file: str | None, as_json: bool) -> None:
    """Drop the vector index and re-embed every visible memory on every branch.

    The index is derived data: the sealed journal is the source of truth, so nothing is lost.
    Run it after changing the embedding model. Stop other processes using the store first.
    """
    with _open(path, key_file=key_file):
        pass  # a missing store or a key that does not open it fails here, before the index is dropped
    with _progress("re-embedding (branches)") as progress:
        count = maintenance.rebuild_index(path, key_text=_key_text(key_file), embedder=EMBEDDER, progress=progress)
    if as_json:
        _emit_json({"branches": count})
    else:
        click.echo(f"rebuilt the vector index for {_count(count, 'branch', 'branches')}")


# -- backup --------------------------------------------------------------------------------------


_FILE_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
               (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def _export_target(file: str, force: bool) -> Path:
    """The regular file a backup replaces: ``file``, or what a symlink ``file`` points to (so the
    link stays a link). Anything else that is there (a FIFO, a device, a directory) is refused and
    left alone: the backup is written beside it and renamed over it, which would replace it."""
    target = Path(os.path.realpath(file))
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return target
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _FILE_KINDS if test(mode)), "a special file")
        raise InvalidInputError(
            f"{file} is {kind}, not a regular file: export writes a backup file only; pass another FILE, or `-` for stdout"
        )
    if not force:
        raise InvalidInputError(f"{file} exists; pass --force to overwrite it")
    return target


@contextmanager
def _replacing(target: Path) -> Iterator[Any]:
    """A new file beside ``target`` that replaces it only once fully written and fsynced: a failed
    or interrupted export leaves the old backup as it was, and no temporary file behind."""
    from sovseal.durable import fsync_dir, fsync_fd

    fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            yield out
            out.flush()
            fsync_fd(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    fsync_dir(target.parent)


@main.command("export", short_help="Write an encrypted backup file of the whole store.")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--force", is_flag=True, help="Replace FILE if it exists (through a symlink: the file it points to).")
@path_option
@key_option
@json_option
def export_(file: str, force: bool, path: str | None, key_file: str | None, as_json: bool) -> None:
    """Write an encrypted backup of the whole store (every branch and snapshot) to FILE.

    Restoring needs the store's key too: keep `sovseal key export` somewhere safe, apart from
    the backup. `-` writes to stdout.

    \b
      sovseal export backup.sovseal
      sovseal import backup.sovseal --path /new/home    (after `sovseal key import` there)
    """
    directory = store_dir(path or None)
    with _open(str(directory), key_file=key_file) as (mem, _), _progress("exporting") as progress:
        master, _ = _store_key(directory, key_file)
        if file == "-":
            info = export_backup(mem, master, sys.stdout.buffer, progress=progress)
        else:
            target = _export_target(file, force)
            with _replacing(target) as out:
                info = export_backup(mem, master, out, progress=progress)
    if file == "-":
        return
    if as_json:
        _emit_json({"file": str(Path(file).absolute()), **jsonable(info)})
        return
    click.echo(f"exported {_count(info.items, 'item')} ({_count(len(info.source_branches), 'branch', 'branches')}) to {file}")
    if info.skipped_damaged:
        _note(f"warning: left out {_count(info.skipped_damaged, 'damaged frame')}; run `sovseal verify`")


@main.command("import", short_help="Import an encrypted backup file.")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@path_option
@key_option
@json_option
def import_(file: str, path: str | None, key_file: str | None, as_json: bool) -> None:
    """Import a backup written by `sovseal export` (into a fresh store, usually).

    The store at --path needs the source store's key first (`sovseal key import`, --key-file or
    SOVSEAL_KEY); the store is created if it does not exist. Every record is authenticated and
    its snapshot id re-derived; items already present are skipped.

    \b
      sovseal key import --path /new/home < sovseal-key.txt
      sovseal import backup.sovseal --path /new/home && sovseal verify --path /new/home
    """
    write = _will_write("part of the import")
    directory = store_dir(path or None)
    with open(file, "rb") as src:
        read_backup_header(src)  # a file that is not a backup is refused before the key is looked up
        master, _ = _store_key(directory, key_file)  # never a new key: it must be the source store's
        src.seek(0)
        mem, _ = open_store(directory, key=master, create=True, embedder=EMBEDDER)
        with mem, _progress("importing") as progress:
            _watch(mem, directory, master)
            held = len(mem.export_items())  # counted in the store itself: the backup cannot say what is new here
            info = import_backup(mem, master, src, progress=progress)
            new = len(mem.export_items()) - held
            write.what = "the import"
            write.committed(f"{_count(new, 'new item')}")
            heads = branch_heads(mem)
    present = info.items - new
    if as_json:
        _emit_json({"path": str(directory.absolute()), "items": info.items, "new": new, "present": present, "branches": heads})
    else:
        already = f" ({present} already present)" if present else ""
        click.echo(f"imported {_count(new, 'new item')}{already} into {directory}: branches {', '.join(sorted(heads))}")


# -- keys ------------------------------------------------------------------------------------------


@main.group(short_help="Export or import the store's master key.")
def key() -> None:
    """Export the store's master key, or import one (a second device, a restore)."""


@key.command("export", short_help="Print the master key as one line of text.")
@path_option
def key_export(path: str | None) -> None:
    """Print the store's master key as one line of text (with a checksum).

    Anyone holding it can read every memory: keep it offline. Without it, nothing can be read.

    \b
      sovseal key export > sovseal-key.txt && chmod 600 sovseal-key.txt
    """
    from sovseal.crypto.keychain import export_key

    directory = store_dir(path or None)
    master, origin = _store_key(directory, None)
    click.echo(export_key(master))
    _note(f"this is the master key of {directory} (from {origin.shown()}); anyone holding it can read the store")


@key.command("import", short_help="Save an exported key for a store.")
@click.argument("exported", required=False, default="-")
@path_option
def key_import(exported: str, path: str | None) -> None:
    """Save an exported key for the store at --path (EXPORTED, or `-` to read it from stdin).

    Reading from stdin keeps the key out of your shell history. Refuses a key that does not
    open an existing store, or that would replace a different key already held for it.

    \b
      sovseal key import --path /new/home < sovseal-key.txt
    """
    from sovseal.crypto.keychain import import_key, store_master_key
    from sovseal.sdk.client import Sovseal

    directory = store_dir(path or None)
    if exported == "-":
        exported = click.prompt("exported key", hide_input=True) if sys.stdin.isatty() else sys.stdin.read()
    master = import_key(exported)
    if store_exists(directory):
        try:
            Sovseal(directory, key=master, endpoint="").close()
        except KeyUnavailableError as exc:
            advice = "import the key exported from this store, or import this one into a new, empty directory"
            raise KeyUnavailableError(_cli_message(exc, advice)) from None
    click.get_current_context().meta[_ORIGIN] = _KeyOrigin(directory, None, create=True)  # for errors saving it
    backend = store_master_key(directory, master)
    from sovseal.crypto.primitives import derive_subkeys

    click.echo(f"imported key {derive_subkeys(master).key_id} for {directory} into {backend}")


@key.command("rotate", short_help="Re-seal the store under a new master key.")
@path_option
@key_option
@click.option(
    "--new-key-file",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="The new key (as `sovseal key export` prints one). Required when the store's key is passed with "
    "--key-file or SOVSEAL_KEY; otherwise a new key is made and kept where the old one was.",
)
@click.option(
    "--retire", "retire_only", is_flag=True, help="Only send a retirement of the old server project that could not be sent before."
)
@json_option
def key_rotate(path: str | None, key_file: str | None, new_key_file: str | None, retire_only: bool, as_json: bool) -> None:
    """Re-seal every record, branch move and erasure under a new master key (docs/operations.md).

    Snapshot ids do not change. Stop every other process using the store first. After a crash, run
    it again: it finishes the same rotation. With replication configured (SOVSEAL_ENDPOINT and
    SOVSEAL_API_KEY), the old server project is retired (its bodies replaced by skeletons) and the
    store replicates to a new project, which needs its own API key.

    Backups made with `sovseal export` before the rotation open only with the old key: export
    the old key first and keep it with them, or export a new backup afterwards.

    \b
      sovseal key export > old-key.txt     # for the backups made so far
      sovseal key rotate && sovseal key export > sovseal-key.txt && sovseal export backup.sovseal --force
    """
    from sovseal.crypto.keychain import import_key

    directory = store_dir(path or None)
    if retire_only:
        done = retire_old_project(directory)
        if as_json:
            _emit_json({"retired": done})
        else:
            click.echo("old server project retired" if done else "the server could not be reached; run it again later")
        if not done:
            raise SystemExit(1)
        return
    key_text = _key_text(key_file)
    if key_text is None and os.environ.get(ENV_KEY):
        key_text = os.environ[ENV_KEY]
    new_key = import_key(Path(new_key_file).read_text(encoding="utf-8").strip()) if new_key_file else None
    if new_key is not None:
        _refuse_the_current_key(directory, key_text, new_key)
    result = rotate_key(directory, key_text=key_text, new_key=new_key)
    if as_json:
        _emit_json({k: v for k, v in jsonable(result).items() if k != "new_key"})
        return
    click.echo(
        f"rotated {directory} from key {result.old_key_id} to key {result.new_key_id}: {result.records} records "
        f"re-sealed in {result.seconds:.2f} s, verify {'ok' if result.verified else 'FAILED'}"
    )
    if result.new_key is None:
        _note(f"the new key replaced the old one in the store's key store; back it up now: sovseal key export --path {directory}")
        _note(
            "backups made with `sovseal export` before now open only with the old key, which the key store no longer holds: "
            f"export a new backup now (sovseal export FILE --path {directory}), or keep the old key if you exported it before"
        )
    else:
        _note("keep the new key (the one in --new-key-file) where you keep the old one: the old key no longer opens this store")
        _note(
            "backups made with `sovseal export` before now open only with the old key: keep it as long as you keep them, "
            f"or export a new backup now (sovseal export FILE --path {directory} --key-file NEW)"
        )
    if result.retired is None:
        _note("no replication configured: nothing was sent to a server")
    elif result.retired:
        _note("the old server project was retired; give the devices an API key for the new key's project")
    else:
        _note("the old server project could not be reached: `sovseal key rotate --retire` sends its retirement later")
    if not result.index_kept:
        _note("records changed places: the vector index was dropped and recall re-embeds what it needs")


def _refuse_the_current_key(directory: Path, key_text: str | None, new_key: bytes) -> None:
    """Refuse a --new-key-file that holds the store's current key (exit 2, nothing changed).

    ``rotate_key`` takes "old key == new key" for a rotation that crashed while its staged key
    was being promoted, and just finishes it: given on purpose, the same key would be reported as a
    rotation. While a rotation is unfinished (a staged key), rotate_key is left to decide.
    """
    from sovseal.crypto.keychain import staged_key
    from sovseal.crypto.primitives import derive_subkeys

    if not store_exists(directory):
        raise StoreNotFoundError.at(directory)
    if key_text is None and staged_key(directory) is not None:
        return
    current, _ = resolve_key(directory, key_text=key_text)
    if current == new_key:
        instead = "pass a different key with --new-key-file" if key_text is not None else "leave --new-key-file out to have a new key made"
        raise InvalidInputError(
            f"--new-key-file holds the store's current key (key id {derive_subkeys(current).key_id}); nothing was changed: {instead}"
        )


# -- consolidation (sovseal/consolidate) ------------------------------------------------------------


def _load_model(spec: str) -> Any:
    """``package.module:factory`` -> a chat model: the attribute, called with no arguments unless it
    already is a model (has ``invoke``)."""
    import importlib

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise InvalidInputError(f"--model must be package.module:factory (e.g. mymodels:chat); got {spec!r}")
    sys.path.insert(0, os.getcwd())  # like `python -m`: a module in the current directory can be named
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InvalidInputError(f"--model {spec}: cannot import it ({exc})") from None
    finally:
        sys.path.remove(os.getcwd())
    return target if callable(getattr(target, "invoke", None)) else target()


def _guard_model(model: Any) -> Any:
    """``model`` with every call's exception turned into a ModelCallError: one line and exit 6
    instead of a traceback, and not mistaken for the store's own disk errors (a refused connection
    is an OSError too). The wrapper keeps the model's class name, which the run's audit record names."""
    call = model.invoke if callable(getattr(model, "invoke", None)) else model

    def invoke(self: Any, prompt: str) -> Any:
        try:
            return call(prompt)
        except Exception as exc:
            kind = type(exc)
            name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
            detail = _one_line(str(exc)) or "(no message)"
            raise ModelCallError(
                f"the model failed: {name}: {detail}; check that its server is reachable (and the --model "
                "factory's address and credentials), then run `sovseal consolidate` again: nothing was written "
                "for the batch it was asked about, and the run resumes after the batches already finished"
            ) from exc

    return type(type(model).__name__, (), {"invoke": invoke})()


def _print_run(report: Any) -> None:
    if report.run is None:
        click.echo("nothing to do: every input is consolidated and every score is current (nothing was written)")
    else:
        verb = "resumed and finished" if report.resumed else "finished"
        click.echo(
            f"{verb} {report.run}: {_count(report.steps, 'step')}, {_count(report.writes, 'write')}; "
            f"HEAD {_short(report.head_before)} -> {_short(report.head_after)}"
        )
        for name, c in report.counts.items():
            shown = ", ".join(f"{k} {len(v) if isinstance(v, list) else v}" for k, v in c.items())
            click.echo(f"  {name:<10} {shown}")
    for name, why in report.skipped.items():
        _note(f"skipped {name}: {why} (pass --model package.module:factory)")


@main.group(invoke_without_command=True, short_help="Nightly passes: promotion, graph, digest, decay (audited, undoable).")
@click.option("--model", "model_spec", metavar="MODULE:FACTORY", envvar="SOVSEAL_CONSOLIDATE_MODEL", default=None,
              help="Import path of a chat model or of a function returning one: any LangChain chat model works "
              "(e.g. mymodels:chat with `def chat(): return ChatOllama(model=\"llama3.1\")`). Without it only "
              "the passes that need no model run (decay).  [env: SOVSEAL_CONSOLIDATE_MODEL]")
@click.option("--passes", default=None, metavar="LIST",
              help="Comma-separated passes to run, of promotion, graph, digest, decay (default: all that can run).")
@click.option("--batch-size", type=click.IntRange(1, 64), default=8, show_default=True, help="Memories per model call.")
@click.option("--as-of", type=click.DateTime(["%Y-%m-%d"]), default=None, help="The day to digest and score at (default: today, UTC).")
@store_options
@json_option
@click.pass_context
def consolidate(
    ctx: click.Context, model_spec: str | None, passes: str | None, batch_size: int, as_of: Any,
    path: str | None, branch: str, key_file: str | None, as_json: bool,
) -> None:
    """Consolidate memory, as a nightly job: Sci's passes on this store.

    \b
      promotion  a chat model turns batches of episodic memories into semantic ones,
                 or reinforces the semantic memories they restate
      graph      a chat model links related semantic memories (Sovseal.related follows them)
      digest     a chat model summarises the day into the episodic memory digest.YYYY-MM-DD
      decay      an Ebbinghaus retention score for every memory (needs no model)

    Without --model only decay runs; the others are skipped and say so. Every write is an
    ordinary sealed, replicated snapshot, and each run leaves an audit record. Running again
    changes nothing; a run that died resumes where it stopped. Undo a run with
    `sovseal consolidate rollback RUN`.

    \b
      sovseal consolidate                               decay only
      sovseal consolidate --model mymodels:chat         every pass
      sovseal consolidate runs                          the audit trail
    """
    if ctx.invoked_subcommand is not None:
        return
    from sovseal.consolidate import consolidate as run_passes

    model = _guard_model(_load_model(model_spec)) if model_spec else None
    with _open(path, branch, key_file) as (mem, _):
        report = run_passes(
            mem, model, passes=passes, batch_size=batch_size, as_of=None if as_of is None else as_of.date(),
            progress=None if as_json else _note,
        )
    if as_json:
        _emit_json(report)
    else:
        _print_run(report)


@consolidate.command("runs", short_help="The audit trail: every run, its HEADs and counts.")
@store_options
@json_option
def consolidate_runs(path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """List every consolidation run (oldest first) with its status, HEAD before and after, and counts."""
    from sovseal.consolidate import runs

    with _open(path, branch, key_file) as (mem, _):
        found = runs(mem)
    if as_json:
        _emit_json([{k: v for k, v in vars(r).items() if k != "raw"} for r in found])
        return
    if not found:
        click.echo("no consolidation runs yet")
    for r in found:
        click.echo(
            f"{r.run}  {r.status:<11} as of {r.as_of}  HEAD {_short(r.head_before)} -> {_short(r.head_after)}  {_compact(r.counts, 100)}"
        )


@consolidate.command("rollback", short_help="Undo a run (appends; later writes are kept).")
@click.argument("run_id", metavar="RUN")
@store_options
@json_option
def consolidate_rollback(run_id: str, path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """Undo consolidation run RUN as a unit, by appending: each path it wrote goes back to its value
    before the run. Paths written again since (by you, an agent or a later run) are kept and listed
    as conflicts. Nothing is rewritten; `sovseal rollback HEAD_BEFORE` (see `runs`) moves HEAD instead.
    """
    from sovseal.consolidate import rollback_run

    with _open(path, branch, key_file) as (mem, _):
        report = rollback_run(mem, run_id)
    if as_json:
        _emit_json(report)
        return
    if report.already:
        click.echo(f"{run_id} was already rolled back: nothing to do")
        return
    click.echo(f"rolled back {run_id}: {_count(len(report.restored), 'path')} restored, {_count(len(report.conflicts), 'conflict')} kept")
    for p in report.conflicts:
        _note(f"  kept (written after the run): {p}")


# -- agents ----------------------------------------------------------------------------------------


@main.command(short_help="Run the MCP server on stdio for agents.")
@store_options
def mcp(path: str | None, branch: str, key_file: str | None) -> None:
    """Run the MCP server on stdio, for agents (Claude Desktop, Claude Code, Cursor, ...).

    It creates the store (and key) on first start, warms the embedding model, then serves the
    tools store_memory, recall_memory, get_memory, delete_memory, purge, snapshot, fork, rollback,
    list_branches, switch_branch, memory_log, verify, and message_anonymize and
    message_deanonymize (with the anonymize extra). See docs/mcp.md for client configs.

    \b
      {"mcpServers": {"sovseal": {"command": "sovseal", "args": ["mcp"]}}}
    """
    from sovseal.mcp.server import serve_stdio

    if key_file == STDIN:
        raise InvalidInputError("mcp speaks to its client on stdin, so --key-file cannot be `-`: pass a file, or SOVSEAL_KEY")
    serve_stdio(path, branch=branch, key_text=_key_text(key_file), embedder=EMBEDDER)


# -- the tour --------------------------------------------------------------------------------------


@main.command(short_help="A scripted tour of the engine on a throwaway store.")
@click.option(
    "--path",
    type=click.Path(file_okay=False),
    help="Store directory, kept afterwards (default: a new temporary one, removed at the end).",
)
def demo(path: str | None) -> None:
    """A scripted tour: store, get, recall, fork, rollback, delete, verify, reopen.

    The store lives in a new temporary directory that is removed at the end, also when the tour
    fails halfway, so running it again and again leaves nothing behind; with --path it stays.
    """
    temporary = not path
    directory = Path(path) if path else Path(tempfile.mkdtemp(prefix="sovseal-demo-"))
    try:
        ok = _tour(directory)
    finally:
        if temporary:
            shutil.rmtree(directory, ignore_errors=True)  # a failure here must not hide the tour's own error
            if directory.exists():
                _note(f"warning: could not remove the demo store {directory}; delete it by hand")
    if temporary and not directory.exists():
        click.echo("Removed the temporary store.")
    if not ok:
        sys.exit(1)


def _written(mem: Sovseal, path: str) -> Memory:
    """A memory the tour has just written; gone, the store is damaged, and the tour says so."""
    memory = mem.get(path)
    if memory is None:
        raise IntegrityError(f"the demo wrote {path} and could not read it back")
    return memory


def _head(mem: Sovseal) -> str:
    """The HEAD snapshot of the tour's branch, which its writes have just made."""
    head = mem.snapshot()
    if head is None:
        raise IntegrityError("the demo's writes left its branch without a snapshot")
    return head


def _tour(directory: Path) -> bool:
    """The demo's script on a store at ``directory``: True when every check it prints passed."""
    from sovseal.sdk.client import Sovseal

    key = os.urandom(32)  # a real app keeps its key in the OS keychain; the demo uses a throwaway one
    say = click.echo

    say(f"sovseal demo — store at {directory}")
    say("  (a throwaway key for this demo; apps keep theirs in the OS keychain)\n")
    t0 = time.perf_counter()
    with Sovseal(directory, key=key) as mem:
        mem.ready()
        say(f"1. Loaded the on-device embedder in {time.perf_counter() - t0:.2f} s (all-MiniLM-L6-v2, ONNX Runtime).")

        facts = [
            ("user.editor", "The user edits code in neovim with a dark theme.", "semantic"),
            ("user.preferences.testing", {"framework": "vitest", "reason": "ESM-native, fast cold start"}, "semantic"),
            ("user.pets", "The user has a golden retriever named Biscuit.", "semantic"),
            ("project.deploy", "Deploys go through GitHub Actions, then a manual approval.", "procedural"),
            ("chat.2026-05-21", "We talked about a trip to Lisbon in October.", "episodic"),
        ]
        say("\n2. Storing five memories (each canonicalized, embedded, sealed, fsynced):")
        first = None
        for path_, payload, kind in facts:
            t = time.perf_counter()
            result = mem.store(path_, payload, type=kind)
            first = first or result.snapshot_id
            say(f"   {path_:<26} -> {result.snapshot_id[:17]}…  ({(time.perf_counter() - t) * 1000:.1f} ms)")
        before_edit = _head(mem)

        say("\n3. get('user.editor'):")
        say(f"   {_written(mem, 'user.editor').payload}")

        query = "what does the user write code with?"
        say(f"\n4. recall({query!r}, k=2) — similarity search, offline:")
        for m in mem.recall(query, k=2):
            say(f"   {m.score:.3f}  {m.path}: {m.payload}")

        say("\n5. Storing the same fact again reinforces it instead of adding a snapshot:")
        again = mem.store("user.pets", "The user has a golden retriever named Biscuit.")
        say(f"   reinforced={again.reinforced}, reinforce_count={_written(mem, 'user.pets').reinforce_count}")

        say("\n6. Overwrite user.editor, then fork the previous snapshot into branch 'experiment':")
        mem.store("user.editor", "The user switched to Helix.")
        say(f"   main:       user.editor = {_written(mem, 'user.editor').payload!r}")
        mem.fork(before_edit, branch="experiment")
        say(f"   experiment: user.editor = {_written(mem, 'user.editor').payload!r}")
        mem.checkout("main")

        say("\n7. Roll main back to before the edit (non-destructive: nothing is deleted):")
        head = _head(mem)
        mem.rollback(before_edit)
        say(f"   main:       user.editor = {_written(mem, 'user.editor').payload!r}")
        mem.rollback(head)
        say(f"   and forward again:        {_written(mem, 'user.editor').payload!r}")

        say("\n8. delete('chat.2026-05-21') appends a tombstone; the path disappears from state:")
        mem.delete("chat.2026-05-21")
        say(f"   visible paths: {sorted(mem.state())}")

        report = mem.verify()
        say(f"\n9. verify(): ok={report.ok}, {_count(report.records, 'record')} opened and their snapshot ids re-derived")
        state_before = mem.state()
        log_before = [e.snapshot_id for e in mem.log()]

    with Sovseal(directory, key=key) as mem:
        same = mem.state() == state_before and [e.snapshot_id for e in mem.log()] == log_before
        report = mem.verify()
        say(f"\n10. Closed and reopened: state and log byte-equal: {same}; verify ok={report.ok}")
        say("\n    The lineage of main, newest first:")
        for entry in mem.log():
            say(f"    #{entry.seq:<2} {entry.op:<6} {entry.path:<26} {entry.snapshot_id[:17]}…")
    on_disk = sorted(p.name for p in directory.iterdir())
    say(f"\nOn disk: {', '.join(on_disk)} — no path or payload in the clear. Done.")
    return same and report.ok


# -- replication: the server and restore (sovseal/replication, sovseal/server) -------------------


def _has_password(database: str) -> bool:
    """Whether ``--database`` is a URL with a password in it (a malformed one is left for the server to report)."""
    from urllib.parse import urlsplit

    try:
        return bool(urlsplit(database).password)
    except ValueError:
        return False


@main.command(short_help="Run the replication server (blind: never sees keys or plaintext).")
@click.option("--host", envvar="SOVSEAL_SERVER_HOST", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option("--port", envvar="SOVSEAL_SERVER_PORT", type=int, default=8765, show_default=True, help="Port to listen on.")
@click.option(
    "--database",
    envvar="SOVSEAL_SERVER_DATABASE",
    default=None,
    help="SQLite file (default ~/.sovseal-server/replication.sqlite3) or a postgresql:// URL; with the role URLs set, "
    "the owner's URL, used only to migrate and grant.  [env: SOVSEAL_SERVER_DATABASE]",
)
@click.option("--max-body", type=int, default=16 * 1024 * 1024, show_default=True, help="Largest push body accepted, in bytes.")
@click.option("--create-key", is_flag=True, help="Create an API key, print it once, and exit (it is stored hashed).")
@click.option(
    "--project",
    default=None,
    help="With --create-key: the server-blind project id (64 hex) to bind the key to; "
    "by default it binds to the first project it is used with.",
)
@click.option("--label", default="", help="With --create-key: a note stored beside the key.")
@click.option(
    "--revoke-key",
    default=None,
    metavar="KEY",
    help="Revoke an API key and exit; `-` reads KEY from stdin, off the process list (given here, a warning says so).",
)
@click.option("--log-level", default="info", show_default=True, type=click.Choice(["critical", "error", "warning", "info", "debug"]))
def serve(
    host: str, port: int, database: str | None, max_body: int, create_key: bool, project: str | None, label: str, revoke_key: str | None,
    log_level: str,
) -> None:
    """Serve replication (push, pull, health) over HTTP with uvicorn.

    Put TLS in front of it (a reverse proxy) for anything but loopback: clients refuse plain http
    to other hosts. Keys are per project:

    \b
      sovseal serve --create-key              # prints sov_...; give it to the devices of one project
      sovseal serve --revoke-key - < key.txt  # stdin keeps the key off the process list
      SOVSEAL_ENDPOINT=http://127.0.0.1:8765 SOVSEAL_API_KEY=sov_... python agent.py
      sovseal serve --database postgresql://user@db/sovseal --host 0.0.0.0

    On PostgreSQL, least privilege: set SOVSEAL_SERVER_WRITER_URL and SOVSEAL_SERVER_READER_URL
    (both, or neither) to postgresql://ROLE[:password]@host/db. Pushes then connect as the writer
    (no DELETE), pulls as the reader (SELECT only); --database is the owner's URL, used only to
    migrate and grant the two roles at start-up. See docs/operations.md.

    \b
      SOVSEAL_SERVER_WRITER_URL=postgresql://sovseal_writer@db/sovseal \\
      SOVSEAL_SERVER_READER_URL=postgresql://sovseal_reader@db/sovseal \\
      sovseal serve --database postgresql://owner@db/sovseal --host 0.0.0.0
    """
    from sovseal.server import Limits, open_storage
    from sovseal.server import serve as run_server

    if project is not None and not (len(project) == 64 and all(c in "0123456789abcdef" for c in project)):
        raise InvalidInputError("--project must be a server-blind project id: 64 lowercase hex digits")
    if database is not None and _has_password(database):
        _warn_inline("database", "the password in --database", "set SOVSEAL_SERVER_DATABASE instead")
    if revoke_key == STDIN:
        revoke_key = (click.prompt("API key", hide_input=True) if sys.stdin.isatty() else sys.stdin.readline()).strip()
    elif revoke_key is not None:
        _warn_inline("revoke_key", "the API key given with --revoke-key", "pass `--revoke-key -` and the key on stdin instead")
    if create_key or revoke_key:
        storage = open_storage(database)
        found = True
        try:
            if create_key:
                click.echo(storage.create_api_key(project, label))
            if revoke_key:
                found = storage.revoke_api_key(revoke_key)
                if found:
                    _note("revoked")
        finally:
            storage.close()
        if revoke_key and not found:
            click.echo(
                "error: no such API key on this server (nothing was revoked); check the key and --database "
                "(or SOVSEAL_SERVER_DATABASE), then run the command again",
                err=True,
            )
            sys.exit(EXIT_NOT_FOUND)
        return
    run_server(database, host, port, Limits(max_body=max_body), log_level=log_level)


@main.command(short_help="Push what is not replicated yet, then pull what other devices wrote.")
@store_options
@json_option
def sync(path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """Push the outbox, then pull: one round of two-way sync with the replication server.

    Needs replication on (SOVSEAL_ENDPOINT and SOVSEAL_API_KEY). A branch written on two devices
    shows two heads afterwards, merged by the next write on it; concurrent writes to one path are
    listed with the value every device chose (`sovseal status` shows them too).
    """
    with _open(path, branch, key_file) as (mem, _):
        if mem.replication is None:
            raise InvalidInputError("sync needs replication: set SOVSEAL_ENDPOINT and SOVSEAL_API_KEY")
        pushed = mem.status().outbox_records
        if not mem.replication.flush(60, stop_on_failure=True):
            raise ReplicationError(_push_failure(mem.replication.status()))
        with _progress("pulling") as update:
            result = mem.pull(progress=update)
        heads = mem.status().heads
        conflicts = [c for name in mem.branches() for c in mem.conflicts(branch=name)]
    if as_json:
        _emit_json({"pushed": pushed, "pull": result, "heads": heads, "conflicts": conflicts})
        return
    click.echo(f"pushed {_count(pushed, 'item')}, pulled {_count(result.received, 'item')} ({_count(result.new_records, 'new snapshot')})")
    for name, sids in heads.items():
        if len(sids) > 1:
            click.echo(f"  {_visible(name)}: {len(sids)} heads ({', '.join(_short(s) for s in sids)}); the next write on it merges them")
    for conflict in conflicts:
        click.echo(
            f"  conflict on {_visible(conflict.branch)}: {_visible(conflict.path)} written on {len(conflict.versions)} devices "
            f"at once; showing {_short(conflict.chosen)}"
        )


def _push_failure(state: ReplicationStatus) -> str:
    """Why ``sync`` could not send the outbox: the server's or the connection's own words."""
    if state.last_error is None:
        return "the outbox was not sent within 60 s (no error reported: the server is slow, or another process is sending)"
    advice = "check SOVSEAL_API_KEY and SOVSEAL_PROJECT" if state.state == "paused" else f"check that {state.endpoint} is reachable"
    return f"the outbox was not sent: {_visible(state.last_error)}; {advice}, then run sync again (the outbox keeps everything)"


@main.command(short_help="Pull a project from the replication server into this store.")
@path_option
@key_option
@click.option("--endpoint", envvar="SOVSEAL_ENDPOINT", required=True, help="The server's base URL.  [env: SOVSEAL_ENDPOINT]")
@click.option(
    "--api-key",
    envvar="SOVSEAL_API_KEY",
    required=True,
    help="The project's API key. Set the variable instead: given here, other local users can read it in the "
    "process list (a warning says so).  [env: SOVSEAL_API_KEY]",
)
@click.option("--project", envvar="SOVSEAL_PROJECT", default="default", show_default=True, help="Project name.  [env: SOVSEAL_PROJECT]")
@json_option
def restore(path: str | None, key_file: str | None, endpoint: str, api_key: str, project: str, as_json: bool) -> None:
    """Restore on a second device: pull, verify every record, rebuild lineage, branches and index.

    The store's key must be the source's: pass --key-file (or SOVSEAL_KEY), or import it first
    with `sovseal key import`. Pulling again later fetches only what is new.
    """
    from sovseal.sdk.client import Sovseal

    _warn_inline("api_key", "the API key given with --api-key", "set SOVSEAL_API_KEY instead")
    directory = store_dir(path or None)
    key, _ = _store_key(directory, key_file)
    with Sovseal(directory, key=key, embedder=EMBEDDER, endpoint=endpoint, api_key=api_key, project=project) as mem:
        with _progress("pulling") as update:
            result = mem.pull(progress=update)
        report = mem.verify()
        info = {"pull": jsonable(result), "verify_ok": report.ok, "records": report.records, "branches": mem.branches()}
    if as_json:
        _emit_json(info)
    else:
        click.echo(
            f"pulled {_count(result.received, 'item')} ({_count(result.new_records, 'new snapshot')}, {result.waiting} waiting "
            f"for a parent); verify {'ok' if report.ok else 'FAILED'}: {_count(report.records, 'record')}, "
            f"branches {', '.join(info['branches'])}"
        )
    if not report.ok:
        sys.exit(EXIT_INTEGRITY)


def run() -> None:
    """The console-script entry point."""
    try:
        main(standalone_mode=True)
    except SovsealError as exc:  # raised outside a command (the group handles those inside one)
        click.echo(f"error: {_one_line(str(exc))}", err=True)
        sys.exit(exit_code(exc))
