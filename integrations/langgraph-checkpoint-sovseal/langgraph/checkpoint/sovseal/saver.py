"""``SovsealSaver`` and ``AsyncSovsealSaver``: LangGraph checkpoints as sealed sovseal records.

The mapping (docs/integrations/langgraph.md has the long form; paths and branch names in _layout.py):

- A **thread is a sovseal branch**, ``langgraph:thread:<thread id>``: its checkpoints, in every
  namespace, are records appended to it, so each checkpoint's snapshot id commits to all of the
  thread's history before it. **Pending writes** go to a companion branch ``...:writes``, one
  record per (checkpoint, task), so they never split the checkpoint chain.
- **Time travel is a sovseal fork.** A checkpoint whose parent is not the newest of its namespace
  is stored with ``parent=`` that parent's snapshot; the abandoned future stays readable on an
  archive branch ``...:fork:<n>`` (a branch is the only way to show records off a HEAD's chain).
- ``delete_thread`` deletes the thread's branches and purges what nothing reaches any more;
  ``delete_for_runs`` appends tombstones; ``prune`` re-roots the thread on what it keeps.

The saver keeps an index of each thread it touched (which paths each branch shows, at which
snapshot), loaded from ``log()`` and checked against the branches' heads (``heads_of``) before
every read, so records written by another process, or pulled from another device, are picked up.
A write passes every head its index knows as ``if_heads``, so the store checks them as it appends
instead of the saver reading them first. After a sync a branch can have several heads (two devices
wrote the thread): the index holds what all of them hold and the next checkpoint goes on all of
them. The payloads the saver opened or sealed are kept (``_Opened``), and their frames rechecked on
disk (``Sovseal.recheck``) whenever they are returned again.
"""

from __future__ import annotations

import asyncio
import bisect
import os
import random
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Self, TypeVar

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
    get_serializable_checkpoint_metadata,
    writes_sort_key,
)
from langgraph.checkpoint.serde.types import _DeltaSnapshot

from sovseal import Sovseal
from sovseal.errors import HeadMovedError, IntegrityError, InvalidInputError, UnknownBranchError

from ._common import RECORD_BLOB_CHARS, decode_blob, no_embedding
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

__all__ = ["AsyncSovsealSaver", "SovsealSaver", "ThreadVerification"]

_T = TypeVar("_T")
_LIST_BATCH = 16  # checkpoints decoded per batch (one recheck call; one worker-thread hop in alist)
_OPENED_CACHE = 512  # opened record payloads kept, so re-reading a checkpoint does not decrypt it again
_Packed = tuple[dict[str, dict[str, Any]], list[tuple[str, dict[str, Any]]]]  # what pack_blobs returns


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
    """A record as this process opened or sealed it. The first read that checks the payload against
    its path sets ``blobs`` (the inline blobs decoded) and, for a writes record, ``writes``
    ((idx, channel) pairs). Blobs in part records are read (and rechecked) on every read."""

    payload: Any
    blobs: dict[str, tuple[str, bytes]] | None = None
    writes: list[tuple[int, str]] | None = None


@dataclass(slots=True)
class _Ref:
    """Where a visible record is read: its snapshot id and a branch whose HEAD shows it."""

    sid: str
    branch: str


class _Thread:
    """The index of one thread: its branches, what each shows, and what the thread holds."""

    def __init__(self, thread_id: str) -> None:
        self.thread_id = thread_id
        self.live = live_branch(thread_id)
        self.writes = writes_branch(thread_id)
        self.heads: dict[str, tuple[str | None, ...]] = {}  # branch -> every head as last seen, newest first
        self.views: dict[str, dict[str, tuple[str, float]]] = {}  # branch -> path -> (sid, created)
        self.merged: dict[str, _Ref] = {}  # path -> where to read it
        self.checkpoints: dict[str, dict[str, str]] = {}  # ns -> checkpoint id -> path
        self._sorted: dict[str, list[str]] = {}  # ns -> its checkpoint ids in order (built on demand)
        self.task_writes: dict[tuple[str, str], dict[str, str]] = {}  # (ns, checkpoint id) -> task -> path
        # snapshot id -> (decoded metadata, for filters; its typed bytes, decoded again for each copy returned)
        self.metadata: dict[str, tuple[dict[str, Any], tuple[str, bytes]]] = {}

    def tips(self, branch: str) -> tuple[str | None, ...]:
        return self.heads.get(branch, (None,))

    def archives(self) -> list[str]:
        found = [(p, b) for b in self.heads if (p := parse_branch(b)) and p[1] == "archive"]
        return [b for _, b in sorted(found)]

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

    def remerge(self, path: str, parsed: Parsed | None = None) -> None:
        """Recompute where ``path`` is read from: the newest version any branch shows (two branches
        differ only after a checkpoint was stored again and the thread then forked from before it).
        Ties go to the live branch, then the writes branch."""
        best: tuple[float, int, str, str] | None = None
        for branch, view in self.views.items():
            if (found := view.get(path)) is not None:
                key = (-found[1], 0 if branch == self.live else 1 if branch == self.writes else 2, branch, found[0])
                if best is None or key[:2] < best[:2]:
                    best = key
        if best is None:
            self.merged.pop(path, None)
        else:
            self.merged[path] = _Ref(best[3], best[2])
        parsed = parsed or parse_path(path)
        if parsed is None or parsed.kind == "part":
            return
        if parsed.kind == "checkpoint":
            index, key = self.checkpoints.setdefault(parsed.ns, {}), parsed.checkpoint_id
        else:
            index, key = self.task_writes.setdefault((parsed.ns, parsed.checkpoint_id), {}), parsed.task_id or ""
        if best is not None:
            ordered = self._sorted.get(parsed.ns)
            if parsed.kind == "checkpoint" and key not in index and ordered is not None:
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
        """Rebuild everything from ``views``."""
        self.merged.clear()
        self.checkpoints.clear()
        self._sorted.clear()
        self.task_writes.clear()
        for path in {p for view in self.views.values() for p in view}:
            self.remerge(path)
        self.checkpoints = {ns: ids for ns, ids in self.checkpoints.items() if ids}

    def show(self, branch: str, path: str, sid: str, parsed: Parsed | None = None) -> None:
        self.views.setdefault(branch, {})[path] = (sid, time.time())
        self.remerge(path, parsed)


class _State:
    """What every copy of a saver shares (``with_allowlist`` makes shallow copies)."""

    def __init__(self, handle: Sovseal) -> None:
        self.handle = handle
        self.owned = False
        self.lock = threading.RLock()
        self.names: set[str] = set(handle.branches())
        self.threads: dict[str, _Thread] = {}
        # Records opened and verified, or sealed, by snapshot id (records never change; a cached
        # payload is never mutated), least recently used first.
        self.opened: OrderedDict[str, _Opened] = OrderedDict()
        self.views: dict[str, Sovseal] = {}  # branch -> a view of the handle on it
        # While a batch decodes: the remembered records it returns, rechecked in one call at the end.
        self.deferred_rechecks: list[str] | None = None

    def remember(self, sid: str, record: _Opened) -> None:
        opened = self.opened
        if sid in opened:
            opened.move_to_end(sid)
        opened[sid] = record
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
    thread_id = (config.get("configurable") or {}).get("thread_id")
    if thread_id is None or thread_id == "":
        raise ValueError('the config needs a thread id: {"configurable": {"thread_id": ...}}')
    return str(thread_id)


def _ns_of(config: RunnableConfig) -> str:
    return str((config.get("configurable") or {}).get("checkpoint_ns") or "")


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}


class _SovsealSaverBase(BaseCheckpointSaver[str]):
    """The saver's logic; the two public classes differ in how they open and in their sync guard."""

    def __init__(self, sovseal: Sovseal, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        handle = getattr(sovseal, "sync", sovseal)  # an AsyncSovseal exposes its sync handle
        if not isinstance(handle, Sovseal):
            raise TypeError(f"{type(self).__name__} needs a sovseal.Sovseal handle, got {type(sovseal).__name__}")
        self._s = _State(handle)

    @property
    def sovseal(self) -> Sovseal:
        """The handle the saver writes through."""
        return self._s.handle

    def close(self) -> None:
        """Close the handle if the saver opened it (``open``); a handle you passed stays open."""
        if self._s.owned:
            self._s.handle.close()

    # -- the index (every method below holds self._s.lock) -----------------------------------------

    def _view(self, branch: str) -> Sovseal:
        """A view of the handle on ``branch`` (UnknownBranchError if there is none)."""
        found = self._s.views.get(branch)
        if found is None:
            found = self._s.views[branch] = self._s.handle.view(branch)
        return found

    def _heads(self, branch: str) -> tuple[str | None, ...]:
        """Every head of ``branch``, newest first; () for a branch that does not exist (any more)."""
        try:
            return tuple(self._s.handle.heads_of(branch))
        except UnknownBranchError:
            return ()

    def _names(self, *, refresh: bool = False) -> set[str]:
        if refresh:
            self._s.names = set(self._s.handle.branches())
        return self._s.names

    def _exists(self, branch: str) -> bool:
        """Asked of the store by name: listing every branch costs a name per thread."""
        if branch in self._s.names:
            return True
        if not self._heads(branch):
            return False
        self._s.names.add(branch)
        return True

    def _create(self, branch: str, at: str | None = None) -> None:
        self._s.handle.create_branch(branch, at)
        self._s.names.add(branch)

    def _load(self, t: _Thread, branch: str) -> None:
        """Fold ``log()`` of a branch into the paths it shows (opens and re-derives every record).

        With several heads ``log()`` walks them all, newest first by the store's (clock, id) order,
        so the first mention of a path is the write the branch's merged state shows, on every device
        alike. The heads are read first: if another writer moves the branch meanwhile, the next check
        sees it. A branch that no longer exists leaves the index.
        """
        damage = self._s.handle.status().damage
        if damage:  # a frame that failed authentication may hide records: refuse rather than read less
            raise IntegrityError(f"the store has damaged records ({'; '.join(damage[:3])}); run `sovseal verify`")
        heads = self._heads(branch)
        try:
            entries = self._view(branch).log() if heads else None
        except UnknownBranchError:
            entries = None
        if entries is None:
            t.heads.pop(branch, None)
            t.views.pop(branch, None)
            self._s.names.discard(branch)
            return
        view: dict[str, tuple[str, float]] = {}
        seen: set[str] = set()
        for entry in entries:
            if entry.path not in seen:
                seen.add(entry.path)
                if entry.op == "store" and parse_path(entry.path) is not None:
                    view[entry.path] = (entry.snapshot_id, entry.created_at.timestamp())
        t.heads[branch], t.views[branch] = heads, view

    def _refresh(self, t: _Thread, only: str | None = None) -> None:
        """Reload the branches another handle (or a pull) moved since we last looked.

        ``only`` names the one branch an operation depends on (put: the live branch, put_writes: the
        writes branch): only its heads are checked, and the others only if it moved. The writes
        branch is looked for by name (another handle may have created it without moving the live
        branch); archives appear only with a fork, which moves the live branch.
        """
        if only is not None and only in t.heads and self._heads(only) == t.heads[only]:
            return
        if only in (None, t.writes) and t.writes not in t.heads and self._exists(t.writes):
            self._load(t, t.writes)
            t.derive()
        moved = [b for b in list(t.heads) if self._heads(b) != t.heads[b]]
        if not moved:
            return
        for branch in moved:
            self._load(t, branch)
        for name in self._names(refresh=True):
            if (p := parse_branch(name)) and p[0] == t.thread_id and name not in t.heads:
                self._load(t, name)
        t.metadata.clear()
        t.derive()

    def _thread(self, thread_id: str, *, create: bool = False, only: str | None = None) -> _Thread | None:
        """The thread's index, fresh (``only``: see _refresh); None for a thread with no branch (unless ``create``)."""
        s = self._s
        t = s.threads.get(thread_id)
        if t is not None:
            self._refresh(t, only)
            if t.live in t.heads:
                return t
            del s.threads[thread_id]  # another handle deleted it
        t = _Thread(thread_id)
        names = self._names()
        if t.live not in names and self._exists(t.live):  # another handle created it: find all its branches
            names = self._names(refresh=True)
        if t.live in names:
            for name in names:
                if (p := parse_branch(name)) and p[0] == thread_id:
                    self._load(t, name)
            if t.writes not in t.heads and self._exists(t.writes):  # the cached names may predate it
                self._load(t, t.writes)
        if t.live not in t.heads:
            if not create:
                return None
            self._ensure(t, t.live)
        t.derive()
        s.threads[thread_id] = t
        return t

    def _ensure(self, t: _Thread, branch: str) -> None:
        """Create ``branch`` empty, or load it if another process created it just now."""
        try:
            self._create(branch)
        except InvalidInputError:
            self._load(t, branch)
            if branch not in t.heads:
                raise
            t.derive()
        else:
            t.heads[branch], t.views[branch] = (None,), {}

    def _thread_ids(self) -> list[str]:
        return sorted({p[0] for name in self._names(refresh=True) if (p := parse_branch(name)) and p[1] == "live"})

    # -- reading records -----------------------------------------------------------------------------

    def _open(self, t: _Thread, path: str) -> _Opened:
        """A visible record, opened and verified by the SDK (callers must not mutate its payload).

        A record opened or sealed before is taken from memory, and its frame on disk rechecked
        (``Sovseal.recheck``, now or with the batch), so bytes altered under a running process
        still raise IntegrityError.
        """
        ref = t.merged.get(path)
        if ref is None:
            raise IntegrityError(f"{path} is named by a record of thread {t.thread_id!r} but is not visible; run verify()")
        s = self._s
        record = s.opened.get(ref.sid)
        if record is None:
            memory = self._view(ref.branch).get(path)
            if memory is None or memory.snapshot_id != ref.sid:
                raise IntegrityError(
                    f"{path} on branch {ref.branch!r} is not the record the thread's index holds "
                    "(written by another process mid-operation, or the store was changed): retry, or run verify()"
                )
            record = _Opened(memory.payload)
        elif s.deferred_rechecks is not None:
            s.deferred_rechecks.append(ref.sid)
        else:
            s.handle.recheck(ref.sid)
        s.remember(ref.sid, record)
        return record

    def _blob(self, t: _Thread, record_path: str, name: str, descriptor: Any, record: _Opened | None = None) -> tuple[str, bytes]:
        """A blob's typed bytes: decoded once for an inline blob of a checked record, else from its parts."""
        if record is not None and record.blobs is not None and (found := record.blobs.get(name)) is not None:
            return found
        where = f"{name!r} of {record_path}"
        type_, inline = typed(descriptor, where)
        if inline:
            return type_, decode_blob(descriptor, where)
        n = descriptor["n"]
        chunks = [check_part(self._open(t, part_path(record_path, name, i)).payload, record_path, name, i, n) for i in range(n)]
        return type_, join_parts(descriptor, chunks, where)

    @staticmethod
    def _inline(descriptors: dict[str, Any], path: str) -> dict[str, tuple[str, bytes]]:
        """The inline blobs of a record, decoded (every descriptor is checked)."""
        out: dict[str, tuple[str, bytes]] = {}
        for name, descriptor in descriptors.items():
            type_, inline = typed(descriptor, f"{name!r} of {path}")
            if inline:
                out[name] = (type_, decode_blob(descriptor, f"{name!r} of {path}"))
        return out

    def _checkpoint_record(self, t: _Thread, path: str) -> _Opened:
        record = self._open(t, path)
        if record.blobs is None:  # not checked by an earlier read
            payload = record.payload
            if not _names_its_path(payload, path, "checkpoint") or not isinstance(payload.get("blobs"), dict):
                raise IntegrityError(f"the checkpoint record {path} does not match its path; run verify()")
            record.blobs = self._inline(payload["blobs"], path)
        return record

    def _writes_record(self, t: _Thread, path: str) -> _Opened:
        record = self._open(t, path)
        if record.writes is None:  # not checked by an earlier read
            payload = record.payload
            if not _names_its_path(payload, path, "writes") or not isinstance(payload.get("writes"), list):
                raise IntegrityError(f"the writes record {path} does not match its path; run verify()")
            for e in payload["writes"]:
                if not isinstance(e, dict) or not isinstance(e.get("idx"), int) or not isinstance(e.get("channel"), str):
                    raise IntegrityError(f"a write in {path} is malformed; run verify()")
            record.blobs = self._inline({f"w{e['idx']}": e.get("blob") for e in payload["writes"]}, path)
            record.writes = [(e["idx"], e["channel"]) for e in payload["writes"]]
        return record

    def _metadata(self, t: _Thread, path: str, record: _Opened | None = None) -> tuple[dict[str, Any], tuple[str, bytes]]:
        """The checkpoint's metadata (shared: read it, never change it) and its typed bytes."""
        sid = t.merged[path].sid
        cached = t.metadata.get(sid)
        if cached is None:
            record = record or self._checkpoint_record(t, path)
            typed_ = self._blob(t, path, "metadata", record.payload["blobs"].get("metadata"), record)
            decoded = self.serde.loads_typed(typed_)
            if not isinstance(decoded, dict):
                raise IntegrityError(f"the metadata of {path} is not a mapping; run verify()")
            cached = t.metadata[sid] = (decoded, typed_)
        return cached

    def _pending_writes(self, t: _Thread, ns: str, checkpoint_id: str) -> list[tuple[str, str, Any]]:
        keyed: list[tuple[tuple[str, str, int], tuple[str, str, Any]]] = []
        for task_id, path in t.task_writes.get((ns, checkpoint_id), {}).items():
            record = self._writes_record(t, path)
            task_path = record.payload.get("task_path") or ""
            for entry, (idx, channel) in zip(record.payload["writes"], record.writes or (), strict=True):
                value = self.serde.loads_typed(self._blob(t, path, f"w{idx}", entry.get("blob"), record))
                keyed.append((writes_sort_key(task_path, task_id, idx), (task_id, channel, value)))
        keyed.sort(key=lambda item: item[0])
        return [write for _, write in keyed]

    def _decoded(self, t: _Thread, path: str, record: _Opened | None = None) -> tuple[dict[str, Any], str | None]:
        """A stored checkpoint, decoded, and its parent's checkpoint id."""
        record = record or self._checkpoint_record(t, path)
        checkpoint = self.serde.loads_typed(self._blob(t, path, "checkpoint", record.payload["blobs"].get("checkpoint"), record))
        if not isinstance(checkpoint, dict):
            raise IntegrityError(f"the checkpoint in {path} is not a checkpoint; run verify()")
        return checkpoint, record.payload.get("parent_checkpoint_id")

    def _tuple(self, t: _Thread, ns: str, checkpoint_id: str, filter: dict[str, Any] | None = None) -> CheckpointTuple | None:
        path = t.checkpoints.get(ns, {}).get(checkpoint_id)
        if path is None:
            return None
        record = self._checkpoint_record(t, path)
        metadata, metadata_typed = self._metadata(t, path, record)
        if filter and not all(metadata.get(k) == v for k, v in filter.items()):
            return None
        checkpoint, parent_id = self._decoded(t, path, record)
        if checkpoint.get("id") != checkpoint_id:
            raise IntegrityError(f"the checkpoint in {path} is not checkpoint {checkpoint_id}; run verify()")
        return CheckpointTuple(
            config=_config(t.thread_id, ns, checkpoint_id),
            checkpoint=checkpoint,  # type: ignore[arg-type]
            metadata=self.serde.loads_typed(metadata_typed),  # the caller's own copy
            parent_config=_config(t.thread_id, ns, parent_id) if parent_id else None,
            pending_writes=self._pending_writes(t, ns, checkpoint_id),
        )

    def _rechecked(self, decode: Callable[..., _T], *args: Any) -> _T:
        """``decode(*args)``, the remembered records it read rechecked in one ``Sovseal.recheck`` call
        before anything it decoded is returned."""
        s = self._s
        if s.deferred_rechecks is not None:  # already inside a batch: it rechecks these too
            return decode(*args)
        s.deferred_rechecks = []
        try:
            decoded = decode(*args)
            sids = s.deferred_rechecks
        finally:
            s.deferred_rechecks = None
        if sids:
            s.handle.recheck(*sids)
        return decoded

    # -- writing records -----------------------------------------------------------------------------

    def _append(
        self,
        t: _Thread,
        branch: str,
        records: list[tuple[str, Any]],
        *,
        parent: str | None = None,
        if_heads: dict[str, list[str]] | None = None,
        parsed: Parsed | None = None,
    ) -> None:
        """Store records in order on ``branch`` (the first one with ``parent=``) and index them.

        One record (the usual put or put_writes, or a fork's first) goes through ``store``, which
        can take ``parent=`` and ``if_heads`` (HeadMovedError, nothing stored, if the branches'
        heads are not exactly those); the rest in one ``store_many`` batch (a crash keeps a prefix:
        parts come before the record naming them). Records are never recalled: ``index=False``, no
        sovseal metadata. What was sealed is remembered as opened. ``parsed``: what the last
        record's path names, if the caller has it.
        """
        view = self._view(branch)
        results = []
        if parent is not None or len(records) == 1:
            path, payload = records[0]
            results.append(
                view.store(path, payload, type="episodic", provenance="observed", index=False, parent=parent, if_heads=if_heads)
            )
        if len(records) > len(results):
            items = [{"path": p, "payload": d, "type": "episodic", "provenance": "observed", "index": False} for p, d in records]
            results.extend(view.store_many(items[len(results) :]))
        for (path, payload), result in zip(records, results, strict=True):
            if not result.reinforced:  # the record went on every head of the branch: it is the one head now
                t.heads[branch] = (result.snapshot_id,)
            t.show(branch, path, result.snapshot_id, parsed if path == records[-1][0] else None)
            self._s.remember(result.snapshot_id, _Opened(payload))

    def _archive_live(self, t: _Thread) -> None:
        """Keep the live branch's records readable on archive branches before its HEAD moves back:
        one per head (a live branch that a sync left with two heads keeps both sides)."""
        if not t.views.get(t.live):
            return
        archived = {h for b in t.archives() for h in t.tips(b)}
        tips = [h for h in t.tips(t.live) if h is not None]
        for head in tips:
            if head in archived:
                continue
            name = self._new_archive(t, head)
            if len(tips) == 1:
                t.heads[name], t.views[name] = (head,), dict(t.views[t.live])
            else:  # each archive shows what its head holds, a part of the live branch's view
                self._load(t, name)

    def _new_archive(self, t: _Thread, at: str) -> str:
        """Create the thread's next free archive branch at ``at`` (the caller indexes it)."""
        n = max([p[2] for b in t.heads if (p := parse_branch(b)) and p[1] == "archive"], default=0)
        while True:
            n += 1
            name = archive_branch(t.thread_id, n)
            if name in self._names():
                continue
            try:
                self._create(name, at)
            except InvalidInputError:  # another process took the name
                self._names(refresh=True)
                continue
            return name

    def _fork_store(self, t: _Thread, parent_sid: str, records: list[tuple[str, Any]]) -> None:
        """Store records on the live branch as a fork at ``parent_sid`` (time travel)."""
        before = {p for b, view in t.views.items() if b != t.writes for p in view}
        self._archive_live(t)
        self._append(t, t.live, records, parent=parent_sid)
        self._load(t, t.live)
        # A record deleted (tombstoned) after the fork point is visible again at the fork: delete it again.
        written = {p for p, _ in records}
        revived = [p for p in t.views[t.live] if p not in before and p not in written]
        if revived:
            self._view(t.live).delete_many(revived)
            self._load(t, t.live)
        t.derive()

    def _empty(self, t: _Thread) -> None:
        """Delete every branch of the thread (nothing visible; the records stay until purged)."""
        for branch in list(t.heads):
            try:
                self._s.handle.delete_branch(branch)
            except UnknownBranchError:  # deleted by another handle
                pass
            self._s.names.discard(branch)
        t.heads.clear()
        t.views.clear()
        t.metadata.clear()
        t.derive()

    def _hide_everywhere(self, t: _Thread, paths: list[str]) -> None:
        """Append a tombstone for each path on every branch of the thread that shows it."""
        for branch, view in t.views.items():
            doomed = [p for p in paths if p in view]
            if doomed:
                done = [r for r in self._view(branch).delete_many(doomed) if r is not None]
                if done:
                    t.heads[branch] = (done[-1].snapshot_id,)
                for path in doomed:
                    del view[path]
        for path in paths:
            t.remerge(path)
        t.checkpoints = {ns: ids for ns, ids in t.checkpoints.items() if ids}

    def _record_paths(self, t: _Thread, ns: str, checkpoint_id: str) -> list[str]:
        """The checkpoint's record, its parts, its writes records and their parts."""
        roots = [p for p in [t.checkpoints.get(ns, {}).get(checkpoint_id)] if p is not None]
        roots.extend(t.task_writes.get((ns, checkpoint_id), {}).values())
        visible = {p for view in t.views.values() for p in view}
        return [p for root in roots for p in visible if p == root or p.startswith(root + "/part/")]

    # -- BaseCheckpointSaver ---------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        self._guard()
        thread_id, ns = _thread_of(config), _ns_of(config)
        with self._s.lock:
            t = self._thread(thread_id)
            if t is None or not t.checkpoints.get(ns):
                return None
            checkpoint_id = get_checkpoint_id(config) or t.newest(ns)
            assert checkpoint_id is not None  # nosec B101 -- type narrowing: the namespace has checkpoints
            return self._rechecked(self._tuple, t, ns, checkpoint_id)

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        self._guard()
        for batch in self._batches(config, filter, before, limit):
            yield from batch

    def _batches(
        self, config: RunnableConfig | None, filter: dict[str, Any] | None, before: RunnableConfig | None, limit: int | None
    ) -> Iterator[list[CheckpointTuple]]:
        """``list`` in batches, newest first: each decoded, and its records rechecked, under one hold of the lock."""
        candidates = self._listing(config, before, None if filter else limit)
        remaining = limit
        start = 0
        while start < len(candidates) and (remaining is None or remaining > 0):
            size = _LIST_BATCH if filter or remaining is None else min(_LIST_BATCH, remaining)
            chunk, start = candidates[start : start + size], start + size
            with self._s.lock:
                decoded = self._rechecked(self._listed, chunk, filter)
            found = [d for d in decoded if d is not None][:remaining]
            if remaining is not None:
                remaining -= len(found)
            yield found

    def _listed(self, chunk: list[tuple[str, str, str]], filter: dict[str, Any] | None) -> list[CheckpointTuple | None]:
        found = []
        for thread_id, ns, checkpoint_id in chunk:
            t = self._s.threads.get(thread_id)
            found.append(None if t is None else self._tuple(t, ns, checkpoint_id, filter))
        return found

    def _listing(self, config: RunnableConfig | None, before: RunnableConfig | None, cap: int | None) -> list[tuple[str, str, str]]:
        """(thread, ns, checkpoint id) of the candidates, newest checkpoint id first; at most ``cap``
        (when no filter can drop one) from each namespace, which is all a ``limit`` can return."""
        ns_wanted = (config.get("configurable") or {}).get("checkpoint_ns") if config else None
        id_wanted = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        out: list[tuple[str, str, str]] = []
        with self._s.lock:
            for thread_id in [_thread_of(config)] if config else self._thread_ids():
                t = self._thread(thread_id)
                if t is None:
                    continue
                for ns, ids in t.checkpoints.items():
                    if ns_wanted is not None and ns != ns_wanted:
                        continue
                    if id_wanted:
                        if id_wanted in ids and not (before_id and id_wanted >= before_id):
                            out.append((id_wanted, thread_id, ns))
                        continue
                    ordered = t.ordered(ns)
                    end = bisect.bisect_left(ordered, before_id) if before_id else len(ordered)
                    out.extend((cid, thread_id, ns) for cid in ordered[max(0, end - cap) if cap is not None else 0 : end])
        out.sort(reverse=True)
        return [(thread_id, ns, cid) for cid, thread_id, ns in out]

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
            "metadata": self.serde.dumps_typed(get_serializable_checkpoint_metadata(config, metadata)),
        }
        # Encoded before the lock, so this runs while another operation of the handle waits on the disk.
        new_path = checkpoint_path(thread_id, ns, checkpoint_id)
        args = (ns, checkpoint_id, parent_id, blobs, new_path, pack_blobs(new_path, blobs))
        with self._s.lock:
            t = self._s.threads.get(thread_id)
            if t is None or t.live not in t.heads or not self._put_record(t, *args, fresh=False):
                t = self._thread(thread_id, create=True, only=live_branch(thread_id))
                assert t is not None  # nosec B101 -- type narrowing: create=True always returns a thread
                self._put_record(t, *args, fresh=True)
        return _config(thread_id, ns, checkpoint_id)

    def _put_record(
        self,
        t: _Thread,
        ns: str,
        checkpoint_id: str,
        parent_id: str | None,
        blobs: dict[str, tuple[str, bytes]],
        new_path: str,
        packed: _Packed,
        *,
        fresh: bool,
    ) -> bool:
        """Store a checkpoint's record (and its parts) where the thread's index places it.

        ``fresh``: the index was just checked against the live branch's heads. Otherwise the usual
        put, one record appended on the live branch, is stored at once with ``if_heads`` listing
        every head the index knows (the store checks them under its writer lock); False, nothing
        stored, if they moved, or if the put forks or has parts (which act on more of the index):
        the caller refreshes the index and calls again.

        A checkpoint whose parent is one of the live heads, or the namespace's newest, goes on every
        head (after a sync that merges what two devices wrote); one whose parent is further back
        forks the branch there (time travel), each head kept on an archive branch.
        """
        ids = t.checkpoints.get(ns, {})
        existing = ids.get(checkpoint_id)
        path = existing or new_path
        # A new path names this thread; one already stored may name another (copy_thread keeps paths).
        parsed = parse_path(existing) if existing else Parsed("checkpoint", t.thread_id, ns, checkpoint_id)
        assert parsed is not None  # nosec B101 -- type narrowing: the index holds only the saver's paths
        parent_ref = t.merged.get(ids[parent_id]) if parent_id in ids else None
        forks = parent_ref is not None and not existing and parent_id != t.newest(ns) and parent_ref.sid not in t.tips(t.live)
        descriptors, parts = packed if path == new_path else pack_blobs(path, blobs)  # parts name their record
        tips = t.tips(t.live)
        if not fresh and (forks or parts or None in tips):
            return False
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
        if forks:
            assert parent_ref is not None  # nosec B101 -- type narrowing: forks only with a parent
            self._fork_store(t, parent_ref.sid, records)
            return True
        try:
            self._append(t, t.live, records, if_heads=None if fresh else {t.live: [h for h in tips if h]}, parsed=parsed)
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
        incoming = {WRITES_IDX_MAP.get(ch, idx): (ch, self.serde.dumps_typed(value)) for idx, (ch, value) in enumerate(writes)}
        # Packed before the lock for the usual case, a task's first writes (no record to merge with).
        new_path = writes_path(thread_id, ns, checkpoint_id, task_id)
        first_pack = pack_blobs(new_path, {f"w{k}": typed_value for k, (_, typed_value) in incoming.items()})
        args = (ns, checkpoint_id, task_id, task_path, incoming, new_path, first_pack)
        with self._s.lock:
            t = self._s.threads.get(thread_id)
            if t is None or t.writes not in t.heads or not self._put_writes_record(t, *args, fresh=False):
                t = self._thread(thread_id, create=True, only=writes_branch(thread_id))
                assert t is not None  # nosec B101 -- type narrowing: create=True always returns a thread
                if t.writes not in t.heads:
                    self._ensure(t, t.writes)
                self._put_writes_record(t, *args, fresh=True)

    def _put_writes_record(
        self,
        t: _Thread,
        ns: str,
        checkpoint_id: str,
        task_id: str,
        task_path: str,
        incoming: dict[int, tuple[str, tuple[str, bytes]]],
        new_path: str,
        first_pack: _Packed,
        *,
        fresh: bool,
    ) -> bool:
        """Store a task's pending writes, merged into its record if it has one.

        ``fresh`` as for :meth:`_put_record`: otherwise a task's first writes, one record, are stored
        with ``if_heads`` listing the writes branch's heads (and the live branch's when the index
        does not hold the checkpoint: the store then checks that no other handle stored it
        meanwhile); merging into a stored record, and parts, return False for a refreshed index first.
        """
        existing = t.task_writes.get((ns, checkpoint_id), {}).get(task_id)
        path = existing or new_path
        parsed = parse_path(existing) if existing else Parsed("writes", t.thread_id, ns, checkpoint_id, task_id)
        assert parsed is not None  # nosec B101 -- type narrowing: the index holds only the saver's paths
        conditions: dict[str, list[str]] | None = None
        if not fresh:
            tips = t.tips(t.writes)
            if path in t.merged or None in tips:
                return False
            conditions = {t.writes: [h for h in tips if h]}
        record = self._writes_record(t, path) if path in t.merged else None
        entries: dict[int, dict[str, Any]] = {}
        news = incoming  # a task's first writes: all of them
        if record is not None:  # merged; an upsert (negative idx) of the value already stored changes nothing
            entries = {e["idx"]: e for e in record.payload["writes"]}
            news = {k: v for k, v in incoming.items() if k not in entries or (k < 0 and not self._same(t, path, record, entries[k], *v))}
            if not news:
                return True
        if record is None and path == new_path:
            descriptors, parts = first_pack
        else:
            budget = RECORD_BLOB_CHARS - sum(inline_chars(e.get("blob", {})) for k, e in entries.items() if k not in news)
            descriptors, parts = pack_blobs(path, {f"w{k}": typed_value for k, (_, typed_value) in news.items()}, budget)
        if not fresh and parts:
            return False
        for k, (channel, _) in news.items():
            entries[k] = {"idx": k, "channel": channel, "blob": descriptors[f"w{k}"]}
        cp_path = t.checkpoints.get(ns, {}).get(checkpoint_id)
        if cp_path is None:
            # Not stored yet (its put may be waiting for the lock), or stored by another handle on the
            # live branch, whose HEAD then moved: the store checks it, or a fresh index looks now.
            live_tips = t.tips(t.live)
            if conditions is not None and None not in live_tips:
                conditions[t.live] = [h for h in live_tips if h]
            else:
                self._refresh(t, only=t.live)
                cp_path = t.checkpoints.get(ns, {}).get(checkpoint_id)
        payload = {
            "lg": "writes",
            "format": FORMAT,
            "thread_id": parsed.thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
            "task_id": task_id,
            "task_path": task_path or (record.payload.get("task_path") if record else "") or "",
            "checkpoint_snapshot": t.merged[cp_path].sid if cp_path else None,
            "writes": [entries[k] for k in sorted(entries)],
        }
        try:
            self._append(t, t.writes, [*parts, (path, payload)], if_heads=conditions, parsed=parsed)
        except HeadMovedError:
            return False
        return True

    def _same(self, t: _Thread, path: str, record: _Opened, entry: dict[str, Any], channel: str, value: tuple[str, bytes]) -> bool:
        return entry.get("channel") == channel and self._blob(t, path, f"w{entry['idx']}", entry.get("blob"), record) == value

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread and erase its records for good: nothing reads them any more, their bytes
        leave the disk at the next compaction, and with replication every device erases them too
        (docs/integrations/langgraph.md, "Deleting and erasing"). Records another thread still
        reaches (``copy_thread`` shares them) stay until that thread lets them go too."""
        self._guard()
        with self._s.lock:
            t = self._thread(str(thread_id))
            if t is not None:
                threads = self._threads_shown(t)
                self._empty(t)
                del self._s.threads[t.thread_id]
                self._erase_unreachable(threads)

    def _threads_shown(self, t: _Thread) -> set[str]:
        """The thread and every thread whose records it shows (a ``copy_thread`` shares its source's)."""
        return {t.thread_id} | {p.thread_id for view in t.views.values() for path in view if (p := parse_path(path))}

    def _erase_unreachable(self, threads: set[str]) -> None:
        """Purge the records under these threads' paths that no branch reaches any more. Their bytes
        leave the disk at the next compaction (``compact()``, or by itself past the threshold):
        rewriting the journal on every delete would make each one cost the whole store."""
        prefixes = [p for t in sorted(threads) for p in thread_prefixes(t)]
        self._s.handle.purge(prefix=prefixes, unreachable=True, reason="langgraph delete_thread", compact=False)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._guard()
        wanted = {str(r) for r in run_ids}
        with self._s.lock:
            for thread_id in self._thread_ids() if wanted else ():
                t = self._thread(thread_id)
                if t is None:
                    continue
                doomed = [
                    p
                    for ns, ids in t.checkpoints.items()
                    for cid, path in ids.items()
                    if (run_id := self._metadata(t, path)[0].get("run_id")) is not None and str(run_id) in wanted
                    for p in self._record_paths(t, ns, cid)
                ]
                if doomed:
                    self._hide_everywhere(t, doomed)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Give the target thread the source's whole history, sharing its records (no bytes copied).

        Each of the source's branches is created again for the target at the same heads, so the
        target holds the same checkpoint ids, metadata, namespaces and writes, and every record keeps
        the path it was written under. A source branch that a sync left with several heads is copied
        at its HEAD, each other head on an archive branch of the target. A target that already has
        checkpoints is refused.
        """
        self._guard()
        source, target = str(source_thread_id), str(target_thread_id)
        if source == target:
            return
        with self._s.lock:
            src = self._thread(source)
            if src is None or not src.has_checkpoints():
                return
            dst = self._thread(target)
            if dst is not None and dst.has_checkpoints():
                raise ValueError(f"thread {target!r} already has checkpoints; delete_thread() it first or copy to a new thread")
            if dst is not None:
                self._empty(dst)  # its branches show nothing: they are made again at the source's heads
            dst = _Thread(target)
            for branch, heads in list(src.heads.items()):
                kind = (parse_branch(branch) or ("", "", 0))[1]
                if kind in ("live", "writes"):
                    to = dst.live if kind == "live" else dst.writes
                    self._create(to, heads[0])
                elif src.views.get(branch) and heads[0] is not None:
                    to = self._new_archive(dst, heads[0])
                else:
                    continue
                if len(heads) == 1:
                    dst.heads[to], dst.views[to] = heads, dict(src.views.get(branch, {}))
                else:  # the source's view is the merge of its heads; this branch shows one
                    self._load(dst, to)
                for other in heads[1:]:
                    if other is not None:
                        self._load(dst, self._new_archive(dst, other))
            if dst.live not in dst.heads:
                self._ensure(dst, dst.live)
            dst.metadata = dict(src.metadata)
            dst.derive()
            self._s.threads[target] = dst

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``"delete"``: as ``delete_thread``. ``"keep_latest"``: keep the newest checkpoint per namespace,
        and the ancestors its ``DeltaChannel`` values are rebuilt from (see :meth:`_delta_chain`).

        Keeping re-roots the thread: its branches are made again, empty, and the kept checkpoints
        (with their parts and pending writes, oldest first) stored again on them, so the thread's
        chain is short again. The checkpoints let go are then erased for good, as ``delete_thread``
        erases them.
        """
        self._guard()
        if strategy not in ("keep_latest", "delete"):
            raise ValueError(f"unknown prune strategy {strategy!r}; use 'keep_latest' or 'delete'")
        for thread_id in map(str, thread_ids):
            with self._s.lock:
                t = self._thread(thread_id)
                if t is None:
                    continue
                threads = self._threads_shown(t)
                if strategy == "delete":
                    self._empty(t)
                    del self._s.threads[thread_id]
                    self._erase_unreachable(threads)
                    continue
                kept: dict[str, list[tuple[str, Any]]] = {t.live: [], t.writes: []}
                for ns in t.checkpoints:
                    for checkpoint_id in self._delta_chain(t, ns, t.ordered(ns)[-1]):
                        # parts first: a record is stored after the parts it names
                        for path in sorted(self._record_paths(t, ns, checkpoint_id), key=lambda p: ("/part/" not in p, p)):
                            kept[t.writes if path.startswith(WRITES_ROOT) else t.live].append((path, self._open(t, path).payload))
                if sum(map(len, t.views.values())) == sum(map(len, kept.values())) and not any(t.views.get(b) for b in t.archives()):
                    continue  # nothing to drop
                self._empty(t)
                self._ensure(t, t.live)
                if kept[t.live]:
                    self._append(t, t.live, kept[t.live])
                if kept[t.writes]:
                    self._ensure(t, t.writes)
                    self._append(t, t.writes, [(p, self._rebound(t, d)) for p, d in kept[t.writes]])
                self._erase_unreachable(threads)  # the checkpoints the re-root let go

    @staticmethod
    def _rebound(t: _Thread, payload: Any) -> Any:
        """A kept writes record bound to its checkpoint's record as stored again (a part: unchanged).
        A copy: payloads read are shared with the cache."""
        if not isinstance(payload, dict) or payload.get("lg") != "writes":
            return payload
        cp = t.checkpoints.get(payload["checkpoint_ns"], {}).get(payload["checkpoint_id"])
        return {**payload, "checkpoint_snapshot": t.merged[cp].sid if cp else None}

    def _delta_chain(self, t: _Thread, ns: str, checkpoint_id: str) -> list[str]:
        """The checkpoint ids ``prune`` keeps for ``checkpoint_id``, oldest first: it, and the ancestors
        that ``get_delta_channel_history`` reads to rebuild its delta channels.

        A ``DeltaChannel`` (beta) stores its value only every ``snapshot_frequency`` updates; in
        between LangGraph rebuilds it by walking the parent chain back to the nearest checkpoint
        holding a value, replaying the pending writes on the way (the reducer lives in the graph,
        so the saver cannot materialise it). A channel needs the walk when the checkpoint has a
        version for it but no value and it is a delta channel: named in the metadata
        (``counters_since_delta_snapshot``) or holding a ``_DeltaSnapshot`` in an ancestor (channels
        such as ``branch:to:node`` also have a version and no value, and need no walk). Each keeps
        the ancestors back to the nearest one holding a value for it (whose writes produce its child,
        so they are kept too), or back to the root.
        """
        ids = t.checkpoints.get(ns, {})
        checkpoint, parent = self._decoded(t, ids[checkpoint_id])
        values = checkpoint.get("channel_values") or {}
        missing = {k for k in checkpoint.get("channel_versions") or {} if k not in values}
        if not missing or parent not in ids:
            return [checkpoint_id]
        counted = set(self._metadata(t, ids[checkpoint_id])[0].get("counters_since_delta_snapshot") or {})
        ancestors: list[tuple[str, dict[str, Any]]] = []
        seen = {checkpoint_id}
        while parent in ids and parent not in seen:  # a cycle cannot be written, but never loop on one
            seen.add(parent)
            ancestor, grandparent = self._decoded(t, ids[parent])
            ancestors.append((parent, ancestor.get("channel_values") or {}))
            parent = grandparent
        remaining = missing & (counted | {k for _, vals in ancestors for k in missing if isinstance(vals.get(k), _DeltaSnapshot)})
        keep = 0
        for i, (_, vals) in enumerate(ancestors):
            if not remaining:
                break
            keep = i + 1
            remaining = {k for k in remaining if k not in vals}
        return [cid for cid, _ in reversed(ancestors[:keep])] + [checkpoint_id]

    def get_next_version(self, current: str | None, channel: None) -> str:
        current_v = 0 if current is None else current if isinstance(current, int) else int(str(current).split(".")[0])
        return f"{current_v + 1:032}.{random.random():016}"  # nosec B311 -- a tie-breaker as in InMemorySaver, not a secret

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
        with self._s.lock:
            try:
                t = self._thread(thread_id)
            except IntegrityError as exc:  # a record on the thread's chains failed to open
                self._s.threads.pop(thread_id, None)
                branches = sorted(n for n in self._names(refresh=True) if (p := parse_branch(n)) and p[0] == thread_id)
                return ThreadVerification(thread_id, False, branches, 0, 0, 0, [str(exc)])
            if t is None:
                return ThreadVerification(thread_id, False, [], 0, 0, 0, [f"no thread {thread_id!r} in this store"])
            for branch in sorted(t.heads):
                try:
                    records += len(self._view(branch).log())
                except IntegrityError as exc:
                    problems.append(f"branch {branch}: {exc}")
            for ns, ids in t.checkpoints.items():
                for checkpoint_id in ids:
                    try:
                        checkpoints += self._tuple(t, ns, checkpoint_id) is not None
                        writes += len(t.task_writes.get((ns, checkpoint_id), {}))
                    except Exception as exc:  # noqa: BLE001 - every failure is a finding
                        problems.append(f"checkpoint {ns!r}/{checkpoint_id}: {exc}")
            problems.extend(f"store: {d}" for d in self._s.handle.status().damage)
            return ThreadVerification(thread_id, not problems, sorted(t.heads), records, checkpoints, writes, problems)

    # -- async: each operation runs whole in one worker thread ------------------------------------------

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await asyncio.to_thread(self.get_tuple, config)

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        batches = self._batches(config, filter, before, limit)  # each batch one worker-thread hop
        while (batch := await asyncio.to_thread(next, batches, None)) is not None:
            for item in batch:
                yield item

    async def aput(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions
    ) -> RunnableConfig:
        return await asyncio.to_thread(self.put, config, checkpoint, metadata, new_versions)

    async def aput_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        await asyncio.to_thread(self.put_writes, config, writes, task_id, task_path)

    async def adelete_thread(self, thread_id: str) -> None:
        await asyncio.to_thread(self.delete_thread, thread_id)

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await asyncio.to_thread(self.delete_for_runs, run_ids)

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await asyncio.to_thread(self.copy_thread, source_thread_id, target_thread_id)

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await asyncio.to_thread(self.prune, thread_ids, strategy=strategy)

    async def arollback(self, config: RunnableConfig) -> RunnableConfig:
        return await asyncio.to_thread(self.rollback, config)

    async def averify(self, thread_id: str) -> ThreadVerification:
        return await asyncio.to_thread(self.verify, thread_id)

    def _guard(self) -> None:
        """Nothing for SovsealSaver (AsyncSovsealSaver refuses sync calls on its event loop's thread;
        the a* methods call the sync ones in a worker thread, which has no running loop)."""

    @classmethod
    def _opened(cls, path: Any, key: Any, embedder: Any, serde: SerializerProtocol | None, kwargs: dict[str, Any]) -> Self:
        """A saver on a handle of its own (closed with the saver). Checkpoints are never recalled by
        meaning, so unless ``embedder`` is given no model is loaded."""
        handle = Sovseal(path, key=key, embedder=embedder or no_embedding, **kwargs)
        try:
            saver = cls(handle, serde=serde)
        except BaseException:
            handle.close()
            raise
        saver._s.owned = True
        return saver


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
        """Open the store at ``path`` for checkpoints (best kept in a directory of its own)."""
        saver = cls._opened(path, key, embedder, serde, sovseal_kwargs)
        try:
            yield saver
        finally:
            saver.close()


class AsyncSovsealSaver(_SovsealSaverBase):
    """The async-first saver: ``async with AsyncSovsealSaver.open(path, key=...) as saver``.

    Every ``a*`` method runs its whole operation in one worker thread, so the event loop never
    blocks on disk or crypto. The sync methods work from other threads (LangGraph's sync nodes run
    in a pool); called on the thread running the event loop they raise, as ``AsyncSqliteSaver``'s
    do, since they would block it.
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
        saver = await asyncio.to_thread(cls._opened, path, key, embedder, serde, sovseal_kwargs)
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
