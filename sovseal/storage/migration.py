"""Migrating a journal to the current format (docs/design.md, "Migration from format 2").

Every frame keeps its place and its sealed bytes; each gains what the current format adds (a
clock and the heads it replaces). The new journal is written beside the old one, fsynced, read
back and compared frame by frame, then renamed over it: a crash at any point leaves one whole
journal, the old or the new. :class:`~sovseal.storage.store.LocalStore` decides when to migrate
(a writer that has caught up on an authentic journal of an older format) and reopens afterwards.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from sovseal.durable import fsync_dir
from sovseal.errors import StorageError

from . import frames as fr
from .journal import FORMAT, HEADER, Journal, JournalWriter
from .lineage import Lineage

#: The new journal's name while it is being written, beside the old one.
MIGRATING = "journal.migrating"


def migrate_journal(journal: Journal, journal_key: bytes) -> int:
    """Rewrite the format-2 ``journal`` as format :data:`FORMAT` in place; the frame count.

    The caller holds the writer lock and reopens the journal afterwards (its file was replaced).
    """
    old = journal.path
    target = old.with_name(MIGRATING)
    target.unlink(missing_ok=True)
    frames = migrated_frames(journal)
    write_journal(target, frames, journal_key)
    check = Journal(target, journal_key)
    try:
        written = [fr.decode(f.body) for f in check.scan(0).frames]
    finally:
        check.close()
    if [_untagged(f) for f in written] != [_untagged(f) for f in frames]:
        target.unlink()
        raise StorageError(f"migrating {old} to journal format {FORMAT} did not read back identically; nothing was changed")
    os.replace(target, old)
    fsync_dir(old.parent)
    return len(frames)


def migrated_frames(journal: Journal) -> list[fr.Frame]:
    """Every frame of the (format-2, authentic) ``journal`` as its current equivalent, in order."""
    shadow = Lineage()
    out: list[fr.Frame] = []
    for scanned in journal.scan(0).frames:
        frame = fr.decode_v2(scanned.body)
        if not isinstance(frame, fr.AckFrame):
            floor = shadow.max_hlc + 1  # no frame's time may be unknown, nor below what came before it
            if isinstance(frame, fr.RecordFrame):
                branch = shadow.branches.get(frame.branch_id)
                replaces = branch.replaceable if branch is not None else ()
                explicit = replaces != frame.parents
                # Raised above its parents only: the same value on every device that migrates it.
                parents_floor = max(
                    (shadow.nodes[shadow.by_wire[p]].hlc + 1 for p in frame.parents if p in shadow.by_wire), default=fr.MIN_LEGACY_HLC
                )
                frame = dataclasses.replace(
                    frame,
                    hlc=max(frame.hlc, parents_floor),
                    flags=frame.flags | (fr.Flag.EXPLICIT_AFTER if explicit else fr.Flag.NONE),
                    after=replaces if explicit else (),
                )
            elif isinstance(frame, fr.BranchFrame):
                branch = shadow.branches.get(frame.branch_id)
                after = branch.replaceable if branch is not None else ()
                frame = dataclasses.replace(frame, hlc=max(frame.hlc, floor), after=after)
            else:
                frame = dataclasses.replace(frame, hlc=max(frame.hlc, floor))
        shadow.apply(frame, scanned.offset, len(scanned.body) + HEADER.size, True)
        out.append(frame)
    return out


def write_journal(path: Path, frames: list[fr.Frame], journal_key: bytes) -> None:
    """A new journal at ``path`` holding ``frames`` in order, fsynced (nothing left behind on failure)."""
    writer = JournalWriter(path, journal_key)
    try:
        for frame in frames:
            writer.add(frame.encode_tagged(writer.tag_next) if isinstance(frame, fr.RecordFrame) else frame.encode())
        writer.finish()
    except BaseException:
        writer.abandon()
        raise


def _untagged(frame: fr.Frame) -> fr.Frame:
    """A frame without its head tag (a place-bound MAC that differs between two journals)."""
    return dataclasses.replace(frame, head_tag=bytes(fr.TAG_LEN)) if isinstance(frame, fr.RecordFrame) else frame
