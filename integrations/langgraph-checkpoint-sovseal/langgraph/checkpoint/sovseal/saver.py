"""``SovsealSaver`` and ``AsyncSovsealSaver``: LangGraph checkpoints as sealed sovseal records.

The mapping (docs/integrations/langgraph.md has the long form; paths and branch names in _layout.py):

- A **thread is a sovseal branch**, ``langgraph:thread:<thread id>``: its checkpoints, in every
  namespace, are records appended to it, so each checkpoint's snapshot id commits to all of the
  thread's history before it. **Pending writes** go to a companion branch ``...:writes``, one
  record per (checkpoint, task), so they never split the checkpoint chain.
- **Time travel is a sovseal fork.** A checkpoint whose parent is not the newest of its namespace
  is stored with ``parent=`` that parent's snapshot; the abandoned future stays readable on an
  archive branch ``...:fork:<n>`` (numbered from 1 without gaps).
- ``delete_thread`` deletes the thread's branches and purges what no branch reaches any more;
  ``delete_for_runs`` appends tombstones; ``prune`` re-roots the thread on what it keeps.

The store side (each thread's index, kept fresh against its branches' heads; reading and writing
records) is _threads.py. A write is planned from the index and passes the heads it knows as
``if_heads``: the store checks them as it appends, and the saver reloads and plans again if they
moved (another process wrote the thread, or a pull brought another device's writes).
"""

from __future__ import annotations

import asyncio
import bisect
import os
import random
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Concatenate, ParamSpec, Self, TypeVar

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
from sovseal.errors import HeadMovedError, IntegrityError, InvalidArgumentTypeError, InvalidInputError, UnknownBranchError

from ._common import RECORD_BLOB_CHARS, no_embedding
from ._group import GroupCommit
from ._layout import (
    FORMAT,
    WRITES_ROOT,
    Parsed,
    checkpoint_path,
    inline_chars,
    live_branch,
    pack_blobs,
    parse_branch,
    parse_path,
    writes_branch,
    writes_path,
)
from ._threads import Opened, Thread, Threads

__all__ = ["AsyncSovsealSaver", "SovsealSaver", "ThreadVerification"]

_T = TypeVar("_T")
_P = ParamSpec("_P")
_LIST_BATCH = 16  # checkpoints decoded per batch (one recheck call; one worker-thread hop in alist)
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


def _thread_of(config: RunnableConfig) -> str:
    thread_id = (config.get("configurable") or {}).get("thread_id")
    if thread_id is None or thread_id == "":
        raise InvalidInputError('the config needs a thread id: {"configurable": {"thread_id": ...}}')
    return str(thread_id)


def _ns_of(config: RunnableConfig) -> str:
    return str((config.get("configurable") or {}).get("checkpoint_ns") or "")


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {"configurable": {"thread_id": thread_id, "checkpoint_ns": ns, "checkpoint_id": checkpoint_id}}


def _in_worker(method: Callable[Concatenate[Any, _P], _T]) -> Callable[Concatenate[Any, _P], Coroutine[Any, Any, _T]]:
    """The async twin of a sync method: the whole operation in one worker thread (which has no
    running event loop, so AsyncSovsealSaver's guard never trips on it)."""

    async def run(self: Any, *args: _P.args, **kwargs: _P.kwargs) -> _T:
        return await asyncio.to_thread(getattr(self, method.__name__), *args, **kwargs)  # type: ignore[no-any-return]

    return run


class _SovsealSaverBase(BaseCheckpointSaver[str]):
    """The saver's logic; the two public classes differ in how they open and in their sync guard."""

    def __init__(self, sovseal: Sovseal, *, serde: SerializerProtocol | None = None) -> None:
        super().__init__(serde=serde)
        if not isinstance(sovseal, Sovseal):
            raise InvalidArgumentTypeError(
                f"{type(self).__name__} needs a sovseal.Sovseal handle, got {type(sovseal).__name__}; "
                f"or let {type(self).__name__}.open(path, key=...) open one"
            )
        self._s = Threads(sovseal)
        self._group = GroupCommit(self._s.lock, sovseal.batch)

    @property
    def sovseal(self) -> Sovseal:
        """The handle the saver writes through."""
        return self._s.handle

    def close(self) -> None:
        """Close the handle if the saver opened it (``open``); a handle you passed stays open."""
        if self._s.owned:
            self._s.handle.close()

    # -- reading --------------------------------------------------------------------------------------

    def _metadata(self, t: Thread, path: str, record: Opened | None = None) -> tuple[dict[str, Any], tuple[str, bytes]]:
        """The checkpoint's metadata (shared: read it, never change it) and its typed bytes."""
        sid = t.merged[path].sid
        cached = t.metadata.get(sid)
        if cached is None:
            record = record or self._s.checked(t, path, "checkpoint")
            typed_ = self._s.blob(t, path, "metadata", record, record.payload["blobs"].get("metadata"))
            decoded = self.serde.loads_typed(typed_)
            if not isinstance(decoded, dict):
                raise IntegrityError(f"the metadata of {path} is not a mapping; run verify()")
            cached = t.metadata[sid] = (decoded, typed_)
        return cached

    def _decoded(self, t: Thread, path: str, record: Opened | None = None) -> tuple[dict[str, Any], str | None]:
        """A stored checkpoint, decoded, and its parent's checkpoint id."""
        record = record or self._s.checked(t, path, "checkpoint")
        checkpoint = self.serde.loads_typed(self._s.blob(t, path, "checkpoint", record, record.payload["blobs"].get("checkpoint")))
        if not isinstance(checkpoint, dict):
            raise IntegrityError(f"the checkpoint in {path} is not a checkpoint; run verify()")
        return checkpoint, record.payload.get("parent_checkpoint_id")

    def _pending_writes(self, t: Thread, ns: str, checkpoint_id: str) -> list[tuple[str, str, Any]]:
        keyed: list[tuple[tuple[str, str, int], tuple[str, str, Any]]] = []
        for task_id, path in t.task_writes.get((ns, checkpoint_id), {}).items():
            record = self._s.checked(t, path, "writes")
            task_path = record.payload.get("task_path") or ""
            for e in record.payload["writes"]:
                value = self.serde.loads_typed(self._s.blob(t, path, f"w{e['idx']}", record, e.get("blob")))
                keyed.append((writes_sort_key(task_path, task_id, e["idx"]), (task_id, e["channel"], value)))
        keyed.sort(key=lambda item: item[0])
        return [write for _, write in keyed]

    def _tuple(self, t: Thread, ns: str, checkpoint_id: str, filter: dict[str, Any] | None = None) -> CheckpointTuple | None:
        path = t.checkpoints.get(ns, {}).get(checkpoint_id)
        if path is None:
            return None
        record = self._s.checked(t, path, "checkpoint")  # opened (or rechecked) once for both
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

    # -- BaseCheckpointSaver ---------------------------------------------------------------------------

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        self._guard()
        thread_id, ns = _thread_of(config), _ns_of(config)
        with self._s.lock:
            t = self._s.get(thread_id)
            if t is None or not t.checkpoints.get(ns):
                return None
            return self._s.rechecked(self._tuple, t, ns, get_checkpoint_id(config) or t.newest(ns))

    def _listed(self, chunk: list[tuple[str, str, str]], filter: dict[str, Any] | None) -> list[CheckpointTuple | None]:
        threads = self._s.threads
        return [self._tuple(threads[tid], ns, cid, filter) if tid in threads else None for tid, ns, cid in chunk]

    def _listing(self, config: RunnableConfig | None, before: RunnableConfig | None, cap: int | None) -> list[tuple[str, str, str]]:
        """(thread, ns, checkpoint id) of the candidates, newest checkpoint id first; at most ``cap``
        (when no filter can drop one) from each namespace, which is all a ``limit`` can return."""
        ns_wanted = (config.get("configurable") or {}).get("checkpoint_ns") if config else None
        id_wanted = get_checkpoint_id(config) if config else None
        before_id = get_checkpoint_id(before) if before else None
        out: list[tuple[str, str, str]] = []
        with self._s.lock:
            for thread_id in [_thread_of(config)] if config else self._s.thread_ids():
                t = self._s.get(thread_id)
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
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata, new_versions: ChannelVersions
    ) -> RunnableConfig:
        self._guard()
        thread_id, ns = _thread_of(config), _ns_of(config)
        checkpoint_id = checkpoint["id"]
        blobs = {
            "checkpoint": self.serde.dumps_typed(checkpoint),
            "metadata": self.serde.dumps_typed(get_serializable_checkpoint_metadata(config, metadata)),
        }
        # Encoded before the lock, so this runs while another operation of the handle waits on the disk.
        new_path = checkpoint_path(thread_id, ns, checkpoint_id)
        args = (ns, checkpoint_id, get_checkpoint_id(config), blobs, new_path, pack_blobs(new_path, blobs))

        def write() -> None:
            t = self._s.threads.get(thread_id)
            if t is None or t.live not in t.heads or not self._put_record(t, *args, fresh=False):
                t = self._s.get(thread_id, create=True, only=live_branch(thread_id))
                assert t is not None  # nosec B101 -- type narrowing: create=True always returns a thread
                self._put_record(t, *args, fresh=True)

        self._group.run(write)
        return _config(thread_id, ns, checkpoint_id)

    def _put_record(
        self, t: Thread, ns: str, checkpoint_id: str, parent_id: str | None, blobs: dict[str, tuple[str, bytes]], new_path: str,
        packed: _Packed, *, fresh: bool,
    ) -> bool:  # fmt: skip
        """Store a checkpoint's record (and its parts) where the thread's index places it.

        ``fresh``: the index was just checked against the live branch's heads. Otherwise the usual
        put, one record on the live branch, is stored at once with ``if_heads`` listing every head
        the index knows; False, nothing stored, if they moved, or if the put forks or has parts
        (which act on more of the index): the caller refreshes the index and calls again.

        A checkpoint whose parent is one of the live heads, or the namespace's newest, goes on every
        head (after a sync, that merges what two devices wrote); one whose parent is further back
        forks the branch there (time travel).
        """
        ids = t.checkpoints.get(ns, {})
        existing = ids.get(checkpoint_id)
        path = existing or new_path
        # A new path names this thread; one already stored may name another (copy_thread keeps paths).
        parsed = parse_path(existing) if existing else Parsed("checkpoint", t.thread_id, ns, checkpoint_id)
        assert parsed is not None  # nosec B101 -- type narrowing: the index holds only the saver's paths
        parent_ref = t.merged.get(ids[parent_id]) if parent_id in ids else None
        tips = t.tips(t.live)
        forks = parent_ref is not None and not existing and parent_id != t.newest(ns) and parent_ref.sid not in tips
        descriptors, parts = packed if path == new_path else pack_blobs(path, blobs)  # parts name their record
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
        if parent_ref is not None and forks:
            self._s.fork(t, parent_ref.sid, [*parts, (path, payload)])
            return True
        try:
            conditions = None if fresh else {t.live: [h for h in tips if h]}
            self._s.append(t, t.live, [*parts, (path, payload)], if_heads=conditions, parsed=parsed)
        except (HeadMovedError, UnknownBranchError):  # another handle wrote or deleted the thread
            if fresh:
                raise
            return False
        return True

    def put_writes(self, config: RunnableConfig, writes: Sequence[tuple[str, Any]], task_id: str, task_path: str = "") -> None:
        self._guard()
        thread_id, ns = _thread_of(config), _ns_of(config)
        checkpoint_id = get_checkpoint_id(config)
        if not checkpoint_id:
            raise InvalidInputError("put_writes needs the config of a checkpoint (configurable.checkpoint_id)")
        incoming = {WRITES_IDX_MAP.get(ch, idx): (ch, self.serde.dumps_typed(value)) for idx, (ch, value) in enumerate(writes)}
        # Packed before the lock for the usual case, a task's first writes (no record to merge with).
        new_path = writes_path(thread_id, ns, checkpoint_id, task_id)
        first_pack = pack_blobs(new_path, {f"w{k}": typed_value for k, (_, typed_value) in incoming.items()})
        args = (ns, checkpoint_id, task_id, task_path, incoming, new_path, first_pack)

        def write() -> None:
            t = self._s.threads.get(thread_id)
            if t is None or t.writes not in t.heads or not self._put_writes_record(t, *args, fresh=False):
                t = self._s.get(thread_id, create=True, only=writes_branch(thread_id))
                assert t is not None  # nosec B101 -- type narrowing: create=True always returns a thread
                if t.writes not in t.heads:
                    self._s.ensure(t, t.writes)
                self._put_writes_record(t, *args, fresh=True)

        self._group.run(write)

    def _put_writes_record(
        self, t: Thread, ns: str, checkpoint_id: str, task_id: str, task_path: str, incoming: dict[int, tuple[str, tuple[str, bytes]]],
        new_path: str, first_pack: _Packed, *, fresh: bool,
    ) -> bool:  # fmt: skip
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
        tips = t.tips(t.writes)
        if not fresh and (existing or None in tips):
            return False
        conditions = None if fresh else {t.writes: [h for h in tips if h]}
        record = self._s.checked(t, path, "writes") if existing else None
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
        if conditions is not None and parts:
            return False
        for k, (channel, _) in news.items():
            entries[k] = {"idx": k, "channel": channel, "blob": descriptors[f"w{k}"]}
        cp_path = t.checkpoints.get(ns, {}).get(checkpoint_id)
        if cp_path is None:
            # Not stored yet (its put may be waiting for the lock), or stored by another handle on the
            # live branch, whose HEAD then moved: the store checks it, or a fresh index looks now.
            if conditions is not None and None not in t.tips(t.live):
                conditions[t.live] = [h for h in t.tips(t.live) if h]
            else:
                self._s.refresh(t, only=t.live)
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
            self._s.append(t, t.writes, [*parts, (path, payload)], if_heads=conditions, parsed=parsed)
        except (HeadMovedError, UnknownBranchError):  # another handle wrote or deleted the thread
            if fresh:
                raise
            return False
        return True

    def _same(self, t: Thread, path: str, record: Opened, entry: dict[str, Any], channel: str, value: tuple[str, bytes]) -> bool:
        return entry.get("channel") == channel and self._s.blob(t, path, f"w{entry['idx']}", record, entry.get("blob")) == value

    def delete_thread(self, thread_id: str) -> None:
        """Delete the thread and erase its records for good: nothing reads them any more, their bytes
        leave the disk at the next compaction, and with replication every device erases them too
        (docs/integrations/langgraph.md, "Deleting and erasing"). Records another thread still
        reaches (``copy_thread`` shares them) stay until that thread lets them go too."""
        self.prune([thread_id], strategy="delete")

    def _erase_unreachable(self, paths: set[str]) -> None:
        """Purge the versions of these paths (all a thread's chains ever held) that no branch reaches
        any more: those another thread shares (``copy_thread``) stay. By path, not by prefix: a
        prefix would start the handle's recall catalog, a decrypt of the whole store. Their bytes
        leave the disk at the next compaction (``compact()``, or by itself past the threshold):
        rewriting the journal on every delete would make each one cost the whole store."""
        if paths:
            self._s.handle.purge(sorted(paths), unreachable=True, reason="langgraph delete_thread", compact=False)

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._guard()
        wanted = {str(r) for r in run_ids}
        with self._s.lock:
            for thread_id in self._s.thread_ids() if wanted else ():
                t = self._s.get(thread_id)
                if t is None:
                    continue
                doomed = [
                    p
                    for ns, ids in t.checkpoints.items()
                    for cid, path in ids.items()
                    if (run := self._metadata(t, path)[0].get("run_id")) is not None and str(run) in wanted
                    for p in t.record_paths(ns, cid)
                ]
                if doomed:
                    self._s.hide(t, doomed)

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        """Give the target thread the source's whole history, sharing its records (no bytes copied).

        Each of the source's branches is created again for the target at the same heads, so the
        target holds the same checkpoint ids, metadata, namespaces and writes, and every record keeps
        the path it was written under. A source branch that a sync left with several heads is copied
        at its HEAD, each other head on an archive branch. A target with checkpoints is refused.
        """
        self._guard()
        source, target = str(source_thread_id), str(target_thread_id)
        if source == target:
            return
        with self._s.lock:
            src = self._s.get(source)
            if src is None or not src.checkpoints:
                return
            dst = self._s.get(target)
            if dst is not None and dst.checkpoints:
                raise InvalidInputError(f"thread {target!r} already has checkpoints; delete_thread() it first or copy to a new thread")
            if dst is not None:
                self._s.empty(dst)  # it shows nothing: its branches are made again at the source's heads
            dst = Thread(target)
            for branch, heads in list(src.heads.items()):
                kind = (parse_branch(branch) or ("", "", 0))[1]
                if kind in ("live", "writes"):
                    to = dst.live if kind == "live" else dst.writes
                    self._s.handle.create_branch(to, heads[0])
                elif src.views.get(branch) and heads[0] is not None:
                    to = self._s.new_archive(dst, heads[0])
                else:
                    continue
                if len(heads) == 1:
                    dst.heads[to], dst.views[to] = heads, dict(src.views.get(branch, {}))
                else:  # the source's view is the merge of its heads; this branch shows one
                    self._s.load(dst, to)
                for other in heads[1:]:
                    if other is not None:
                        self._s.load(dst, self._s.new_archive(dst, other))
            dst.metadata, dst.written = dict(src.metadata), set(src.written)
            dst.derive()
            self._s.threads[target] = dst

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        """``"delete"``: as ``delete_thread``. ``"keep_latest"``: keep the newest checkpoint per namespace,
        and the ancestors its ``DeltaChannel`` values are rebuilt from (see :meth:`_delta_chain`).

        Keeping re-roots the thread: its branches are made again, empty, and the kept checkpoints
        (with their parts and pending writes, oldest first) stored again on them, so its chain is
        short again. What is let go is then erased for good, as ``delete_thread`` erases.
        """
        self._guard()
        if strategy not in ("keep_latest", "delete"):
            raise InvalidInputError(f"unknown prune strategy {strategy!r}; use 'keep_latest' or 'delete'")
        for thread_id in map(str, thread_ids):
            with self._s.lock:
                t = self._s.get(thread_id)
                if t is None:
                    continue
                written = set(t.written)
                kept: dict[str, list[tuple[str, Any]]] = {t.live: [], t.writes: []}
                for ns in t.checkpoints if strategy == "keep_latest" else ():
                    for checkpoint_id in self._delta_chain(t, ns, t.ordered(ns)[-1]):
                        # parts first: a record is stored after the parts it names
                        for path in sorted(t.record_paths(ns, checkpoint_id), key=lambda p: ("/part/" not in p, p)):
                            kept[t.writes if path.startswith(WRITES_ROOT) else t.live].append((path, self._s.open(t, path).payload))
                archived = any(t.views.get(b) for b in t.archives())
                if strategy == "keep_latest" and not archived and sum(map(len, t.views.values())) == sum(map(len, kept.values())):
                    continue  # nothing to drop
                self._s.empty(t)
                if strategy == "delete":
                    del self._s.threads[thread_id]
                else:
                    self._s.ensure(t, t.live)
                    if kept[t.live]:
                        self._s.append(t, t.live, kept[t.live])
                    if kept[t.writes]:
                        self._s.ensure(t, t.writes)
                        self._s.append(t, t.writes, [(p, self._rebound(t, d)) for p, d in kept[t.writes]])
                self._erase_unreachable(written)  # what the delete or the re-root let go

    @staticmethod
    def _rebound(t: Thread, payload: Any) -> Any:
        """A kept writes record, bound to its checkpoint's record as stored again (a part: unchanged).
        A copy: payloads read are shared with the cache."""
        if not isinstance(payload, dict) or payload.get("lg") != "writes":
            return payload
        cp = t.checkpoints.get(payload["checkpoint_ns"], {}).get(payload["checkpoint_id"])
        return {**payload, "checkpoint_snapshot": t.merged[cp].sid if cp else None}

    def _delta_chain(self, t: Thread, ns: str, checkpoint_id: str) -> list[str]:
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
        while parent in ids and parent not in {checkpoint_id, *(a for a, _ in ancestors)}:  # never loop on a cycle
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
            raise InvalidInputError("rollback needs the config of a past checkpoint (configurable.checkpoint_id)")
        past = self.get_tuple(config)
        if past is None:
            raise InvalidInputError(
                f"no checkpoint {get_checkpoint_id(config)!r} in thread {_thread_of(config)!r}; list(config) lists the thread's checkpoints"
            )
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
                t = self._s.get(thread_id)
            except IntegrityError as exc:  # a record on the thread's chains failed to open
                self._s.threads.pop(thread_id, None)
                names = sorted(n for n in self._s.handle.branches() if (p := parse_branch(n)) and p[0] == thread_id)
                return ThreadVerification(thread_id, False, names, 0, 0, 0, [str(exc)])
            if t is None:
                return ThreadVerification(thread_id, False, [], 0, 0, 0, [f"no thread {thread_id!r} in this store"])
            for branch in sorted(t.heads):
                try:
                    records += len(self._s.view(branch).log())
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

    # -- async: each operation runs whole in one worker thread ----------------------------------------

    aget_tuple = _in_worker(get_tuple)
    aput = _in_worker(put)
    aput_writes = _in_worker(put_writes)
    adelete_thread = _in_worker(delete_thread)
    adelete_for_runs = _in_worker(delete_for_runs)
    acopy_thread = _in_worker(copy_thread)
    aprune = _in_worker(prune)
    arollback = _in_worker(rollback)
    averify = _in_worker(verify)

    def _guard(self) -> None:
        """Nothing for SovsealSaver; AsyncSovsealSaver refuses sync calls on its event loop's thread."""

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

    # -- listing (last in the class: below it, ``list`` names this method, not the builtin) ------------

    def _batches(
        self, config: RunnableConfig | None, filter: dict[str, Any] | None, before: RunnableConfig | None, limit: int | None
    ) -> Iterator[list[CheckpointTuple]]:
        """What ``list`` returns, newest first, in batches each decoded under one hold of the lock."""
        candidates = self._listing(config, before, None if filter else limit)
        remaining = limit
        start = 0
        while start < len(candidates) and (remaining is None or remaining > 0):
            size = _LIST_BATCH if filter or remaining is None else min(_LIST_BATCH, remaining)
            chunk, start = candidates[start : start + size], start + size
            with self._s.lock:
                decoded = self._s.rechecked(self._listed, chunk, filter)
            found = [d for d in decoded if d is not None][:remaining]
            if remaining is not None:
                remaining -= len(found)
            yield found

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
