"""Binary layout of the journal's frames.

A frame body is one of four kinds. Fields that identify things are keyed (HMAC) ids, never
plaintext; everything readable (the entry, the snapshot id, a branch's name) is sealed. The
encoding is fixed-width ``struct`` so that replaying a million frames on open stays cheap.

Records, branch moves and reinforcements are *replicable*: each carries a blob sealed under
``k_sync`` that is sent to the replication server byte for byte, so a retry resends identical
bytes and a second device with the key can replay the frame. Acks are local bookkeeping.
"""

from __future__ import annotations

import hashlib
import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

ID_LEN = 32
BRANCH_ID_LEN = 16
NO_ID = bytes(ID_LEN)
TAG_LEN = 16


class Kind(IntEnum):
    RECORD = 1
    BRANCH = 2
    REINFORCE = 3
    ACK = 4


class Op(IntEnum):
    STORE = 0
    DELETE = 1


class BranchReason(IntEnum):
    CREATE = 1  # a new branch (the default branch, or a fork)
    ROLLBACK = 2  # HEAD moved back to an existing snapshot
    ADVANCE = 3  # HEAD moved to an existing snapshot whose id a store re-derived


@dataclass(frozen=True, slots=True)
class RecordFrame:
    """One snapshot: a sealed entry appended to a branch. Also its own outbox job.

    ``head_tag`` authenticates the fixed-width head (every clear field) apart from the sealed
    parts, under the journal's key (:meth:`Journal.tag`): if the frame's MAC fails but its head
    passes, the damage is in the sealed parts and is pinned on this record's real path; if the
    head fails too, the record's branch, parent and path cannot be trusted.
    """

    op: Op
    created_at: float
    wire_id: bytes
    parent_wire_id: bytes  # NO_ID for a genesis snapshot
    branch_id: bytes
    path_hash: bytes
    sealed_sid: bytes  # the snapshot id, sealed under k_rest
    sealed_entry: bytes  # the canonical entry, sealed under k_sync; replicated unchanged
    head_tag: bytes = bytes(TAG_LEN)

    _HEAD = struct.Struct(">BBd32s32s16s32sHI")

    def head(self) -> bytes:
        """The clear fields as encoded: what ``head_tag`` authenticates."""
        return self._HEAD.pack(
            Kind.RECORD,
            self.op,
            self.created_at,
            self.wire_id,
            self.parent_wire_id,
            self.branch_id,
            self.path_hash,
            len(self.sealed_sid),
            len(self.sealed_entry),
        )

    def encode(self) -> bytes:
        return self.encode_tagged(lambda _: self.head_tag)

    def encode_tagged(self, tag_of: Callable[[bytes], bytes]) -> bytes:
        """The body with the head tag ``tag_of(head)``: a writer tags the head for the place the frame
        takes while it encodes it, so the head is packed once."""
        head = self.head()
        tag = tag_of(head)
        if len(tag) != TAG_LEN:
            raise ValueError(f"a record's head tag is {TAG_LEN} bytes, got {len(tag)}")
        return head + tag + self.sealed_sid + self.sealed_entry

    @classmethod
    def decode(cls, body: bytes) -> RecordFrame:
        _, op, created, wire, parent, branch, path_hash, sid_len, entry_len = cls._HEAD.unpack_from(body)
        start = cls._HEAD.size + TAG_LEN
        if start + sid_len + entry_len != len(body):
            raise ValueError("record frame length mismatch")
        return cls(
            Op(op),
            created,
            wire,
            parent,
            branch,
            path_hash,
            bytes(body[start : start + sid_len]),
            bytes(body[start + sid_len :]),
            bytes(body[cls._HEAD.size : start]),
        )


@dataclass(frozen=True, slots=True)
class BranchFrame:
    """A branch's HEAD set to an existing snapshot (or to nothing, for a new empty branch)."""

    reason: BranchReason
    created_at: float
    branch_id: bytes
    head_wire_id: bytes  # NO_ID: the branch has no snapshot yet
    sealed_event: bytes  # {"branch": name, "head": snapshot id | null, ...} sealed under k_sync

    @property
    def event_id(self) -> bytes:
        return hashlib.sha256(self.sealed_event).digest()

    _HEAD = struct.Struct(">BBd16s32sH")

    def encode(self) -> bytes:
        head = self._HEAD.pack(
            Kind.BRANCH, self.reason, self.created_at, self.branch_id, self.head_wire_id, len(self.sealed_event)
        )
        return head + self.sealed_event

    @classmethod
    def decode(cls, body: bytes) -> BranchFrame:
        _, reason, created, branch, head, name_len = cls._HEAD.unpack_from(body)
        if cls._HEAD.size + name_len != len(body):
            raise ValueError("branch frame length mismatch")
        return cls(BranchReason(reason), created, branch, head, bytes(body[cls._HEAD.size :]))


@dataclass(frozen=True, slots=True)
class ReinforceFrame:
    """The visible value of a path was stored again: reinforcement, not a new snapshot."""

    at: float
    wire_id: bytes  # the reinforced record
    sealed_event: bytes  # {"reinforce": snapshot id, "at": time} sealed under k_sync

    _HEAD = struct.Struct(">Bd32sH")

    @property
    def event_id(self) -> bytes:
        return hashlib.sha256(self.sealed_event).digest()

    def encode(self) -> bytes:
        return self._HEAD.pack(Kind.REINFORCE, self.at, self.wire_id, len(self.sealed_event)) + self.sealed_event

    @classmethod
    def decode(cls, body: bytes) -> ReinforceFrame:
        _, at, wire, length = cls._HEAD.unpack_from(body)
        if cls._HEAD.size + length != len(body):
            raise ValueError("reinforce frame length mismatch")
        return cls(at, wire, bytes(body[cls._HEAD.size :]))


@dataclass(frozen=True, slots=True)
class AckFrame:
    """The replication server durably acknowledged these items (record wire ids, event ids)."""

    wire_ids: tuple[bytes, ...]

    _HEAD = struct.Struct(">BI")

    def encode(self) -> bytes:
        return self._HEAD.pack(Kind.ACK, len(self.wire_ids)) + b"".join(self.wire_ids)

    @classmethod
    def decode(cls, body: bytes) -> AckFrame:
        _, count = cls._HEAD.unpack_from(body)
        start = cls._HEAD.size
        if start + count * ID_LEN != len(body):
            raise ValueError("ack frame length mismatch")
        return cls(tuple(bytes(body[start + i * ID_LEN : start + (i + 1) * ID_LEN]) for i in range(count)))


Frame = RecordFrame | BranchFrame | ReinforceFrame | AckFrame

_DECODERS = {
    Kind.RECORD: RecordFrame.decode,
    Kind.BRANCH: BranchFrame.decode,
    Kind.REINFORCE: ReinforceFrame.decode,
    Kind.ACK: AckFrame.decode,
}


def decode(body: bytes) -> Frame:
    """Decode one frame body; raises ValueError on anything malformed."""
    if not body:
        raise ValueError("empty frame")
    try:
        return _DECODERS[Kind(body[0])](body)
    except (struct.error, KeyError) as exc:
        raise ValueError(f"malformed frame: {exc}") from exc
