"""The in-memory lineage: a DAG of snapshots and the named branches that point into it.

Pure bookkeeping over keyed ids, rebuilt on open by replaying the journal's frames. It holds
no key and no plaintext; the store decides what the frames mean, this module remembers them.
"""

from __future__ import annotations

import hashlib
import heapq
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .frames import ID_LEN, NO_ID, AckFrame, BranchFrame, BranchReason, Flag, Frame, Op, RecordFrame, RedactionFrame, ReinforceFrame


@dataclass(slots=True)
class Node:
    """One snapshot as the lineage knows it (no plaintext: read its frame to open it)."""

    idx: int
    wire_id: bytes
    parent: int  # index of the first parent node, -1 for a genesis snapshot
    branch_id: bytes
    path_hash: bytes
    op: Op
    hlc: int  # the frame's clock, microseconds (frames.UNKNOWN_HLC: a format-2 time that was not plausible)
    offset: int  # where its frame starts in the journal
    size: int  # bytes of its frame: what the outbox holds for it
    seq: int  # its depth: 1 + the largest seq of its parents (1 for a genesis snapshot), the same on every device
    sealed_sid: bytes
    authentic: bool
    more_parents: tuple[int, ...] = ()  # a merge's parents after the first (shared empty tuple otherwise)
    reinforce_count: int = 0
    last_reinforced: float | None = None
    #: Erased by a redaction (docs/design.md, "Redaction skeletons"): it reads as a delete of its
    #: path, and its frame is, or will be after compaction, a skeleton.
    redacted: bool = False

    @property
    def created_at(self) -> float:
        return self.hlc / 1e6

    @property
    def parents(self) -> tuple[int, ...]:
        """Every parent node (a merge has several), in the frame's order."""
        return () if self.parent < 0 else (self.parent, *self.more_parents)


@dataclass(slots=True)
class Branch:
    """A named branch: the frames that moved it, and which of them are its heads.

    Every record and branch event on the branch is an *item* (its wire id or event id) with a
    target node (-1: none); an item that another names in *after* is superseded. The heads are the
    items nothing supersedes, less any whose target the target of another head descends from or
    equals (it adds nothing to the state). Both are functions of the set of frames, not of the
    order they arrived in, so devices holding the same frames agree (docs/design.md).
    """

    branch_id: bytes
    created_by: BranchFrame  # its sealed event holds the branch's name
    head: int = -1  # the primary head's target: the newest by (clock, wire id); -1 with none
    live: dict[bytes, int] = field(default_factory=dict)  # items nothing supersedes (yet) -> target node
    waiting: set[bytes] = field(default_factory=set)  # ids named in *after* that have not arrived
    heads: dict[bytes, int] = field(default_factory=dict)  # head item id -> target node
    authentic: bool = True
    deletions: set[bytes] = field(default_factory=set)  # its delete events' ids
    #: Every head is a delete event: the branch is gone until something is written to it or it is
    #: created again (a write another device made concurrently with the delete is such a head).
    deleted: bool = False
    _view: dict[bytes, int] | None = None  # path_hash -> node idx of the visible record
    #: The view as a checkpoint holds it (path hashes, nodes), until something needs the dict
    #: (:meth:`Lineage.view`, or a frame on the branch): a million-entry dict is half a second.
    view_arrays: tuple[np.ndarray, np.ndarray] | None = None

    @property
    def replaceable(self) -> tuple[bytes, ...]:
        """What the branch's next frame replaces: every item nothing supersedes yet, sorted."""
        return tuple(sorted(self.live))

    @property
    def merged(self) -> bool:
        """True when the branch has at most one head (nothing waiting to be merged)."""
        return len(self.heads) <= 1


_KIND_NAMES = {BranchFrame: "branch", ReinforceFrame: "reinforcement", AckFrame: "ack", RedactionFrame: "redaction"}


def kind_name(frame: Frame) -> str:
    """What a frame is, in words, for the damage reports."""
    return "record" if isinstance(frame, RecordFrame) else _KIND_NAMES[type(frame)]


@dataclass(slots=True)
class Damage:
    offset: int
    reason: str


if TYPE_CHECKING:
    import numpy as np

_OPS = (Op.STORE, Op.DELETE)


class NodeTable:
    """The lineage's nodes, by index: a list, except that those a checkpoint brought are kept as
    columns and made into :class:`Node` objects only when first asked for.

    A cold open of a million records then builds no million objects; the nodes a read, a recall
    or a walk touches are made once and kept (their mutable fields, the clock and reinforcement,
    live on the object from then on).
    """

    __slots__ = ("_base", "_branch_ids", "_columns", "_made", "_tail")

    def __init__(self, columns: dict[str, np.ndarray] | None = None, branch_ids: list[bytes] | None = None) -> None:
        self._columns = columns or {}
        self._base = len(columns["n.parent"]) if columns else 0
        self._branch_ids = branch_ids or []
        self._made: dict[int, Node] = {}
        self._tail: list[Node] = []

    def __len__(self) -> int:
        return self._base + len(self._tail)

    def __bool__(self) -> bool:
        return len(self) > 0

    def __getitem__(self, idx: int) -> Node:
        if idx >= self._base:
            return self._tail[idx - self._base]
        if idx < 0:
            return self[len(self) + idx]
        node = self._made.get(idx)
        if node is None:
            node = self._made[idx] = self._make(idx)
        return node

    def __iter__(self) -> Iterator[Node]:
        for idx in range(len(self)):
            yield self[idx]

    def append(self, node: Node) -> None:
        self._tail.append(node)

    def with_paths(self, path_hashes: set[bytes]) -> list[int]:
        """Every node that writes one of the paths ``path_hashes`` (keyed), in node order.

        A checkpoint's nodes are matched on their packed column, without making Node objects.
        """
        found: list[int] = []
        if self._base and path_hashes:
            column = self._columns["n.path"].tobytes()
            found = [i for i in range(self._base) if column[i * ID_LEN : (i + 1) * ID_LEN] in path_hashes]
        return found + [n.idx for n in self._tail if n.path_hash in path_hashes]

    def reinforcement(self, nodes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(reinforce count, decay start) of each of ``nodes``: the start is when the node was last
        reinforced, else its creation time (:mod:`sovseal.recall.params`).

        Recall reads this for its few hundred candidates on every query; a checkpoint's nodes are
        read from their columns, so no Node objects are made for it. A made node's object is the
        truth for its mutable fields, and the nodes since the checkpoint are objects anyway.
        """
        import numpy as np

        counts = np.zeros(len(nodes), dtype=np.float64)
        start = np.zeros(len(nodes), dtype=np.float64)
        base = self._base
        if base:
            old = nodes < base
            at = nodes[old]
            c = self._columns
            counts[old] = c["n.rcount"][at]
            last = c["n.rlast"][at]
            start[old] = np.where(np.isnan(last), c["n.hlc"][at] / 1e6, last)
        made, tail = self._made, self._tail
        for i, idx in enumerate(nodes.tolist()):
            node = made.get(idx) if idx < base else tail[idx - base]
            if node is not None:
                counts[i] = node.reinforce_count
                start[i] = node.created_at if node.last_reinforced is None else node.last_reinforced
        return counts, start

    def _make(self, idx: int) -> Node:
        c = self._columns  # numpy arrays: only a restored table has any
        start, end = int(c["n.mp_ends"][idx - 1]) if idx else 0, int(c["n.mp_ends"][idx])
        sid_start = abs(int(c["n.sid_ends"][idx - 1])) if idx else 0
        last = float(c["n.rlast"][idx])
        return Node(
            idx=idx,
            wire_id=c["n.wire"][idx].tobytes(),
            parent=int(c["n.parent"][idx]),
            branch_id=self._branch_ids[int(c["n.branch"][idx])],
            path_hash=c["n.path"][idx].tobytes(),
            op=_OPS[int(c["n.op"][idx])],
            hlc=int(c["n.hlc"][idx]),
            offset=int(c["n.offset"][idx]),
            size=int(c["n.size"][idx]),
            seq=int(c["n.seq"][idx]),
            sealed_sid=c["n.sid_blob"][sid_start : int(c["n.sid_ends"][idx])].tobytes(),
            authentic=bool(c["n.authentic"][idx]),
            more_parents=tuple(c["n.mp"][start:end].tolist()) if end > start else (),
            reinforce_count=int(c["n.rcount"][idx]),
            last_reinforced=None if last != last else last,
            redacted=bool(c["n.redacted"][idx]) if "n.redacted" in c else False,
        )

    def columns(self, branch_index: dict[bytes, int]) -> dict[str, np.ndarray]:
        """Every node as columns (a checkpoint's arrays): the checkpoint's own, with the fields that
        change on a made object (clock, reinforcement) taken from it, then the nodes since."""
        import numpy as np

        from . import checkpoint as cp

        c = self._columns
        base = self._base
        if base:
            hlc, rcount, rlast = c["n.hlc"].copy(), c["n.rcount"].copy(), c["n.rlast"].copy()
            redacted = c["n.redacted"].copy() if "n.redacted" in c else np.zeros(base, dtype=bool)
            for idx, node in self._made.items():
                hlc[idx], rcount[idx], redacted[idx] = node.hlc, node.reinforce_count, node.redacted
                rlast[idx] = np.nan if node.last_reinforced is None else node.last_reinforced
        tail = self._tail
        more = [n.more_parents for n in tail]
        sid_blob, sid_ends = cp.pack([n.sealed_sid for n in tail])
        tail_columns = {
            "n.wire": cp.pack_fixed([n.wire_id for n in tail], ID_LEN),
            "n.parent": np.array([n.parent for n in tail], dtype=np.int64),
            "n.branch": np.array([branch_index[n.branch_id] for n in tail], dtype=np.int32),
            "n.path": cp.pack_fixed([n.path_hash for n in tail], ID_LEN),
            "n.op": np.array([int(n.op) for n in tail], dtype=np.int8),
            "n.hlc": np.array([n.hlc for n in tail], dtype=np.int64),
            "n.offset": np.array([n.offset for n in tail], dtype=np.int64),
            "n.size": np.array([n.size for n in tail], dtype=np.int64),
            "n.seq": np.array([n.seq for n in tail], dtype=np.int64),
            "n.authentic": np.array([n.authentic for n in tail], dtype=bool),
            "n.redacted": np.array([n.redacted for n in tail], dtype=bool),
            "n.mp": np.array([p for m in more for p in m], dtype=np.int64),
            "n.mp_ends": np.cumsum([len(m) for m in more], dtype=np.int64),
            "n.rcount": np.array([n.reinforce_count for n in tail], dtype=np.int64),
            "n.rlast": np.array([np.nan if n.last_reinforced is None else n.last_reinforced for n in tail], dtype=np.float64),
            "n.sid_blob": sid_blob,
            "n.sid_ends": sid_ends,
        }
        if not base:
            return tail_columns
        # The checkpoint's branch numbers are positions in its own list: map them to the new one.
        remap = np.array([branch_index[b] for b in self._branch_ids], dtype=np.int32)
        blob_size, mp_size = len(c["n.sid_blob"]), int(c["n.mp_ends"][-1])
        shifted_ends = np.where(sid_ends < 0, sid_ends - blob_size, sid_ends + blob_size)
        return {
            "n.wire": np.concatenate([c["n.wire"], tail_columns["n.wire"]]),
            "n.parent": np.concatenate([c["n.parent"], tail_columns["n.parent"]]),
            "n.branch": np.concatenate([remap[c["n.branch"]], tail_columns["n.branch"]]),
            "n.path": np.concatenate([c["n.path"], tail_columns["n.path"]]),
            "n.op": np.concatenate([c["n.op"], tail_columns["n.op"]]),
            "n.hlc": np.concatenate([hlc, tail_columns["n.hlc"]]),
            "n.offset": np.concatenate([c["n.offset"], tail_columns["n.offset"]]),
            "n.size": np.concatenate([c["n.size"], tail_columns["n.size"]]),
            "n.seq": np.concatenate([c["n.seq"], tail_columns["n.seq"]]),
            "n.authentic": np.concatenate([c["n.authentic"], tail_columns["n.authentic"]]),
            "n.redacted": np.concatenate([redacted, tail_columns["n.redacted"]]),
            "n.mp": np.concatenate([c["n.mp"], tail_columns["n.mp"]]),
            "n.mp_ends": np.concatenate([c["n.mp_ends"], tail_columns["n.mp_ends"] + mp_size]),
            "n.rcount": np.concatenate([rcount, tail_columns["n.rcount"]]),
            "n.rlast": np.concatenate([rlast, tail_columns["n.rlast"]]),
            "n.sid_blob": np.concatenate([c["n.sid_blob"], sid_blob]),
            "n.sid_ends": np.concatenate([c["n.sid_ends"], shifted_ends]),
        }


class WireIndex:
    """wire id -> node index: a dict, except for the nodes a checkpoint brought, which are found
    by binary search over their ids' first 8 bytes (sorted when the checkpoint was written).

    Building a dict of a million ids costs about half a second; a cold open builds none.
    """

    __slots__ = ("_added", "_order", "_prefix", "_wires")

    def __init__(self, wires: np.ndarray | None = None, order: np.ndarray | None = None) -> None:
        self._wires = wires  # (n,) V32: node i's wire id (the checkpoint's n.wire)
        self._order = order  # node indexes sorted by id prefix
        self._prefix = None
        if wires is not None:  # only a checkpoint brings arrays (and numpy is imported only then)
            import numpy as np

            self._prefix = np.frombuffer(wires.tobytes(), dtype=">u8")[::4][order]
        self._added: dict[bytes, int] = {}

    def _find(self, wire: bytes) -> int | None:
        found = self._added.get(wire)
        if found is not None or self._prefix is None or len(wire) != ID_LEN:
            return found
        key = int.from_bytes(wire[:8], "big")
        prefix, order, wires = self._prefix, self._order, self._wires
        at = int(prefix.searchsorted(key))
        while at < len(prefix) and int(prefix[at]) == key:
            idx = int(order[at])  # type: ignore[index]
            if wires[idx].tobytes() == wire:  # type: ignore[index]
                return idx
            at += 1
        return None

    def get(self, wire: bytes, default: int | None = None) -> int | None:
        found = self._find(wire)
        return default if found is None else found

    def __getitem__(self, wire: bytes) -> int:
        found = self._find(wire)
        if found is None:
            raise KeyError(wire)
        return found

    def __contains__(self, wire: object) -> bool:
        return isinstance(wire, bytes) and self._find(wire) is not None

    def __setitem__(self, wire: bytes, idx: int) -> None:
        self._added[wire] = idx

    def __len__(self) -> int:
        return (0 if self._order is None else len(self._order)) + len(self._added)

    @staticmethod
    def sort_order(wires: np.ndarray) -> np.ndarray:
        """The order a checkpoint stores with ``n.wire``: node indexes by id prefix."""
        import numpy as np

        return np.argsort(np.frombuffer(wires.tobytes(), dtype=">u8")[::4], kind="stable")


class Outbox:
    """Replicable frames not acknowledged yet, in journal order: id -> (frame offset, frame size).

    Without replication nothing is ever acknowledged and every record is here; those a
    checkpoint brought stay in its arrays until an acknowledgement or a lookup needs a dict.
    """

    __slots__ = ("_base_ids", "_base_where", "_items")

    def __init__(self, ids: np.ndarray | None = None, where: np.ndarray | None = None) -> None:
        self._base_ids = ids  # (n,) V32
        self._base_where = where  # (n, 2) int64
        self._items: dict[bytes, tuple[int, int]] = {}

    def _dict(self) -> dict[bytes, tuple[int, int]]:
        if self._base_ids is not None:
            assert self._base_where is not None  # nosec B101 -- type narrowing: set together
            items = dict(zip(self._base_ids.tolist(), map(tuple, self._base_where.tolist()), strict=True))
            items.update(self._items)  # added after the checkpoint: later in the journal
            self._items, self._base_ids, self._base_where = items, None, None
        return self._items

    def add(self, item: bytes, where: tuple[int, int]) -> bool:
        """Enqueue a frame the lineage sees for the first time (its callers check that); False if queued."""
        if item in self._items:
            return False
        self._items[item] = where
        return True

    def pop(self, item: bytes, default: tuple[int, int] | None = None) -> tuple[int, int] | None:
        return self._dict().pop(item, default)

    def __contains__(self, item: object) -> bool:
        return item in self._dict()

    def __len__(self) -> int:
        return (0 if self._base_ids is None else len(self._base_ids)) + len(self._items)

    def __iter__(self) -> Iterator[bytes]:
        return iter(self._dict())

    def items(self) -> Iterable[tuple[bytes, tuple[int, int]]]:
        return self._dict().items()

    def first(self, limit: int) -> list[tuple[int, int]]:
        """Where the oldest ``limit`` frames are (no dict is built for it)."""
        out: list[tuple[int, int]] = []
        if self._base_where is not None:
            out = [(int(o), int(n)) for o, n in self._base_where[:limit].tolist()]
        for where in self._items.values():
            if len(out) >= limit:
                break
            out.append(where)
        return out

    def arrays(self) -> tuple[list[bytes], np.ndarray]:
        """(ids, where) of every entry, in order, for a checkpoint."""
        import numpy as np

        if self._base_ids is not None and self._base_where is not None:
            extra = list(self._items.items())
            ids = self._base_ids.tolist() + [k for k, _ in extra]
            where = np.concatenate([self._base_where, np.array([w for _, w in extra], dtype=np.int64).reshape(len(extra), 2)])
            return ids, where
        items = list(self._items.items())
        return [k for k, _ in items], np.array([w for _, w in items], dtype=np.int64).reshape(len(items), 2)


@dataclass
class Lineage:
    nodes: NodeTable = field(default_factory=NodeTable)
    by_wire: WireIndex = field(default_factory=WireIndex)
    branches: dict[bytes, Branch] = field(default_factory=dict)
    damage: list[Damage] = field(default_factory=list)
    sync_seals: int = 0  # seals under k_sync: one per record, branch and reinforce frame
    rest_seals: int = 0  # seals under k_rest: one snapshot id per record
    #: The outbox: replicable frames not yet acknowledged by the server, in journal order.
    #: id (record wire id or event id) -> (frame offset, frame size).
    pending: Outbox = field(default_factory=Outbox)
    outbox_bytes: int = 0
    events: set[bytes] = field(default_factory=set)  # ids of branch and reinforce events seen
    unattributed_damage: bool = False  # see unattributed()
    max_hlc: int = 0  # the newest clock value of any frame: a new frame is stamped above it
    #: Snapshots held in more than one version: wire id -> sha256 of each later version's sealed entry.
    versions: dict[bytes, set[bytes]] = field(default_factory=dict)
    epoch: int = 0  # raised when a node's clock moves (an earlier version arrived): orderings are stale
    #: Erased records: wire id -> (offset, size) of the first redaction frame that names it (the
    #: frame holds a skeleton seal of it). A skeleton that arrived without its redaction is not listed.
    redactions: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    #: Records named by more than one redaction (devices that purged one path concurrently, each
    #: with its own seal): wire id -> where each later one is, in journal order. Every one of them
    #: is authentic, so a skeleton made from any of them is (see ``LocalStore.erasure``).
    redacted_again: dict[bytes, list[tuple[int, int]]] = field(default_factory=dict)
    #: Every redacted node, in the order it was erased: what the recall engine still has to drop.
    erased: list[int] = field(default_factory=list)
    #: Frame bytes of redacted records whose frame still holds the sealed entry (compaction's due).
    uncompacted: int = 0

    def apply(self, frame: Frame, offset: int, size: int, authentic: bool, *, placed: bool = False) -> None:
        """Replay one frame. Damaged frames are still applied where that makes reads fail closed.

        ``placed``: a record frame that failed authentication but whose head passed its own tag
        (:meth:`Journal.tag`), so its branch, parent and path are the real ones.
        """
        if not isinstance(frame, AckFrame) and authentic and frame.hlc > self.max_hlc:
            self.max_hlc = frame.hlc
        if isinstance(frame, RecordFrame):
            self._apply_record(frame, offset, size, authentic, placed)
        elif not authentic:
            # Its branch id, target or event may be what was altered (or it was copied from another
            # journal): it may have moved any HEAD, so it is pinned on none.
            if not isinstance(frame, AckFrame):
                self.sync_seals += 1
            self.unattributed(offset, f"a {_KIND_NAMES[type(frame)]} frame failed authentication")
        elif isinstance(frame, (BranchFrame, ReinforceFrame, RedactionFrame)) and frame.event_id in self.events:
            # Every event seals with a fresh nonce, so an event id seen twice is an old frame
            # appended again (to roll a HEAD back, or inflate a reinforcement): never applied.
            self.damage.append(Damage(offset, "a branch or reinforcement event repeats an earlier one (replayed)"))
        elif isinstance(frame, BranchFrame):
            self.sync_seals += 1
            self._apply_branch(frame, offset)
            self.events.add(frame.event_id)
            self._enqueue(frame.event_id, offset, size)
        elif isinstance(frame, ReinforceFrame):
            self.sync_seals += 1
            idx = self.by_wire.get(frame.wire_id)
            if idx is None:  # a store only reinforces what it holds, and imports wait for the target
                self.damage.append(Damage(offset, "a reinforcement names a snapshot that does not exist"))
                return
            node = self.nodes[idx]
            node.reinforce_count += 1
            node.last_reinforced = frame.at if node.last_reinforced is None else max(node.last_reinforced, frame.at)
            self.events.add(frame.event_id)
            self._enqueue(frame.event_id, offset, size)
        elif isinstance(frame, RedactionFrame):
            self.sync_seals += 1 + len(frame.erased)
            for wire in frame.wire_ids:
                idx = self.by_wire.get(wire)
                if idx is None:  # a store erases only what it holds, and imports wait for the records
                    self.damage.append(Damage(offset, "a redaction names a snapshot that does not exist"))
                    continue
                if wire in self.redactions:
                    self.redacted_again.setdefault(wire, []).append((offset, size))
                else:
                    self.redactions[wire] = (offset, size)
                self.redact(idx)
            self.events.add(frame.event_id)
            self._enqueue(frame.event_id, offset, size)
        elif isinstance(frame, AckFrame):
            for item in frame.wire_ids:
                done = self.pending.pop(item, None)
                if done is not None:
                    self.outbox_bytes -= done[1]

    def unattributed(self, offset: int, reason: str) -> None:
        """Damage that cannot be pinned on one record: every branch known so far fails closed.

        A frame that does not decode, a record that lost its branch or parent, or a damaged frame
        whose clear fields cannot be trusted (a branch event; a record whose head failed its tag)
        may have moved any HEAD; reading a branch as if it had not would return a silently older
        state, and reading a path as if that record were not on it would return an older value.
        """
        self.damage.append(Damage(offset, reason))
        self.unattributed_damage = True
        for branch in self.branches.values():
            branch.authentic = False

    def redact(self, idx: int, *, skeleton: bool = False) -> None:
        """Mark a record erased: from now on it reads as a delete of its path on every branch.

        ``skeleton``: its frame already is a skeleton (nothing left to compact).
        """
        node = self.nodes[idx]
        if node.redacted:
            return
        node.redacted = True
        self.erased.append(idx)
        if not skeleton:
            self.uncompacted += node.size
        for branch in self.branches.values():
            view = self._materialized(branch)
            if view is not None and view.get(node.path_hash) == idx:
                del view[node.path_hash]

    def _enqueue(self, item: bytes, offset: int, size: int) -> None:
        if self.pending.add(item, (offset, size)):
            self.outbox_bytes += size

    def replicated(self, item: bytes) -> bool:
        return item not in self.pending

    def _apply_record(self, frame: RecordFrame, offset: int, size: int, authentic: bool, placed: bool) -> None:
        self.sync_seals += 1
        self.rest_seals += 1
        if not authentic:
            if not placed:  # its path hash, branch or parent may be what was altered: the real path is unknown
                self.unattributed(offset, "a record frame failed authentication, its head too: its branch, parent and path are unknown")
                return
            self.damage.append(Damage(offset, "a record frame failed authentication"))
        if frame.wire_id in self.by_wire:
            if authentic and frame.flags & Flag.REDACTED:  # the skeleton of a record held here
                self.redact(self.by_wire[frame.wire_id], skeleton=True)
                return
            if not authentic or frame.flags & Flag.LEGACY:
                self.damage.append(Damage(offset, "a record frame repeats an existing snapshot"))
                return
            self._add_version(frame)
            return
        parents: list[int] = []
        for wire in frame.parents:
            found = self.by_wire.get(wire)
            if found is None:
                self.unattributed(offset, "a record frame names a parent that does not exist")
                return
            parents.append(found)
        branch = self.branches.get(frame.branch_id)
        if branch is None:
            self.unattributed(offset, "a record frame names a branch that does not exist")
            return
        node = Node(
            idx=len(self.nodes),
            wire_id=frame.wire_id,
            parent=parents[0] if parents else -1,
            branch_id=frame.branch_id,
            path_hash=frame.path_hash,
            op=frame.op,
            hlc=frame.hlc,
            offset=offset,
            size=size,
            seq=1 + (self.nodes[parents[0]].seq if len(parents) == 1 else max((self.nodes[p].seq for p in parents), default=0)),
            sealed_sid=frame.sealed_sid,
            authentic=authentic,
            more_parents=tuple(parents[1:]),
            redacted=bool(frame.flags & Flag.REDACTED),
        )
        self.nodes.append(node)
        if node.redacted:
            self.erased.append(node.idx)
        self.by_wire[frame.wire_id] = node.idx
        self._enqueue(frame.wire_id, offset, size)
        self._add_item(branch, frame.wire_id, node.idx, frame.replaces)

    def _apply_branch(self, frame: BranchFrame, offset: int) -> None:
        head = -1
        if frame.head_wire_id != NO_ID:
            found = self.by_wire.get(frame.head_wire_id)
            if found is None:
                self.damage.append(Damage(offset, "a branch frame points at a snapshot that does not exist"))
                return
            head = found
        branch = self.branches.get(frame.branch_id)
        if branch is None:
            branch = self.branches[frame.branch_id] = Branch(frame.branch_id, frame)
        if frame.reason is BranchReason.DELETE:
            branch.deletions.add(frame.event_id)
        self._add_item(branch, frame.event_id, head, frame.after)

    def _add_version(self, frame: RecordFrame) -> None:
        """Another device's version of a snapshot this lineage holds: the same entry on the same
        parents, written there independently, so with its own clock and replaced heads.

        Both versions stand for one snapshot: its clock is the earlier of the two and it replaces
        the heads either replaced (docs/design.md). Every device that holds both computes the same.
        """
        idx = self.by_wire[frame.wire_id]
        node = self.nodes[idx]
        self.versions.setdefault(frame.wire_id, set()).add(hashlib.sha256(frame.sealed_entry).digest())
        if frame.hlc < node.hlc:
            node.hlc = frame.hlc
            self.epoch += 1
            for branch in self.branches.values():
                branch._view, branch.view_arrays = None, None
        on = self.branches.get(frame.branch_id)
        if on is not None:
            self._add_item(on, frame.wire_id, idx, frame.replaces, again=True)

    def _add_item(self, branch: Branch, item: bytes, target: int, replaces: tuple[bytes, ...], *, again: bool = False) -> None:
        """One more frame on ``branch``: update its heads, keeping its view when it can follow.

        ``again``: a second version of an item the branch already has (it is not re-added).
        """
        for old in replaces:
            if branch.live.pop(old, None) is None and old not in self.by_wire and old not in self.events:
                branch.waiting.add(old)  # superseded before it arrived: it never becomes a head
        if item in branch.waiting:
            branch.waiting.discard(item)
        elif not again or self.nodes[target].branch_id != branch.branch_id:
            branch.live[item] = target  # a second version on the first's branch changes nothing of it
        before = branch.heads
        live = branch.live
        heads = dict(live) if len(live) == 1 else self._undominated(live)  # one live item: it is the head
        if heads == before:
            return
        branch.heads = heads
        branch.deleted = bool(branch.deletions) and all(h in branch.deletions for h in heads)
        previous = next(iter(before.values())) if len(before) == 1 else None
        node = self.nodes[target] if target >= 0 else None
        view = self._materialized(branch)
        if (
            view is not None
            and node is not None
            and heads == {item: target}
            and previous is not None
            and node.parents == ((previous,) if previous >= 0 else ())
        ):
            # A record on the only head: the view gains its write (its clock is the newest).
            if (node.op is Op.DELETE or node.redacted) and node.authentic:
                view.pop(node.path_hash, None)
            else:
                view[node.path_hash] = target
        else:
            branch._view = {} if all(t < 0 for t in heads.values()) else None
        branch.head = target if len(heads) == 1 and item in heads else max(heads.values(), key=self.order, default=-1)

    def order(self, idx: int) -> tuple[int, bytes]:
        """Newest first by this: (clock, wire id). -1 (no snapshot) sorts before everything."""
        if idx < 0:
            return (-1, b"")
        node = self.nodes[idx]
        return (node.hlc, node.wire_id)

    def _undominated(self, live: dict[bytes, int]) -> dict[bytes, int]:
        """``live`` less the items whose target adds nothing: none, or an ancestor of (or equal to)
        the target of an item that stays. Ties between equal targets keep the greatest id."""
        targets = sorted({t for t in live.values() if t >= 0}, key=self.order, reverse=True)
        kept: list[int] = []
        for target in targets:
            if not any(self.descends(other, target) for other in kept):
                kept.append(target)
        if not kept:  # only empty heads (a branch created and not written yet): keep one, the greatest id
            if not live:
                return {}
            item = max(live)
            return {item: live[item]}
        out: dict[bytes, int] = {}
        for target in kept:
            item = max(i for i, t in live.items() if t == target)
            out[item] = target
        return out

    def descends(self, node: int, ancestor: int) -> bool:
        """Is ``ancestor`` reachable from ``node`` by parents (or the same node)?

        Clocks rise along every parent link, so the walk never goes below the ancestor's clock.
        """
        if node == ancestor:
            return True
        floor = self.nodes[ancestor].hlc
        stack, seen = [node], {node}
        while stack:
            for parent in self.nodes[stack.pop()].parents:
                if parent == ancestor:
                    return True
                if parent not in seen and self.nodes[parent].hlc >= floor:
                    seen.add(parent)
                    stack.append(parent)
        return False

    def history(self, targets: Iterable[int]) -> Iterator[Node]:
        """Every snapshot reachable from ``targets``, newest first by (clock, wire id).

        Parents always come after their children (clocks rise along parent links), and the order
        is the same on every device that holds the same snapshots.
        """
        heap = [(-self.nodes[t].hlc, _neg(self.nodes[t].wire_id), t) for t in set(targets) if t >= 0]
        heapq.heapify(heap)
        seen = {t for _, _, t in heap}
        while heap:
            _, _, idx = heapq.heappop(heap)
            node = self.nodes[idx]
            yield node
            for parent in node.parents:
                if parent not in seen:
                    seen.add(parent)
                    other = self.nodes[parent]
                    heapq.heappush(heap, (-other.hlc, _neg(other.wire_id), parent))

    def chain(self, idx: int) -> list[Node]:
        """The snapshots reachable from ``idx``, newest first (see :meth:`history`)."""
        return list(self.history([idx]))

    def view(self, branch: Branch) -> dict[bytes, int]:
        """path_hash -> index of the record visible on the branch (tombstones removed).

        With several heads this is their merge: per path, the write with the newest (clock,
        wire id) among everything the heads hold. Clocks rise along parent links, so that is the
        write no other descends from, and among concurrent writes the later one by the rule.

        A damaged frame stays visible whatever its op says (its op may be what was altered), so
        reading its path fails closed instead of showing the path as deleted.
        """
        view = self._materialized(branch)
        if view is None:
            seen: set[bytes] = set()
            view = {}
            for node in self.history(branch.heads.values()):
                if node.path_hash in seen:
                    continue
                seen.add(node.path_hash)
                if not node.authentic or (node.op is Op.STORE and not node.redacted):
                    view[node.path_hash] = node.idx
            branch._view = view
        return view

    @staticmethod
    def _materialized(branch: Branch) -> dict[bytes, int] | None:
        """The branch's view as a dict, built from the checkpoint's arrays if it came with them."""
        if branch._view is None and branch.view_arrays is not None:
            paths, nodes = branch.view_arrays
            branch._view = dict(zip(paths.tolist(), nodes.tolist(), strict=True))
            branch.view_arrays = None
        return branch._view

    def conflicts(self, branch: Branch) -> dict[bytes, list[int]]:
        """path_hash -> the competing writes (newest first) of every path the branch's heads disagree on.

        A path conflicts when two heads see different last writes of it and neither write descends
        from the other: concurrent writes that the next local write will merge.
        """
        if len(branch.heads) < 2:
            return {}
        per_head = [self.view_of(target) for target in branch.heads.values()]
        out: dict[bytes, list[int]] = {}
        for path in set().union(*per_head):
            writes = {v[path] for v in per_head if path in v}
            if len(writes) < 2:
                continue
            competing = [w for w in writes if not any(o != w and self.descends(o, w) for o in writes)]
            if len(competing) > 1:
                out[path] = sorted(competing, key=self.order, reverse=True)
        return out

    def view_of(self, target: int) -> dict[bytes, int]:
        """path_hash -> the last write (tombstones included) of every path reachable from ``target``."""
        out: dict[bytes, int] = {}
        for node in self.history([target]):
            out.setdefault(node.path_hash, node.idx)
        return out

    # -- checkpoints ---------------------------------------------------------------------------

    def to_arrays(self) -> dict[str, np.ndarray]:
        """Everything replay computed, as a checkpoint's arrays (docs/design.md, "Checkpoints").

        The caller holds the store's lock; the arrays are copies, so sealing and writing them can
        happen after it is released.
        """
        import numpy as np

        from . import checkpoint as cp

        branch_list = list(self.branches)
        index = {b: i for i, b in enumerate(branch_list)}
        arrays = self.nodes.columns(index)
        arrays["n.wire_order"] = WireIndex.sort_order(arrays["n.wire"])
        pending_ids, arrays["p.where"] = self.pending.arrays()
        arrays["p.ids"] = cp.pack_fixed(pending_ids, ID_LEN)
        arrays["e.blob"], arrays["e.ends"] = cp.pack(sorted(self.events))
        branches = []
        for j, branch in enumerate(self.branches.values()):
            if branch.view_arrays is not None:
                arrays[f"v{j}.paths"], arrays[f"v{j}.nodes"] = branch.view_arrays
            elif branch._view is not None:
                arrays[f"v{j}.paths"] = cp.pack_fixed(list(branch._view), ID_LEN)
                arrays[f"v{j}.nodes"] = np.fromiter(branch._view.values(), dtype=np.int64, count=len(branch._view))
            branches.append(
                {
                    "id": branch.branch_id.hex(),
                    "created_by": branch.created_by.encode().hex(),
                    "head": branch.head,
                    "live": [[k.hex(), v] for k, v in branch.live.items()],
                    "waiting": sorted(w.hex() for w in branch.waiting),
                    "heads": [[k.hex(), v] for k, v in branch.heads.items()],
                    "authentic": branch.authentic,
                    "deletions": sorted(d.hex() for d in branch.deletions),
                    "deleted": branch.deleted,
                    "view": branch._view is not None or branch.view_arrays is not None,
                }
            )
        meta = {
            "branches": branches,
            "damage": [[d.offset, d.reason] for d in self.damage],
            "sync_seals": self.sync_seals,
            "rest_seals": self.rest_seals,
            "outbox_bytes": self.outbox_bytes,
            "unattributed_damage": self.unattributed_damage,
            "max_hlc": self.max_hlc,
            "versions": {k.hex(): sorted(v.hex() for v in vs) for k, vs in self.versions.items()},
            "epoch": self.epoch,
            "redactions": {k.hex(): list(v) for k, v in self.redactions.items()},
            "redacted_again": {k.hex(): [list(w) for w in v] for k, v in self.redacted_again.items()},
            "erased": self.erased,
            "uncompacted": self.uncompacted,
        }
        arrays["l.meta"] = np.frombuffer(json.dumps(meta).encode(), dtype=np.uint8)
        return arrays

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> Lineage:
        """The lineage :meth:`to_arrays` described (the arrays come from an authenticated checkpoint)."""
        from . import checkpoint as cp

        meta: dict[str, Any] = json.loads(arrays["l.meta"].tobytes())
        branch_ids = [bytes.fromhex(b["id"]) for b in meta["branches"]]
        node_columns = {k: v for k, v in arrays.items() if k.startswith("n.") and k != "n.wire_order"}
        lineage = cls(nodes=NodeTable(node_columns, branch_ids))
        lineage.by_wire = WireIndex(arrays["n.wire"], arrays["n.wire_order"])
        lineage.pending = Outbox(arrays["p.ids"], arrays["p.where"])
        lineage.events = set(cp.unpack(arrays["e.blob"], arrays["e.ends"]))  # type: ignore[arg-type]
        for j, b in enumerate(meta["branches"]):
            branch = Branch(
                branch_ids[j],
                BranchFrame.decode(bytes.fromhex(b["created_by"])),
                head=b["head"],
                live={bytes.fromhex(k): v for k, v in b["live"]},
                waiting={bytes.fromhex(w) for w in b["waiting"]},
                heads={bytes.fromhex(k): v for k, v in b["heads"]},
                authentic=b["authentic"],
                deletions={bytes.fromhex(d) for d in b.get("deletions", ())},
                deleted=b.get("deleted", False),
            )
            if b["view"]:
                branch.view_arrays = (arrays[f"v{j}.paths"], arrays[f"v{j}.nodes"])
            lineage.branches[branch.branch_id] = branch
        lineage.damage = [Damage(o, r) for o, r in meta["damage"]]
        lineage.sync_seals, lineage.rest_seals = meta["sync_seals"], meta["rest_seals"]
        lineage.outbox_bytes, lineage.unattributed_damage = meta["outbox_bytes"], meta["unattributed_damage"]
        lineage.max_hlc, lineage.epoch = meta["max_hlc"], meta["epoch"]
        lineage.versions = {bytes.fromhex(k): {bytes.fromhex(v) for v in vs} for k, vs in meta["versions"].items()}
        lineage.redactions = {bytes.fromhex(k): (v[0], v[1]) for k, v in meta.get("redactions", {}).items()}
        if lineage.redactions and "redacted_again" not in meta:
            # Written when a later redaction of a record replaced the first here: what it lists
            # cannot be trusted, so the checkpoint is refused and the journal replayed.
            raise cp.CheckpointRefused("made before a record could be named by several redactions")
        lineage.redacted_again = {bytes.fromhex(k): [(w[0], w[1]) for w in v] for k, v in meta.get("redacted_again", {}).items()}
        lineage.erased = list(meta.get("erased", []))
        lineage.uncompacted = int(meta.get("uncompacted", 0))
        return lineage


def _neg(wire: bytes) -> bytes:
    """A key that sorts ``wire`` ids in reverse in a min-heap."""
    return bytes(255 - b for b in wire)
