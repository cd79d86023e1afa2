"""The store side of the saver: each thread's records on its sovseal branches, indexed, read and written.

Nothing here knows LangGraph's API (saver.py maps it onto this). A thread's branches are its live
branch (checkpoints), its writes branch (pending writes) and its archives (futures abandoned by time
travel); see _layout.py for their names and the record paths.

``Threads`` keeps an index of each thread it touched (``Thread``: the paths each branch shows, at
which snapshot, and where each visible record is read), loaded from ``log()`` and checked against
the branches' heads (``heads_of``) before it is used, so what another process wrote, or a pull
brought, is picked up. A branch that a sync left with several heads (two devices wrote the thread)
shows what all of them hold; a write goes on all of them. Payloads opened or sealed are kept in
memory, their frames rechecked on disk (``Sovseal.recheck``) whenever they are returned again.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from cachetools import LRUCache

from sovseal import Sovseal
from sovseal.errors import IntegrityError, InvalidInputError, UnknownBranchError

from ._common import decode_blob
from ._layout import (
    FORMATS,
    Parsed,
    archive_branch,
    check_part,
    join_parts,
    live_branch,
    parse_branch,
    parse_path,
    part_path,
    typed,
    writes_branch,
)

_T = TypeVar("_T")
_OPENED_CACHE = 512  # opened payloads kept, so re-reading a checkpoint does not decrypt it again
#: How every record is stored: never recalled by meaning (no embedding, no keywords), no sovseal metadata.
_RECORD: dict[str, Any] = {"type": "episodic", "provenance": "observed", "index": False}


@dataclass(slots=True)
class Opened:
    """A payload as this process opened or sealed it; ``blobs`` (its inline blobs decoded) is set by
    the first read that checks it against its path. Blobs in part records are read every time."""

    payload: Any
    blobs: dict[str, tuple[str, bytes]] | None = None


@dataclass(slots=True)
class _Ref:
    """Where a visible record is read: its snapshot id and a branch whose HEAD shows it."""

    sid: str
    branch: str


class Thread:
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
        # Every saver path on the thread's chains, visible or not: what deleting the thread purges.
        self.written: set[str] = set()
        # snapshot id -> (decoded metadata, for filters; its typed bytes): kept by the saver
        self.metadata: dict[str, tuple[dict[str, Any], tuple[str, bytes]]] = {}

    def tips(self, branch: str) -> tuple[str | None, ...]:
        return self.heads.get(branch, (None,))

    def archives(self) -> list[str]:
        found = {p[2]: b for b in self.heads if (p := parse_branch(b)) and p[1] == "archive"}
        return [found[n] for n in sorted(found)]

    def ordered(self, ns: str) -> list[str]:
        """The namespace's checkpoint ids, oldest first (kept up to date, so the newest is O(1))."""
        found = self._sorted.get(ns)
        if found is None:
            found = self._sorted[ns] = sorted(self.checkpoints.get(ns, ()))
        return found

    def newest(self, ns: str) -> str | None:
        ids = self.ordered(ns)
        return ids[-1] if ids else None

    def record_paths(self, ns: str, checkpoint_id: str) -> list[str]:
        """The checkpoint's record and its writes records, with their parts."""
        roots = [p for p in [self.checkpoints.get(ns, {}).get(checkpoint_id)] if p is not None]
        roots.extend(self.task_writes.get((ns, checkpoint_id), {}).values())
        visible = {p for view in self.views.values() for p in view}
        return [p for root in roots for p in visible if p == root or p.startswith(root + "/part/")]

    def show(self, branch: str, path: str, sid: str, parsed: Parsed | None = None) -> None:
        self.views.setdefault(branch, {})[path] = (sid, time.time())
        self.written.add(path)
        self.remerge(path, parsed)

    def remerge(self, path: str, parsed: Parsed | None = None) -> None:
        """Recompute where ``path`` is read from: the newest version any branch shows (two branches
        differ only after a checkpoint was stored again and the thread then forked from before it),
        ties to the live branch, then the writes branch."""
        best: tuple[float, int] | None = None
        ref: _Ref | None = None
        for branch, view in self.views.items():
            if (found := view.get(path)) is not None:
                rank = (-found[1], 0 if branch == self.live else 1 if branch == self.writes else 2)
                if best is None or rank < best:
                    best, ref = rank, _Ref(found[0], branch)
        if ref is None:
            self.merged.pop(path, None)
        else:
            self.merged[path] = ref
        parsed = parsed or parse_path(path)
        if parsed is None or parsed.kind == "part":
            return
        if parsed.kind == "checkpoint":
            index, key = self.checkpoints.setdefault(parsed.ns, {}), parsed.checkpoint_id
        else:
            index, key = self.task_writes.setdefault((parsed.ns, parsed.checkpoint_id), {}), parsed.task_id or ""
        if ref is not None:
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


def _names_its_path(payload: Any, path: str, kind: str) -> bool:
    """Whether a payload says it is the ``kind`` record ("checkpoint" or "writes") its path names."""
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


class Threads:
    """The threads of one store, as one saver (and its ``with_allowlist`` copies) sees them.

    Every method expects ``lock`` held: the index is one process's, shared by the saver's threads.
    """

    def __init__(self, handle: Sovseal) -> None:
        self.handle = handle
        self.owned = False  # the saver opened the handle and closes it
        self.lock = threading.RLock()
        self.threads: dict[str, Thread] = {}
        self._views: dict[str, Sovseal] = {}  # branch -> a view of the handle on it
        # Payloads opened and verified, or sealed, by snapshot id (records never change; a cached
        # payload is never mutated), least recently used first.
        self._opened: LRUCache[str, Opened] = LRUCache(_OPENED_CACHE)
        # While a batch decodes: the remembered records it returns, rechecked in one call at the end.
        self._deferred: list[str] | None = None

    # -- keeping the index fresh ----------------------------------------------------------------------

    def view(self, branch: str) -> Sovseal:
        """A view of the handle on ``branch``: reads and writes there, the handle's own branch untouched."""
        found = self._views.get(branch)
        if found is None:
            found = self._views[branch] = self.handle.view(branch)
        return found

    def heads(self, branch: str) -> tuple[str | None, ...]:
        """Every head of ``branch``, newest first; () for a branch that does not exist (any more)."""
        try:
            return tuple(self.handle.heads_of(branch))
        except UnknownBranchError:
            return ()

    def load(self, t: Thread, branch: str) -> bool:
        """Fold ``log()`` of a branch into the paths it shows (opening every record); False, and the
        branch leaves the index, if it does not exist.

        With several heads ``log()`` walks them all, newest first by the store's (clock, id) order,
        so the first mention of a path is the write the branch's merged state shows, on every device
        alike. The heads are read first: if another writer moves the branch meanwhile, the next check
        sees it.
        """
        heads = self.heads(branch)
        try:
            entries = self.view(branch).log() if heads else None
        except UnknownBranchError:  # deleted just now
            entries = None
        if entries is None:
            t.heads.pop(branch, None)
            t.views.pop(branch, None)
            return False
        if damage := self.handle.status().damage:  # a frame that failed authentication may hide records
            raise IntegrityError(f"the store has damaged records ({'; '.join(damage[:3])}); run `sovseal verify`")
        view: dict[str, tuple[str, float]] = {}
        seen: set[str] = set()
        for entry in entries:
            if entry.path not in seen:
                seen.add(entry.path)
                if parse_path(entry.path) is not None:
                    t.written.add(entry.path)
                    if entry.op == "store":
                        view[entry.path] = (entry.snapshot_id, entry.created_at.timestamp())
        t.heads[branch], t.views[branch] = heads, view
        return True

    def _discover(self, t: Thread, *, archives: bool = True) -> bool:
        """Load the thread's branches the index lacks, asked of the store by name (listing every
        branch would cost a name per thread): its writes branch and (``archives``) those after the
        last archive it knows (they are numbered from 1 without gaps). Whether it found any."""
        found = t.writes not in t.heads and self.load(t, t.writes)
        if archives:
            n = len(t.archives())
            while self.load(t, archive_branch(t.thread_id, n := n + 1)):
                found = True
        return found

    def refresh(self, t: Thread, only: str | None = None) -> None:
        """Reload the branches another handle (or a pull) moved since the index last looked.

        ``only`` names the branch an operation depends on (put: the live branch, put_writes: the
        writes branch): only its heads are checked, and the others only if it moved. The writes
        branch appears without the live branch moving; archives appear only with a fork, which moves it.
        """
        if only is not None and only in t.heads and self.heads(only) == t.heads[only]:
            return
        moved = [b for b in list(t.heads) if self.heads(b) != t.heads[b]]
        for branch in moved:
            self.load(t, branch)
        found = self._discover(t, archives=bool(moved)) if moved or only != t.live else False
        if moved or found:
            t.metadata.clear()
            t.derive()

    def get(self, thread_id: str, *, create: bool = False, only: str | None = None) -> Thread | None:
        """The thread's index, fresh (``only``: see refresh); None for a thread with no branch (unless ``create``)."""
        t = self.threads.get(thread_id)
        if t is not None:
            self.refresh(t, only)
            if t.live in t.heads:
                return t
        t = Thread(thread_id)  # new to this process, or deleted by another handle
        if self.load(t, t.live):
            self._discover(t)
        elif create:
            self.ensure(t, t.live)
        else:
            self.threads.pop(thread_id, None)
            return None
        t.derive()
        self.threads[thread_id] = t
        return t

    def ensure(self, t: Thread, branch: str) -> None:
        """Create ``branch`` empty (or load it, if another process created it just now)."""
        try:
            self.handle.create_branch(branch)
        except InvalidInputError:
            if not self.load(t, branch):
                raise
            t.derive()
        else:
            t.heads[branch], t.views[branch] = (None,), {}

    def new_archive(self, t: Thread, at: str) -> str:
        """Create the thread's next archive branch at ``at`` (the caller indexes it)."""
        n = len(t.archives())
        while True:
            name = archive_branch(t.thread_id, n := n + 1)
            try:
                self.handle.create_branch(name, at)
            except InvalidInputError:
                if self.heads(name):  # another process took the number
                    continue
                raise
            return name

    def thread_ids(self) -> list[str]:
        return sorted({p[0] for name in self.handle.branches() if (p := parse_branch(name)) and p[1] == "live"})

    # -- reading records ---------------------------------------------------------------------------------

    def open(self, t: Thread, path: str) -> Opened:
        """A visible record, opened and verified by the SDK (callers must not mutate its payload).

        A record opened or sealed before is taken from memory and its frame on disk rechecked (now,
        or with the batch), so bytes altered under a running process still raise IntegrityError.
        """
        ref = t.merged.get(path)
        if ref is None:
            raise IntegrityError(f"{path} is named by a record of thread {t.thread_id!r} but is not visible; run verify()")
        record = self._opened.get(ref.sid)
        if record is None:
            memory = self.view(ref.branch).get(path)
            if memory is None or memory.snapshot_id != ref.sid:
                raise IntegrityError(
                    f"{path} on branch {ref.branch!r} is not the record the thread's index holds "
                    "(written by another process mid-operation, or the store was changed): retry, or run verify()"
                )
            record = Opened(memory.payload)
        elif self._deferred is not None:
            self._deferred.append(ref.sid)
        else:
            self.handle.recheck(ref.sid)
        self._remember(ref.sid, record)
        return record

    def checked(self, t: Thread, path: str, kind: str) -> Opened:
        """A checkpoint or writes record (``kind``), its payload checked against its path and its
        inline blobs decoded on its first read."""
        record = self.open(t, path)
        if record.blobs is None:
            payload = record.payload
            if not _names_its_path(payload, path, kind):
                raise IntegrityError(f"the {kind} record {path} does not match its path; run verify()")
            if kind == "checkpoint":
                descriptors = payload.get("blobs")
            elif isinstance(writes := payload.get("writes"), list) and all(
                isinstance(e, dict) and isinstance(e.get("idx"), int) and isinstance(e.get("channel"), str) for e in writes
            ):
                descriptors = {f"w{e['idx']}": e.get("blob") for e in writes}
            else:
                descriptors = None
            if not isinstance(descriptors, dict):
                raise IntegrityError(f"the {kind} record {path} is malformed; run verify()")
            blobs = {}
            for name, descriptor in descriptors.items():
                type_, inline = typed(descriptor, f"{name!r} of {path}")
                if inline:
                    blobs[name] = (type_, decode_blob(descriptor, f"{name!r} of {path}"))
            record.blobs = blobs
        return record

    def blob(self, t: Thread, path: str, name: str, record: Opened, descriptor: Any) -> tuple[str, bytes]:
        """A blob of a checked record, as typed bytes: decoded already if inline, else read from its parts."""
        if (found := (record.blobs or {}).get(name)) is not None:
            return found
        where = f"{name!r} of {path}"
        type_, _ = typed(descriptor, where)
        n = descriptor["n"]
        chunks = [check_part(self.open(t, part_path(path, name, i)).payload, path, name, i, n) for i in range(n)]
        return type_, join_parts(descriptor, chunks, where)

    def rechecked(self, decode: Callable[..., _T], *args: Any) -> _T:
        """``decode(*args)``, the remembered records it read rechecked together (one
        ``Sovseal.recheck`` call) before anything it decoded is returned."""
        if self._deferred is not None:  # already inside a batch: it rechecks these too
            return decode(*args)
        self._deferred = []
        try:
            decoded = decode(*args)
            sids = self._deferred
        finally:
            self._deferred = None
        if sids:
            self.handle.recheck(*sids)
        return decoded

    def _remember(self, sid: str, record: Opened) -> None:
        self._opened[sid] = record  # the most recent; the least recently used goes when it is full

    # -- writing records ---------------------------------------------------------------------------------

    def append(
        self,
        t: Thread,
        branch: str,
        records: list[tuple[str, Any]],
        *,
        parent: str | None = None,
        if_heads: dict[str, list[str]] | None = None,
        parsed: Parsed | None = None,
    ) -> None:
        """Store records in order on ``branch`` and index them (``parsed``: what the last one's path names).

        One record (the usual put or put_writes, or a fork's first, with ``parent=``) goes through
        ``store``, which takes ``if_heads`` (HeadMovedError, nothing stored, if those branches' heads
        are not exactly those); the rest go in one ``store_many`` batch (a crash keeps a prefix:
        parts come before the record naming them). What was sealed is remembered as opened.
        """
        view = self.view(branch)
        results = []
        if parent is not None or len(records) == 1:
            path, payload = records[0]
            results.append(view.store(path, payload, type="episodic", provenance="observed", index=False, parent=parent, if_heads=if_heads))
        if len(records) > len(results):
            results.extend(view.store_many([{"path": p, "payload": d, **_RECORD} for p, d in records[len(results) :]]))
        for (path, payload), result in zip(records, results, strict=True):
            if not result.reinforced:  # the record went on every head of the branch: it is the one head now
                t.heads[branch] = (result.snapshot_id,)
            t.show(branch, path, result.snapshot_id, parsed if path == records[-1][0] else None)
            self._remember(result.snapshot_id, Opened(payload))

    def fork(self, t: Thread, parent_sid: str, records: list[tuple[str, Any]]) -> None:
        """Store records on the live branch as a fork at ``parent_sid`` (time travel), each head it
        leaves kept readable on an archive branch (two after a sync that left two heads)."""
        before = {p for b, view in t.views.items() if b != t.writes for p in view}
        if t.views.get(t.live):
            archived = {h for b in t.archives() for h in t.tips(b)}
            for head in [h for h in t.tips(t.live) if h is not None and h not in archived]:
                name = self.new_archive(t, head)
                if len(t.tips(t.live)) == 1:
                    t.heads[name], t.views[name] = (head,), dict(t.views[t.live])
                else:  # each archive shows what its head holds, a part of the live branch's view
                    self.load(t, name)
        self.append(t, t.live, records, parent=parent_sid)
        self.load(t, t.live)
        # A record deleted (tombstoned) after the fork point is visible again at the fork: delete it again.
        revived = [p for p in t.views[t.live] if p not in before and p not in {path for path, _ in records}]
        if revived:
            self.view(t.live).delete_many(revived)
            self.load(t, t.live)
        t.derive()

    def hide(self, t: Thread, paths: list[str]) -> None:
        """A tombstone for each path on every branch of the thread that shows it (one batch a branch)."""
        for branch, view in t.views.items():
            gone = [p for p in paths if view.pop(p, None)]
            if gone and (done := [r for r in self.view(branch).delete_many(gone) if r is not None]):
                t.heads[branch] = (done[-1].snapshot_id,)
        t.derive()

    def empty(self, t: Thread) -> None:
        """Delete every branch of the thread (nothing visible; the records stay until purged)."""
        for branch in list(t.heads):
            try:
                self.handle.delete_branch(branch)
            except UnknownBranchError:  # deleted by another handle
                pass
        t.heads.clear()
        t.views.clear()
        t.metadata.clear()
        t.derive()
