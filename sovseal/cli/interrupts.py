"""Ctrl-C: exit 130 with one line that says whether the command's write was committed.

A write command records what it is about to change (:func:`_will_write`); an interrupt is then
answered from the store itself (a fresh read-only look when it lands inside the write), never guessed.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import click

from sovseal.cli.errors import _one_line
from sovseal.cli.output import _short
from sovseal.errors import SovsealError

if TYPE_CHECKING:  # the store and the keychain load when a command opens one, so `--help` is quick
    from sovseal.sdk.client import Sovseal

#: Ctrl-C (SIGINT), as shells report 128 + the signal's number (not an error: not in EXIT_CODES).
EXIT_INTERRUPTED = 130


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


def _all_or_nothing(line: str) -> None:
    """Register what Ctrl-C says for a command whose write is all or nothing by construction (a
    new file renamed over the old one): ``line`` is true wherever the interrupt lands."""
    click.get_current_context().meta[_WRITE] = _Write(line, _fingerprint, _store_changed, done=line)


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
