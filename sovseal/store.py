"""The local store: journal + lineage + sealing + the cross-process writer lock.

This is the engine's durable half. It knows keys, frames and branches; it does not embed,
index or rank (that is :mod:`sovseal.client` and :mod:`sovseal.index`). Every public method
either reads under the in-process mutex (never the file lock: readers do not block on a writer
in another process) or writes under both, re-reading the journal's tail first so that several
processes appending to one store form one chain per branch.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from . import frames as fr
from .crypto import Sealer, derive_subkeys, keyed_id, record_aad
from .durable import atomic_write, make_dirs
from .entries import Entry, snapshot_id
from .errors import (
    IntegrityError,
    InvalidInputError,
    KeyUnavailableError,
    UnknownBranchError,
    UnknownSnapshotError,
)
from .filelock import WriterLock
from .journal import HEADER, Journal
from .lineage import Branch, Damage, Lineage, Node

STORE_FORMAT = 1
DEFAULT_BRANCH = "main"
_JOURNAL = "journal.log"
_LOCK = "LOCK"
_META = "store.json"


@dataclass(frozen=True, slots=True)
class Opened:
    """A record that was opened and verified: its entry, snapshot id and parent's id."""

    node: Node
    entry: Entry
    snapshot_id: str
    parent_id: str | None


@dataclass(frozen=True, slots=True)
class Appended:
    node: Node
    snapshot_id: str
    reinforced: bool


class LocalStore:
    """One store directory, opened with one master key."""

    def __init__(self, directory: Path, master: bytes, *, lock_timeout: float = 10.0) -> None:
        self.directory = directory
        self.lock_timeout = lock_timeout
        make_dirs(directory)
        self._keys = derive_subkeys(master)
        self.store_uuid = self._check_meta()
        self._journal = Journal(directory / _JOURNAL, bytes.fromhex(keyed_id(self._keys.k_id, "frame-mac", "v1")))
        self._flock = WriterLock(directory / _LOCK, lock_timeout)
        self._mutex = threading.RLock()
        self._lineage = Lineage()
        self._end = 0
        self._authentic_frames = 0
        self._sealers()
        self._sids: dict[int, str] = {}
        self._names: dict[bytes, str] = {}
        self.repairs: list[str] = []  # what recovery did on open, for status()
        self.closed = False
        with self._writing():
            wrong_key = self._end > 0 and not self._authentic_frames
            if not wrong_key:
                self._bind_meta()
                self._ensure_branch(DEFAULT_BRANCH)
        if wrong_key:
            self.close()
            raise KeyUnavailableError(
                f"no frame of the journal in {directory} authenticates under this key: it is the wrong key. "
                "Pass the store's own key."
            )

    # -- opening -------------------------------------------------------------------------

    def _check_meta(self) -> str:
        """Bind the directory to one key: opening with another key fails before anything is read."""
        meta_path = self.directory / _META
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        if "key_id" in meta:
            if meta["key_id"] != self._keys.key_id:
                raise KeyUnavailableError(
                    f"the store at {self.directory} was created with key id {meta.get('key_id')}; the key given has id "
                    f"{self._keys.key_id}. Pass the store's own key (key=..., or the one in its keychain entry / key file)."
                )
            return str(meta["store_uuid"])
        return str(meta.get("store_uuid") or uuid.uuid4())  # the key module may have written one

    def _bind_meta(self) -> None:
        """Record the key id of a new store, once its journal is known to authenticate under the key."""
        meta_path = self.directory / _META
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        if "key_id" not in meta:
            meta = {"format": STORE_FORMAT, "store_uuid": self.store_uuid, "key_id": self._keys.key_id}
            atomic_write(meta_path, json.dumps(meta, indent=2).encode())

    def close(self) -> None:
        with self._mutex:
            if not self.closed:
                self.closed = True
                self._journal.close()
                self._flock.close()

    # -- locking and catching up ---------------------------------------------------------

    @contextmanager
    def _writing(self) -> Iterator[None]:
        with self._mutex:
            self._flock.acquire()
            try:
                self._catch_up(owner=True)
                yield
            finally:
                self._flock.release()

    @contextmanager
    def reading(self) -> Iterator[Lineage]:
        with self._mutex:
            self._catch_up(owner=False)
            yield self._lineage

    def _catch_up(self, *, owner: bool) -> None:
        """Apply frames other processes appended; the lock owner also cuts a torn tail off."""
        if self._journal.size() == self._end:
            return
        scan = self._journal.scan(self._end)
        for frame in scan.frames:
            self._authentic_frames += frame.authentic
            size = len(frame.body) + HEADER.size
            try:
                decoded = fr.decode(frame.body)
            except ValueError:
                self._lineage.damage.append(Damage(frame.offset, "a frame could not be decoded"))
                continue
            self._lineage.apply(decoded, frame.offset, size, frame.authentic)
        self._end = scan.end
        if owner and scan.torn_tail:
            self.repairs.append(f"cut a torn tail of {scan.torn_tail} bytes left by an interrupted write")
            self._journal.truncate(scan.end)
        self._sealers()

    def _sealers(self) -> None:
        self._sync = Sealer(self._keys.k_sync, used=self._lineage.record_frames)
        self._rest = Sealer(self._keys.k_rest, used=self._lineage.rest_seals)

    # -- identifiers ---------------------------------------------------------------------

    def wire_id(self, sid: str) -> bytes:
        return bytes.fromhex(keyed_id(self._keys.k_id, "snap", sid))

    def path_hash(self, path: str) -> bytes:
        return bytes.fromhex(keyed_id(self._keys.k_id, "path", path))

    def branch_id(self, name: str) -> bytes:
        return bytes.fromhex(keyed_id(self._keys.k_id, "branch", name))[: fr.BRANCH_ID_LEN]

    # -- reading -------------------------------------------------------------------------

    def branch(self, name: str) -> Branch:
        branch = self._lineage.branches.get(self.branch_id(name))
        if branch is None:
            raise UnknownBranchError(f"no branch named {name!r}; list them with branches()")
        if not branch.authentic:
            raise IntegrityError(f"the HEAD of branch {name!r} failed authentication; run verify()")
        return branch

    def branch_names(self) -> list[str]:
        return sorted(self._branch_name(b) for b in self._lineage.branches.values())

    def _branch_name(self, branch: Branch) -> str:
        name = self._names.get(branch.branch_id)
        if name is None:
            name = self._rest.open(branch.sealed_name, b"branch:" + branch.branch_id).decode()
            self._names[branch.branch_id] = name
        return name

    def sid_of(self, idx: int) -> str:
        """The snapshot id of a node, opened from its sealed copy and checked against its wire id."""
        sid = self._sids.get(idx)
        if sid is None:
            node = self._lineage.nodes[idx]
            sid = self._rest.open(node.sealed_sid, b"sid:" + node.wire_id).decode("ascii")
            if self.wire_id(sid) != node.wire_id:
                raise IntegrityError(f"snapshot {sid} does not match its keyed id; run verify()")
            self._sids[idx] = sid
        return sid

    def resolve(self, sid: object) -> int:
        if not isinstance(sid, str) or not sid.startswith("snap_"):
            raise InvalidInputError(f"a snapshot id looks like 'snap_<64 hex>'; got {sid!r}")
        idx = self._lineage.by_wire.get(self.wire_id(sid))
        if idx is None:
            raise UnknownSnapshotError(f"no snapshot {sid} in this store; list snapshots with log()")
        return idx

    def open(self, idx: int) -> Opened:
        """Decrypt one record and re-derive its snapshot id; anything off raises IntegrityError."""
        node = self._lineage.nodes[idx]
        where = f"the record at journal byte {node.offset}"
        if not node.authentic:
            raise IntegrityError(f"{where} failed authentication (it was altered on disk); run verify()")
        mac, body = self._journal.read_frame(node.offset)
        if self._journal.mac(body) != mac:
            raise IntegrityError(f"{where} changed on disk after the store was opened; run verify()")
        frame = fr.decode(body)
        assert isinstance(frame, fr.RecordFrame)
        parent_wire = frame.parent_wire_id
        aad = record_aad(
            key_id=self._keys.key_id,
            wire_id=frame.wire_id.hex(),
            parent_wire_id="" if parent_wire == fr.NO_ID else parent_wire.hex(),
        )
        canonical = self._sync.open(frame.sealed_entry, aad)
        parent_id = self.sid_of(node.parent) if node.parent >= 0 else None
        sid = snapshot_id(canonical, parent_id or "")
        if self.wire_id(sid) != node.wire_id or self.sid_of(idx) != sid:
            raise IntegrityError(f"{where} does not re-derive its snapshot id; run verify()")
        entry = Entry.from_canonical(canonical)
        if self.path_hash(entry.path) != node.path_hash or (entry.op == "delete") != (node.op is fr.Op.DELETE):
            raise IntegrityError(f"{where} does not match its keyed path or operation; run verify()")
        return Opened(node, entry, sid, parent_id)

    # -- writing -------------------------------------------------------------------------

    def _append(self, bodies: list[bytes]) -> None:
        start = self._journal.append(bodies)
        assert start == self._end, "journal grew under the lock"
        self._catch_up(owner=True)

    def _branch_frame(self, reason: fr.BranchReason, name: str, head: int) -> bytes:
        branch_id = self.branch_id(name)
        sealed_name = self._rest.seal(name.encode(), b"branch:" + branch_id)
        head_wire = self._lineage.nodes[head].wire_id if head >= 0 else fr.NO_ID
        return fr.BranchFrame(reason, time.time(), branch_id, head_wire, sealed_name).encode()

    def _ensure_branch(self, name: str) -> None:
        if self.branch_id(name) not in self._lineage.branches:
            self._append([self._branch_frame(fr.BranchReason.CREATE, name, -1)])

    def append(self, branch_name: str, entry: Entry, *, parent: str | None = None) -> Appended | None:
        """Append ``entry`` to a branch, durably.

        Storing the visible value reinforces it instead; deleting a path that is not visible
        appends nothing and returns None.
        """
        canonical = entry.canonical()
        with self._writing():
            branch = self.branch(branch_name)
            parent_idx = self.resolve(parent) if parent is not None else branch.head
            path_hash = self.path_hash(entry.path)
            if parent_idx == branch.head:
                visible = self._lineage.view(branch).get(path_hash)
                if visible is None and entry.op == "delete":
                    return None  # nothing to delete: a tombstone would change nothing
                if visible is not None and entry.op == "store" and self.open(visible).entry.canonical() == canonical:
                    wire = self._lineage.nodes[visible].wire_id
                    self._append([fr.ReinforceFrame(time.time(), wire).encode()])
                    return Appended(self._lineage.nodes[visible], self.sid_of(visible), reinforced=True)
            parent_id = self.sid_of(parent_idx) if parent_idx >= 0 else ""
            sid = snapshot_id(canonical, parent_id)
            wire = self.wire_id(sid)
            existing = self._lineage.by_wire.get(wire)
            if existing is not None:
                # Same entry on the same parent: the snapshot already exists (a retried store, or a
                # replay after rollback). Ids are deterministic, so HEAD moves to it; nothing is duplicated.
                self._append([self._branch_frame(fr.BranchReason.ADVANCE, branch_name, existing)])
                return Appended(self._lineage.nodes[existing], sid, reinforced=False)
            parent_wire = self._lineage.nodes[parent_idx].wire_id if parent_idx >= 0 else fr.NO_ID
            aad = record_aad(
                key_id=self._keys.key_id,
                wire_id=wire.hex(),
                parent_wire_id="" if parent_idx < 0 else parent_wire.hex(),
            )
            frame = fr.RecordFrame(
                op=fr.Op.DELETE if entry.op == "delete" else fr.Op.STORE,
                created_at=time.time(),
                wire_id=wire,
                parent_wire_id=parent_wire,
                branch_id=branch.branch_id,
                path_hash=path_hash,
                sealed_sid=self._rest.seal(sid.encode("ascii"), b"sid:" + wire),
                sealed_entry=self._sync.seal(canonical, aad),
            )
            self._append([frame.encode()])
            idx = self._lineage.by_wire[wire]
            self._sids[idx] = sid
            return Appended(self._lineage.nodes[idx], sid, reinforced=False)

    def create_branch(self, name: str, at: str | None) -> None:
        with self._writing():
            if self.branch_id(name) in self._lineage.branches:
                raise InvalidInputError(f"a branch named {name!r} already exists; pick another name")
            head = self.resolve(at) if at is not None else -1
            self._append([self._branch_frame(fr.BranchReason.CREATE, name, head)])

    def move_head(self, name: str, sid: str) -> None:
        with self._writing():
            self.branch(name)
            idx = self.resolve(sid)
            self._append([self._branch_frame(fr.BranchReason.ROLLBACK, name, idx)])

    def ack(self, wire_ids: list[bytes]) -> None:
        """Mark records as durably replicated (used by the replication worker)."""
        if wire_ids:
            with self._writing():
                self._append([fr.AckFrame(tuple(wire_ids)).encode()])

    # -- facts for status() --------------------------------------------------------------

    @property
    def key_id(self) -> str:
        return self._keys.key_id

    @property
    def seals(self) -> tuple[int, int]:
        return self._sync.used, self._rest.used

