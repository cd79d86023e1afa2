"""Recall: HEAD-visible hybrid search with decay and reinforcement (docs/recall.md).

One ``RecallEngine`` per ``Sovseal`` handle. On creation a background thread decrypts every record
once into the in-memory catalog and keyword index (nothing of it is written to disk); the store
hook adds each new record as it is stored, and a recall first catches up with records other
processes appended. A recall:

1. embeds the query (an LRU of 256 queries);
2. computes the records visible at the branch's HEAD (a mask over lineage nodes, kept
   incrementally per branch) and applies the filter from the catalog, exactly;
3. takes the best ``candidates`` from the vector index and from BM25 among those records;
4. fuses them (see :mod:`sovseal.recall.params`), adds the lineage neighbours' context, and
   multiplies by decay and reinforcement;
5. opens every record it returns (decrypt, re-derive the snapshot id): one that fails raises
   IntegrityError instead of being returned.

Past the two retrievers a recall works on arrays of its few hundred candidates, never on arrays
over every record. What does not depend on the query is kept between recalls, each for as long
as the store cannot have changed it: each node's reinforcement (until a reinforcement event), its
cosine to its parent (until its vector is replaced) and to its far node (until the lineage
grows), each term's BM25 contributions (until a record is added).
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

import numpy as np
from cachetools import LRUCache

from sovseal.storage.entries import MEMORY_TYPES, memory_text
from sovseal.storage.frames import Op
from sovseal.storage.store import CHECKPOINT_EVERY, CHECKPOINT_ON_CLOSE

from ..errors import RUN_VERIFY, RUN_VERIFY_CLI, DamagedRecordError, IntegrityError
from . import text
from .catalog import Catalog
from .filters import Filter
from .keyword import KeywordIndex, QueryScores
from .params import RecallParams
from .vector_index import Dense

if TYPE_CHECKING:
    from sovseal.storage.entries import Entry
    from sovseal.storage.lineage import Branch, Lineage, Node
    from sovseal.storage.store import LocalStore, Opened

    from .vector_index import VectorIndex

log = logging.getLogger(__name__)
_T = TypeVar("_T")

QUERY_CACHE_SIZE = 256
_CHUNK = 256  # records opened per hold of the store's lock while loading
_WALK = 4096  # steps a HEAD may have moved and still be followed incrementally
_DAY = 86400.0
_SEEDS = 40  # candidates whose lineage neighbours join the pool (at least 2k)


@dataclass
class _View:
    head: int
    mask: np.ndarray  # bool over nodes: visible at ``head``
    _paths: dict[bytes, int] | None  # path hash -> the visible node (None: still the arrays below)
    heads: tuple[int, ...]  # the lineage's epoch and the branch's head targets it was computed for
    arrays: tuple[np.ndarray, np.ndarray] | None = None  # a checkpoint's (path hashes, nodes) at ``head``

    @property
    def paths(self) -> dict[bytes, int]:
        if self._paths is None:
            assert self.arrays is not None  # nosec B101 -- one or the other is set
            self._paths = dict(zip(self.arrays[0].tolist(), self.arrays[1].tolist(), strict=True))
            self.arrays = None
        return self._paths


class RecallEngine:
    def __init__(
        self,
        store: LocalStore,
        embed: Callable[[list[str]], np.ndarray],
        vector_index: Callable[[int], VectorIndex],
        params: RecallParams | None = None,
        *,
        forget_vectors: Callable[[list[int]], None] | None = None,
    ) -> None:
        self._store = store
        self._forget_vectors = forget_vectors  # erased records leave the vector index's memory too
        self._embed = embed
        self._vector_index = vector_index
        self.params = params or RecallParams()
        self.now: Callable[[], float] = time.time  # tests move the clock
        self._lock = threading.RLock()
        self.catalog = Catalog()
        self.keywords = KeywordIndex()
        self._hwm = 0  # every node below this is in the catalog
        self._queries: LRUCache[str, np.ndarray] = LRUCache(QUERY_CACHE_SIZE)  # under _lock
        self._views: dict[bytes, _View] = {}
        self._pairs = _PairCosines()
        self._ready = threading.Event()
        self.restored = False  # the catalog came from the store's checkpoint
        self._added_since_check = 0
        self._erased: set[int] = set()  # erased records already dropped from the catalog and keywords
        self._checkpointer: threading.Thread | None = None
        self.load_seconds: float | None = None
        self._thread = threading.Thread(target=self._load, name="sovseal-recall-catalog", daemon=True)
        self._thread.start()

    # -- the catalog -------------------------------------------------------------------------

    def _load(self) -> None:
        started = time.perf_counter()
        try:
            self._restore()
            while not self._store.closed and self._sync_step():
                pass
        except Exception as exc:  # noqa: BLE001 - a recall retries the sync in its own thread and raises
            if not self._store.closed:
                log.warning("loading the recall catalog failed (recall will retry): %s", exc)
        finally:
            self.load_seconds = time.perf_counter() - started
            self._ready.set()
        # A checkpoint without the catalog (written by a handle that never recalled) is worth
        # completing once a catalog of some size was built from the journal.
        self.checkpoint_if_due(CHECKPOINT_EVERY if self._store.checkpoint_has_catalog else CHECKPOINT_ON_CLOSE, catalog=True)

    def checkpoint_if_due(self, least: int, *, catalog: bool = False) -> None:
        """The store's :meth:`~sovseal.storage.store.LocalStore.checkpoint_if_due`, with this catalog in it."""
        self._store.checkpoint_if_due(least, add_arrays=self.checkpoint_arrays, catalog=catalog)

    def close(self) -> None:
        """Finish a background checkpoint, then write one if enough was added (the store closes next)."""
        writer = self._checkpointer
        if writer is not None:
            writer.join()
        if self._ready.is_set():
            self.checkpoint_if_due(CHECKPOINT_ON_CLOSE)

    def _restore(self) -> None:
        """Start from the catalog in the store's checkpoint, when it has one (docs/design.md)."""
        restored = self._store.take_restored()
        if restored is None:
            return
        header, arrays = restored
        if "c.state" not in arrays:
            return
        catalog, keywords = Catalog.from_arrays(arrays), KeywordIndex.from_arrays(arrays)
        erased = set(json.loads(arrays["l.meta"].tobytes()).get("erased", []))  # erased when it was written
        with self._lock:
            if self._hwm == 0 and self.catalog.size == 0:  # nothing was added before this thread ran
                self.catalog, self.keywords = catalog, keywords
                self._hwm = int(header["catalogued"])
                self.restored = True
                self._erased = erased  # a checkpoint's catalog holds no erased record

    def checkpoint_arrays(self, header: dict[str, object], arrays: dict[str, np.ndarray]) -> None:
        """Add the catalog and keyword index to a checkpoint (the caller holds the store's lock)."""
        with self._store.reading() as lineage:  # the store's lock is held: this only re-enters it
            self.forget_erased(lineage)
        with self._lock:
            header["catalogued"] = self._hwm
            self.catalog.to_arrays(arrays)
            self.keywords.to_arrays(arrays)

    @property
    def catalogued(self) -> int:
        """Nodes below this are all in the catalog."""
        return self._hwm

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the catalog holds every record present at open."""
        return self._ready.wait(timeout)

    def _sync_step(self, lineage: Lineage | None = None) -> bool:
        """Catalog up to _CHUNK unknown nodes from the high-water mark; False when there were none."""
        if lineage is None:
            with self._store.reading() as current:
                return self._sync_step(current)
        self.forget_erased(lineage)
        end = len(lineage.nodes)
        start = self._hwm
        if start >= end:
            return False
        stop = min(end, start + _CHUNK)
        with self._lock:
            todo = [i for i in range(start, stop) if not self.catalog.known(i)]
        opened: list[tuple[Node, Entry | None, str | None]] = []
        for idx in todo:
            node = lineage.nodes[idx]
            if node.op is Op.DELETE or node.redacted:  # an erased record is catalogued as a delete
                opened.append((node, None, None))
                continue
            try:
                opened.append((node, self._store.open(idx).entry, None))
            except IntegrityError as exc:
                opened.append((node, None, str(exc)))
        for node, entry, damage in opened:
            if entry is not None:
                self.added(node, entry)
            else:
                with self._lock:
                    if not self.catalog.known(node.idx):
                        if damage is None:
                            self.catalog.add_tombstone(node.idx, node.parent)
                        else:
                            self.catalog.add_damaged(node.idx, node.parent, damage)
        with self._lock:
            self._hwm = max(self._hwm, stop)
        return True

    def forget_erased(self, lineage: Lineage) -> list[int]:
        """Drop from the catalog and the keyword index every record erased since the last call
        (the caller holds the store's lock); returns them. The vector index is the caller's."""
        if len(lineage.erased) == len(self._erased):
            return []
        new = [idx for idx in lineage.erased if idx not in self._erased]
        if new:
            with self._lock:
                self.catalog.erase(new)
                self.keywords.erase(new)
                self._views.clear()
                self._pairs = _PairCosines()
            if self._forget_vectors is not None:
                self._forget_vectors(new)
        self._erased = set(lineage.erased)
        return new

    def sync(self, lineage: Lineage) -> None:
        """Catalog every node of ``lineage`` (the caller holds the store's lock)."""
        while self._sync_step(lineage):
            pass

    def added(self, node: Node, entry: Entry) -> None:
        """The store hook: a record was just stored (its plaintext is in hand).

        An entry whose text is ``""`` (``store(..., index=False)``) is catalogued for filters and
        visibility but has no terms and no vector: recall never ranks it.
        """
        indexed = entry.text != ""
        terms = text.tokens(memory_text(entry)) if indexed else []
        with self._lock:
            if self.catalog.known(node.idx):
                return
            self.catalog.add_record(
                node.idx, node.parent, entry.path, entry.type, entry.provenance, entry.metadata, indexed=indexed
            )
            if terms:
                self.keywords.add(node.idx, terms)
            self._added_since_check += 1
            due = self._added_since_check >= CHECKPOINT_EVERY and self._ready.is_set()
            if due and (self._checkpointer is None or not self._checkpointer.is_alive()):
                self._added_since_check = 0
                self._checkpointer = threading.Thread(
                    target=self.checkpoint_if_due, args=(CHECKPOINT_EVERY,), name="sovseal-checkpoint", daemon=True
                )
                self._checkpointer.start()

    # -- visibility ----------------------------------------------------------------------------

    def visible(self, lineage: Lineage, branch: Branch) -> np.ndarray:
        """A boolean mask over nodes: the records visible at the branch's HEAD (caller holds the store lock)."""
        size = len(lineage.nodes)
        view = self._views.get(branch.branch_id)
        head = branch.head
        heads = (lineage.epoch, *sorted(branch.heads.values()))
        if view is not None and view.heads != heads:
            # One head that moved along its chain is followed; anything else (a pull that brought
            # concurrent heads, a merge) is recomputed.
            if len(heads) > 2 or len(view.heads) > 2 or heads[0] != view.heads[0] or not self._follow(lineage, view, head):
                view = None
            else:
                view.heads = heads
        if view is None:
            mask = np.zeros(max(size, 1024), dtype=bool)
            if branch.view_arrays is not None:  # from the checkpoint: no dict until a HEAD moves
                mask[branch.view_arrays[1]] = True
                view = _View(head, mask, None, heads, branch.view_arrays)
            else:
                paths = dict(lineage.view(branch))
                if paths:
                    mask[np.fromiter(paths.values(), dtype=np.int64, count=len(paths))] = True
                view = _View(head, mask, paths, heads)
            self._views[branch.branch_id] = view
        if len(view.mask) < size:
            grown = np.zeros(max(size, 2 * len(view.mask)), dtype=bool)
            grown[: len(view.mask)] = view.mask
            view.mask = grown
        return view.mask[:size]

    def _follow(self, lineage: Lineage, view: _View, head: int) -> bool:
        """Move a cached view forward along the chain to ``head``; False if ``head`` is not a near descendant."""
        steps: list[Node] = []
        idx = head
        while idx != view.head:
            if idx < 0 or len(steps) >= _WALK:
                return False
            node = lineage.nodes[idx]
            if node.more_parents:  # a merge brings in another history: recompute
                return False
            steps.append(node)
            idx = node.parent
        if len(view.mask) <= head:
            grown = np.zeros(max(head + 1, 2 * len(view.mask)), dtype=bool)
            grown[: len(view.mask)] = view.mask
            view.mask = grown
        for node in reversed(steps):
            old = view.paths.pop(node.path_hash, None)
            if old is not None:
                view.mask[old] = False
            if node.op is Op.STORE:
                view.paths[node.path_hash] = node.idx
                view.mask[node.idx] = True
        view.head = head
        return True

    # -- recall --------------------------------------------------------------------------------

    def query_vector(self, query: str) -> np.ndarray:
        with self._lock:
            cached = self._queries.get(query)
            if cached is not None:
                return cached
        vector: np.ndarray = self._embed([query])[0]
        with self._lock:
            self._queries[query] = vector  # the least recently used query goes when it is full
        return vector

    def recall(self, query: str, k: int, tree: Filter | None, branch_name: str) -> list[tuple[Opened, float]]:
        vector = self.query_vector(query)
        terms = text.tokens(query)
        index = self._vector_index(int(vector.shape[0]))
        def rank(lineage: Lineage, searchable: np.ndarray) -> list[tuple[Opened, float]]:
            return self._rank(lineage, index, vector, terms, k, tree, searchable)

        return self._searching(index, branch_name, rank)

    def by_vector(self, vector: np.ndarray, k: int, tree: Filter | None, branch_name: str) -> list[tuple[Opened, float]]:
        """Dense search only among the records visible at the branch's HEAD; scores are cosine similarities."""
        with self._store.reading() as lineage:
            if len(lineage.nodes) == 0:
                return []  # no index yet, and nothing to find
        index = self._vector_index(int(vector.shape[0]))
        if index.dim != int(vector.shape[0]):
            from ..errors import InvalidInputError

            raise InvalidInputError(f"the vector has {vector.shape[0]} dimensions; this store's index has {index.dim}")

        def search(lineage: Lineage, searchable: np.ndarray) -> list[tuple[Opened, float]]:
            with self._lock:
                allowed = self._allowed(searchable, tree)
            if not allowed.any():
                return []
            nodes, scores = index.search_arrays(vector, k, allowed)
            return [(self._store.open(n), s) for n, s in zip(nodes.tolist(), scores.tolist(), strict=True)]

        return self._searching(index, branch_name, search)

    def _searching(self, index: VectorIndex, branch_name: str, search: Callable[[Lineage, np.ndarray], _T]) -> _T:
        """Run ``search`` under the store's lock over the records recall may rank at the branch's
        HEAD (a mask over nodes). Records without a vector yet (stored by another process, or lost
        with the index) are embedded first, outside the lock; the third time round the search runs
        over whatever has a vector."""
        self.wait_ready()
        for attempt in range(3):
            with self._store.reading() as lineage:
                self.sync(lineage)
                visible = self.visible(lineage, self._store.branch(branch_name))
                self._check_damage(visible)
                with self._lock:
                    searchable = self.catalog.searchable(visible)
                missing = index.missing_in(searchable)
                if len(missing) == 0 or attempt == 2:
                    return search(lineage, searchable)
                texts = [memory_text(self._store.open(int(i)).entry) for i in missing]
            index.add(missing.tolist(), self._embed(texts))  # outside the lock: embedding can be slow
        raise AssertionError("unreachable")

    def select(self, branch_name: str, tree: Filter | None) -> list[tuple[int, str]]:
        """(node, path) of every record visible at the branch's HEAD that satisfies ``tree``, sorted
        by path: answered from the catalog, nothing decrypted (``Sovseal.paths`` and ``find``).
        Records stored with ``index=False`` are included: only ranking skips them."""
        self.wait_ready()
        with self._store.reading() as lineage:
            self.sync(lineage)
            visible = self.visible(lineage, self._store.branch(branch_name))
            self._check_damage(visible)
            with self._lock:
                chosen = visible if tree is None else visible & self.catalog.mask(tree, len(visible))
                paths = self.catalog.paths
                found = [(idx, paths[idx]) for idx in np.flatnonzero(chosen).tolist()]
        return sorted(((idx, path) for idx, path in found if path is not None), key=lambda pair: pair[1])

    def _allowed(self, searchable: np.ndarray, tree: Filter | None) -> np.ndarray:
        """The records a search may return: ``searchable`` and the filter (the caller holds the lock)."""
        return searchable if tree is None else searchable & self.catalog.mask(tree, len(searchable))

    def embed_missing(self, index: VectorIndex, nodes: list[int]) -> None:
        """Embed the given records that have no vector (skipping ones that fail to open)."""
        missing = index.missing(nodes)
        if not missing:
            return
        texts: list[str] = []
        kept: list[int] = []
        with self._store.reading():
            for idx in missing:
                try:
                    entry = self._store.open(idx).entry
                except IntegrityError:
                    continue  # verify() reports it; recall refuses to run over it
                if entry.text != "":  # stored with index=False: no vector by design
                    texts.append(memory_text(entry))
                    kept.append(idx)
        if kept:
            index.add(kept, self._embed(texts))

    def _check_damage(self, visible: np.ndarray) -> None:
        with self._lock:
            damaged = [(idx, reason) for idx, reason in self.catalog.damage.items() if idx < len(visible) and visible[idx]]
        if not damaged:
            return
        idx, reason = damaged[0]
        context = "a memory visible at this HEAD cannot be opened, so recall cannot rank it"
        try:
            self._store.open(idx)
        except DamagedRecordError as exc:
            raise exc.within(context) from None
        raise IntegrityError(f"{context}: {reason}", advice=RUN_VERIFY, cli_advice=RUN_VERIFY_CLI)

    def _rank(
        self,
        lineage: Lineage,
        index: VectorIndex,
        vector: np.ndarray,
        terms: list[str],
        k: int,
        tree: Filter | None,
        visible: np.ndarray,
    ) -> list[tuple[Opened, float]]:
        """The top ``k`` of the fused, decayed and reinforced scores (:mod:`sovseal.recall.params`).

        ``visible``: the records recall may rank at HEAD. Everything past the two retrievers works
        on the few hundred candidates and their neighbours, never on arrays over every record.
        """
        with self._lock:
            fused = self._fuse(index, vector, terms, k, tree, visible)
        return [] if fused is None else self._finish(lineage, *fused, k)

    def _fuse(
        self, index: VectorIndex, vector: np.ndarray, terms: list[str], k: int, tree: Filter | None, visible: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """The pool of candidates and their fused scores (None: nothing to rank); the caller holds the lock."""
        p = self.params
        size = len(visible)
        allowed = self._allowed(visible, tree)
        if not allowed.any():
            return None
        want = max(p.candidates, 2 * k)
        if p.fusion == "keyword":
            dense = Dense(np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32), None)
        else:
            dense = index.search_scored(vector, want, allowed, keep=True)
        if p.fusion == "dense" or not terms:
            bm = None
            kw_nodes = np.zeros(0, dtype=np.int64)
        else:
            kw_nodes, bm = self.keywords.best(terms, size, p.bm25_k1, p.bm25_b, allowed, want)  # BM25 among the allowed
        scorer = _Scorer(p, index, vector, dense, kw_nodes, bm)
        if p.fusion == "dense":
            candidates = dense.nodes
        elif p.fusion == "keyword":
            candidates = kw_nodes
        else:
            candidates = _distinct([dense.nodes, kw_nodes])
        if not len(candidates):
            return None
        radius = len(p.neighbor_weights)
        parent, child = self.catalog.parent, self.catalog.child
        pool = candidates
        if radius:
            # Neighbours of the best candidates join the pool: a record can be found through its context.
            first = scorer.base(candidates)
            seeds = candidates[np.argsort(-first, kind="stable")[: max(_SEEDS, 2 * k)]]
            near = [seeds]
            up = down = seeds
            for _ in range(radius):
                up, down = _step(parent, up), _step(child, down)
                near += [up, down]
            extra = np.concatenate(near)
            extra = extra[(extra >= 0) & (extra < size)]
            pool = _distinct([candidates, extra[allowed[extra]]])
        if not radius:
            fused = scorer.base(pool)
        else:
            # The pool and its neighbours 1..radius steps up and down, scored in one call; a
            # neighbour that is not visible here (or none) counts 0.
            rings = [pool]
            for links in (parent, child):
                ring = pool
                for _ in range(radius):
                    ring = _step(links, ring)
                    rings.append(ring)
            flat = np.concatenate(rings)
            ok = (flat >= 0) & (flat < size)
            ok[ok] = visible[flat[ok]]
            scored = np.zeros(len(flat))
            scored[ok] = scorer.base(flat[ok])
            base = scored.reshape(len(rings), len(pool))  # rows: pool, parents 1..r, children 1..r
            fused = base[0]
            gate = self._coherence(index, pool, visible)
            if gate:
                # The best-scoring neighbour within reach is the context, not the sum of all of them: a
                # sum credits a record for every vaguely similar neighbour (in a conversation, all are).
                weights = np.array(p.neighbor_weights)[:, None]
                context = (weights * np.maximum(base[1 : radius + 1], base[radius + 1 :])).max(axis=0)
                fused = fused + gate * np.maximum(context, 0.0)
        return pool, fused

    def _coherence(self, index: VectorIndex, pool: np.ndarray, visible: np.ndarray) -> float:
        """How far lineage neighbours are context for each other here, from 0 (off) to 1 (full weight).

        The mean cosine between the pool's records and their parents, minus the mean cosine between
        the same records and records far from them in the lineage, over ``context_coherence``. A
        conversation's consecutive turns are much more alike than two random turns of it; documents
        ingested in bulk in arbitrary order are not, and there the context would only be noise.
        """
        full = self.params.context_coherence
        if full <= 0:
            return 1.0
        size = len(visible)
        parents = _step(self.catalog.parent, pool)
        ok = (parents >= 0) & visible[parents]  # a parent is an earlier node; visible[-1] is masked out
        if np.count_nonzero(ok) < 4:
            return 1.0  # too little evidence either way: trust the lineage
        left = pool[ok]
        far_nodes = (left + size // 2) % size
        far_nodes = np.where(visible[far_nodes], far_nodes, -1)
        near, far = self._pairs.get(index, left, parents[ok], far_nodes, size)
        near_mean, far_mean = _nanmean(near), _nanmean(far)
        if near_mean is None or far_mean is None:
            return 1.0
        return min(1.0, max(0.0, float((near_mean - far_mean) / full)))

    def _finish(self, lineage: Lineage, pool: np.ndarray, fused: np.ndarray, k: int) -> list[tuple[Opened, float]]:
        """Decay and reinforcement over the pool, then the top k (ties: the newer record), opened."""
        p = self.params
        with self._lock:
            types = self.catalog.type_code[pool]
            counts, last = lineage.nodes.reinforcement(pool)
        # by type code; the code -1 (no known type) picks the last entry, the semantic half-life
        halves = np.array([p.half_life_days[t] for t in MEMORY_TYPES] + [p.half_life_days["semantic"]])
        half = halves[types]
        age = np.maximum(0.0, (self.now() - last) / _DAY)
        score = fused * (p.decay_floor + (1.0 - p.decay_floor) * np.power(0.5, age / half))
        if counts.any():  # else the factor is exactly 1
            score = score * np.minimum(p.reinforcement_cap, 1.0 + p.reinforcement_weight * np.log1p(counts))
        top = np.lexsort((-pool, -score))[:k]
        return [(self._store.open(n), s) for n, s in zip(pool[top].tolist(), score[top].tolist(), strict=True)]


class _PairCosines:
    """The cosine of each node to its parent and to its far node ((node + size // 2) % size), as
    the coherence gate uses them, kept by node (NaN: not known). Neither depends on the query: a
    node's vector and parent never change (``VectorIndex.replaced`` says when a vector did), and
    its far node only when the lineage grows. So each is computed once, not for every recall."""

    def __init__(self) -> None:
        self._parent = np.zeros(0, dtype=np.float32)
        self._far = np.zeros(0, dtype=np.float32)
        self._size = -1  # the lineage size the far cosines are for
        self._replaced = -1

    def get(
        self, index: VectorIndex, left: np.ndarray, parents: np.ndarray, far_nodes: np.ndarray, size: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """cos(left, parents) and cos(left, far_nodes) (NaN where a node is -1 or has no vector)."""
        if index.replaced != self._replaced or len(self._parent) < size:
            parent = np.full(max(size, 2 * len(self._parent), 1024), np.nan, dtype=np.float32)
            if index.replaced == self._replaced:
                parent[: len(self._parent)] = self._parent
            self._parent, self._replaced = parent, index.replaced
            self._size = -1
        if self._size != size:
            self._far = np.full(len(self._parent), np.nan, dtype=np.float32)
            self._size = size
        near = self._parent[left]
        far = np.where(far_nodes >= 0, self._far[left], np.float32(np.nan))
        todo = np.isnan(near) | (np.isnan(far) & (far_nodes >= 0))
        if todo.any():
            fresh_near, fresh_far = index.pair_similarities(left[todo], (parents[todo], far_nodes[todo]))
            near[todo], far[todo] = fresh_near, fresh_far
            self._parent[left[todo]] = fresh_near
            known = far_nodes[todo] >= 0
            self._far[left[todo][known]] = fresh_far[known]
        return near, far


class _Scorer:
    """One query's base score of any node (see :mod:`sovseal.recall.params`): its cosine read
    from the dense search (or computed where that search did not score it) and its BM25 among the
    allowed records, max-normalised."""

    def __init__(
        self,
        params: RecallParams,
        index: VectorIndex,
        vector: np.ndarray,
        dense: Dense,
        kw_nodes: np.ndarray,
        bm: QueryScores | None,
    ) -> None:
        self.params, self.index, self.vector, self.dense = params, index, vector, dense
        self.kw_nodes, self.bm = kw_nodes, bm  # bm: BM25 among the allowed records, 0 elsewhere
        self.bm_max = float(bm[kw_nodes[:1]][0]) if len(kw_nodes) and bm is not None else 0.0  # the best allowed BM25

    def base(self, nodes: np.ndarray) -> np.ndarray:
        p = self.params
        if p.fusion == "rrf":
            out = np.zeros(len(nodes), dtype=np.float64)
            for ranked in (self.dense.nodes, self.kw_nodes):
                out += _rrf(ranked, nodes, p.rrf_k)
            return out
        if self.bm_max > 0:
            assert self.bm is not None  # nosec B101 -- type narrowing: bm_max > 0 only with scores
            keyword: np.ndarray = np.divide(self.bm[nodes], self.bm_max, dtype=np.float64)  # bm is 0 where not allowed
        else:
            keyword = np.zeros(len(nodes))
        if p.fusion == "keyword":
            return keyword
        cosines = self.cosines(nodes)
        if p.fusion == "dense":
            dense = cosines.astype(np.float64)
            dense[np.isnan(dense)] = -1.0  # no vector
            return (1.0 + dense) / 2.0
        # fmax: a node without a vector (NaN) counts 0, as max(cosine, 0) of cosine -1 would
        fused: np.ndarray = p.dense_weight * np.fmax(cosines, 0.0, dtype=np.float64) + p.keyword_weight * keyword
        return fused

    def cosines(self, nodes: np.ndarray) -> np.ndarray:
        """The cosine of each node to the query, read where the search computed it, else computed
        once (and remembered for the next call)."""
        known = self.dense.known
        if known is None:
            return self.index.scores_for(self.vector, nodes)
        found = known[nodes]
        unknown = np.isnan(found)
        if unknown.any():
            todo = _distinct([nodes[unknown]])  # sorted-unique: np.unique is 2x slower here
            known.add(todo, self.index.scores_for(self.vector, todo))
            found = known[nodes]
        return found


def _nanmean(values: np.ndarray) -> np.float32 | None:
    """``np.nanmean`` of a float32 vector (the same number: NaNs summed as 0, the float32 total
    divided by the count in float64), without its generic machinery; None when all are NaN."""
    keep = ~np.isnan(values)
    count = np.count_nonzero(keep)
    if not count:
        return None
    total = np.add.reduce(np.where(keep, values, np.float32(0)))
    return np.float32(total / np.intp(count))


def _rrf(ranked: np.ndarray, nodes: np.ndarray, rrf_k: int) -> np.ndarray:
    """1 / (rrf_k + rank) of each node in the ranked list (rank from 1), 0 where it is not in it."""
    if not len(ranked) or not len(nodes):
        return np.zeros(len(nodes))
    order = np.argsort(ranked, kind="stable")
    keys = ranked[order]
    pos = np.clip(np.searchsorted(keys, nodes), 0, len(keys) - 1)
    hit = keys[pos] == nodes
    return np.where(hit, 1.0 / (rrf_k + order[pos] + 1), 0.0)


def _distinct(parts: list[np.ndarray]) -> np.ndarray:
    """The distinct node numbers of ``parts`` (each a valid node, never -1), sorted."""
    joined = np.concatenate(parts)
    joined.sort()
    if len(joined) < 2:
        return joined
    first = np.empty(len(joined), dtype=bool)
    first[0] = True
    np.not_equal(joined[1:], joined[:-1], out=first[1:])
    return joined[first]


def _step(links: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """One step along ``links`` (the catalog's parent or child) for each node; -1 stays -1.

    Every node is -1 or below the catalog's size, and the catalog keeps ``links[-1] == -1``.
    """
    stepped: np.ndarray = links[nodes]
    return stepped
