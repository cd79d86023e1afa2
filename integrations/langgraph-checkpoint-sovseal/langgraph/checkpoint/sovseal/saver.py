"""``SovsealSaver`` and ``AsyncSovsealSaver``: LangGraph checkpoints as sealed sovseal records.

The mapping (docs/integrations/langgraph.md has the long form):

- A **thread is a sovseal branch**, ``langgraph:thread:<thread id>``: its checkpoints, in every
  namespace, are records appended to it. A checkpoint's lineage parent is its LangGraph parent's
  record when that record is the branch's HEAD (the usual case in the root graph); when a subgraph
  namespace interleaved, it is the HEAD, which has the parent as an ancestor. Either way each
  checkpoint's snapshot id commits to all of the thread's history before it.
- **Time travel is a sovseal fork.** A checkpoint whose parent is not the newest of its namespace
  (replay from the past, ``update_state`` on the past, ``__copy__``, :meth:`rollback`) is stored
  with ``parent=`` that parent's snapshot: the lineage forks exactly where LangGraph's tree does.
  The abandoned future stays readable on an archive branch ``...:fork:<n>`` (a branch is the only
  way the SDK shows records that are not on a HEAD's chain). Nothing is deleted.
- **Pending writes** go to a companion branch ``...:writes``, one record per (checkpoint, task),
  so they never split the checkpoint chain.
- **Deletion is append-only**: ``delete_thread`` moves the thread's branches back to the anchor (an
  empty snapshot) with ``rollback``; ``delete_for_runs`` appends tombstones; ``prune`` re-roots the
  thread on the records it keeps. The old records stay sealed in the lineage.

The saver keeps an in-memory index (paths and snapshot ids) built from ``log()`` the first time
a thread is touched, and checks the branches' heads before every read; a write passes every head
its index knows to the store, which checks them as it appends (``store(if_heads={branch: [heads]})``),
so records written by another process, or
pulled from another device, are picked up. A thread written on two devices has, after a sync, two
heads on its branches: the index holds what both hold, the latest checkpoint is the greatest id as
always, and the next checkpoint stored goes on both heads (docs/integrations/langgraph.md, "On two
devices"). It also keeps the
payloads it opened or sealed (``_Opened``), and rechecks each one's frame on disk whenever it
returns it.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import random
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, TypeVar

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    SerializerProtocol,
    create_checkpoint,
    get_checkpoint_id,
)

from sovseal import Sovseal
from sovseal.errors import (
    HeadMovedError,
    IntegrityError,
    InvalidInputError,
    UnknownBranchError,
)

from ._common import (
    ANCHOR_BRANCH,
    RECORD_BLOB_CHARS,
    branch_heads,
    decode_blob,
    ensure_anchor,
    handle_lock,
    no_embedding,
)
from ._layout import (
    FORMAT,
    FORMATS,
    WRITES_ROOT,
    Parsed,
    archive_branch,
    check_part,
    checkpoint_path,
    inline_chars,
    join_parts,
    live_branch,
    pack_blobs,
    parse_branch,
    parse_path,
    part_path,
    thread_prefixes,
    typed,
    writes_branch,
    writes_path,
)

try:  # langgraph-checkpoint >= 2.0.?: metadata without the legacy "writes" key
    from langgraph.checkpoint.base import (
        get_serializable_checkpoint_metadata as _metadata_for,
    )
except ImportError:  # pragma: no cover - older langgraph-checkpoint
    from langgraph.checkpoint.base import get_checkpoint_metadata as _metadata_for

try:  # langgraph-checkpoint >= 4.?: DeltaChannel's snapshot blob
    from langgraph.checkpoint.serde.types import _DeltaSnapshot
except ImportError:  # pragma: no cover - no DeltaChannel before it

    class _DeltaSnapshot:  # type: ignore[no-redef]
        pass


try:
    from langgraph.checkpoint.base import writes_sort_key
except ImportError:  # pragma: no cover - langgraph-checkpoint < 4.3

    def writes_sort_key(task_path: str, task_id: str = "", idx: int = 0) -> tuple[str, str, int]:
        return (task_path, task_id, idx)


__all__ = ["AsyncSovsealSaver", "SovsealSaver", "ThreadVerification"]

_T = TypeVar("_T")
#: Checkpoints decoded per worker-thread hop when ``alist`` streams.
_LIST_BATCH = 16
#: Opened record payloads kept in memory, so re-reading a checkpoint does not decrypt it again.
_OPENED_CACHE = 512


@dataclass(frozen=True, slots=True)
class ThreadVerification:
    """What :meth:`SovsealSaver.verify` found for one thread."""

    thread_id: str
    ok: bool
    branches: list[str]  # the thread's sovseal branches (checkpoints, writes, archived futures)
    records: int  # records opened on their chains, each snapshot id re-derived from its parent
    checkpoints: int  # visible checkpoints decoded (parts and digests checked)
    writes: int  # pending-write records decoded
    problems: list[str] = field(default_factory=list)


@dataclass(slots=True)
class _Opened:
    """A record as this process opened (or sealed) it, and what reads need once it was checked.

    ``blobs`` and ``writes`` are set by the first read that checks the payload against its path:
    the inline blobs decoded (name -> typed bytes) and, for a writes record, its (idx, channel)
    pairs. Blobs stored in part records are not kept here: every read reads (and rechecks) them.
    """

    payload: Any
    blobs: dict[str, tuple[str, bytes]] | None = None
    writes: list[tuple[int, str]] | None = None


@dataclass(slots=True)
class _Ref:
    """Where a visible record can be read: its snapshot id and a branch whose HEAD shows it."""

    sid: str
    branch: str
    created: float


class _Family:
    """The index of one thread: its branches, what each shows, and what the thread holds."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.live = live_branch(thread_id)
        self.writes = writes_branch(thread_id)
        self.heads: dict[str, str | None] = {}  # branches that exist -> their HEAD as last seen
        # branches a pull left with several heads -> the heads other than HEAD (older), as last seen
        self.others: dict[str, tuple[str | None, ...]] = {}
        self.views: dict[str, dict[str, tuple[str, float]]] = {}  # branch -> path -> (sid, created)
        self.merged: dict[str, _Ref] = {}  # path -> where to read it
        self.checkpoints: dict[str, dict[str, str]] = {}  # ns -> checkpoint id -> path
        self._sorted: dict[str, list[str]] = {}  # ns -> its checkpoint ids in order (built on demand)
        self.task_writes: dict[tuple[str, str], dict[str, str]] = {}  # (ns, checkpoint id) -> task -> path
        # snapshot id -> (decoded metadata, for filters; its typed bytes, decoded again for each copy returned)
        self.metadata: dict[str, tuple[dict[str, Any], tuple[str, bytes]]] = {}

    def tips(self, branch: str) -> tuple[str | None, ...]:
        """Every head of ``branch`` as last seen, newest first (HEAD, then the others)."""
        return (self.heads.get(branch), *self.others.get(branch, ()))

    def set_head(self, branch: str, head: str | None) -> None:
        """``branch`` has this one head (after a write of ours, which goes on every head, or a move)."""
        self.heads[branch] = head
        self.others.pop(branch, None)

    def archives(self) -> list[str]:
        found = [(parse_branch(b), b) for b in self.heads]
        return [b for p, b in sorted((p, b) for p, b in found if p and p[1] == "archive")]

    def has_checkpoints(self) -> bool:
        return any(self.checkpoints.values())

    def ordered(self, ns: str) -> list[str]:
        """The namespace's checkpoint ids, oldest first (kept up to date, so the newest is O(1))."""
        found = self._sorted.get(ns)
        if found is None:
            found = self._sorted[ns] = sorted(self.checkpoints.get(ns, ()))
        return found

    def newest(self, ns: str) -> str | None:
        ids = self.ordered(ns)
        return ids[-1] if ids else None

    def _rank(self, branch: str, created: float) -> tuple[float, int]:
        return (-created, 0 if branch == self.live else 1 if branch == self.writes else 2)

    def remerge(self, path: str, parsed: Parsed | None = None) -> None:
        """Recompute where ``path`` is read from: the newest version any branch shows.

        Two branches show different versions of one path only after a checkpoint was stored again
        (same id) and the thread then forked from before that: the newer write wins. ``parsed``:
        what the path names, if the caller has it.
        """
        best: tuple[str, tuple[str, float]] | None = None
        for branch, view in self.views.items():
            found = view.get(path)
            if found is not None and (best is None or self._rank(branch, found[1]) < self._rank(best[0], best[1][1])):
                best = (branch, found)
        if parsed is None:
            parsed = parse_path(path)
        if best is None:
            self.merged.pop(path, None)
        else:
            self.merged[path] = _Ref(best[1][0], best[0], best[1][1])
        if parsed is None or parsed.kind == "part":
            return
        if parsed.kind == "checkpoint":
            index = self.checkpoints.setdefault(parsed.ns, {})
            key = parsed.checkpoint_id
        else:
            index = self.task_writes.setdefault((parsed.ns, parsed.checkpoint_id), {})
            key = parsed.task_id or ""
        if best is not None:
            if parsed.kind == "checkpoint" and key not in index and (ordered := self._sorted.get(parsed.ns)) is not None:
                if not ordered or key > ordered[-1]:
                    ordered.append(key)  # the usual case: a new checkpoint is the newest
                else:
                    bisect.insort(ordered, key)
            index[key] = path
        elif index.get(key) == path:
            del index[key]
            if parsed.kind == "checkpoint":
                self._sorted.pop(parsed.ns, None)

    def derive(self) -> None:
        self.merged.clear()
        self.checkpoints.clear()
        self._sorted.clear()
        self.task_writes.clear()
        for path in {p for view in self.views.values() for p in view}:
            self.remerge(path)
        for ns in [ns for ns, ids in self.checkpoints.items() if not ids]:
            del self.checkpoints[ns]

    def show(self, branch: str, path: str, sid: str, parsed: Parsed | None = None) -> None:
        self.views.setdefault(branch, {})[path] = (sid, time.time())
        self.remerge(path, parsed)

    def hide(self, branch: str, path: str) -> None:
        self.views.get(branch, {}).pop(path, None)
        self.remerge(path)


class _State:
    """What every copy of a saver shares (``with_allowlist`` makes shallow copies)."""

    def __init__(self, handle: Sovseal, owned: bool) -> None:
        self.handle = handle
        self.owned = owned
        self.lock = handle_lock(handle)
        with self.lock:
            self.anchor = ensure_anchor(handle)
            self.names: set[str] = set(handle.branches())
        self.families: dict[str, _Family] = {}
        # Records already opened and verified, or sealed by this saver, by snapshot id (records never
        # change, and a payload is never mutated once cached): process memory only.
        self.opened: OrderedDict[str, _Opened] = OrderedDict()
        # A view of the handle per branch (``Sovseal.view``): reads and writes on a thread's branches
        # without switching the handle's own branch back and forth.
        self.branch_views: dict[str, Sovseal] = {}
        # While a listing decodes a batch (under ``lock``): the snapshot ids of remembered records
        # it returns, rechecked together in one ``Sovseal.recheck`` call before any is handed out.
        self.deferred_rechecks: list[str] | None = None

    def branch_view(self, branch: str) -> Sovseal:
        found = self.branch_views.get(branch)
        if found is None:
            found = self.branch_views[branch] = self.handle.view(branch)
        return found

    def remember(self, sid: str, record: _Opened) -> None:
        """Keep an opened (or just sealed) record, evicting the least recently used."""
        opened = self.opened
        if sid in opened:
            opened.move_to_end(sid)
        opened[sid] = record  # a new key goes to the end
        if len(opened) > _OPENED_CACHE:
            opened.popitem(last=False)


def _names_its_path(payload: Any, path: str, kind: str) -> bool:
    """Whether a record's payload says it is the ``kind`` record (checkpoint or writes) its path names."""
    parsed = parse_path(path)
    assert parsed is not None  # nosec B101 -- type narrowing: the path was written by this saver
    return (
        isinstance(payload, dict)
        and payload.get("lg") == kind
        and payload.get("format") in FORMATS
        and payload.get("thread_id") == parsed.thread_id
        and payload.get("checkpoint_ns") == parsed.ns
        and payload.get("checkpoint_id") == parsed.checkpoint_id
        and (kind != "writes" or payload.get("task_id") == parsed.task_id)
    )


def _thread_of(config: RunnableConfig) -> str:
    conf = config.get("configurable") or {}
    thread_id = conf.get("thread_id")
    if thread_id is None or thread_id == "":
        raise ValueError('the config needs a thread id: {"configurable": {"thread_id": ...}}')
    return str(thread_id)


def _ns_of(config: RunnableConfig) -> str:
    return str((config.get("configurable") or {}).get("checkpoint_ns") or "")


class _SovsealSaverBase(BaseCheckpointSaver[str]):
    """The saver's logic; the two public classes differ in how they open and in their sync guard."""

    def __init__(self, sovseal: Sovseal, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        handle = getattr(sovseal, "sync", sovseal)  # an AsyncSovseal that exposes its sync handle
        if not isinstance(handle, Sovseal):
            raise TypeError(f"{type(self).__name__} needs a sovseal.Sovseal handle, got {type(sovseal).__name__}")
        self._s = _State(handle, owned=False)

    @property
    def sovseal(self) -> Sovseal:
        """The handle the saver writes through (share it with ``SovsealStore`` to use one lock)."""
        return self._s.handle

    def close(self) -> None:
        """Close the handle if the saver opened it (``open``); a handle you passed stays open."""
        if self._s.owned:
            self._s.handle.close()

    # -- the index ---------------------------------------------------------------------------------

    def _names(self, *, refresh: bool = False) -> set[str]:
        if refresh:
            self._s.names = set(self._s.handle.branches())
        return self._s.names

    def _exists(self, branch: str) -> bool:
        """Whether ``branch`` exists now, asked of the store by name: listing every branch of a store
        with many threads costs a name per thread (the answer joins the cached names)."""
        if branch in self._s.names:
            return True
        try:
            self._s.branch_view(branch)
        except UnknownBranchError:
            return False
        self._s.names.add(branch)
        return True

    def _load_branch(self, fam: _Family, branch: str) -> None:
        """Fold ``log()`` of a branch into the paths it shows (opens and re-derives every record).

        With several heads (a pull brought another device's writes) ``log()`` walks them all,
        newest first by the store's (clock, id) order, so the first mention of a path is the write
        the branch's merged state shows, on every device alike. The heads are read first: if
        another writer moves the branch meanwhile, the next check sees it and loads again.
        """
        h = self._s.handle
        status = h.status()
        if status.damage:  # a frame that failed authentication may hide records: refuse rather than read less
            raise IntegrityError(f"the store has damaged records ({'; '.join(status.damage[:3])}); run `sovseal verify`")
        tips = branch_heads(h, [branch], status=status)[branch]
        entries = self._s.branch_view(branch).log()
        view: dict[str, tuple[str, float]] = {}
        seen: set[str] = set()
        for entry in entries:  # newest first: the first mention of a path decides
            if entry.path in seen:
                continue
            seen.add(entry.path)
            if entry.op == "store" and parse_path(entry.path) is not None:
                view[entry.path] = (entry.snapshot_id, entry.created_at.timestamp())
        fam.set_head(branch, tips[0] if tips else (entries[0].snapshot_id if entries else None))
        if len(tips) > 1:
            fam.others[branch] = tips[1:]
        fam.views[branch] = view

    def _moved(self, fam: _Family, *branches: str) -> list[str]:
        """The branches whose heads are no longer the ones the index knows (all of them, not only HEAD:
        a pull can add a head older than HEAD)."""
        now = branch_heads(self._s.handle, branches)
        return [b for b in branches if now[b] != fam.tips(b)]

    def _refresh(self, fam: _Family, only: str | None = None) -> None:
        """Reload the branches another handle (or a pull) moved since we last looked.

        ``only`` names the one branch an operation depends on (a put reads only the live branch's
        index, a put_writes only the writes branch's): just its heads are checked, and only if they
        moved are the others. Reads check every branch of the thread.
        """
        if only is not None and only in fam.heads and not self._moved(fam, only):
            return
        if only in (None, fam.writes) and fam.writes not in fam.heads:
            self._discover_writes(fam)
        moved = self._moved(fam, *fam.heads)
        if not moved:
            return
        for branch in moved:
            self._load_branch(fam, branch)
        for name in self._names(refresh=True):
            parsed = parse_branch(name)
            if parsed and parsed[0] == fam.thread_id and name not in fam.heads:
                self._load_branch(fam, name)
        fam.metadata.clear()
        fam.derive()

    def _discover_writes(self, fam: _Family) -> None:
        """Load the thread's writes branch if another handle created it since the thread was loaded.

        It is the one branch of a thread that appears without the live branch moving (archives
        appear only with a fork, which moves it), so it is looked for by name, not by listing
        every branch of the store.
        """
        if not self._exists(fam.writes):
            return
        self._load_branch(fam, fam.writes)
        fam.derive()

    def _family(self, thread_id: str, *, create: bool = False, only: str | None = None) -> _Family | None:
        """The thread's index, fresh (``only``: see _refresh); None for a thread that never existed (unless ``create``)."""
        s = self._s
        fam = s.families.get(thread_id)
        if fam is not None:
            self._refresh(fam, only)
            return fam
        live = live_branch(thread_id)
        names = self._names()
        if live not in names and self._exists(live):  # another handle created the thread: find all its branches
            names = self._names(refresh=True)
        fam = _Family(thread_id)
        if live not in names:
            if not create:
                return None
            try:
                self._create_branch(live, s.anchor)
            except InvalidInputError:  # another process created the thread just now
                names = self._names(refresh=True)
                if live not in names:
                    raise
            else:
                fam.heads[live], fam.views[live] = s.anchor, {}
                s.families[thread_id] = fam
                return fam
        for name in names:
            parsed = parse_branch(name)
            if parsed and parsed[0] == thread_id:
                self._load_branch(fam, name)
        fam.derive()
        if fam.writes not in fam.heads:  # the cached names may predate it
            self._discover_writes(fam)
        s.families[thread_id] = fam
        return fam

    def _create_branch(self, name: str, at: str) -> None:
        self._s.handle.view(ANCHOR_BRANCH).fork(at, branch=name)  # a throwaway view moves to the new branch
        self._s.names.add(name)

    def _thread_ids(self) -> list[str]:
        out = {p[0] for name in self._names(refresh=True) if (p := parse_branch(name)) and p[1] == "live"}
        return sorted(out)

    # -- reading records -----------------------------------------------------------------------------

    def _open(self, fam: _Family, path: str) -> _Opened:
        """A visible record, opened and verified by the SDK (callers must not mutate its payload).

        A record this process opened or sealed before is kept by snapshot id; reading it again
        still calls ``Sovseal.recheck``, which re-reads the record's frame and checks its MAC, so
        bytes altered on disk under a running process raise IntegrityError here as they would
        without the cache.
        """
        ref = fam.merged.get(path)
        if ref is None:
            raise IntegrityError(f"{path} is named by a record of thread {fam.thread_id!r} but is not visible; run verify()")
        record = self._s.opened.get(ref.sid)
        if record is None:
            memory = self._s.branch_view(ref.branch).get(path)
            if memory is None or memory.snapshot_id != ref.sid:
                raise IntegrityError(
                    f"{path} on branch {ref.branch!r} is not the record the thread's index holds "
                    "(written by another process mid-operation, or the store was changed): retry, or run verify()"
                )
            record = _Opened(memory.payload)
        elif self._s.deferred_rechecks is not None:
            self._s.deferred_rechecks.append(ref.sid)  # a listing rechecks its whole batch at once
        else:
            self._s.handle.recheck(ref.sid)  # the bytes on disk are still the ones opened or sealed
        self._s.remember(ref.sid, record)
        return record

    def _read(self, fam: _Family, path: str) -> Any:
        return self._open(fam, path).payload

    def _blob(self, fam: _Family, record_path: str, name: str, descriptor: Any, record: _Opened | None = None) -> tuple[str, bytes]:
        """A blob's typed bytes: decoded once for an inline blob of a checked record, else from its parts."""
        if record is not None and record.blobs is not None and (found := record.blobs.get(name)) is not None:
            return found
        where = f"{name!r} of {record_path}"
        type_, inline = typed(descriptor, where)
        if inline:
            return type_, decode_blob(descriptor, where)
        n = descriptor["n"]
        chunks = [check_part(self._read(fam, part_path(record_path, name, i)), record_path, name, i, n) for i in range(n)]
        return type_, join_parts(descriptor, chunks, where)

    @staticmethod
    def _inline(descriptors: dict[str, Any], path: str) -> dict[str, tuple[str, bytes]]:
        """The inline blobs of a record, decoded (every descriptor is checked)."""
        out: dict[str, tuple[str, bytes]] = {}
        for name, descriptor in descriptors.items():
            where = f"{name!r} of {path}"
            type_, inline = typed(descriptor, where)
            if inline:
                out[name] = (type_, decode_blob(descriptor, where))
        return out

    def _checkpoint_record(self, fam: _Family, path: str) -> _Opened:
        record = self._open(fam, path)
        if record.blobs is not None:
            return record  # checked by an earlier read
        payload = record.payload
        if not _names_its_path(payload, path, "checkpoint") or not isinstance(payload.get("blobs"), dict):
            raise IntegrityError(f"the checkpoint record {path} does not match its path; run verify()")
        record.blobs = self._inline(payload["blobs"], path)
        return record

    def _writes_record(self, fam: _Family, path: str) -> _Opened:
        record = self._open(fam, path)
        if record.writes is not None:
            return record  # checked by an earlier read
        payload = record.payload
        if not _names_its_path(payload, path, "writes") or not isinstance(payload.get("writes"), list):
            raise IntegrityError(f"the writes record {path} does not match its path; run verify()")
        for entry in payload["writes"]:
            if not isinstance(entry, dict) or not isinstance(entry.get("idx"), int) or not isinstance(entry.get("channel"), str):
                raise IntegrityError(f"a write in {path} is malformed; run verify()")
        record.blobs = self._inline({f"w{e['idx']}": e.get("blob") for e in payload["writes"]}, path)
        record.writes = [(e["idx"], e["channel"]) for e in payload["writes"]]
        return record

    def _metadata(self, fam: _Family, path: str, record: _Opened | None = None) -> tuple[dict[str, Any], tuple[str, bytes]]:
        """The checkpoint's metadata (shared: read it, never change it) and its typed bytes."""
        sid = fam.merged[path].sid
        cached = fam.metadata.get(sid)
        if cached is None:
            if record is None:
                record = self._checkpoint_record(fam, path)
            typed_ = self._blob(fam, path, "metadata", record.payload["blobs"].get("metadata"), record)
            decoded = self.serde.loads_typed(typed_)
            if not isinstance(decoded, dict):
                raise IntegrityError(f"the metadata of {path} is not a mapping; run verify()")
            cached = fam.metadata[sid] = (decoded, typed_)
        return cached

    def _pending_writes(self, fam: _Family, ns: str, checkpoint_id: str) -> list[tuple[str, str, Any]]:
        keyed: list[tuple[tuple[str, str, int], tuple[str, str, Any]]] = []
        for task_id, path in fam.task_writes.get((ns, checkpoint_id), {}).items():
            record = self._writes_record(fam, path)
            payload = record.payload
            task_path = payload.get("task_path") or ""
            for entry, (idx, channel) in zip(payload["writes"], record.writes or (), strict=True):
                value = self.serde.loads_typed(self._blob(fam, path, f"w{idx}", entry.get("blob"), record))
                keyed.append((writes_sort_key(task_path, task_id, idx), (task_id, channel, value)))
        if len(keyed) > 1:
            keyed.sort(key=lambda item: item[0])
        return [write for _, write in keyed]

    def _tuple(
        self, fam: _Family, thread_id: str, ns: str, checkpoint_id: str, *, filter: dict[str, Any] | None = None
    ) -> CheckpointTuple | None:
        path = fam.checkpoints.get(ns, {}).get(checkpoint_id)
        if path is None:
            return None
        record = self._checkpoint_record(fam, path)
        payload = record.payload
        metadata, metadata_typed = self._metadata(fam, path, record)
        if filter and not all(metadata.get(k) == v for k, v in filter.items()):
            return None
        checkpoint = self.serde.loads_typed(self._blob(fam, path, "checkpoint", payload["blobs"].get("checkpoint"), record))
        if not isinstance(checkpoint, dict) or checkpoint.get("id") != checkpoint_id:
            raise IntegrityError(f"the checkpoint in {path} is not checkpoint {checkpoint_id}; run verify()")
        parent_id = payload.get("parent_checkpoint_id")
        return CheckpointTuple(
            config={"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}},
            checkpoint=checkpoint,  # type: ignore[arg-type]
            metadata=self.serde.loads_typed(metadata_typed),  # the caller's own copy
            parent_config=(
                {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": parent_id}} if parent_id else None
            ),
            pending_writes=self._pending_writes(fam, ns, checkpoint_id),
        )

    # -- writing records -----------------------------------------------------------------------------

    def _append(
        self,
        fam: _Family,
        branch: str,
        records: list[tuple[str, Any]],
        *,
        parent: str | None = None,
        if_heads: dict[str, list[str]] | None = None,
        parsed: Parsed | None = None,
    ) -> None:
        """Store records in order on ``branch`` (the first one with ``parent=``) and index them.

        Several records go in one ``store_many`` call, one durable batch (a crash keeps a prefix,
        and parts come before the record that names them); a single record (the usual put or
        put_writes) and a fork's first record, which needs ``parent=``, go through ``store``, which
        costs less for one. Records carry no sovseal metadata: their path and payload say what they
        are, and they are never recalled. What was sealed is remembered as opened: the next read
        rechecks the frame on disk instead of decrypting it again. ``if_heads`` (one record only) is
        passed to ``store``: HeadMovedError, with nothing stored, if one of those branches' heads are
        not exactly the ones listed. ``parsed``: what the last record's path names, if the caller
        built the path (spares parsing it again).
        """
        if if_heads is not None and len(records) != 1:
            raise ValueError("if_heads applies to a single record")
        view = self._s.branch_view(branch)
        if len(records) == 1:  # the usual put or put_writes: one store call, no item mappings
            path, payload = records[0]
            # index=False: checkpoints are never recalled by meaning (no embedding, no keywords)
            result = view.store(
                path, payload, type="episodic", provenance="observed", index=False, parent=parent, if_heads=if_heads
            )
            if not result.reinforced:  # the record went on every head of the branch: it is the one head now
                fam.set_head(branch, result.snapshot_id)
            fam.show(branch, path, result.snapshot_id, parsed)
            self._s.remember(result.snapshot_id, _Opened(payload))
            return
        items = [{"path": p, "payload": d, "type": "episodic", "provenance": "observed", "index": False} for p, d in records]
        results = []
        if items and parent is not None:
            results.append(view.store(**items.pop(0), parent=parent))
        if items:
            results.extend(view.store_many(items))
        for (path, payload), result in zip(records, results, strict=True):
            if not result.reinforced:  # the record went on every head of the branch: it is the one head now
                fam.set_head(branch, result.snapshot_id)
            fam.show(branch, path, result.snapshot_id, parsed if path == records[-1][0] else None)
            self._s.remember(result.snapshot_id, _Opened(payload))

    def _archive_live(self, fam: _Family) -> None:
        """Keep the live branch's records readable on archive branches before its HEAD moves back.

        One archive per head: a live branch that a pull left with two heads (the thread was written
        on two devices) keeps both sides readable.
        """
        if not fam.views.get(fam.live):
            return
        tips = [t for t in fam.tips(fam.live) if t is not None and t != self._s.anchor]
        archives = fam.archives()
        archived = {t for b in archives for t in fam.tips(b)}
        n = max((parse_branch(b) or ("", "", 0))[2] for b in archives) if archives else 0
        for head in tips:
            if head in archived:
                continue
            while True:
                n += 1
                name = archive_branch(fam.thread_id, n)
                if name in self._names():
                    continue
                try:
                    self._create_branch(name, head)
                except InvalidInputError:
                    self._names(refresh=True)
                    continue
                break
            if len(tips) == 1:
                fam.set_head(name, head)
                fam.views[name] = dict(fam.views[fam.live])
            else:  # each archive shows what its head holds, a part of the live branch's view
                self._load_branch(fam, name)

    def _fork_store(self, fam: _Family, parent_sid: str, records: list[tuple[str, Any]]) -> None:
        """Store records on the live branch as a fork at ``parent_sid`` (time travel)."""
        before = {p for b, view in fam.views.items() if b != fam.writes for p in view}
        self._archive_live(fam)
        self._append(fam, fam.live, records, parent=parent_sid)
        self._load_branch(fam, fam.live)
        # A record deleted (tombstoned) after the fork point is visible again at the fork: delete it again.
        written = {p for p, _ in records}
        revived = [p for p in fam.views[fam.live] if p not in before and p not in written]
        if revived:
            live = self._s.branch_view(fam.live)
            for path in revived:
                live.delete(path)
            self._load_branch(fam, fam.live)
        fam.derive()

    def _ensure_writes_branch(self, fam: _Family) -> None:
        if fam.writes not in fam.heads:
            if self._exists(fam.writes):
                self._load_branch(fam, fam.writes)
                fam.derive()
            else:
                try:
                    self._create_branch(fam.writes, self._s.anchor)
                except InvalidInputError:  # another process created it just now
                    self._names(refresh=True)
                    self._load_branch(fam, fam.writes)
                    fam.derive()
                else:
                    fam.heads[fam.writes], fam.views[fam.writes] = self._s.anchor, {}

    def _empty(self, fam: _Family) -> None:
        """Move every branch of the thread back to the anchor: nothing visible, nothing deleted."""
        anchor = self._s.anchor
        for branch in list(fam.heads):
            if fam.tips(branch) != (anchor,):  # a rollback replaces every head of the branch
                self._s.branch_view(branch).rollback(anchor)
            fam.set_head(branch, anchor)
            fam.views[branch] = {}
        fam.metadata.clear()
        fam.derive()

    def _hide_everywhere(self, fam: _Family, paths: list[str]) -> None:
        """Append a tombstone for each path on every branch of the thread that shows it."""
        for branch, view in fam.views.items():
            doomed = [p for p in paths if p in view]
            if not doomed:
                continue
            handle = self._s.branch_view(branch)
            for path in doomed:
                result = handle.delete(path)
                if result is not None:
                    fam.set_head(branch, result.snapshot_id)
                view.pop(path, None)
        for path in paths:
            fam.remerge(path)
        for ns in [ns for ns, ids in fam.checkpoints.items() if not ids]:
            del fam.checkpoints[ns]

    def _record_paths(self, fam: _Family, ns: str, checkpoint_id: str) -> list[str]:
        """The checkpoint's record, its parts, its writes records and their parts (what to delete)."""
        roots: list[str] = []
        if (path := fam.checkpoints.get(ns, {}).get(checkpoint_id)) is not None:
            roots.append(path)
        roots.extend(fam.task_writes.get((ns, checkpoint_id), {}).values())
        visible = {p for view in fam.views.values() for p in view}
        return [p for root in roots for p in visible if p == root or p.startswith(root + "/part/")]

    # -- BaseCheckpointSaver ---------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        self._guard()
        thread_id, ns = _thread_of(config), _ns_of(config)
        with self._s.lock:
            fam = self._family(thread_id)
            if fam is None:
                return None
            ids = fam.checkpoints.get(ns)
            if not ids:
                return None
            checkpoint_id = get_checkpoint_id(config) or fam.newest(ns)
            assert checkpoint_id is not None  # nosec B101 -- type narrowing: ids is not empty
            # The checkpoint's record and its writes records, if remembered, are rechecked in one call.
            return self._rechecked(lambda: self._tuple(fam, thread_id, ns, checkpoint_id))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        self._guard()
        remaining = limit
        candidates = self._listing(config, before, None if filter else limit)
        start = 0
        while start < len(candidates):
            if remaining is not None and remaining <= 0:
                return
            size = _LIST_BATCH if filter or remaining is None else min(_LIST_BATCH, remaining)
            batch = self._listed_batch(candidates[start : start + size], filter)
            start += size
            for found in batch:
                if found is not None:
                    if remaining is not None:
                        if remaining <= 0:
                            return
                        remaining -= 1
                    yield found

    def _listing(
        self, config: RunnableConfig | None, before: RunnableConfig | None, cap: int | None = None
    ) -> list[tuple[str, str, str]]:
        """(thread, ns, checkpoint id) of the candidates, newest checkpoint id first; at most ``cap``
        (when no filter can drop one) from each namespace, which is all a ``limit`` can return."""
        ns_wanted: str | None = None
        id_wanted: str | None = None
        with self._s.lock:
            if config:
                threads = [_thread_of(config)]
                ns_wanted = (config.get("configurable") or {}).get("checkpoint_ns")
                id_wanted = get_checkpoint_id(config)
            else:
                threads = self._thread_ids()
            before_id = get_checkpoint_id(before) if before else None
            out: list[tuple[str, str, str]] = []
            for thread_id in threads:
                fam = self._family(thread_id)
                if fam is None:
                    continue
                for ns, ids in fam.checkpoints.items():
                    if ns_wanted is not None and ns != ns_wanted:
                        continue
                    if id_wanted:
                        if id_wanted in ids and not (before_id and id_wanted >= before_id):
                            out.append((id_wanted, thread_id, ns))
                        continue
                    ordered = fam.ordered(ns)
                    end = bisect.bisect_left(ordered, before_id) if before_id else len(ordered)
                    start = max(0, end - cap) if cap is not None else 0
                    out.extend((checkpoint_id, thread_id, ns) for checkpoint_id in ordered[start:end])
        out.sort(reverse=True)
        return [(thread_id, ns, checkpoint_id) for checkpoint_id, thread_id, ns in out]

    def _rechecked(self, decode: Callable[[], _T]) -> _T:
        """``decode()`` with the remembered records it reads rechecked together, in one
        ``Sovseal.recheck`` call, before anything it decoded is returned (caller holds the lock)."""
        s = self._s
        if s.deferred_rechecks is not None:  # already inside a batch: it rechecks these too
            return decode()
        s.deferred_rechecks = []
        try:
            decoded = decode()
            sids = s.deferred_rechecks
        finally:
            s.deferred_rechecks = None
        if sids:
            s.handle.recheck(*sids)
        return decoded

    def _listed_batch(self, candidates: list[tuple[str, str, str]], filter: dict[str, Any] | None) -> list[CheckpointTuple | None]:
        """Decode a batch of listed checkpoints; the records they came from are rechecked in one call."""
        with self._s.lock:
            return self._rechecked(lambda: [self._listed(*c, filter) for c in candidates])

    def _listed(self, thread_id: str, ns: str, checkpoint_id: str, filter: dict[str, Any] | None) -> CheckpointTuple | None:
        with self._s.lock:
            fam = self._s.families.get(thread_id)
            if fam is None:
                return None
            return self._tuple(fam, thread_id, ns, checkpoint_id, filter=filter)

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        self._guard()
        thread_id, ns = _thread_of(config), _ns_of(config)
        parent_id = get_checkpoint_id(config)
        checkpoint_id = checkpoint["id"]
        blobs = {
            "checkpoint": self.serde.dumps_typed(checkpoint),
            "metadata": self.serde.dumps_typed(_metadata_for(config, metadata)),
        }
        # Encoded before the lock, so this runs while another operation of the handle waits on the disk.
        new_path = checkpoint_path(thread_id, ns, checkpoint_id)
        packed = pack_blobs(new_path, blobs)
        with self._s.lock:
            fam = self._s.families.get(thread_id)
            if fam is None or fam.live not in fam.heads:
                fam = self._family(thread_id, create=True, only=live_branch(thread_id))
                assert fam is not None  # nosec B101 -- type narrowing: create=True always returns a family
                self._put_record(fam, ns, checkpoint_id, parent_id, blobs, new_path, packed, fresh=True)
            elif not self._put_record(fam, ns, checkpoint_id, parent_id, blobs, new_path, packed, fresh=False):
                self._refresh(fam, only=fam.live)
                self._put_record(fam, ns, checkpoint_id, parent_id, blobs, new_path, packed, fresh=True)
        return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}

    def _put_record(
        self,
        fam: _Family,
        ns: str,
        checkpoint_id: str,
        parent_id: str | None,
        blobs: dict[str, tuple[str, bytes]],
        new_path: str,
        packed: tuple[dict[str, dict[str, Any]], list[tuple[str, dict[str, Any]]]],
        *,
        fresh: bool,
    ) -> bool:
        """Store a checkpoint's record (and its parts) as the thread's index places it; caller holds the lock.

        ``fresh``: the index was just checked against the live branch's heads. Otherwise the usual
        put, one record appended to the live branch, is stored at once with ``if_heads`` listing
        every head the index knows for the branch (the store checks, under its writer lock, that the
        branch's heads are exactly those, so a pull that added one older than HEAD is caught too,
        with no separate read of the heads); it returns False, having stored nothing, if the heads
        moved or if the put forks or has parts, which act on more of the index: the caller
        refreshes the index and calls again.

        A checkpoint whose parent is one of the live branch's heads, or the namespace's newest,
        goes on every head (after a sync that merges what two devices wrote); one whose parent is
        further back forks the branch there (time travel), each head kept on an archive branch.
        """
        ids = fam.checkpoints.get(ns, {})
        existing = ids.get(checkpoint_id)
        path = existing or new_path
        # A new path names this thread; one already stored may name another (copy_thread keeps paths).
        parsed = Parsed("checkpoint", fam.thread_id, ns, checkpoint_id) if existing is None else parse_path(existing)
        assert parsed is not None  # nosec B101 -- type narrowing: the index holds only the saver's paths
        parent_ref = fam.merged.get(ids[parent_id]) if parent_id and parent_id in ids else None
        descriptors, parts = packed
        if parts and path != new_path:  # parts name the record they belong to
            descriptors, parts = pack_blobs(path, blobs)
        payload = {
            "lg": "checkpoint",
            "format": FORMAT,
            "thread_id": parsed.thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
            "parent_checkpoint_id": parent_id,
            "parent_snapshot": parent_ref.sid if parent_ref else None,
            "blobs": descriptors,
        }
        records = [*parts, (path, payload)]
        conditions: dict[str, list[str]] | None = None
        if not fresh:
            tips = fam.tips(fam.live)
            if parts or None in tips:
                return False
            conditions = {fam.live: list(tips)}  # every head, as the index knows them: the store checks them all
        forks = (
            parent_ref is not None
            and existing is None
            and parent_id != fam.newest(ns)
            and parent_ref.sid not in fam.tips(fam.live)
        )
        if forks and not fresh:
            return False
        if forks:
            assert parent_ref is not None  # nosec B101 -- type narrowing: forks is true only with a parent
            self._fork_store(fam, parent_ref.sid, records)
            return True
        try:
            self._append(fam, fam.live, records, if_heads=conditions, parsed=parsed)
        except HeadMovedError:
            return False
        return True

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        self._guard()
        thread_id, ns = _thread_of(config), _ns_of(config)
        checkpoint_id = get_checkpoint_id(config)
        if not checkpoint_id:
            raise ValueError("put_writes needs the config of a checkpoint (configurable.checkpoint_id)")
        incoming: dict[int, tuple[str, tuple[str, bytes]]] = {}
        for idx, (channel, value) in enumerate(writes):
            incoming[WRITES_IDX_MAP.get(channel, idx)] = (channel, self.serde.dumps_typed(value))
        # Packed before the lock for the usual case, a task's first writes (no record to merge with),
        # so this runs while another operation of the handle waits on the disk.
        new_path = writes_path(thread_id, ns, checkpoint_id, task_id)
        first_pack = pack_blobs(new_path, {f"w{k}": typed_value for k, (_, typed_value) in incoming.items()})
        with self._s.lock:
            fam = self._s.families.get(thread_id)
            args = (ns, checkpoint_id, task_id, task_path, incoming, new_path, first_pack)
            if fam is None or fam.writes not in fam.heads:
                fam = self._family(thread_id, create=True, only=writes_branch(thread_id))
                assert fam is not None  # nosec B101 -- type narrowing: create=True always returns a family
                self._ensure_writes_branch(fam)
                self._put_writes_record(fam, *args, fresh=True)
            elif not self._put_writes_record(fam, *args, fresh=False):
                self._refresh(fam, only=fam.writes)
                self._put_writes_record(fam, *args, fresh=True)

    def _put_writes_record(
        self,
        fam: _Family,
        ns: str,
        checkpoint_id: str,
        task_id: str,
        task_path: str,
        incoming: dict[int, tuple[str, tuple[str, bytes]]],
        new_path: str,
        first_pack: tuple[dict[str, dict[str, Any]], list[tuple[str, dict[str, Any]]]],
        *,
        fresh: bool,
    ) -> bool:
        """Store a task's pending writes (merged into its record, if it has one); caller holds the lock.

        ``fresh`` as for :meth:`_put_record`: otherwise a task's first writes, one record, are stored
        with ``if_heads`` listing the writes branch's heads as the index knows them (and the live
        branch's, when the checkpoint
        is not in the index: the store then checks that no other handle has stored it meanwhile);
        merging into a stored record reads it, and parts act on more of the index, so those return
        False (nothing stored) for a refreshed index first.
        """
        existing = fam.task_writes.get((ns, checkpoint_id), {}).get(task_id)
        path = existing or new_path
        # A new path names this thread; one already stored may name another (copy_thread keeps paths).
        parsed = Parsed("writes", fam.thread_id, ns, checkpoint_id, task_id) if existing is None else parse_path(existing)
        assert parsed is not None  # nosec B101 -- type narrowing: the index holds only the saver's paths
        conditions: dict[str, list[str]] | None = None
        if not fresh:
            tips = fam.tips(fam.writes)  # as the index knows them
            if path in fam.merged or None in tips:
                return False
            conditions = {fam.writes: list(tips)}
        record = self._writes_record(fam, path) if path in fam.merged else None
        current = record.payload if record is not None else None
        entries: dict[int, dict[str, Any]] = {}
        fresh_writes = incoming  # a task's first writes: all of them
        if record is not None:  # merged into the stored ones; an upsert of the value already stored changes nothing
            assert current is not None  # nosec B101 -- type narrowing: a record has a payload
            entries = {e["idx"]: e for e in current["writes"]}
            fresh_writes = {
                k: v
                for k, v in incoming.items()
                if k not in entries or (k < 0 and not self._same(fam, path, record, entries[k], *v))
            }
        if not fresh_writes:
            return True
        if record is None and path == new_path:  # nothing to merge: what was packed before the lock
            descriptors, parts = first_pack
        else:
            budget = RECORD_BLOB_CHARS - sum(inline_chars(e.get("blob", {})) for k, e in entries.items() if k not in fresh_writes)
            descriptors, parts = pack_blobs(path, {f"w{k}": typed_value for k, (_, typed_value) in fresh_writes.items()}, budget)
        if not fresh and parts:
            return False
        for k, (channel, _) in fresh_writes.items():
            entries[k] = {"idx": k, "channel": channel, "blob": descriptors[f"w{k}"]}
        cp_path = fam.checkpoints.get(ns, {}).get(checkpoint_id)
        if cp_path is None:
            # Not stored yet (its put may be waiting for this lock), or stored by another handle: then
            # on the live branch, whose HEAD moved (archives appear only with a fork, which moves it
            # too). A fresh index looks now; otherwise the store checks the live HEAD as it appends.
            live_tips = fam.tips(fam.live)
            if conditions is not None and None not in live_tips:
                conditions[fam.live] = list(live_tips)
            else:
                self._refresh(fam, only=fam.live)
                cp_path = fam.checkpoints.get(ns, {}).get(checkpoint_id)
        payload = {
            "lg": "writes",
            "format": FORMAT,
            "thread_id": parsed.thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
            "task_id": task_id,
            "task_path": task_path or (current or {}).get("task_path") or "",
            "checkpoint_snapshot": fam.merged[cp_path].sid if cp_path else None,
            "writes": [entries[k] for k in sorted(entries)],
        }
        try:
            self._append(fam, fam.writes, [*parts, (path, payload)], if_heads=conditions, parsed=parsed)
        except HeadMovedError:
            return False
        return True

    def _same(self, fam: _Family, path: str, record: _Opened, entry: dict[str, Any], channel: str, value: tuple[str, bytes]) -> bool:
        return entry.get("channel") == channel and self._blob(fam, path, f"w{entry['idx']}", entry.get("blob"), record) == value

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread, and erase its records for good: nothing reads them any more, their bytes
        leave the disk at the next compaction, and with replication the server and every other device
        erase them too (docs/integrations/langgraph.md, "Deleting and erasing").

        Its branches go back to the anchor, then every record under the thread's paths that no
        branch reaches any more is purged. Records another thread still reaches (it was made with
        ``copy_thread``, which shares them) stay until that thread lets them go too.
        """
        self._guard()
        with self._s.lock:
            fam = self._family(str(thread_id))
            if fam is not None:
                threads = self._threads_shown(fam)
                self._empty(fam)
                self._erase_unreachable(threads)

    def _threads_shown(self, fam: _Family) -> set[str]:
        """The thread and every thread whose records it shows (a ``copy_thread`` shares its source's)."""
        shown = {fam.thread_id}
        for view in fam.views.values():
            for path in view:
                parsed = parse_path(path)
                if parsed is not None:
                    shown.add(parsed.thread_id)
        return shown

    def _erase_unreachable(self, threads: set[str]) -> None:
        """Purge the records under these threads' paths that no branch reaches any more (the caller
        holds the lock). Records another thread still reaches stay. Their bytes leave the disk at the
        next compaction (``sovseal.compact()``, or by itself past the threshold): rewriting the
        journal on every delete would make each one cost the whole store."""
        prefixes = [p for t in sorted(threads) for p in thread_prefixes(t)]
        self._s.handle.purge(prefix=prefixes, unreachable=True, reason="langgraph delete_thread", compact=False)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._guard()
        wanted = {str(r) for r in run_ids}
        if not wanted:
            return
        with self._s.lock:
            for thread_id in self._thread_ids():
                fam = self._family(thread_id)
                if fam is None:
                    continue
                doomed: list[str] = []
                for ns, ids in list(fam.checkpoints.items()):
                    for checkpoint_id, path in list(ids.items()):
                        run_id = self._metadata(fam, path)[0].get("run_id")
                        if run_id is not None and str(run_id) in wanted:
                            doomed.extend(self._record_paths(fam, ns, checkpoint_id))
                if doomed:
                    self._hide_everywhere(fam, doomed)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Give the target thread the source's whole history, sharing its records (no bytes copied).

        Each of the source's branches is forked (or, for a target branch left empty by
        ``delete_thread``, rolled forward) at the same snapshot, so the target holds the same
        checkpoint ids, metadata, namespaces and writes, and every record keeps the path it was
        written under. A source branch that a pull left with several heads is forked at its HEAD,
        and each other head goes to an archive branch of the target. A target that already has
        checkpoints is refused.
        """
        self._guard()
        source, target = str(source_thread_id), str(target_thread_id)
        if source == target:
            return
        with self._s.lock:
            src = self._family(source)
            if src is None or not src.has_checkpoints():
                return
            dst = self._family(target)
            if dst is not None and dst.has_checkpoints():
                raise ValueError(f"thread {target!r} already has checkpoints; delete_thread() it first or copy to a new thread")
            dst = dst or _Family(target)
            names = self._names(refresh=True)
            used = [parse_branch(n)[2] for n in names if (p := parse_branch(n)) and p[0] == target and p[1] == "archive"]  # type: ignore[index]
            next_archive = max(used, default=0)
            for branch, head in list(src.heads.items()):
                kind = (parse_branch(branch) or ("", "", 0))[1]
                others = [t for t in src.others.get(branch, ()) if t is not None and t != self._s.anchor]
                if kind == "live":
                    to = dst.live
                elif kind == "writes":
                    to = dst.writes
                elif head is None or head == self._s.anchor:
                    to = None
                else:
                    next_archive += 1
                    to = archive_branch(target, next_archive)
                if to is not None:
                    at = head or self._s.anchor
                    if to in names:
                        self._s.branch_view(to).rollback(at)
                    else:
                        self._create_branch(to, at)
                    dst.set_head(to, at)
                    if others:  # the source's view is the merge of its heads; this branch shows one
                        self._load_branch(dst, to)
                    else:
                        dst.views[to] = dict(src.views.get(branch, {}))
                for other in others:
                    next_archive += 1
                    name = archive_branch(target, next_archive)
                    self._create_branch(name, other)
                    self._load_branch(dst, name)
            if dst.live not in dst.heads:
                self._create_branch(dst.live, self._s.anchor)
                dst.set_head(dst.live, self._s.anchor)
                dst.views[dst.live] = {}
            dst.metadata = dict(src.metadata)
            dst.derive()
            self._s.families[target] = dst

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``"delete"``: as ``delete_thread``. ``"keep_latest"``: keep the newest checkpoint per namespace,
        and the ancestors its ``DeltaChannel`` values are rebuilt from.

        A ``DeltaChannel`` (beta) stores its value only every ``snapshot_frequency`` updates; in
        between, LangGraph rebuilds it by walking the parent chain back to the nearest checkpoint
        that holds a value for it, replaying the pending writes on the way
        (``get_delta_channel_history``). So, as ``BaseCheckpointSaver.prune`` asks, the newest
        checkpoint keeps every ancestor (with its pending writes) back to that one, for each delta
        channel it does not hold (all of them up to the root if the channel never snapshotted).
        The saver cannot rebuild a value itself: the reducer lives in the graph, not in the store.

        Keeping re-roots the thread: its branches move back to the anchor and the kept checkpoints
        (with their parts and pending writes, oldest first) are stored again on top of it, so the
        thread's chain is short again. The checkpoints let go are then erased for good, as
        ``delete_thread`` erases (those another thread still reaches stay).
        """
        self._guard()
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}; use 'keep_latest' or 'delete'")
        for thread_id in map(str, thread_ids):
            with self._s.lock:
                fam = self._family(thread_id)
                if fam is None:
                    continue
                threads = self._threads_shown(fam)
                if strategy == "delete":
                    self._empty(fam)
                    self._erase_unreachable(threads)
                    continue
                kept_live: list[tuple[str, Any]] = []
                kept_writes: list[tuple[str, Any]] = []
                for ns, ids in fam.checkpoints.items():
                    if not ids:
                        continue
                    for checkpoint_id in self._delta_chain(fam, ns, fam.ordered(ns)[-1]):
                        # parts first: a record is stored after the parts it names
                        for path in sorted(self._record_paths(fam, ns, checkpoint_id), key=lambda p: ("/part/" not in p, p)):
                            into = kept_writes if path.startswith(WRITES_ROOT) else kept_live
                            into.append((path, self._read(fam, path)))
                total = sum(len(v) for v in fam.views.values())
                if total == len(kept_live) + len(kept_writes) and not any(fam.views.get(b) for b in fam.archives()):
                    continue  # nothing to drop
                self._empty(fam)
                if kept_live:
                    self._append(fam, fam.live, kept_live)
                if kept_writes:
                    for i, (path, payload) in enumerate(kept_writes):
                        if isinstance(payload, dict) and payload.get("lg") == "writes":  # a copy: read payloads are shared
                            cp = fam.checkpoints.get(payload["checkpoint_ns"], {}).get(payload["checkpoint_id"])
                            kept_writes[i] = (path, {**payload, "checkpoint_snapshot": fam.merged[cp].sid if cp else None})
                    self._append(fam, fam.writes, kept_writes)
                self._erase_unreachable(threads)  # the checkpoints the re-root let go

    def _decoded(self, fam: _Family, path: str) -> tuple[dict[str, Any], str | None]:
        """A stored checkpoint, decoded, and its parent's checkpoint id."""
        record = self._checkpoint_record(fam, path)
        payload = record.payload
        checkpoint = self.serde.loads_typed(self._blob(fam, path, "checkpoint", payload["blobs"].get("checkpoint"), record))
        if not isinstance(checkpoint, dict):
            raise IntegrityError(f"the checkpoint in {path} is not a checkpoint; run verify()")
        return checkpoint, payload.get("parent_checkpoint_id")

    def _delta_chain(self, fam: _Family, ns: str, checkpoint_id: str) -> list[str]:
        """The checkpoint ids ``prune`` keeps for ``checkpoint_id``, oldest first: it, and the ancestors
        (on its parent chain) that ``get_delta_channel_history`` reads to rebuild its delta channels.

        A delta channel needs the walk when the checkpoint has a version for it but no value; which
        channels are delta channels is known from the metadata (``counters_since_delta_snapshot``)
        and from any ancestor that holds a ``_DeltaSnapshot`` for it (channels such as
        ``branch:to:node`` also have a version and no value, and need no walk). Each such channel
        keeps the ancestors back to the nearest one holding a value for it (the seed, whose own
        writes produce its child, so they are kept too), or back to the root if there is none.
        """
        ids = fam.checkpoints.get(ns, {})
        checkpoint, parent = self._decoded(fam, ids[checkpoint_id])
        values = checkpoint.get("channel_values") or {}
        missing = {k for k in checkpoint.get("channel_versions") or {} if k not in values}
        if not missing or parent not in ids:
            return [checkpoint_id]
        counted = set(self._metadata(fam, ids[checkpoint_id])[0].get("counters_since_delta_snapshot") or {})
        ancestors: list[tuple[str, dict[str, Any]]] = []
        seen = {checkpoint_id}
        while parent in ids and parent not in seen:  # a cycle cannot be written, but never loop on one
            seen.add(parent)
            ancestor, grandparent = self._decoded(fam, ids[parent])
            ancestors.append((parent, ancestor.get("channel_values") or {}))
            parent = grandparent
        delta = counted | {k for _, vals in ancestors for k in missing if isinstance(vals.get(k), _DeltaSnapshot)}
        remaining = missing & delta
        keep = 0
        for i, (_, vals) in enumerate(ancestors):
            if not remaining:
                break
            keep = i + 1
            remaining = {k for k in remaining if k not in vals}
        return [cid for cid, _ in reversed(ancestors[:keep])] + [checkpoint_id]

    def get_next_version(self, current: str | None, channel: None) -> str:
        if current is None:
            current_v = 0
        elif isinstance(current, int):
            current_v = current
        else:
            current_v = int(str(current).split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"  # nosec B311 -- a tie-breaker as in langgraph's InMemorySaver, not a secret

    # -- time travel and integrity -------------------------------------------------------------------

    def rollback(self, config: RunnableConfig) -> RunnableConfig:
        """Append a copy of a past checkpoint as the thread's new head, as ``update_state(cfg, None,
        as_node="__copy__")`` does: same values, same parent, ``metadata.source == "fork"`` and a
        fresh id newer than every other. Nothing is deleted; the returned config is the copy's.
        """
        self._guard()
        if not get_checkpoint_id(config):
            raise ValueError("rollback needs the config of a past checkpoint (configurable.checkpoint_id)")
        past = self.get_tuple(config)
        if past is None:
            raise ValueError(f"no checkpoint {get_checkpoint_id(config)!r} in thread {_thread_of(config)!r}")
        step = past.metadata.get("step", -1)
        latest = self.get_tuple({"configurable": {**past.config["configurable"], "checkpoint_id": None}})
        newest = latest.checkpoint["id"] if latest else ""
        copy_ = create_checkpoint(past.checkpoint, None, step)
        while copy_["id"] <= newest:  # a clock that went backwards: uuid6 ids must still grow
            time.sleep(0.001)
            copy_ = create_checkpoint(past.checkpoint, None, step)
        metadata: dict[str, Any] = {"source": "fork", "step": step + 1, "parents": past.metadata.get("parents", {})}
        if "counters_since_delta_snapshot" in past.metadata:
            metadata["counters_since_delta_snapshot"] = past.metadata["counters_since_delta_snapshot"]
        parent = past.parent_config or {"configurable": {k: v for k, v in past.config["configurable"].items() if k != "checkpoint_id"}}
        return self.put(parent, copy_, metadata, {})  # type: ignore[arg-type]

    def verify(self, thread_id: str) -> ThreadVerification:
        """Check a thread's chains: open every record on each of its branches (re-deriving every
        snapshot id from its parent's), then decode every visible checkpoint and write."""
        self._guard()
        thread_id = str(thread_id)
        problems: list[str] = []
        records = checkpoints = writes = 0
        h = self._s.handle
        with self._s.lock:
            try:
                fam = self._family(thread_id)
            except IntegrityError as exc:  # a record on the thread's chains failed to open
                self._s.families.pop(thread_id, None)
                branches = sorted(n for n in self._names(refresh=True) if (p := parse_branch(n)) and p[0] == thread_id)
                return ThreadVerification(thread_id, False, branches, 0, 0, 0, [str(exc)])
            if fam is None:
                return ThreadVerification(thread_id, False, [], 0, 0, 0, [f"no thread {thread_id!r} in this store"])
            branches = sorted(fam.heads)
            for branch in branches:
                try:
                    records += len(self._s.branch_view(branch).log())
                except IntegrityError as exc:
                    problems.append(f"branch {branch}: {exc}")
            for ns, ids in fam.checkpoints.items():
                for checkpoint_id in ids:
                    try:
                        if self._tuple(fam, thread_id, ns, checkpoint_id) is not None:
                            checkpoints += 1
                        writes += len(fam.task_writes.get((ns, checkpoint_id), {}))
                    except Exception as exc:  # noqa: BLE001 - every failure is a finding
                        problems.append(f"checkpoint {ns!r}/{checkpoint_id}: {exc}")
            problems.extend(f"store: {d}" for d in h.status().damage)
        return ThreadVerification(thread_id, not problems, branches, records, checkpoints, writes, problems)

    # -- async: each operation runs whole in one worker thread ------------------------------------------

    async def _run(self, fn: Callable[..., _T], *args: Any, **kwargs: Any) -> _T:
        return await asyncio.to_thread(fn, *args, **kwargs)

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await self._run(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        remaining = limit
        candidates: list[tuple[str, str, str]] | None = None
        start = 0

        def hop() -> tuple[list[tuple[str, str, str]], list[CheckpointTuple | None]]:
            """One worker-thread hop: the candidates (on the first) and the next batch decoded."""
            found = candidates if candidates is not None else self._listing(config, before, None if filter else limit)
            size = _LIST_BATCH if filter or remaining is None else min(_LIST_BATCH, remaining)
            return found, self._listed_batch(found[start : start + size], filter)

        while candidates is None or start < len(candidates):
            if remaining is not None and remaining <= 0:
                return
            candidates, decoded = await self._run(hop)
            start += len(decoded)
            for item in decoded:
                if item is None:
                    continue
                if remaining is not None:
                    if remaining <= 0:
                        return
                    remaining -= 1
                yield item

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await self._run(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await self._run(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await self._run(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._run(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._run(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._run(self.prune, thread_ids, strategy=strategy)

    async def arollback(self, config: RunnableConfig) -> RunnableConfig:
        return await self._run(self.rollback, config)

    async def averify(self, thread_id: str) -> ThreadVerification:
        return await self._run(self.verify, thread_id)

    # -- the sync guard (AsyncSovsealSaver refuses sync calls on its event loop's thread) ----------

    def _guard(self) -> None:
        """Nothing for SovsealSaver. The a* methods call the sync ones in a worker thread, which has
        no running event loop, so AsyncSovsealSaver's guard never trips on them."""


class SovsealSaver(_SovsealSaverBase):
    """A LangGraph checkpointer whose every checkpoint, metadata and pending write is a sealed
    sovseal record, a thread's history a tamper-evident chain and time travel a sovseal fork.

    ``SovsealSaver(sovseal)`` writes through a ``Sovseal`` handle you own;
    ``SovsealSaver.open(path, key=...)`` opens (and closes) a store of its own. Sync methods run in
    the caller's thread; the async ones run each operation in one worker thread.
    """

    @classmethod
    @contextmanager
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        key: bytes | str | None = None,
        embedder: Callable[[Sequence[str]], Any] | None = None,
        serde: SerializerProtocol | None = None,
        **sovseal_kwargs: Any,
    ) -> Iterator[SovsealSaver]:
        """Open the store at ``path`` for checkpoints (its own handle, closed on exit).

        Checkpoints are never recalled by meaning, so unless ``embedder`` is given no model is
        loaded (a store of checkpoints is best kept in its own directory for that reason).
        """
        handle = Sovseal(path, key=key, embedder=embedder or no_embedding, **sovseal_kwargs)
        try:
            saver = cls(handle, serde=serde)
            saver._s.owned = True
        except BaseException:
            handle.close()
            raise
        try:
            yield saver
        finally:
            saver.close()


class AsyncSovsealSaver(_SovsealSaverBase):
    """The async-first saver: ``async with AsyncSovsealSaver.open(path, key=...) as saver``.

    Every ``a*`` method runs its whole operation in one worker thread, so the event loop never
    blocks on disk or crypto. The sync methods work from other threads (LangGraph's sync nodes run
    in a pool); called on the thread running the event loop they raise, as ``AsyncSqliteSaver``'s do,
    since they would block it.
    """

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        key: bytes | str | None = None,
        embedder: Callable[[Sequence[str]], Any] | None = None,
        serde: SerializerProtocol | None = None,
        **sovseal_kwargs: Any,
    ) -> AsyncIterator[AsyncSovsealSaver]:
        """Open the store at ``path`` in a worker thread (opening replays its journal)."""

        def opened() -> AsyncSovsealSaver:
            handle = Sovseal(path, key=key, embedder=embedder or no_embedding, **sovseal_kwargs)
            try:
                saver = cls(handle, serde=serde)
            except BaseException:
                handle.close()
                raise
            saver._s.owned = True
            return saver

        saver = await asyncio.to_thread(opened)
        try:
            yield saver
        finally:
            await asyncio.to_thread(saver.close)

    def _guard(self) -> None:
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            return
        raise asyncio.InvalidStateError(
            "Synchronous calls to AsyncSovsealSaver are only allowed from a thread without a running event loop. "
            "From async code use the a* methods (graph.ainvoke / astream / aget_state), or use SovsealSaver."
        )

