"""The in-memory lineage: a DAG of snapshots and the named branches that point into it.

Pure bookkeeping over keyed ids, rebuilt on open by replaying the journal's frames. It holds
no key and no plaintext; the store decides what the frames mean, this module remembers them.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .frames import NO_ID, AckFrame, BranchFrame, BranchReason, Frame, Op, RecordFrame, ReinforceFrame


@dataclass(slots=True)
class Node:
    """One snapshot as the lineage knows it (no plaintext: read its frame to open it)."""

    idx: int
    wire_id: bytes
    parent: int  # index of the parent node, -1 for a genesis snapshot
    branch_id: bytes
    path_hash: bytes
    op: Op
    hlc: int  # the frame's clock, microseconds (frames.UNKNOWN_HLC: a format-2 time that was not plausible)
    offset: int  # where its frame starts in the journal
    size: int  # bytes of its frame: what the outbox holds for it
    seq: int  # position on the branch it was appended to, 1-based
    sealed_sid: bytes
    authentic: bool
    reinforce_count: int = 0
    last_reinforced: float | None = None

    @property
    def created_at(self) -> float:
        return self.hlc / 1e6


@dataclass(slots=True)
class Branch:
    branch_id: bytes
    created_by: BranchFrame  # its sealed event holds the branch's name
    head: int  # -1: no snapshot yet
    head_item: bytes = NO_ID  # the frame that set HEAD: a record's wire id or a branch event's id
    appended: int = 0  # snapshots appended on this branch: the next seq is appended + 1
    authentic: bool = True
    _view: dict[bytes, int] | None = None  # path_hash -> node idx of the visible record


_KIND_NAMES = {BranchFrame: "branch", ReinforceFrame: "reinforcement", AckFrame: "ack"}


@dataclass(slots=True)
class Damage:
    offset: int
    reason: str


@dataclass
class Lineage:
    nodes: list[Node] = field(default_factory=list)
    by_wire: dict[bytes, int] = field(default_factory=dict)
    branches: dict[bytes, Branch] = field(default_factory=dict)
    damage: list[Damage] = field(default_factory=list)
    sync_seals: int = 0  # seals under k_sync: one per record, branch and reinforce frame
    rest_seals: int = 0  # seals under k_rest: one snapshot id per record
    #: The outbox: replicable frames not yet acknowledged by the server, in journal order.
    #: id (record wire id or event id) -> (frame offset, frame size).
    pending: dict[bytes, tuple[int, int]] = field(default_factory=dict)
    outbox_bytes: int = 0
    events: set[bytes] = field(default_factory=set)  # ids of branch and reinforce events seen
    unattributed_damage: bool = False  # see unattributed()
    max_hlc: int = 0  # the newest clock value of any frame: a new frame is stamped above it

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
        elif isinstance(frame, (BranchFrame, ReinforceFrame)) and frame.event_id in self.events:
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

    def _enqueue(self, item: bytes, offset: int, size: int) -> None:
        if item not in self.pending:
            self.pending[item] = (offset, size)
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
            self.damage.append(Damage(offset, "a record frame repeats an existing snapshot"))
            return
        parent = -1
        if frame.parent_wire_id != NO_ID:
            found = self.by_wire.get(frame.parent_wire_id)
            if found is None:
                self.unattributed(offset, "a record frame names a parent that does not exist")
                return
            parent = found
        branch = self.branches.get(frame.branch_id)
        if branch is None:
            self.unattributed(offset, "a record frame names a branch that does not exist")
            return
        branch.appended += 1
        node = Node(
            idx=len(self.nodes),
            wire_id=frame.wire_id,
            parent=parent,
            branch_id=frame.branch_id,
            path_hash=frame.path_hash,
            op=frame.op,
            hlc=frame.hlc,
            offset=offset,
            size=size,
            seq=branch.appended,
            sealed_sid=frame.sealed_sid,
            authentic=authentic,
        )
        self.nodes.append(node)
        self.by_wire[frame.wire_id] = node.idx
        self._enqueue(frame.wire_id, offset, size)
        self._move_head(branch, node.idx)
        branch.head_item = frame.wire_id

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
            branch = self.branches[frame.branch_id] = Branch(frame.branch_id, frame, head, frame.event_id)
            branch._view = {} if head == -1 else None
        elif frame.reason is not BranchReason.CREATE:  # re-creating a branch (another device's main) moves nothing
            self._move_head(branch, head)
            branch.head_item = frame.event_id

    def _move_head(self, branch: Branch, idx: int) -> None:
        if idx == branch.head:
            return
        view = branch._view
        node = self.nodes[idx] if idx >= 0 else None
        if view is not None and node is not None and node.parent == branch.head:
            if node.op is Op.DELETE and node.authentic:
                view.pop(node.path_hash, None)
            else:
                view[node.path_hash] = idx
        else:
            branch._view = None  # recomputed on demand by view()
        branch.head = idx

    def chain(self, idx: int) -> list[Node]:
        """The snapshots from ``idx`` back to its genesis, newest first."""
        out: list[Node] = []
        while idx >= 0:
            node = self.nodes[idx]
            out.append(node)
            idx = node.parent
        return out

    def view(self, branch: Branch) -> dict[bytes, int]:
        """path_hash -> index of the record visible at the branch's HEAD (tombstones removed).

        A damaged frame stays visible whatever its op says (its op may be what was altered), so
        reading its path fails closed instead of showing the path as deleted.
        """
        if branch._view is None:
            seen: set[bytes] = set()
            view: dict[bytes, int] = {}
            for node in self.chain(branch.head):
                if node.path_hash in seen:
                    continue
                seen.add(node.path_hash)
                if node.op is Op.STORE or not node.authentic:
                    view[node.path_hash] = node.idx
            branch._view = view
        return branch._view

