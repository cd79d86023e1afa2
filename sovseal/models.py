"""The values sovseal returns. Plain frozen dataclasses: easy to print, compare and serialise."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

#: ``progress(done, total)``: called as long work (a backup, an index rebuild) advances; ``total`` is fixed for one run.
Progress = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class StoreResult:
    snapshot_id: str
    replicated: bool = False  # write-behind: replication happens after store returns
    reinforced: bool = False  # the value was already visible: reinforced, no new snapshot


@dataclass(frozen=True, slots=True)
class Memory:
    path: str
    payload: Any
    metadata: dict[str, Any]
    type: str
    provenance: str
    snapshot_id: str
    created_at: datetime
    reinforce_count: int = 0
    last_reinforced: datetime | None = None
    score: float | None = None  # set by recall only


@dataclass(frozen=True, slots=True)
class LogEntry:
    snapshot_id: str
    parent_id: str | None
    seq: int  # position on the branch the snapshot was appended to
    op: str  # "store" or "delete"; "erased" for a record a purge erased (its path is gone with it);
    # "damaged" for one that fails authentication (log(damaged="mark")): path "" unless another version names it
    path: str
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Version:
    """One competing write of a conflicting path: its snapshot, its value (None: a delete), its time."""

    snapshot_id: str
    payload: Any
    deleted: bool
    created_at: datetime


@dataclass(frozen=True, slots=True)
class Conflict:
    """A path written concurrently on one branch (on two devices, before either saw the other).

    ``versions`` are every competing write, newest first; ``chosen`` is the one the branch shows:
    the newest by (clock, wire id), on every device alike (docs/design.md). The next write on the
    branch merges its heads and the conflict is resolved as shown; write the path to choose another.
    """

    branch: str
    path: str
    versions: list[Version]
    chosen: str


@dataclass(frozen=True, slots=True)
class VerifyReport:
    ok: bool
    records: int  # records opened and re-derived
    branches: int
    problems: list[str] = field(default_factory=list)
    #: What recovery did when this handle opened the store (a torn tail cut, a migration): not a
    #: problem, but a verify run as the first opener must not hide it behind a bare "ok".
    repairs: list[str] = field(default_factory=list)
    #: Records erased by a purge: each checked as a skeleton named by an authentic redaction.
    erased: int = 0


@dataclass(frozen=True, slots=True)
class PurgeResult:
    """What a purge erased, and (when it compacted) what the rewrite of the journal reclaimed."""

    erased: list[str]  # the snapshot ids erased, on every branch
    compacted: bool  # the journal was rewritten: no sealed entry of them is left in it
    bytes_reclaimed: int = 0


@dataclass(frozen=True, slots=True)
class Status:
    path: str
    branch: str
    head: str | None
    branches: list[str]
    records: int  # snapshots in the lineage, all branches
    visible: int  # paths visible at this branch's HEAD
    outbox_records: int
    outbox_bytes: int
    key_backend: str
    key_id: str
    seals: dict[str, int]  # encryptions per subkey, against the random-nonce budget
    recovery: list[str]  # what opening the store repaired
    damage: list[str]  # frames that failed authentication (run verify())
    index_pending: int
    index_error: str | None
    #: Per branch: its heads' snapshot ids, newest first. One head: merged; several: a pull brought
    #: in concurrent writes that the next local write on that branch merges (see conflicts()).
    heads: dict[str, list[str | None]] = field(default_factory=dict)
    #: When the oldest item still waiting in the outbox was written (None: nothing waits): how long
    #: replication has been behind, whatever the worker's state says.
    outbox_since: datetime | None = None
