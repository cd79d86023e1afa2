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
from dataclasses import dataclass
from typing import TYPE_CHECKING

from . import frames as fr
from .errors import StorageError
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
    paused: float  # how long the writer lock was held: what other writers waited

    @property
    def reclaimed(self) -> int:
        return self.bytes_before - self.bytes_after


def due(store: LocalStore) -> bool:
    """Is enough erased content waiting that compaction should run by itself?"""
    with store.reading() as lineage:
        waiting = lineage.uncompacted
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
        self._skeleton_written: set[bytes] = set()

    def copy(self, scanned: list[ScannedFrame], seals: dict[bytes, bytes]) -> None:
        """Copy frames, each erased record (its wire id in ``seals``) as its skeleton, once."""
        for frame in scanned:
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
                body = record.encode_tagged(self.writer.tag_next)  # re-tagged for its new place
            self.writer.add(bytes(body))

    def abandon(self) -> None:
        self.writer.abandon()


def _seals(scanned: list[ScannedFrame]) -> dict[bytes, bytes]:
    """wire id -> skeleton seal, from the redaction frames among ``scanned``."""
    out: dict[bytes, bytes] = {}
    for frame in scanned:
        if frame.authentic and frame.body[0] == fr.Kind.REDACTION:
            out.update(fr.RedactionFrame.decode(frame.body).erased)
    return out


def compact(store: LocalStore) -> CompactionReport:
    """Rewrite the store's journal with every erased record as its skeleton (see the module doc).

    Raises StorageError on a read-only store, a journal with damage (compaction never launders
    it), or a journal that did not read back as written (then nothing changed).
    """
    started = time.perf_counter()
    store.check_compactable()
    before = store.journal_size()
    for attempt in range(_ATTEMPTS):
        last = attempt == _ATTEMPTS - 1
        reader = Journal(store.journal_path, store.journal_key, read_only=True)
        rewriter = _Rewriter(store)
        try:
            if last:  # others keep appending redactions of what was copied: do it all under the lock
                with store.writing():
                    first = reader.scan(0)
                    seals = _seals(first.frames)
                    rewriter.copy(first.frames, seals)
                    lock_started = time.perf_counter()
                    return _swap(store, reader, rewriter, before, started, lock_started, first.end, seals, set())
            first = reader.scan(0)
            seals = _seals(first.frames)
            copied = {fr.RecordFrame.decode(f.body).wire_id for f in first.frames if f.body[0] == fr.Kind.RECORD}
            rewriter.copy(first.frames, seals)
            rewriter.writer.flush()
            with store.writing():
                lock_started = time.perf_counter()
                report = _swap(store, reader, rewriter, before, started, lock_started, first.end, seals, copied)
            if report is not None:
                return report
        except BaseException:
            rewriter.abandon()
            raise
        finally:
            reader.close()
        rewriter.abandon()
    raise AssertionError("unreachable: the last attempt runs under the lock")  # pragma: no cover


def _swap(
    store: LocalStore,
    reader: Journal,
    rewriter: _Rewriter,
    before: int,
    started: float,
    lock_started: float,
    copied_to: int,
    seals: dict[bytes, bytes],
    copied: set[bytes],
) -> CompactionReport | None:
    """Under the writer lock: copy what was appended since, then put the new journal in place.

    None (try again) when a redaction appended meanwhile erases a record already copied whole.
    """
    if reader.replaced():
        raise StorageError("another process compacted or migrated the journal meanwhile; nothing was changed, run compact() again")
    if reader.format != FORMAT:
        raise StorageError("the journal is not in the current format; open the store once to migrate it, then compact")
    rest = reader.scan(copied_to).frames if reader.size() > copied_to else []
    more = _seals(rest)
    if any(wire in copied for wire in more):
        return None
    seals.update(more)
    rewriter.copy(rest, seals)
    rewriter.writer.finish()
    store.replace_journal(rewriter.path)
    after = store.journal_size()
    now = time.perf_counter()
    return CompactionReport(before, after, rewriter.skeletons, now - started, now - lock_started)


