"""``Sovseal`` and ``AsyncSovseal``: the public API (docs/api.md).

The client ties the durable store to the embedder and the vector index and holds the one
piece of per-handle state, the current branch. It validates every argument before anything
is written, so bad input raises a typed error and leaves the store as it was.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import functools
import itertools
import logging
import os
import threading
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, TypeVar

from sovseal import settings
from sovseal.crypto.keychain import coerce_key, resolve_key
from sovseal.errors import (
    RUN_VERIFY,
    DamagedRecordError,
    EmbedderMismatchError,
    IntegrityError,
    InvalidInputError,
    KeyRotatedError,
    KeyUnavailableError,
    SovsealError,
    StorageError,
    StoreClosedError,
    UnknownBranchError,
    UnknownPathError,
)
from sovseal.models import Conflict, LogEntry, Memory, PurgeResult, Status, StoreResult, VerifyReport, Version
from sovseal.paths import store_dir, store_exists
from sovseal.replication import DEFAULT_MAX_OUTBOX_BYTES, ReplicatedStatus, ReplicationConfig
from sovseal.replication import start as start_replication
from sovseal.replication.periodic import PeriodicPull
from sovseal.storage.entries import Entry, make_entry, memory_text
from sovseal.storage.frames import Op
from sovseal.storage.store import CHECKPOINT_ON_CLOSE, DEFAULT_BRANCH, Appended, LocalStore, Opened
from sovseal.storage.wire import WireItem

if TYPE_CHECKING:  # numpy, the index (pyarrow, LanceDB) and recall load on first use: reads need none of them

    import numpy as np

    from sovseal.recall import RecallEngine, RecallParams
    from sovseal.recall.filters import Filter
    from sovseal.recall.vector_index import VectorIndex
    from sovseal.replication.restore import PullResult
    from sovseal.replication.worker import Replicator
    from sovseal.storage.compaction import CompactionReport
    from sovseal.storage.lineage import Lineage

EmbedFn = Callable[[Sequence[str]], Any]
EVENTS = ("replication-error", "replicated", "conflict", "set-aside")
#: The most memories one recall returns.
MAX_RECALL_K = 1000


def _at(ts: float) -> datetime:
    return datetime.fromtimestamp(ts, UTC)


def _dt(ts: float | None) -> datetime | None:
    return None if ts is None else _at(ts)



log = logging.getLogger(__name__)


def _nothing_named(description: Mapping[str, Any]) -> str:
    """What a purge that matched nothing was asked for, as the start of its error message."""
    parts = []
    if "path" in description:
        parts.append(f"no version of {description['path']!r}")
    elif "paths" in description:
        parts.append(f"none of the {len(description['paths'])} paths has a version that")
    if "prefix" in description:
        parts.append(f"no path under {description['prefix']!r}")
    elif "prefixes" in description:
        parts.append(f"no path under the {len(description['prefixes'])} prefixes")
    return " and ".join(parts)


def _purged(description: Mapping[str, Any]) -> str:
    """What a purge erased, as its messages name it."""
    parts = []
    if "path" in description:
        parts.append(repr(description["path"]))
    elif "paths" in description:
        parts.append(f"{len(description['paths'])} paths")
    if "prefix" in description or "prefixes" in description:
        parts.append("the paths under the prefixes given")
    what = " and ".join(parts) or "every path"
    return f"the unreachable versions of {what}" if description.get("unreachable") else what


class _Shared:
    """What every view of one open store shares, created on first use: embedder, index, recall engine."""

    def __init__(self, embedder: EmbedFn | None) -> None:
        self.embedder = embedder
        self.index: VectorIndex | None = None
        self.recaller: RecallEngine | None = None
        self.mismatch: EmbedderMismatchError | None = None  # the index holds another model's vectors
        self.lock = threading.Lock()
        self.listeners: dict[str, list[Callable[..., None]]] = defaultdict(list)
        self.closed = False  # close() ran (the storage may also have closed itself after a lost batch)
        #: Per thread, inside batch(): the index work of its writes, done once the batch is durable.
        self.batching = threading.local()


_ITEM_KEYS = frozenset({"path", "payload", "metadata", "type", "provenance", "text", "index"})


def _head_conditions(if_heads: object) -> dict[str, str | frozenset[str]] | None:
    """``if_heads`` of store(), checked: branch names to a snapshot id (the primary head) or a list
    of snapshot ids (every head of the branch, in any order)."""
    if if_heads is None:
        return None
    out: dict[str, str | frozenset[str]] = {}
    if isinstance(if_heads, Mapping):
        for name, value in if_heads.items():
            if isinstance(name, str) and isinstance(value, str):
                out[name] = value
            elif isinstance(name, str) and isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
                out[name] = frozenset(value)
            else:
                break
        else:
            return out
    raise InvalidInputError(
        f"if_heads must map branch names to a snapshot id such as 'snap_<64 hex>' or a list of them, got {if_heads!r}"
    )


def _store_entry(
    path: Any, payload: Any, metadata: Any, type: Any, provenance: Any, text: Any, index: Any
) -> Entry:
    """A checked store entry (non-JSON, oversized and ill-typed input refused before any work)."""
    if not isinstance(index, bool):
        raise InvalidInputError(f"index must be True or False, got {index!r}")
    if not index:
        if text is not None:
            raise InvalidInputError("index=False stores no text for recall", advice="drop text= or keep index=True")
        text = ""
    entry = make_entry("store", path, payload, metadata=metadata, type=type, provenance=provenance, text=text)
    entry.canonical()
    return entry


class Sovseal:
    """A local-first, encrypted, lineage-tracked memory store.

    ``path`` is the store directory (default ``$SOVSEAL_HOME`` or ``~/.sovseal``). ``key`` is the
    32-byte master key or its exported text; without it the key is ``$SOVSEAL_KEY`` (an exported
    key, used and saved nowhere, as the command line and the MCP server use it), else the one in the
    OS keychain (or the key file when ``SOVSEAL_KEY_FALLBACK=file``). ``embedder`` is any ``embed(texts) ->
    vectors`` callable; the default is the on-device all-MiniLM-L6-v2.

    Replication (write-behind, ciphertext only) starts when an ``endpoint`` is given or
    ``SOVSEAL_ENDPOINT`` is set (``endpoint=""`` turns it off); ``api_key`` / ``SOVSEAL_API_KEY``
    and ``project`` / ``SOVSEAL_PROJECT`` go with it. Past ``max_outbox_bytes`` of unreplicated
    data, ``store`` and ``delete`` block until the outbox drains, or raise
    ``BackpressureTimeoutError`` after ``backpressure_timeout`` seconds. See docs/replication.md.

    ``sync_interval`` (or ``SOVSEAL_SYNC_INTERVAL``, seconds): with replication on, pull in the
    background that often, so writes from other devices arrive without calling ``pull()``; a
    branch they wrote concurrently shows several heads until the next local write merges them
    (``conflicts()``, ``status().heads``). Off by default.

    ``read_only``: None (the default) opens an existing store read-only when it cannot be written
    (a read-only volume, a mounted backup); True always does. Reads, recall, verify and export
    work; writes raise ``ReadOnlyStoreError``; replication does not start.
    """

    def __init__(
        self,
        path: str | os.PathLike[str] | None = None,
        *,
        key: bytes | str | None = None,
        branch: str = DEFAULT_BRANCH,
        embedder: EmbedFn | None = None,
        lock_timeout: float = 10.0,
        read_only: bool | None = None,
        endpoint: str | None = None,
        api_key: str | None = None,
        project: str | None = None,
        max_outbox_bytes: int = DEFAULT_MAX_OUTBOX_BYTES,
        backpressure_timeout: float | None = None,
        replication_config: ReplicationConfig | None = None,
        sync_interval: float | None = None,
    ) -> None:
        self.path = store_dir(path)
        if key is not None:
            master, self.key_backend = coerce_key(key), "explicit"
        else:
            # $SOVSEAL_KEY, else the keychain or key file; an existing store never gets a fresh key:
            # that key could not open it.
            master, self.key_backend = resolve_key(self.path, create=not store_exists(self.path))
        try:
            self._store = LocalStore(self.path, master, lock_timeout=lock_timeout, read_only=read_only)
        except KeyUnavailableError as exc:
            if type(exc) is not KeyUnavailableError or self.key_backend != f"env:{settings.KEY.name}":
                raise
            # Say where the wrong key came from: the message above advises key=, which was not given.
            raise KeyUnavailableError(
                f"{exc} The key came from {settings.KEY.name}: set it to this store's exported key, or unset it to use the key "
                "saved for the store."
            ) from None
        try:
            self._store.branch(branch)  # an unknown branch fails here, not on first use
        except IntegrityError:
            pass  # it exists but its HEAD is damaged: verify() reports it; reads and writes fail closed
        self.branch = branch
        self._shared = _Shared(embedder)
        self._is_view = False
        #: The write-behind worker, or None without an endpoint: flush(), rejected(), retry(), status().
        self.replication: Replicator | None = None
        try:
            if not self._store.read_only:  # it records acks and imports: nothing to do on a store it cannot write
                self.replication = start_replication(
                    self._store,
                    master,
                    self._emit,
                    has_listener=lambda event: bool(self._shared.listeners[event]),
                    endpoint=endpoint,
                    api_key=api_key,
                    project=project,
                    max_outbox_bytes=max_outbox_bytes,
                    backpressure_timeout=backpressure_timeout,
                    config=replication_config,
                )
        except BaseException:
            self._store.close()
            raise
        #: The background pull (``sync_interval``), or None.
        self.syncing: PeriodicPull | None = None
        if self.replication is not None:  # without replication there is nothing to pull: the variable is not read
            try:
                interval = sync_interval if sync_interval is not None else settings.SYNC_INTERVAL.given()
                if interval is not None:
                    self.syncing = PeriodicPull(self.pull, interval)
            except BaseException:
                self.replication.close()
                self._store.close()
                raise

    # -- lifecycle -----------------------------------------------------------------------

    def ready(self) -> None:
        """Warm the embedder, open the vector index and start loading the recall catalog
        (in the background), so the first call is fast.

        An index filled by another model is not opened and does not fail this call (reads and
        writes work): recall raises ``EmbedderMismatchError``."""
        embedder = self._embed_fn()
        warm = getattr(embedder, "ready", None)
        if callable(warm):
            warm()
        self._index_if_current()
        self._recall_engine()

    def close(self) -> None:
        """Close the store (and every view of it). Closing a view closes nothing: the store stays open."""
        if self._is_view:
            return
        with self._shared.lock:
            if self._shared.closed:
                return
            self._shared.closed = True
        if self.syncing is not None:
            self.syncing.close()
        if self.replication is not None:
            self.replication.close()  # a healthy worker drains first; the rest goes on the next open
        if not self._store.read_only and not self._store.closed:
            try:  # erased content deferred with purge(compact=False) past the threshold leaves now
                if self._compaction_due():
                    self.compact()
            except SovsealError as exc:
                log.warning("compacting the journal on close failed (the next compaction retries): %s", exc)
        if self._shared.recaller is not None:
            self._shared.recaller.close()  # a checkpoint, when enough was added (docs/design.md)
        else:
            self._store.checkpoint_if_due(CHECKPOINT_ON_CLOSE)  # the lineage alone: nothing recalled here
        with self._shared.lock:
            if self._shared.index is not None:
                # What another process erased meanwhile stays out of the snapshot (a journal that is
                # gone has nothing more to say).
                if not self._store.closed:
                    with contextlib.suppress(StorageError), self._store.reading() as lineage:
                        self._shared.index.forget(lineage.erased)
                self._shared.index.close()
        self._store.close()

    def view(self, branch: str | None = None) -> Sovseal:
        """Another handle on this open store, with its own current branch (default: this one's).

        A view shares everything else: the storage, the writer lock, the keys, the embedder, the
        index, the recall catalog and the replication worker, so it costs nothing to open and
        never conflicts with this handle. Frameworks use one to work on a branch without moving
        the branch of the handle they were given. Closing a view is a no-op.
        """
        self._check_open()
        name = self.branch if branch is None else branch
        try:
            # Without the lock first: a view is made on an event loop too (AsyncSovseal.view), where
            # waiting for a batch another task holds would block the loop that batch waits on.
            self._store.branch(name)
        except UnknownBranchError:
            with self._store.reading():  # made by another process since this handle last caught up?
                self._store.branch(name)  # an unknown branch fails here
        other = object.__new__(type(self))
        other.__dict__.update(self.__dict__)
        other.branch, other._is_view = name, True
        return other

    def __enter__(self) -> Sovseal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def on(self, event: str, callback: Callable[..., None]) -> None:
        """Register a callback for an event (``replication-error``, ``replicated``, ``conflict``, ``set-aside``:
        the ids a pull set aside, see ``ReplicationStatus.set_aside``)."""
        if event not in EVENTS:
            raise InvalidInputError(f"unknown event {event!r}; events are {', '.join(EVENTS)}")
        self._shared.listeners[event].append(callback)

    def _emit(self, event: str, *args: object) -> None:
        for callback in list(self._shared.listeners[event]):
            callback(*args)

    # -- embedding and indexing ----------------------------------------------------------

    @property
    def embedder(self) -> EmbedFn:
        """The ``embed(texts) -> vectors`` callable this store embeds with: the one given, or the
        on-device default (created on first use; its model loads on its first call). A framework
        embeds queries for dense search with it, so they match the stored vectors."""
        self._check_open()
        return self._embed_fn()

    def _embed_fn(self) -> EmbedFn:
        shared = self._shared
        if shared.embedder is None:
            with shared.lock:
                if shared.embedder is None:
                    from sovseal.embed import Embedder

                    shared.embedder = Embedder()
        return shared.embedder

    def _embed(self, texts: Sequence[str]) -> np.ndarray:
        import numpy as np

        vectors = np.asarray(self._embed_fn()(list(texts)), dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise InvalidInputError(f"the embedder returned shape {vectors.shape} for {len(texts)} texts")
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        return vectors / np.where(norms == 0, 1, norms)

    def _vector_index(self, dim: int | None = None) -> VectorIndex:
        """The vector index, opened on first use for this handle's embedder.

        ``dim``, when given, is the dimension of vectors this embedder just returned (else one text
        is embedded to learn it). The first opening records the embedder's fingerprint in
        ``index/model.json``, or compares it with the one recorded there: an index filled by
        another model is not opened, and this raises ``EmbedderMismatchError`` (every time, for
        this open store) until ``sovseal rebuild-index`` re-embeds it (docs/embedder.md).
        """
        shared = self._shared
        index = shared.index
        if index is not None:
            return index
        if shared.mismatch is not None:
            raise shared.mismatch
        if dim is None:
            dim = int(self._embed(["dimension probe"]).shape[1])  # outside the lock: it may load the model
        from sovseal.embed.fingerprint import fingerprint_of

        current = fingerprint_of(self._embed_fn(), dim)  # outside the lock: the built-in model loads first
        with shared.lock:
            if shared.index is None and shared.mismatch is None:
                self._open_index(current, dim)
            if shared.mismatch is not None:
                raise shared.mismatch
            assert shared.index is not None  # nosec B101 -- type narrowing: _open_index set one or the other
            return shared.index

    def _open_index(self, current: dict[str, Any], dim: int) -> None:
        """Open the index for ``current`` or set ``mismatch``. The caller holds the shared lock."""
        from sovseal.recall.opening import open_vector_index

        store = self._store
        opened = open_vector_index(self.path, current, dim, read_only=store.read_only, owner=store.store_uuid)
        if isinstance(opened, EmbedderMismatchError):
            self._shared.mismatch = opened
        else:
            self._shared.index = opened

    def _index_if_current(self, dim: int | None = None) -> VectorIndex | None:
        """:meth:`_vector_index`, or None when the index holds another model's vectors: a write
        then goes to the journal only (the rebuild embeds it), and warming up skips the index."""
        try:
            return self._vector_index(dim)
        except EmbedderMismatchError:
            return None

    def _check_open(self) -> None:
        if self._store.closed:
            raise StoreClosedError("this Sovseal was closed; open a new one")

    # -- writing -------------------------------------------------------------------------

    def store(
        self,
        path: str,
        payload: Any,
        *,
        metadata: dict[str, Any] | None = None,
        type: str = "semantic",
        provenance: str = "explicit",
        parent: str | None = None,
        text: str | None = None,
        index: bool = True,
        if_heads: Mapping[str, str | Sequence[str]] | None = None,
    ) -> StoreResult:
        """Store ``payload`` at ``path``: durable on disk before this returns.

        Storing the value a path already shows at HEAD appends nothing; it reinforces that memory.
        ``parent`` overrides HEAD as the new snapshot's parent (the branch's HEAD moves to it).
        ``text`` is what recall embeds and matches instead of the payload; ``index=False`` stores a
        record recall never ranks (no embedding, no keywords: checkpoints, key-value data), sealed
        with ``text=""``, so ``text`` cannot be given with it.

        ``if_heads`` ({branch name: snapshot id}, this handle's branch or others) stores only if
        each of those branches' HEAD is still that snapshot (with a list of ids: only if the branch's
        heads are exactly those, which also catches a pull that added a head), checked as the record is appended (under
        the writer lock, after catching up with other processes); if another writer moved one,
        nothing is stored and HeadMovedError is raised. A caller that keeps its own index of some
        branches (the LangGraph saver) writes from it this way instead of reading their HEADs first.
        """
        self._check_open()
        conditions = _head_conditions(if_heads)
        entry = _store_entry(path, payload, metadata, type, provenance, text, index)
        vector = self._embed([memory_text(entry)]) if entry.text != "" else None
        return self._commit(entry, None if vector is None else vector[0], parent, conditions)

    def store_many(self, items: Sequence[Mapping[str, Any]], *, vectors: Any = None) -> list[StoreResult]:
        """Store several records in order, embedded in one batch; each is durable before this returns.

        Each item is a mapping with ``path`` and ``payload`` and, optionally, ``metadata``,
        ``type``, ``provenance``, ``text`` and ``index`` (as for :meth:`store`). Every item is
        checked before anything is written, so a bad one raises and stores nothing. ``vectors``,
        one row per item, are used instead of embedding: they must come from this store's
        embedder (rows of ``index=False`` items are ignored). A crash midway keeps a prefix of
        the items, each whole and verifiable.
        """
        self._check_open()
        if isinstance(items, (str, bytes, Mapping)) or not isinstance(items, Sequence):
            raise InvalidInputError("store_many takes a list of item mappings")
        entries = []
        for i, item in enumerate(items):
            if not isinstance(item, Mapping):
                raise InvalidInputError(f"item {i} must be a mapping with path and payload, got {item.__class__.__name__}")
            unknown = set(item) - _ITEM_KEYS
            if unknown or "path" not in item or "payload" not in item:
                raise InvalidInputError(
                    f"item {i} needs path and payload and may have {', '.join(sorted(_ITEM_KEYS - {'path', 'payload'}))}"
                    + (f"; unknown: {', '.join(sorted(map(str, unknown)))}" if unknown else "")
                )
            entries.append(
                _store_entry(
                    item["path"],
                    item["payload"],
                    item.get("metadata"),
                    item.get("type", "semantic"),
                    item.get("provenance", "explicit"),
                    item.get("text"),
                    item.get("index", True),
                )
            )
        indexed = [i for i, e in enumerate(entries) if e.text != ""]
        rows: dict[int, np.ndarray] = {}
        if vectors is not None:
            import numpy as np

            given = np.asarray(vectors, dtype=np.float32)
            if given.ndim != 2 or given.shape[0] != len(entries):
                raise InvalidInputError(f"vectors must have one row per item: {len(entries)} rows, got shape {given.shape}")
            if indexed and (index := self._index_if_current()) is not None and index.dim != given.shape[1]:
                raise InvalidInputError(f"vectors have {given.shape[1]} dimensions; this store's index has {index.dim}")
            norms = np.linalg.norm(given, axis=1, keepdims=True)
            given = (given / np.where(norms == 0, 1, norms)).astype(np.float32, copy=False)
            rows = {i: given[i] for i in indexed}
        elif indexed:
            embedded = self._embed([memory_text(entries[i]) for i in indexed])
            rows = dict(zip(indexed, embedded, strict=True))
        self._backpressure()
        appended = self._store.append_many(self.branch, entries)
        return [self._indexed(entry, done, rows.get(i)) for i, (entry, done) in enumerate(zip(entries, appended, strict=True))]

    def _commit(
        self, entry: Entry, vector: np.ndarray | None, parent: str | None, if_heads: dict[str, str | frozenset[str]] | None = None
    ) -> StoreResult:
        """Append one checked entry durably, then index it (its vector, its keywords)."""
        self._backpressure()
        return self._indexed(entry, self._store.append(self.branch, entry, parent=parent, if_heads=if_heads), vector)

    def _backpressure(self) -> None:
        """Block while the replication outbox is over ``max_outbox_bytes`` (not inside :meth:`batch`,
        which waited once before taking the lock the outbox drains through)."""
        if self.replication is not None and getattr(self._shared.batching, "pending", None) is None:
            self.replication.wait_for_room()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """``with``: the writes this thread makes inside, through this handle or its views, share one fsync at the end.

        A writer with several writes to acknowledge at once (the LangGraph saver's group commit)
        pays for one fsync instead of one each. Nothing written inside is durable before the block
        ends, so acknowledge none of it before then; other threads of this process, and other
        processes' writers, wait until it ends, and the indexes take the writes only once they are
        durable. It is not a transaction: a read-only handle in another process reads the journal
        as it is and may see them before the fsync, and a crash of this process inside the block
        keeps a prefix of its writes, each record whole (a power loss, any of them). If the closing
        fsync fails, everything written inside is cut off and the handle closes (StorageError). A
        batch inside a batch joins the outer one.
        """
        self._check_open()
        batching = self._shared.batching
        if getattr(batching, "pending", None) is not None:
            yield
            return
        self._backpressure()
        pending: list[tuple[Entry, Appended, np.ndarray | None]] = []
        batching.pending = pending
        try:
            with self._store.unsynced_batch():
                yield
        finally:
            batching.pending = None
            if not self._store.closed:  # the fsync went through (a failed one closes the storage), even if the block raised
                for entry, appended, vector in pending:
                    self._index(entry, appended, vector)

    def _indexed(self, entry: Entry, appended: Appended | None, vector: np.ndarray | None) -> StoreResult:
        """Hand a durable record to the indexes (its vector, its keywords), or, inside :meth:`batch`,
        once the batch is durable."""
        assert appended is not None  # nosec B101 -- type narrowing: only a delete can append nothing
        pending = getattr(self._shared.batching, "pending", None)
        if pending is None:
            self._index(entry, appended, vector)
        else:
            pending.append((entry, appended, vector))
        return StoreResult(appended.snapshot_id, replicated=False, reinforced=appended.reinforced)

    def _index(self, entry: Entry, appended: Appended, vector: np.ndarray | None) -> None:
        vectors = None if vector is None else self._index_if_current(int(vector.shape[0]))  # None: another model's index
        if vector is not None and vectors is not None and vectors.missing([appended.node.idx]):
            vectors.add([appended.node.idx], vector[None, :])
        recaller = self._shared.recaller
        if recaller is not None:  # not started yet: its first load reads this record from the journal
            recaller.added(appended.node, entry)

    def delete(self, path: str) -> StoreResult | None:
        """Append a tombstone: ``path`` stops being visible; its history stays in the lineage.

        Deleting a path that is not visible appends nothing and returns None, so a retried
        delete is harmless.
        """
        self._check_open()
        self._backpressure()
        entry = make_entry("delete", path)
        appended = self._store.append(self.branch, entry)
        if appended is None:
            return None
        return StoreResult(appended.snapshot_id, replicated=False)

    def delete_many(self, paths: Sequence[str]) -> list[StoreResult | None]:
        """Tombstones for ``paths`` in order, with one fsync for all (None for a path not visible,
        as :meth:`delete` returns). Every path is checked before anything is written."""
        self._check_open()
        if isinstance(paths, (str, bytes)) or not isinstance(paths, Sequence):
            raise InvalidInputError("delete_many takes a list of paths")
        entries = [make_entry("delete", path) for path in paths]
        self._backpressure()
        appended = self._store.append_many(self.branch, entries)
        return [None if done is None else StoreResult(done.snapshot_id, replicated=False) for done in appended]

    def reinforce(self, path: str) -> StoreResult | None:
        """Reinforce the memory visible at ``path``, as storing its value again would (no new
        snapshot; ``reinforce_count`` + 1). None if nothing is visible there.

        The read and the append are two steps: if another writer changes ``path`` between them,
        the value read is stored again as a new snapshot (nothing is lost from the lineage).
        """
        self._check_open()
        entry = make_entry("store", path)
        with self._store.reading() as lineage:
            idx = lineage.view(self._store.branch(self.branch)).get(self._store.path_hash(entry.path))
            if idx is None:
                return None
            visible = self._store.open(idx).entry
        appended = self._store.append(self.branch, visible)  # the visible entry, byte for byte: a reinforcement
        assert appended is not None  # nosec B101 -- type narrowing: a store always appends (a record or a reinforcement)
        return StoreResult(appended.snapshot_id, replicated=False, reinforced=appended.reinforced)

    def fork(self, snapshot_id: str | None = None, *, branch: str | None = None) -> str:
        """Create a branch whose HEAD is ``snapshot_id`` (default: this HEAD) and switch to it."""
        self._check_open()
        if snapshot_id is None:
            snapshot_id = self.snapshot()
        if branch is None:
            branch = f"fork-{os.urandom(4).hex()}"
        self.create_branch(branch, snapshot_id)
        self.branch = branch
        return branch

    def create_branch(self, name: str, at: str | None = None) -> None:
        """Create the branch ``name`` whose HEAD is snapshot ``at``, or an empty branch (nothing
        visible) without ``at``. This handle stays on its branch: use :meth:`view` to work on the
        new one. InvalidInputError if a branch of that name exists."""
        self._check_open()
        if not isinstance(name, str) or not name.strip():
            raise InvalidInputError(f"a branch name must be a non-empty string; got {name!r}")
        if at is not None and not isinstance(at, str):
            raise InvalidInputError(f"at must be a snapshot id such as 'snap_<64 hex>' or None; got {at!r}")
        self._store.create_branch(name, at)

    def delete_branch(self, name: str) -> None:
        """Delete the branch ``name``: it is no longer listed and cannot be read or written.

        Append-only, like a delete of a path: the branch's records stay in the lineage (other
        branches may share them) until ``purge(unreachable=True)`` erases what nothing reaches.
        The name can be created again. A write another device made to the branch concurrently
        wins: after a pull the branch is back with that write. This handle's own branch and the
        default branch cannot be deleted (check out another branch first; roll the default back
        instead). UnknownBranchError if there is no such branch.
        """
        self._check_open()
        name = self._branch_arg(name)
        if name == DEFAULT_BRANCH:
            raise InvalidInputError(
                f"the default branch {name!r} cannot be deleted",
                advice="rollback() it or purge() what it holds",
                cli_advice="roll it back with `sovseal rollback SNAPSHOT`, or purge what it holds with `sovseal purge PATH`",
            )
        if name == self.branch:
            raise InvalidInputError(
                f"{name!r} is this handle's current branch",
                advice="checkout() another branch before deleting it",
                cli_advice="pass --branch with another branch (or set SOVSEAL_BRANCH) to delete this one",
            )
        self._store.delete_branch(name)

    def checkout(self, branch: str) -> None:
        """Make ``branch`` this handle's current branch."""
        self._check_open()
        with self._store.reading():
            self._store.branch(branch)
        self.branch = branch

    def rollback(self, snapshot_id: str) -> None:
        """Move this branch's HEAD to ``snapshot_id``. Nothing is deleted: later snapshots stay reachable."""
        self._check_open()
        self._store.move_head(self.branch, snapshot_id)

    # -- reading -------------------------------------------------------------------------

    def _memory(self, opened: Opened, score: float | None = None) -> Memory:
        node, entry = opened.node, opened.entry
        return Memory(
            path=entry.path,
            payload=entry.payload,
            metadata=entry.metadata,
            type=entry.type,
            provenance=entry.provenance,
            snapshot_id=opened.snapshot_id,
            created_at=_at(node.created_at),
            reinforce_count=node.reinforce_count,
            last_reinforced=_dt(node.last_reinforced),
            score=score,
        )

    def _branch_arg(self, branch: object) -> str:
        """``branch=`` of a read: None is this handle's branch; anything else must be a name."""
        if branch is None:
            return self.branch
        if not isinstance(branch, str) or not branch:
            raise InvalidInputError(f"branch must be a branch name (a non-empty string); got {branch!r}")
        return branch

    def get(self, path: str, *, branch: str | None = None) -> Memory | None:
        """The memory visible at ``path`` on the HEAD of ``branch`` (default: this handle's), or None."""
        self._check_open()
        entry = make_entry("store", path)
        name = self._branch_arg(branch)
        with self._store.reading() as lineage:
            idx = lineage.view(self._store.branch(name)).get(self._store.path_hash(entry.path))
            if idx is None:
                return None
            try:
                return self._memory(self._store.open(idx))
            except DamagedRecordError as exc:
                raise exc.named(entry.path) from None

    def paths(self, prefix: str = "", *, branch: str | None = None) -> list[str]:
        """The paths visible at the HEAD of ``branch`` (default: this handle's) that start with
        ``prefix``, sorted. Answered from the recall catalog: nothing is decrypted."""
        self._check_open()
        if not isinstance(prefix, str):
            raise InvalidInputError(f"prefix must be a string, got {type(prefix).__name__}")
        from sovseal.recall import parse_filter

        tree = parse_filter({"path_prefix": prefix}) if prefix else None
        return [path for _, path in self._recall_engine().select(self._branch_arg(branch), tree)]

    def find(self, filter: Mapping[str, Any] | None = None, *, branch: str | None = None, limit: int | None = None) -> list[Memory]:
        """The memories visible at the HEAD of ``branch`` (default: this handle's) that match
        ``filter``, sorted by path, at most ``limit`` of them.

        ``filter`` is recall's filter language (docs/recall.md: path prefix, path, type,
        provenance, metadata operators, ``$and``/``$or``/``$not``); without one, every visible
        memory. The records are chosen from the catalog and only those are decrypted, each
        checked as ``get`` checks it. Unlike recall, records stored with ``index=False`` match.
        """
        self._check_open()
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
            raise InvalidInputError(f"limit must be a non-negative integer or None; got {limit!r}")
        from sovseal.recall import parse_filter

        tree, name, engine = parse_filter(filter), self._branch_arg(branch), self._recall_engine()
        engine.wait_ready()  # before the store's lock: the catalog loads under it
        with self._store.reading():  # one hold: a purge or compaction cannot come between choosing and opening
            return [self._memory(self._store.open(idx)) for idx, _ in engine.select(name, tree)[:limit]]

    def recheck(self, *snapshot_ids: str) -> None:
        """Check that records are still the bytes that were authenticated, without decrypting them.

        For callers that keep what they opened in memory (the LangGraph saver does): re-reading a
        record's frame and its MAC notices bytes altered on disk under a running process, at a tenth
        of the cost of opening the record again. Several ids share one hold of the store's lock.
        IntegrityError if any was altered.
        """
        self._check_open()
        self._store.recheck_ids(snapshot_ids)

    def related(self, path: str, *, relation: str | None = None) -> list[Any]:
        """The memories linked to ``path`` by consolidation's graph pass (``sovseal.consolidate``),
        as ``Related(memory, relation, direction)``: how recall follows the graph's edges."""
        self._check_open()
        from sovseal.consolidate.graph import related

        return related(self, path, relation=relation)

    def snapshot(self, *, branch: str | None = None) -> str | None:
        """The HEAD snapshot id of ``branch`` (default: this handle's; None for a branch with no snapshot yet)."""
        self._check_open()
        name = self._branch_arg(branch)
        with self._store.reading():
            head = self._store.branch(name).head
            return self._store.sid_of(head) if head >= 0 else None

    def branches(self) -> list[str]:
        self._check_open()
        with self._store.reading():
            return self._store.branch_names()

    def state(self, *, branch: str | None = None) -> dict[str, Any]:
        """Every path visible at the HEAD of ``branch`` (default: this handle's) and its payload:
        the fold of the chain from genesis to HEAD. It opens every visible record; ``paths`` and
        ``find`` select from the catalog first."""
        self._check_open()
        name = self._branch_arg(branch)
        with self._store.reading() as lineage:
            view = lineage.view(self._store.branch(name))
            opened = [self._store.open(idx).entry for idx in view.values()]
        return {e.path: e.payload for e in sorted(opened, key=lambda e: e.path)}

    def log(self, *, limit: int | None = None, branch: str | None = None, damaged: Literal["raise", "mark"] = "raise") -> list[LogEntry]:
        """The snapshots from HEAD back to genesis, newest first by (clock, wire id).

        With several heads (a pull brought concurrent writes) it holds everything every head
        holds; the order is the same on every device with the same snapshots. A record that fails
        authentication raises :class:`DamagedRecordError`; with ``damaged="mark"`` it is listed
        instead, as op ``"damaged"`` with its path when another version names it ("" otherwise),
        so the rest of the history stays readable (``sovseal log`` does this)."""
        self._check_open()
        name = self._branch_arg(branch)
        out: list[LogEntry] = []
        with self._store.reading() as lineage:
            for node in itertools.islice(lineage.history(self._store.branch(name).heads.values()), limit):
                if node.redacted:
                    sid, parent = self._store.sid_of(node.idx), self._store.parent_id(node.idx)
                    out.append(LogEntry(sid, parent, node.seq, "erased", "", _at(node.created_at)))
                    continue
                try:
                    opened = self._store.open(node.idx)
                except DamagedRecordError as exc:
                    if damaged != "mark":
                        raise
                    sid, parent = self._store.sid_of(node.idx), self._store.parent_id(node.idx)
                    out.append(LogEntry(sid, parent, node.seq, "damaged", exc.path or "", _at(node.created_at)))
                    continue
                out.append(
                    LogEntry(
                        opened.snapshot_id,
                        opened.parent_id,
                        node.seq,
                        "delete" if node.op is Op.DELETE else "store",
                        opened.entry.path,
                        _at(node.created_at),
                    )
                )
        return out

    def recall(
        self,
        query: str,
        *,
        k: int = 5,
        filter: dict[str, Any] | None = None,
        branch: str | None = None,
    ) -> list[Memory]:
        """The ``k`` memories visible at HEAD that best match ``query``, best first.

        Dense (vector) and keyword (BM25) candidates are fused, given context from the records
        stored next to them, and weighted by decay and reinforcement (``recall_params``, see
        docs/recall.md). ``filter`` restricts the search exactly (path prefix, type, provenance,
        metadata; see docs/recall.md); ``branch`` searches another branch's HEAD without
        switching. Every result is decrypted and its snapshot id re-derived: a record that fails
        raises IntegrityError. An empty or blank query returns [] (after the other arguments are
        checked).
        """
        self._check_open()
        if not isinstance(query, str):
            raise InvalidInputError(f"query must be a string, got {query.__class__.__name__}")
        tree, branch = self._search_args(k, filter, branch)
        if not query.strip():
            return []
        found = self._recall_engine().recall(query, k, tree, branch)
        return [self._memory(opened, score) for opened, score in found]

    def recall_by_vector(
        self,
        vector: Any,
        *,
        k: int = 5,
        filter: dict[str, Any] | None = None,
        branch: str | None = None,
    ) -> list[Memory]:
        """The ``k`` memories visible at HEAD nearest to ``vector`` (cosine similarity in ``Memory.score``), best first.

        Dense similarity only: no keyword side, no decay, no reinforcement, no lineage context.
        """
        self._check_open()
        import numpy as np

        v = np.asarray(vector, dtype=np.float32)
        if v.ndim != 1 or not len(v) or not np.all(np.isfinite(v)):
            raise InvalidInputError("vector must be a non-empty 1-d sequence of finite numbers")
        norm = float(np.linalg.norm(v))
        if norm > 0:
            v = v / norm
        tree, branch = self._search_args(k, filter, branch)
        if self._shared.index is None:
            with self._store.reading() as lineage:
                empty = not lineage.nodes
            if not empty:
                self._vector_index()  # the index of this handle's embedder, or EmbedderMismatchError
        found = self._recall_engine().by_vector(v, k, tree, branch)
        return [self._memory(opened, score) for opened, score in found]

    def _search_args(self, k: object, filter: object, branch: object) -> tuple[Filter | None, str]:
        """Check what recall and recall_by_vector share; an unknown branch fails before any embedding."""
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_RECALL_K:
            raise InvalidInputError(f"k must be an integer from 1 to {MAX_RECALL_K}; got {k!r}")
        from sovseal.recall import parse_filter

        tree = parse_filter(filter)
        branch = self._branch_arg(branch)
        with self._store.reading():
            self._store.branch(branch)
        return tree, branch

    @property
    def recall_params(self) -> RecallParams:
        """Fusion, decay and reinforcement parameters of this handle's recall (docs/recall.md)."""
        return self._recall_engine().params

    @recall_params.setter
    def recall_params(self, params: RecallParams) -> None:
        from sovseal.recall import RecallParams

        if not isinstance(params, RecallParams):
            raise InvalidInputError(f"recall_params must be a sovseal.recall.RecallParams, got {type(params).__name__}")
        self._recall_engine().params = params

    def _recall_engine(self) -> RecallEngine:
        """The recall engine, started on first use: it loads its in-memory catalog in the background."""
        shared = self._shared
        if shared.recaller is None:
            with shared.lock:
                if shared.recaller is None:
                    from sovseal.recall import RecallEngine

                    shared.recaller = RecallEngine(self._store, self._embed, self._vector_index, forget_vectors=self._forget_vectors)
        return shared.recaller

    def _index_missing(self, index: VectorIndex, nodes: set[int]) -> None:
        """Embed records the index lacks (stored by another process, pulled, or lost in a crash)."""
        self._recall_engine().embed_missing(index, sorted(nodes))

    # -- erasure (docs/design.md, "Redaction skeletons" and "Compaction") ------------------------

    def purge(
        self,
        path: str | Sequence[str] | None = None,
        *,
        prefix: str | Sequence[str] | None = None,
        unreachable: bool = False,
        reason: str = "",
        compact: bool = True,
    ) -> PurgeResult:
        """Erase every version of ``path`` (a path, or a list of paths) and of every path under
        ``prefix`` (a prefix, or a list of them; with or without paths) on every branch, for good.

        Unlike :meth:`delete`, which appends a tombstone and keeps the history, a purge makes the
        content unrecoverable, to the key holder too: the journal is rewritten with each erased
        record as a skeleton, and its vectors, keyword postings and catalogue entries are removed.
        ``unreachable=True`` erases only the versions no branch's heads reach any more (the undo
        history a rollback left behind, what a prune cut off), of those paths, or of every path
        when none is given. ``compact=False`` defers the rewrite (reads never return the content
        meanwhile) to :meth:`compact`, or to :meth:`close` once erased content passes the automatic
        threshold: erasing many things, purge each with ``compact=False`` and compact once.
        The lineage stays verifiable; :meth:`log` lists the erased snapshots and :meth:`verify`
        checks them. With replication the purge is sent to the server, which drops the sealed
        bodies, and every other device erases them on its next pull. UnknownPathError when none of
        the paths has a version anywhere and no path was ever under the prefixes (a path already
        purged, or a prefix whose paths a purge already erased, is not an error: nothing is new).
        A purge that a crash interrupted before its rewrite is finished by running it again: with
        nothing new to erase it still rewrites the journal while erased content is left in it.
        """
        self._check_open()
        if path is None and prefix is None and not unreachable:
            raise InvalidInputError("purge needs a path (or a list of paths), prefix=..., or unreachable=True")
        if not isinstance(reason, str):
            raise InvalidInputError(f"reason must be a str, got {type(reason).__name__}")
        description: dict[str, Any] = {}
        named: set[bytes] = set()  # path hashes of the paths given
        if path is not None:
            listed = [path] if isinstance(path, str) else list(path)
            if not listed:
                raise InvalidInputError("purge needs at least one path")
            checked = [make_entry("store", p).path for p in listed]
            named = {self._store.path_hash(p) for p in checked}
            description = {"path": checked[0]} if len(checked) == 1 else {"paths": checked}
        prefixes: list[str] = []
        if prefix is not None:
            prefixes = [prefix] if isinstance(prefix, str) else list(prefix)
            if not prefixes or not all(isinstance(p, str) and p for p in prefixes):
                raise InvalidInputError(
                    "prefix must be a non-empty string (or a list of them); to erase everything, delete the store's directory"
                )
            description |= {"prefix": prefixes[0]} if isinstance(prefix, str) else {"prefixes": prefixes}
        engine = self._recall_engine() if prefixes else None

        def select(lineage: Lineage) -> list[int]:
            if path is None and engine is None:
                return list(range(len(lineage.nodes)))  # unreachable=True over every path
            wanted = set(named)
            if engine is not None:
                engine.sync(lineage)  # every record catalogued, those other processes wrote too
                under = {p for each in prefixes for p in engine.catalog.paths_under(each)}
                wanted |= {self._store.path_hash(p) for p in under}
            return lineage.nodes.with_paths(wanted)

        if unreachable:
            chosen = select

            def select(lineage: Lineage) -> list[int]:
                reachable_from_nothing = set(_unreachable(lineage))
                return [idx for idx in chosen(lineage) if idx in reachable_from_nothing]

            description["unreachable"] = True
        erased, matched = self._store.purge(select, {**description, "reason": reason})
        if not matched and prefixes and not unreachable:
            # Erased paths are catalogued nowhere: a prefix purge run again matches only through
            # the redaction that erased them, and finishes the rewrite below, as a path's does.
            matched = self._store.purged_under(prefixes)
        if not matched and not unreachable:
            raise UnknownPathError(f"{_nothing_named(description)} exists on any branch; nothing was purged")
        with self._store.reading() as lineage:
            # Erased, yet still sealed in the journal: this purge's, or those of one a crash cut
            # short before its rewrite (running it again finishes it), or of purges that deferred it.
            rewrite = compact and lineage.uncompacted > 0
            if rewrite and lineage.damage:
                raise self._purge_stopped_by_damage(lineage, description)
        reclaimed = self.compact().reclaimed if rewrite else 0
        if not compact:
            self._forget_erased()
        return PurgeResult(erased, rewrite, reclaimed)

    def _purge_stopped_by_damage(self, lineage: Lineage, description: Mapping[str, Any]) -> IntegrityError:
        """What a purge says when its erasure is committed but compaction cannot rewrite the journal
        (it never rewrites one with damage): the sealed bytes stay on disk until it can."""
        first = min(lineage.damage, key=lambda d: d.offset)
        where = f"journal byte {first.offset} ({first.reason})"
        damaged = next((n.idx for n in lineage.nodes if n.offset == first.offset and not n.redacted), None)
        if damaged is not None:
            try:
                self._store.open(damaged)
            except DamagedRecordError as exc:
                where = f"{exc.what} (snapshot {exc.snapshot_id}" + (f", path {exc.path!r})" if exc.path else ")")
        erased = _purged(description)
        restore = "restore the store from a replica or backup, where the purge is replayed"
        return IntegrityError(
            f"the purge of {erased} is committed (reads never return it, and replication carries the erasure), but its "
            f"sealed bytes are still in the journal: compaction never rewrites a journal with damage, and this one has "
            f"damage at {where}",
            advice=f"{restore}, then run compact(); {RUN_VERIFY} to list every damaged record",
            cli_advice=f"{restore}, then run `sovseal compact`; `sovseal verify` lists every damaged record",
        )

    def erasures(self) -> int:
        """How many records of this store have been erased so far (here, by another process, or by a pull).

        A purge changes what reads return without moving any branch's head: a cache of what was
        read, keyed on the heads, is stale when this changes too.
        """
        self._check_open()
        with self._store.reading() as lineage:
            return len(lineage.erased)

    def compact(self) -> CompactionReport:
        """Rewrite the journal without erased content, and drop what else held it (sovseal.storage.compaction).

        Other processes keep reading and writing meanwhile; they wait for the writer lock only while
        the new journal takes the old one's place. With nothing erased left in the journal, nothing
        is rewritten.
        """
        self._check_open()
        from sovseal.storage.compaction import compact

        report = compact(self._store)
        if report.seconds == 0.0:  # nothing was rewritten
            return report
        self._forget_erased()
        engine = self._shared.recaller
        if engine is not None:
            engine.checkpoint_if_due(CHECKPOINT_ON_CLOSE, catalog=True)
        else:
            self._store.checkpoint_if_due(CHECKPOINT_ON_CLOSE)
        return report

    def _forget_vectors(self, nodes: list[int]) -> None:
        """The recall engine saw records erased (here or by another process): out of the matrix too."""
        index = self._shared.index
        if index is not None:
            index.forget(nodes)

    def _compaction_due(self) -> bool:
        from sovseal.storage.compaction import due

        return due(self._store)

    def _forget_erased(self) -> None:
        """Drop erased records from the recall catalog, the keyword index and the vector index (on disk too)."""
        with self._store.reading() as lineage:
            erased = list(lineage.erased)
            engine = self._shared.recaller
            if engine is not None:
                engine.forget_erased(lineage)
        if not erased or self._store.read_only:
            return
        index = self._shared.index
        if index is not None:
            index.erase(erased)
            if not index.retired():
                return  # else the directory was rebuilt under it: erase them from that index too, below
        from sovseal.embed.fingerprint import RECORD, decode_record

        directory = self.path / "index"
        if (directory / RECORD).exists():  # the vectors on disk go whatever model made them; no model is loaded for it
            from sovseal.recall.vector_index import VectorIndex

            other = VectorIndex(directory, int(decode_record((directory / RECORD).read_bytes())["dim"]), owner=self._store.store_uuid)
            try:
                other.erase(erased)
            finally:
                other.close()

    def verify(self, *, progress: Callable[[int, int], None] | None = None) -> VerifyReport:
        """Open every record and re-derive every snapshot id; ``progress(done, total)`` as it goes."""
        self._check_open()
        problems: list[str] = []
        erased = 0
        with self._store.reading() as lineage:
            damage = [*lineage.damage, *self._store.audit_restored()]  # the frames a checkpoint covers, read again
            problems.extend(f"journal byte {d.offset}: {d.reason}" for d in sorted(damage, key=lambda d: d.offset))
            total = len(lineage.nodes)
            for done, node in enumerate(lineage.nodes, 1):
                try:
                    if node.redacted:
                        self._store.erasure(node.idx)
                        erased += 1
                    else:
                        self._store.open(node.idx)
                except IntegrityError as exc:
                    problems.append(str(exc))
                if progress is not None and (done % 256 == 0 or done == total):
                    progress(done, total)
            branches = len(lineage.branches)
        return VerifyReport(not problems, total, branches, problems, list(self._store.repairs), erased)

    def heads(self) -> dict[str, str | None]:
        """Every branch and its HEAD snapshot id (None for a branch with no snapshot yet)."""
        self._check_open()
        with self._store.reading():
            return {
                name: (self._store.sid_of(head) if (head := self._store.branch(name).head) >= 0 else None)
                for name in self._store.branch_names()
            }

    def export_items(self) -> list[WireItem]:
        """Every replicable item of this store, oldest first: what a backup or a new device needs.

        Items carry only ciphertext and keyed ids (see :mod:`sovseal.storage.wire`); :meth:`import_items`
        on a store with the same key replays them.
        """
        self._check_open()
        return self._store.export_all()

    def import_items(self, items: Sequence[WireItem]) -> list[WireItem]:
        """Replay exported or pulled items in order, verifying each; returns the suffix still waiting
        for a parent. Items already present are skipped, so importing twice is harmless."""
        self._check_open()
        waiting = self._store.import_items(list(items))
        with self._store.reading() as lineage:
            erased_here = lineage.uncompacted > 0
        if erased_here:  # a redaction came in: its content leaves this store now
            self.compact()
        self._check_rotated()
        return waiting

    def _check_rotated(self) -> None:
        """KeyRotatedError once a pulled redaction said another device rotated the store's key."""
        new_key_id = self._store.rotated_to
        if new_key_id is not None:
            raise KeyRotatedError(
                f"the store was rotated to a new key (id {new_key_id}) on another device: everything sealed under this "
                f"key was erased on the server and here. To move: export the new key there (`sovseal key export`), import "
                "it into a new store directory here (`sovseal key import`), set the new server project's API key, and "
                "pull; the store comes back whole under the new key",
                new_key_id=new_key_id,
            )

    def pull(self, *, progress: Callable[[int, int], None] | None = None) -> PullResult:
        """Fetch this project's items from the server and replay them here: restore on a second device.

        Every record is opened and its snapshot id re-derived before it is written (an item that
        does not authenticate is set aside and the pull goes on: ``status().replication.set_aside``,
        the ``set-aside`` event); then records visible on any branch are embedded locally, since
        embeddings never leave a device. ``progress(done, total)`` is called after each page.
        """
        self._check_open()
        if self.replication is None:
            raise InvalidInputError(
                "pull() needs a replication endpoint: pass endpoint= and api_key= (or set SOVSEAL_ENDPOINT and SOVSEAL_API_KEY)"
            )
        result = self.replication.pull(progress)
        with self._store.reading() as lineage:
            erased_here = lineage.uncompacted > 0
        if erased_here:  # a redaction came in: its content leaves this device now, not at some later compaction
            self.compact()
        self._check_rotated()
        with self._store.reading() as lineage:
            visible = {idx for branch in lineage.branches.values() for idx in lineage.view(branch).values()}
        if visible and (index := self._index_if_current()) is not None:  # None: another model's index, rebuild-index embeds
            self._index_missing(index, visible)
        if self._shared.listeners["conflict"]:
            for name in self.branches():
                for conflict in self.conflicts(branch=name):
                    self._emit("conflict", conflict)
        return result

    def status(self) -> Status:
        self._check_open()
        replication = None if self.replication is None else self.replication.status()
        with self._store.reading() as lineage:
            head = self._store.branch(self.branch).head
            sync, rest = self._store.seals
            index = self._shared.index
            oldest = self._store.outbox(1) if lineage.pending else []
            return ReplicatedStatus(
                replication=replication,
                path=str(self.path),
                branch=self.branch,
                head=self._store.sid_of(head) if head >= 0 else None,
                branches=self._store.branch_names(),
                records=len(lineage.nodes),
                visible=len(lineage.view(self._store.branch(self.branch))),
                outbox_records=len(lineage.pending),
                outbox_bytes=lineage.outbox_bytes,
                key_backend=self.key_backend,
                key_id=self._store.key_id,
                seals={"k_sync": sync, "k_rest": rest},
                recovery=list(self._store.repairs),
                damage=[f"journal byte {d.offset}: {d.reason}" for d in lineage.damage],
                index_pending=0 if index is None else index.pending_count(),
                index_error=None if index is None else index.last_error,
                heads={name: self._heads(name) for name in self._store.branch_names()},
                outbox_since=datetime.fromtimestamp(oldest[0].created_at, UTC) if oldest else None,
            )

    def _heads(self, name: str) -> list[str | None]:
        """A branch's heads' snapshot ids, newest first (the caller holds the store's lock)."""
        try:
            branch = self._store.branch(name)
        except IntegrityError:
            return []
        targets = sorted(branch.heads.values(), key=self._store.order, reverse=True)
        return [self._store.sid_of(t) if t >= 0 else None for t in targets]

    def heads_of(self, branch: str | None = None) -> list[str | None]:
        """This branch's (or ``branch``'s) heads, newest first: one when it is merged, several after
        a pull brought concurrent writes (the next write merges them). None stands for a branch
        with no snapshot yet. UnknownBranchError for a branch that does not exist."""
        self._check_open()
        name = self._branch_arg(branch)
        with self._store.reading():
            self._store.branch(name)
            return self._heads(name)

    def conflicts(self, *, branch: str | None = None) -> list[Conflict]:
        """Paths written concurrently on this branch (or ``branch``) that its heads disagree on.

        Each lists every competing write and the one the branch shows (the same on every device).
        Empty once the branch has one head again: a local write after a pull merges the heads.
        """
        self._check_open()
        name = self._branch_arg(branch)
        out: list[Conflict] = []
        with self._store.reading() as lineage:
            found = lineage.conflicts(self._store.branch(name))
            for writes in found.values():
                opened = [self._store.open(idx) for idx in writes if not lineage.nodes[idx].redacted]
                if not opened:
                    continue
                versions = [
                    Version(
                        o.snapshot_id, None if o.entry.op == "delete" else o.entry.payload, o.entry.op == "delete", _at(o.node.created_at)
                    )
                    for o in opened
                ]
                out.append(Conflict(name, opened[0].entry.path, versions, versions[0].snapshot_id))
        return sorted(out, key=lambda c: c.path)


def _unreachable(lineage: Lineage) -> list[int]:
    """The records no branch's heads reach (by parent links, any branch)."""
    reached = {node.idx for node in lineage.history(t for branch in lineage.branches.values() for t in branch.heads.values())}
    return [idx for idx in range(len(lineage.nodes)) if idx not in reached]


#: Inside ``AsyncSovseal.batch()``: the storage it holds and the one worker thread its calls run in.
_ASYNC_BATCH: contextvars.ContextVar[tuple[LocalStore, ThreadPoolExecutor] | None] = contextvars.ContextVar("sovseal_batch", default=None)
_R = TypeVar("_R")


class AsyncSovseal:
    """``Sovseal`` with ``await``: each call runs in a worker thread so the event loop never blocks."""

    def __init__(self, path: str | os.PathLike[str] | None = None, **kwargs: Any) -> None:
        self._sync = Sovseal(path, **kwargs)

    @property
    def branch(self) -> str:
        return self._sync.branch

    @property
    def embedder(self) -> EmbedFn:
        return self._sync.embedder

    @property
    def recall_params(self) -> RecallParams:
        """:attr:`Sovseal.recall_params`: a plain attribute of the recall engine (starting the engine
        only starts its background loading), so it is read and set here, not in a thread."""
        return self._sync.recall_params

    @recall_params.setter
    def recall_params(self, params: RecallParams) -> None:
        self._sync.recall_params = params

    async def _call(self, fn: Callable[..., _R], /, *args: Any, **kwargs: Any) -> _R:
        """Run a call of the sync handle in a worker thread: inside :meth:`batch`, in the batch's own."""
        held = _ASYNC_BATCH.get()
        if held is not None and held[0] is self._sync._store:
            return await asyncio.get_running_loop().run_in_executor(held[1], functools.partial(fn, *args, **kwargs))
        return await asyncio.to_thread(fn, *args, **kwargs)

    @contextlib.asynccontextmanager
    async def batch(self) -> AsyncIterator[None]:
        """``async with``: :meth:`Sovseal.batch`. The calls this task (and tasks it starts) makes inside,
        through this handle or its views, run in one worker thread that holds the batch."""
        held = _ASYNC_BATCH.get()
        if held is not None and held[0] is self._sync._store:  # a batch inside a batch joins it
            yield
            return
        loop = asyncio.get_running_loop()
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="sovseal-batch") as worker:
            batch = self._sync.batch()
            await loop.run_in_executor(worker, batch.__enter__)
            token = _ASYNC_BATCH.set((self._sync._store, worker))
            try:
                yield
            except BaseException as exc:
                _ASYNC_BATCH.reset(token)
                if not await loop.run_in_executor(worker, batch.__exit__, type(exc), exc, exc.__traceback__):
                    raise
            else:
                _ASYNC_BATCH.reset(token)
                await loop.run_in_executor(worker, batch.__exit__, None, None, None)

    def view(self, branch: str | None = None) -> AsyncSovseal:
        """Another handle on this open store with its own current branch (see ``Sovseal.view``)."""
        other = object.__new__(AsyncSovseal)
        other._sync = self._sync.view(branch)
        return other

    async def ready(self) -> None:
        await self._call(self._sync.ready)

    async def store(self, path: str, payload: Any, **kwargs: Any) -> StoreResult:
        return await self._call(self._sync.store, path, payload, **kwargs)

    async def store_many(self, items: Sequence[Mapping[str, Any]], *, vectors: Any = None) -> list[StoreResult]:
        return await self._call(self._sync.store_many, items, vectors=vectors)

    async def recall(self, query: str, **kwargs: Any) -> list[Memory]:
        return await self._call(self._sync.recall, query, **kwargs)

    async def get(self, path: str, *, branch: str | None = None) -> Memory | None:
        return await self._call(self._sync.get, path, branch=branch)

    async def paths(self, prefix: str = "", *, branch: str | None = None) -> list[str]:
        return await self._call(self._sync.paths, prefix, branch=branch)

    async def find(self, filter: Mapping[str, Any] | None = None, *, branch: str | None = None, limit: int | None = None) -> list[Memory]:
        return await self._call(self._sync.find, filter, branch=branch, limit=limit)

    async def recheck(self, *snapshot_ids: str) -> None:
        await self._call(self._sync.recheck, *snapshot_ids)

    async def delete(self, path: str) -> StoreResult | None:
        return await self._call(self._sync.delete, path)

    async def delete_many(self, paths: Sequence[str]) -> list[StoreResult | None]:
        return await self._call(self._sync.delete_many, paths)

    async def reinforce(self, path: str) -> StoreResult | None:
        return await self._call(self._sync.reinforce, path)

    async def related(self, path: str, *, relation: str | None = None) -> list[Any]:
        return await self._call(self._sync.related, path, relation=relation)

    async def snapshot(self, *, branch: str | None = None) -> str | None:
        return await self._call(self._sync.snapshot, branch=branch)

    async def fork(self, snapshot_id: str | None = None, *, branch: str | None = None) -> str:
        return await self._call(self._sync.fork, snapshot_id, branch=branch)

    async def create_branch(self, name: str, at: str | None = None) -> None:
        await self._call(self._sync.create_branch, name, at)

    async def delete_branch(self, name: str) -> None:
        await self._call(self._sync.delete_branch, name)

    async def heads_of(self, branch: str | None = None) -> list[str | None]:
        return await self._call(self._sync.heads_of, branch)

    async def checkout(self, branch: str) -> None:
        await self._call(self._sync.checkout, branch)

    async def rollback(self, snapshot_id: str) -> None:
        await self._call(self._sync.rollback, snapshot_id)

    async def branches(self) -> list[str]:
        return await self._call(self._sync.branches)

    async def log(
        self, *, limit: int | None = None, branch: str | None = None, damaged: Literal["raise", "mark"] = "raise"
    ) -> list[LogEntry]:
        return await self._call(self._sync.log, limit=limit, branch=branch, damaged=damaged)

    async def state(self, *, branch: str | None = None) -> dict[str, Any]:
        return await self._call(self._sync.state, branch=branch)

    async def recall_by_vector(self, vector: Any, **kwargs: Any) -> list[Memory]:
        return await self._call(self._sync.recall_by_vector, vector, **kwargs)

    async def purge(self, path: str | Sequence[str] | None = None, **kwargs: Any) -> PurgeResult:
        return await self._call(self._sync.purge, path, **kwargs)

    async def compact(self) -> CompactionReport:
        return await self._call(self._sync.compact)

    async def erasures(self) -> int:
        return await self._call(self._sync.erasures)

    async def heads(self) -> dict[str, str | None]:
        return await self._call(self._sync.heads)

    async def conflicts(self, *, branch: str | None = None) -> list[Conflict]:
        return await self._call(self._sync.conflicts, branch=branch)

    async def export_items(self) -> list[WireItem]:
        return await self._call(self._sync.export_items)

    async def import_items(self, items: Sequence[WireItem]) -> list[WireItem]:
        return await self._call(self._sync.import_items, items)

    async def verify(self) -> VerifyReport:
        return await self._call(self._sync.verify)

    async def status(self) -> Status:
        return await self._call(self._sync.status)

    async def pull(self, **kwargs: Any) -> PullResult:
        return await self._call(self._sync.pull, **kwargs)

    @property
    def replication(self) -> Replicator | None:
        return self._sync.replication

    def on(self, event: str, callback: Callable[..., None]) -> None:
        self._sync.on(event, callback)

    async def close(self) -> None:
        await self._call(self._sync.close)

    async def __aenter__(self) -> AsyncSovseal:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()
