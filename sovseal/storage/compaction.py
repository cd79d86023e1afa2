"""Compaction: the journal rewritten without erased content (docs/design.md, "Compaction").

A purge appends redaction frames; the sealed entries they erase are still in the journal until
this rewrite replaces each erased record's frame with its skeleton. Every other frame keeps its
body byte for byte (records are re-tagged for their new place), so node numbers, snapshot ids
and what the server holds do not change.

The bulk is copied without the writer lock, so other processes keep writing; the lock is held
only to copy what they appended meanwhile and to swap the files. The new journal is written
beside the old one, fsynced, read back and compared, then renamed over it: a crash at any point
leaves one whole journal, the old or the new.
"""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sovseal.errors import StorageError

from . import frames as fr
from .journal import FORMAT, Journal, JournalWriter, ScannedFrame

if TYPE_CHECKING:
    from .store import LocalStore

COMPACTING = "journal.compacting"
#: Compaction runs by itself when erased records not yet compacted hold this many frame bytes, or
#: a quarter of the journal (docs/design.md, "Compaction").
AUTO_BYTES = 64 * 1024 * 1024
AUTO_FRACTION = 0.25
_ATTEMPTS = 3


@dataclass(frozen=True, slots=True)
class CompactionReport:
    bytes_before: int
    bytes_after: int
    skeletons: int  # record frames written as skeletons
    seconds: float  # the whole rewrite
    paused: float  # from asking for the writer lock to releasing it: what other writers waited at most

    @property
    def reclaimed(self) -> int:
        return self.bytes_before - self.bytes_after


def due(store: LocalStore) -> bool:
    """Is enough erased content waiting that compaction should run by itself?

    Never for a journal with damage: compaction refuses to rewrite it, and the purge that erased
    the content already said so (running it on every close would only repeat that)."""
    with store.reading() as lineage:
        waiting = lineage.uncompacted
        if lineage.damage:
            return False
    return waiting > 0 and (waiting >= AUTO_BYTES or waiting >= AUTO_FRACTION * store.journal_size())


class _Rewriter:
    """The new journal: frames copied in order, each erased record as its skeleton (once)."""

    def __init__(self, store: LocalStore) -> None:
        # A name of its own: two processes compacting at once must not write into one file (the
        # second to finish finds the journal replaced and gives up). Leftovers of a killed
        # compaction are removed by the next open (LocalStore._remove_stale).
        self.path = store.directory / f"{COMPACTING}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        self.writer = JournalWriter(self.path, store.journal_key)
        self.skeletons = 0
        self.whole: set[bytes] = set()  # records copied with their content
        self._skeleton_written: set[bytes] = set()

    def copy(self, frames: Iterable[ScannedFrame], seals: dict[bytes, bytes]) -> None:
        """Copy frames, each erased record (its wire id in ``seals``) as its skeleton, once."""
        for frame in frames:
            if not frame.authentic:
                raise StorageError(
                    f"journal byte {frame.offset} failed authentication; nothing was compacted. Run `sovseal verify`, "
                    "then restore the store from a replica or backup"
                )
            body = frame.body
            if body[0] == fr.Kind.RECORD:
                record = fr.RecordFrame.decode(body)
                seal = seals.get(record.wire_id)
                if seal is not None and not record.redacted:
                    record = record.skeleton(seal)
                if record.redacted:
                    if record.wire_id in self._skeleton_written:
                        continue  # another version of an erased snapshot: its one skeleton is written
                    self._skeleton_written.add(record.wire_id)
                    self.skeletons += 1
                else:
                    self.whole.add(record.wire_id)
                body = record.encode_tagged(self.writer.tag_next)  # re-tagged for its new place
            self.writer.add(bytes(body))

    def abandon(self) -> None:
        self.writer.abandon()


def _seals(store: LocalStore, since: int = 0) -> dict[bytes, bytes]:
    """wire id -> skeleton seal, from the store's redaction frames at or after byte ``since``."""
    with store.reading() as lineage:
        where = sorted({w for w in lineage.redactions.values() if w[0] >= since})
    out: dict[bytes, bytes] = {}
    for place in where:
        frame, _ = store.open_redaction(place)
        out.update(frame.erased)
    return out


def compact(store: LocalStore) -> CompactionReport:
    """Rewrite the store's journal with every erased record as its skeleton (see the module doc).

    Raises StorageError on a read-only store, a journal with damage (compaction never launders
    it), or a journal that did not read back as written (then nothing changed).
    """
    started = time.perf_counter()
    store.check_compactable()
    before = store.journal_size()
    with store.reading() as lineage:
        waiting = lineage.uncompacted > 0
    if not waiting:  # nothing erased is left in the journal: nothing to rewrite
        return CompactionReport(before, before, 0, 0.0, 0.0)
    for attempt in range(_ATTEMPTS):
        rewriter = _Rewriter(store)
        reader = Journal(store.journal_path, store.journal_key, read_only=True)
        try:
            if attempt == _ATTEMPTS - 1:  # others keep erasing what was copied: do it all under the lock
                asked = time.perf_counter()
                with store.writing():
                    report = _swap(store, reader, rewriter, 0, _seals(store), before, started, asked)
                assert report is not None  # nosec B101 -- under the lock throughout, nothing can erase meanwhile
                return report
            with store.reading():
                copied_to = store.journal_end()
            seals = _seals(store)
            rewriter.copy(reader.frames(0, copied_to), seals)
            rewriter.writer.check()  # the bulk is read back before the lock is taken
            asked = time.perf_counter()
            with store.writing():
                report = _swap(store, reader, rewriter, copied_to, seals, before, started, asked)
            if report is not None:
                return report
            rewriter.abandon()
        except BaseException:
            rewriter.abandon()
            raise
        finally:
            reader.close()
    raise AssertionError("unreachable: the last attempt runs under the lock")  # pragma: no cover


def _swap(
    store: LocalStore,
    reader: Journal,
    rewriter: _Rewriter,
    copied_to: int,
    seals: dict[bytes, bytes],
    before: int,
    started: float,
    asked: float,
) -> CompactionReport | None:
    """Under the writer lock: copy what was appended since ``copied_to``, then put the new journal in place.

    None (try again) when a redaction appended meanwhile erases a record already copied whole.
    """
    if reader.replaced():
        raise StorageError(
            "another process compacted or migrated the journal meanwhile",
            advice="nothing was changed, run compact() again",
            cli_advice="nothing was changed, run `sovseal compact` again",
        )
    if reader.format != FORMAT:
        raise StorageError("the journal is not in the current format; open the store once to migrate it, then compact")
    end = store.journal_end()
    more = _seals(store, copied_to)
    if any(wire in rewriter.whole for wire in more):
        return None
    seals.update(more)
    rewriter.copy(reader.frames(copied_to, end), seals)
    rewriter.writer.finish()
    after = rewriter.path.stat().st_size
    store.replace_journal(rewriter.path)
    now = time.perf_counter()
    return CompactionReport(before, after, rewriter.skeletons, now - started, now - asked)
