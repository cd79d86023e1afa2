"""Key rotation: the journal sealed again under a new master key (docs/design.md, "Key rotation").

Every frame is opened under the old key and sealed again under the new one, in journal order,
into a new journal that is checked and then renamed over the old one. Keyed ids change with the
key; snapshot ids hash content and do not. The old server project is retired with redactions
sealed under the old key (:func:`retirement`), pushed by the caller.
"""

from __future__ import annotations

import dataclasses
import os
import secrets
import shutil
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sovseal.canonical import canonicalize, loads
from sovseal.crypto.primitives import record_fields_aad
from sovseal.crypto.sealing import Sealing
from sovseal.errors import IntegrityError, StorageError

from . import frames as fr
from .compaction import compact
from .entries import Entry
from .journal import Journal, JournalWriter, ScannedFrame
from .wire import WireItem

if TYPE_CHECKING:
    from .store import LocalStore

ROTATING = "journal.rotating"
RETIRE_REASON = "key rotated"


@dataclass(frozen=True, slots=True)
class RotationReport:
    old_key_id: str
    new_key_id: str
    frames: int  # frames written under the new key
    records: int
    seconds: float
    index_kept: bool  # False: records changed places, the vector index was removed (recall re-embeds)


class _Resealer:
    """Turns the old journal's frames into the new key's, remembering how every id maps."""

    def __init__(self, store: LocalStore, new: Sealing) -> None:
        self.store = store
        self.old = store.sealing
        self.new = new
        self.ids: dict[bytes, bytes] = {}  # old wire id or event id -> new
        self.branches: dict[bytes, bytes] = {}  # old branch id -> new
        self.sids: dict[bytes, str] = {}  # old wire id -> snapshot id
        self.seals: dict[bytes, bytes] = {}  # new wire id of a skeleton -> its new seal

    def _links(self, ids: tuple[bytes, ...], present: set[bytes]) -> tuple[bytes, ...] | None:
        """The new ids of ``ids``; None while one that the journal holds is not mapped yet. Ids the
        journal never received (heads superseded before they arrived) are dropped."""
        out = []
        for old in ids:
            new = self.ids.get(old)
            if new is None:
                if old in present:
                    return None
                continue
            out.append(new)
        return tuple(out)

    def frame(self, frame: fr.Frame, present: set[bytes]) -> fr.Frame | None:
        """The frame under the new key; None when it must wait for a frame later in the journal."""
        if isinstance(frame, fr.RecordFrame):
            return self._record(frame, present)
        if isinstance(frame, fr.BranchFrame):
            return self._branch(frame, present)
        if isinstance(frame, fr.ReinforceFrame):
            return self._reinforce(frame)
        if isinstance(frame, fr.RedactionFrame):
            return self._redaction(frame)
        raise TypeError(f"{type(frame).__name__} is not re-sealed")

    def _record(self, frame: fr.RecordFrame, present: set[bytes]) -> fr.RecordFrame | None:
        parents = self._links(frame.parents, present)
        after = self._links(frame.after, present)
        if parents is None or after is None or len(parents) != len(frame.parents):
            return None
        branch = self.branches[frame.branch_id]
        old, new = self.old, self.new
        flags = frame.flags & ~fr.LEGACY  # sealed now as format 3: clock in the AAD, padded
        if frame.redacted:
            skeleton = old.open_skeleton(frame, frame.sealed_entry)
            sid = str(skeleton["sid"])
            path_hash = new.path_hash("erased:" + frame.path_hash.hex())  # the path is gone; one per old path
        else:
            canonical = old.unseal(frame.sealed_entry, old.record_aad(frame), frame.flags)
            sid = self.store.sid_of_wire(frame.wire_id)
            path_hash = new.path_hash(Entry.from_canonical(canonical).path)
        wire = new.wire_id(sid)
        explicit = bool(after) and after != parents
        flags = (flags | fr.Flag.EXPLICIT_AFTER) if explicit else (flags & ~fr.Flag.EXPLICIT_AFTER)
        after = after if explicit else ()
        out = fr.RecordFrame(frame.op, frame.hlc, wire, parents, branch, path_hash, new.seal_sid(sid, wire), b"", int(flags), after)
        if frame.redacted:
            seal = new.seal(canonicalize({"sid": sid, "op": skeleton["op"], "redacted": True}), new.skeleton_aad(out))
            self.seals[wire] = seal
            sealed = seal
        else:
            sealed = new.seal(canonical, record_fields_aad(new.key_id, wire, parents, int(flags), frame.hlc, branch, path_hash, after))
        self.ids[frame.wire_id] = wire
        self.sids[frame.wire_id] = sid
        return dataclasses.replace(out, sealed_entry=sealed)

    def _branch(self, frame: fr.BranchFrame, present: set[bytes]) -> fr.BranchFrame | None:
        after = self._links(frame.after, present)
        head = frame.head_wire_id
        if after is None or (head != fr.NO_ID and head not in self.ids):
            return None
        event = _object(self.old.unseal(frame.sealed_event, self.old.branch_aad(frame), frame.flags))
        branch = self.branches.setdefault(frame.branch_id, self.new.branch_id(str(event["branch"])))
        new_head = fr.NO_ID if head == fr.NO_ID else self.ids[head]
        out = fr.BranchFrame(frame.reason, frame.hlc, branch, new_head, b"", frame.flags & ~fr.LEGACY, after)
        out = dataclasses.replace(out, sealed_event=self.new.seal(canonicalize(event), self.new.branch_aad(out)))
        self.ids[frame.event_id] = out.event_id
        return out

    def _reinforce(self, frame: fr.ReinforceFrame) -> fr.ReinforceFrame | None:
        if frame.wire_id not in self.ids:
            return None
        event = _object(self.old.unseal(frame.sealed_event, self.old.reinforce_aad(frame), frame.flags))
        out = fr.ReinforceFrame(frame.hlc, self.ids[frame.wire_id], b"", frame.flags & ~fr.LEGACY)
        out = dataclasses.replace(out, sealed_event=self.new.seal(canonicalize(event), self.new.reinforce_aad(out)))
        self.ids[frame.event_id] = out.event_id
        return out

    def _redaction(self, frame: fr.RedactionFrame) -> fr.RedactionFrame | None:
        if any(wire not in self.ids for wire in frame.wire_ids):
            return None
        body = _object(self.old.unseal(frame.sealed_body, self.old.redaction_aad(frame), frame.flags))
        erased = tuple((self.ids[wire], self.seals[self.ids[wire]]) for wire in frame.wire_ids)
        out = fr.RedactionFrame(frame.hlc, erased, b"", frame.flags)
        out = dataclasses.replace(out, sealed_body=self.new.seal(canonicalize(body), self.new.redaction_aad(out)))
        self.ids[frame.event_id] = out.event_id
        return out


def _object(data: bytes) -> dict[str, Any]:
    """A sealed event's JSON object (IntegrityError if it is anything else)."""
    value = loads(data)
    if not isinstance(value, dict):
        raise IntegrityError("a sealed event is not a JSON object; nothing was rotated")
    return value


def _present(scanned: list[ScannedFrame]) -> set[bytes]:
    """Every record and event id the journal holds (what a link may wait for)."""
    out: set[bytes] = set()
    for f in scanned:
        frame = fr.decode(f.body)
        if isinstance(frame, fr.RecordFrame):
            out.add(frame.wire_id)
        elif not isinstance(frame, fr.AckFrame):
            out.add(frame.event_id)
    return out


def rotate(store: LocalStore, new_master: bytes) -> RotationReport:
    """Re-seal ``store`` (open under its current key, writable) under ``new_master``; see the module doc.

    The caller has staged the new key where the store's key is kept (keys.stage_next_key) and
    closes ``store`` afterwards: the handle holds the old key, which opens nothing any more.
    """
    started = time.perf_counter()
    new = Sealing(new_master)
    old_key_id = store.sealing.key_id
    if new.key_id == old_key_id:
        raise StorageError("the new key is the store's current key; rotating needs another key")
    # Erased content is never carried over to the new key; compact() also refuses a store it could
    # not rewrite (read-only, an old format, damage).
    compact(store)
    with store.writing():
        store.set_meta(rotating_to=new.key_id)
        reader = Journal(store.journal_path, store.journal_key, read_only=True)
        try:
            scanned = reader.scan(0).frames
        finally:
            reader.close()
        if not all(f.authentic for f in scanned):
            raise IntegrityError("a journal frame failed authentication; nothing was rotated. Run `sovseal verify`")
        present = _present(scanned)
        resealer = _Resealer(store, new)
        out: list[fr.Frame] = []
        waiting: list[fr.Frame] = []
        old_records: list[bytes] = []
        for scanned_frame in scanned:
            frame = fr.decode(scanned_frame.body)
            if isinstance(frame, fr.AckFrame):
                continue  # the new ids are new to the server
            if isinstance(frame, fr.RecordFrame) and frame.wire_id not in old_records:
                old_records.append(frame.wire_id)
            waiting.append(frame)
            progress = True
            while waiting and progress:  # frames whose links are now mapped, in journal order
                progress = False
                for position, candidate in enumerate(waiting):
                    made = resealer.frame(candidate, present)
                    if made is not None:
                        out.append(made)
                        del waiting[position]
                        progress = True
                        break
        if waiting:
            raise IntegrityError(f"{len(waiting)} frame(s) link to frames that could not be re-sealed; nothing was rotated")
        new_records: list[bytes] = []
        for frame in out:
            if isinstance(frame, fr.RecordFrame) and frame.wire_id not in new_records:
                new_records.append(frame.wire_id)
        index_kept = new_records == [resealer.ids[w] for w in old_records]  # node numbers unchanged
        target = store.directory / f"{ROTATING}.{os.getpid()}.{secrets.token_hex(4)}.tmp"
        try:
            writer = JournalWriter(target, new.journal_key)
            for frame in out:
                writer.add(frame.encode_tagged(writer.tag_next) if isinstance(frame, fr.RecordFrame) else frame.encode())
            writer.finish()
            if not index_kept:  # vectors are kept by node number: records moved, so recall re-embeds
                shutil.rmtree(store.directory / "index", ignore_errors=True)
            store.replace_journal(target, new)
        finally:
            target.unlink(missing_ok=True)
        store.set_meta(key_id=new.key_id, rotating_to=None)
    return RotationReport(old_key_id, new.key_id, len(out), len(new_records), time.perf_counter() - started, index_kept)


def retirement(store: LocalStore, rotated_to: str) -> list[WireItem]:
    """Redactions under the store's (old) key naming every record not erased yet, reason "key
    rotated": pushed to the old server project, they replace every body there with its skeleton.

    Built before :func:`rotate`, while the store is still under the old key; nothing is appended
    to the journal (they are for the server, and for devices still on the old key).
    """
    items: list[WireItem] = []
    with store.writing():
        lineage = store.lineage_now()
        targets = [node.idx for node in lineage.nodes if not node.redacted]
        for start in range(0, len(targets), fr.MAX_ERASED):
            chunk = targets[start : start + fr.MAX_ERASED]
            frame, _ = store.redaction_frame(chunk, {"reason": RETIRE_REASON, "rotated_to": rotated_to})
            items.append(store.wire_item(frame))
    return items
