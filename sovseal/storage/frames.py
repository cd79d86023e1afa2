"""Binary layout of the journal's frames (journal format 3; format 2 is read for migration).

A frame body is one of four kinds. Fields that identify things are keyed (HMAC) ids, never
plaintext; everything readable (the entry, the snapshot id, a branch's name) is sealed. The
encoding is fixed-width ``struct`` so that replaying a million frames on open stays cheap.

Records, branch moves and reinforcements are *replicable*: each carries a blob sealed under
``k_sync`` that is sent to the replication server byte for byte, so a retry resends identical
bytes and a second device with the key can replay the frame. Acks are local bookkeeping.

Every replicable frame carries ``hlc``, a hybrid logical clock in microseconds (docs/design.md,
"Journal format 3"), and names in *after* the heads of its branch it replaces. Frames written by
format 2 decode into the same classes with :attr:`Flag.LEGACY`: their sealed bytes were made
under the format-2 AAD (no clock in it) and are kept as they are.
"""

from __future__ import annotations

import hashlib
import math
import struct
from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum, IntFlag

ID_LEN = 32
BRANCH_ID_LEN = 16
NO_ID = bytes(ID_LEN)
TAG_LEN = 16
#: The most parents or replaced heads one frame names.
MAX_LINKS = 255
#: Clock bounds for a timestamp that was never authenticated (format 2): 2000-01-01 up to 2^53 µs
#: (year 2255). A value outside them decodes as :data:`UNKNOWN_HLC`.
MIN_LEGACY_HLC = 946_684_800 * 10**6
MAX_HLC = 2**53
UNKNOWN_HLC = 0


class Kind(IntEnum):
    RECORD = 1
    BRANCH = 2
    REINFORCE = 3
    ACK = 4
    REDACTION = 5


class Op(IntEnum):
    STORE = 0
    DELETE = 1


class BranchReason(IntEnum):
    CREATE = 1  # a new branch (the default branch, or a fork)
    ROLLBACK = 2  # HEAD moved back to an existing snapshot
    ADVANCE = 3  # HEAD moved to an existing snapshot whose id a store re-derived
    DELETE = 4  # the branch was deleted (it points at nothing; its records stay in the lineage)


class Flag(IntFlag):
    NONE = 0
    #: Sealed as journal format 2 sealed it: AAD version 1 (no clock), no padding. Its clock is
    #: range-checked instead of authenticated.
    LEGACY = 1
    #: A record whose replaced heads differ from its parents (after a rollback or fork, the head
    #: is a branch event): they are listed in ``after``. Without it, ``after`` is its parents.
    EXPLICIT_AFTER = 2
    #: A skeleton: an erased record whose sealed entry was replaced by its skeleton seal (the
    #: snapshot id, sealed under the record's clear fields with this flag set).
    REDACTED = 4


_KNOWN_FLAGS = int(Flag.LEGACY | Flag.EXPLICIT_AFTER | Flag.REDACTED)
# Plain ints for the hot paths (replay, every read): an IntFlag operation costs a microsecond or two.
_EXPLICIT_AFTER = int(Flag.EXPLICIT_AFTER)
LEGACY = int(Flag.LEGACY)
REDACTED = int(Flag.REDACTED)
#: The most records one redaction frame erases (a larger purge writes several frames).
MAX_ERASED = 800


def _flags(value: int) -> int:
    """``value`` if it holds only known flags (kept a plain int: see _EXPLICIT_AFTER)."""
    if value & ~_KNOWN_FLAGS:
        raise ValueError(f"unknown frame flags {value:#x}")
    return value


def legacy_hlc(seconds: float) -> int:
    """A format-2 timestamp as a clock value; :data:`UNKNOWN_HLC` when it is not a plausible time."""
    if not math.isfinite(seconds):
        return UNKNOWN_HLC
    hlc = round(seconds * 1e6)
    return hlc if MIN_LEGACY_HLC <= hlc < MAX_HLC else UNKNOWN_HLC


def _links(ids: tuple[bytes, ...], what: str) -> bytes:
    if len(ids) > MAX_LINKS or any(len(i) != ID_LEN for i in ids):
        raise ValueError(f"a frame names at most {MAX_LINKS} {what} of {ID_LEN} bytes each")
    return b"".join(ids)


def _split(body: bytes, start: int, count: int) -> tuple[bytes, ...]:
    return tuple(bytes(body[start + i * ID_LEN : start + (i + 1) * ID_LEN]) for i in range(count))


@dataclass(frozen=True, slots=True)
class RecordFrame:
    """One snapshot: a sealed entry appended to a branch. Also its own outbox job.

    ``head_tag`` authenticates the head (every clear field) apart from the sealed parts, under the
    journal's key (:meth:`Journal.tag`): if the frame's MAC fails but its head passes, the damage
    is in the sealed parts and is pinned on this record's real path; if the head fails too, the
    record's branch, parents and path cannot be trusted.
    """

    op: Op
    hlc: int
    wire_id: bytes
    parents: tuple[bytes, ...]  # () for a genesis snapshot; sorted
    branch_id: bytes
    path_hash: bytes
    sealed_sid: bytes  # the snapshot id, sealed under k_rest
    sealed_entry: bytes  # the canonical entry, sealed under k_sync; replicated unchanged
    flags: int = Flag.NONE  # frames.Flag bits
    after: tuple[bytes, ...] = ()  # the replaced heads, when they are not the parents (EXPLICIT_AFTER)
    head_tag: bytes = bytes(TAG_LEN)

    _HEAD = struct.Struct(">BBBQ32s16s32sBBHI")

    @property
    def created_at(self) -> float:
        return self.hlc / 1e6

    @property
    def parent_wire_id(self) -> bytes:
        """The first parent (NO_ID for a genesis snapshot)."""
        return self.parents[0] if self.parents else NO_ID

    @property
    def replaces(self) -> tuple[bytes, ...]:
        """The heads of its branch this record replaces."""
        return self.after if self.flags & _EXPLICIT_AFTER else self.parents

    @property
    def redacted(self) -> bool:
        return bool(self.flags & REDACTED)

    def skeleton(self, seal: bytes) -> RecordFrame:
        """This record erased: flag REDACTED, the skeleton seal in place of the sealed entry."""
        return RecordFrame(
            self.op, self.hlc, self.wire_id, self.parents, self.branch_id, self.path_hash, self.sealed_sid, seal,
            self.flags | REDACTED, self.after, self.head_tag,
        )

    def head(self) -> bytes:
        """The clear fields as encoded: what ``head_tag`` authenticates."""
        after = self.after if self.flags & _EXPLICIT_AFTER else ()
        return (
            self._HEAD.pack(
                Kind.RECORD,
                self.op,
                self.flags,
                self.hlc,
                self.wire_id,
                self.branch_id,
                self.path_hash,
                len(self.parents),
                len(after),
                len(self.sealed_sid),
                len(self.sealed_entry),
            )
            + _links(self.parents, "parents")
            + _links(after, "replaced heads")
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
    def head_size(cls, body: bytes) -> int:
        """How many bytes of ``body`` its head takes."""
        *_, parents, after, _, _ = cls._HEAD.unpack_from(body)
        return int(cls._HEAD.size + (parents + after) * ID_LEN)

    @classmethod
    def decode(cls, body: bytes) -> RecordFrame:
        _, op, flags, hlc, wire, branch, path_hash, parents, after, sid_len, entry_len = cls._HEAD.unpack_from(body)
        links = cls._HEAD.size
        start = links + (parents + after) * ID_LEN + TAG_LEN
        if start + sid_len + entry_len != len(body):
            raise ValueError("record frame length mismatch")
        flags = _flags(flags)
        if bool(after) != bool(flags & _EXPLICIT_AFTER):
            raise ValueError("a record lists replaced heads exactly when its EXPLICIT_AFTER flag is set")
        return cls(
            Op(op),
            hlc,
            wire,
            _split(body, links, parents),
            branch,
            path_hash,
            bytes(body[start : start + sid_len]),
            bytes(body[start + sid_len :]),
            flags,
            _split(body, links + parents * ID_LEN, after),
            bytes(body[start - TAG_LEN : start]),
        )


@dataclass(frozen=True, slots=True)
class BranchFrame:
    """A branch's HEAD set to an existing snapshot (or to nothing, for a new empty branch)."""

    reason: BranchReason
    hlc: int
    branch_id: bytes
    head_wire_id: bytes  # NO_ID: the branch has no snapshot yet
    sealed_event: bytes  # {"branch": name, "head": snapshot id | null, ...} sealed under k_sync
    flags: int = Flag.NONE  # frames.Flag bits
    after: tuple[bytes, ...] = ()  # the heads of the branch it replaces

    _HEAD = struct.Struct(">BBBQ16s32sBH")

    @property
    def created_at(self) -> float:
        return self.hlc / 1e6

    @property
    def event_id(self) -> bytes:
        return hashlib.sha256(self.sealed_event).digest()

    def encode(self) -> bytes:
        head = self._HEAD.pack(
            Kind.BRANCH, self.reason, self.flags, self.hlc, self.branch_id, self.head_wire_id, len(self.after), len(self.sealed_event)
        )
        return head + _links(self.after, "replaced heads") + self.sealed_event

    @classmethod
    def decode(cls, body: bytes) -> BranchFrame:
        _, reason, flags, hlc, branch, head, after, sealed_len = cls._HEAD.unpack_from(body)
        start = cls._HEAD.size + after * ID_LEN
        if start + sealed_len != len(body):
            raise ValueError("branch frame length mismatch")
        return cls(BranchReason(reason), hlc, branch, head, bytes(body[start:]), _flags(flags), _split(body, cls._HEAD.size, after))


@dataclass(frozen=True, slots=True)
class ReinforceFrame:
    """The visible value of a path was stored again: reinforcement, not a new snapshot."""

    hlc: int
    wire_id: bytes  # the reinforced record
    sealed_event: bytes  # {"reinforce": snapshot id, "at": time} sealed under k_sync
    flags: int = Flag.NONE  # frames.Flag bits

    _HEAD = struct.Struct(">BBQ32sH")

    @property
    def at(self) -> float:
        return self.hlc / 1e6

    @property
    def event_id(self) -> bytes:
        return hashlib.sha256(self.sealed_event).digest()

    def encode(self) -> bytes:
        return self._HEAD.pack(Kind.REINFORCE, self.flags, self.hlc, self.wire_id, len(self.sealed_event)) + self.sealed_event

    @classmethod
    def decode(cls, body: bytes) -> ReinforceFrame:
        _, flags, hlc, wire, length = cls._HEAD.unpack_from(body)
        if cls._HEAD.size + length != len(body):
            raise ValueError("reinforce frame length mismatch")
        return cls(hlc, wire, bytes(body[cls._HEAD.size :]), _flags(flags))


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
        return cls(_split(body, start, count))


@dataclass(frozen=True, slots=True)
class RedactionFrame:
    """Records erased for good: each named with the skeleton seal its frame will hold.

    ``erased`` pairs a record's wire id with its skeleton seal; the sealed body (who purged what,
    why, when) is bound to every pair by its AAD (docs/design.md, "Redaction skeletons").
    """

    hlc: int
    erased: tuple[tuple[bytes, bytes], ...]  # (wire id, skeleton seal)
    sealed_body: bytes
    flags: int = Flag.NONE

    _HEAD = struct.Struct(">BBQI")
    _PAIR = struct.Struct(">32sH")
    _TAIL = struct.Struct(">I")

    @property
    def at(self) -> float:
        return self.hlc / 1e6

    @property
    def event_id(self) -> bytes:
        return hashlib.sha256(self.sealed_body).digest()

    @property
    def wire_ids(self) -> tuple[bytes, ...]:
        return tuple(wire for wire, _ in self.erased)

    def erased_digest(self) -> bytes:
        """What the sealed body's AAD binds: every (wire id, sha256(seal)) pair, in order."""
        digest = hashlib.sha256()
        for wire, seal in self.erased:
            digest.update(wire)
            digest.update(hashlib.sha256(seal).digest())
        return digest.digest()

    def encode(self) -> bytes:
        if not 0 < len(self.erased) <= MAX_ERASED:
            raise ValueError(f"a redaction frame erases 1 to {MAX_ERASED} records")
        parts = [self._HEAD.pack(Kind.REDACTION, self.flags, self.hlc, len(self.erased))]
        for wire, seal in self.erased:
            if len(wire) != ID_LEN or len(seal) > 0xFFFF:
                raise ValueError("a redaction pair is a 32-byte wire id and a skeleton seal under 64 KiB")
            parts += [self._PAIR.pack(wire, len(seal)), seal]
        parts += [self._TAIL.pack(len(self.sealed_body)), self.sealed_body]
        return b"".join(parts)

    @classmethod
    def decode(cls, body: bytes) -> RedactionFrame:
        _, flags, hlc, count = cls._HEAD.unpack_from(body)
        if not 0 < count <= MAX_ERASED:
            raise ValueError("a redaction frame erases 1 to MAX_ERASED records")
        at = cls._HEAD.size
        erased = []
        for _ in range(count):
            wire, length = cls._PAIR.unpack_from(body, at)
            at += cls._PAIR.size
            erased.append((wire, bytes(body[at : at + length])))
            at += length
        (length,) = cls._TAIL.unpack_from(body, at)
        at += cls._TAIL.size
        if at + length != len(body):
            raise ValueError("redaction frame length mismatch")
        return cls(hlc, tuple(erased), bytes(body[at:]), _flags(flags))


Frame = RecordFrame | BranchFrame | ReinforceFrame | AckFrame | RedactionFrame

_DECODERS: dict[Kind, Callable[[bytes], Frame]] = {
    Kind.RECORD: RecordFrame.decode,
    Kind.BRANCH: BranchFrame.decode,
    Kind.REINFORCE: ReinforceFrame.decode,
    Kind.ACK: AckFrame.decode,
    Kind.REDACTION: RedactionFrame.decode,
}


def decode(body: bytes) -> Frame:
    """Decode one format-3 frame body; raises ValueError on anything malformed."""
    if not body:
        raise ValueError("empty frame")
    try:
        return _DECODERS[Kind(body[0])](body)
    except (struct.error, KeyError) as exc:
        raise ValueError(f"malformed frame: {exc}") from exc


# -- format 2, read to migrate it ---------------------------------------------------------------

_V2_RECORD = struct.Struct(">BBd32s32s16s32sHI")
_V2_BRANCH = struct.Struct(">BBd16s32sH")
_V2_REINFORCE = struct.Struct(">Bd32sH")


def _v2_record(body: bytes) -> RecordFrame:
    _, op, created, wire, parent, branch, path_hash, sid_len, entry_len = _V2_RECORD.unpack_from(body)
    start = _V2_RECORD.size + TAG_LEN
    if start + sid_len + entry_len != len(body):
        raise ValueError("record frame length mismatch")
    return RecordFrame(
        Op(op),
        legacy_hlc(created),
        wire,
        () if parent == NO_ID else (parent,),
        branch,
        path_hash,
        bytes(body[start : start + sid_len]),
        bytes(body[start + sid_len :]),
        Flag.LEGACY,
        head_tag=bytes(body[_V2_RECORD.size : start]),
    )


def _v2_branch(body: bytes) -> BranchFrame:
    _, reason, created, branch, head, length = _V2_BRANCH.unpack_from(body)
    if _V2_BRANCH.size + length != len(body):
        raise ValueError("branch frame length mismatch")
    return BranchFrame(BranchReason(reason), legacy_hlc(created), branch, head, bytes(body[_V2_BRANCH.size :]), Flag.LEGACY)


def _v2_reinforce(body: bytes) -> ReinforceFrame:
    _, at, wire, length = _V2_REINFORCE.unpack_from(body)
    if _V2_REINFORCE.size + length != len(body):
        raise ValueError("reinforce frame length mismatch")
    return ReinforceFrame(legacy_hlc(at), wire, bytes(body[_V2_REINFORCE.size :]), Flag.LEGACY)


_V2_DECODERS: dict[Kind, Callable[[bytes], Frame]] = {
    Kind.RECORD: _v2_record,
    Kind.BRANCH: _v2_branch,
    Kind.REINFORCE: _v2_reinforce,
    Kind.ACK: AckFrame.decode,
}


def decode_v2(body: bytes) -> Frame:
    """Decode one body of a format-2 journal into its format-3 class (flag LEGACY; ValueError if malformed)."""
    if not body:
        raise ValueError("empty frame")
    try:
        return _V2_DECODERS[Kind(body[0])](body)
    except (struct.error, KeyError) as exc:
        raise ValueError(f"malformed frame: {exc}") from exc


def v2_record_head(body: bytes) -> bytes:
    """The head a format-2 record's tag authenticates."""
    return bytes(body[: _V2_RECORD.size])
