"""The commands that write: ``store``, ``delete``, ``purge``, ``fork`` and ``rollback``."""

from __future__ import annotations

import sys

import click

from sovseal.cli.app import main
from sovseal.cli.interrupts import _deletion_landed, _held_at, _memory_landed, _will_write
from sovseal.cli.opening import _open
from sovseal.cli.options import STDIN, _from_stdin, json_option, key_option, path_option, store_options
from sovseal.cli.output import _count, _emit_json, _note, _parse_object, _parse_payload, _reclaimed, _short, _visible
from sovseal.cli.status import _replication_note
from sovseal.errors import (
    EXIT_USAGE,
    InvalidInputError,
    MemoryNotFoundError,
)
from sovseal.sdk.views import (
    jsonable,
    resolve_snapshot,
)
from sovseal.storage.entries import MEMORY_TYPES, PROVENANCES


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
