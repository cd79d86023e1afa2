"""Recall: HEAD-visible hybrid search with decay and reinforcement (DESIGN.md §5, docs/recall.md).

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
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..entries import MEMORY_TYPES, memory_text
from ..errors import IntegrityError
from ..frames import Op
from . import text
from .catalog import Catalog
from .filters import Filter
from .keyword import KeywordIndex
from .params import RecallParams

if TYPE_CHECKING:
    from ..entries import Entry
    from ..index import VectorIndex
    from ..lineage import Branch, Lineage, Node
    from ..store import LocalStore, Opened

log = logging.getLogger(__name__)

QUERY_CACHE_SIZE = 256
_CHUNK = 256  # records opened per hold of the store's lock while loading
_WALK = 4096  # steps a HEAD may have moved and still be followed incrementally
_DAY = 86400.0
_SEEDS = 40  # candidates whose lineage neighbours join the pool (at least 2k)


@dataclass
class _View:
    head: int
    mask: np.ndarray  # bool over nodes: visible at ``head``
    paths: dict[bytes, int]  # path hash -> the visible node


class RecallEngine:
    def __init__(
        self,
        store: LocalStore,
        embed: Callable[[list[str]], np.ndarray],
        vector_index: Callable[[int], VectorIndex],
        params: RecallParams | None = None,
    ) -> None:
        self._store = store
        self._embed = embed
        self._vector_index = vector_index
        self.params = params or RecallParams()
        self.now: Callable[[], float] = time.time  # tests move the clock
        self._lock = threading.RLock()
        self.catalog = Catalog()
        self.keywords = KeywordIndex()
        self._hwm = 0  # every node below this is in the catalog
        self._queries: OrderedDict[str, np.ndarray] = OrderedDict()
        self._views: dict[bytes, _View] = {}
        self._ready = threading.Event()
        self.load_seconds: float | None = None
        self._thread = threading.Thread(target=self._load, name="sovseal-recall-catalog", daemon=True)
        self._thread.start()

    # -- the catalog -------------------------------------------------------------------------

    def _load(self) -> None:
        started = time.perf_counter()
        try:
            while not self._store.closed and self._sync_step():
                pass
        except Exception as exc:  # noqa: BLE001 - a recall retries the sync in its own thread and raises
            if not self._store.closed:
                log.warning("loading the recall catalog failed (recall will retry): %s", exc)
        finally:
            self.load_seconds = time.perf_counter() - started
            self._ready.set()

    def wait_ready(self, timeout: float | None = None) -> bool:
        """Wait until the catalog holds every record present at open."""
        return self._ready.wait(timeout)

    def _sync_step(self, lineage: Lineage | None = None) -> bool:
        """Catalog up to _CHUNK unknown nodes from the high-water mark; False when there were none."""
        if lineage is None:
            with self._store.reading() as current:
                return self._sync_step(current)
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
            if node.op is Op.DELETE:
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

    # -- visibility ----------------------------------------------------------------------------

    def visible(self, lineage: Lineage, branch: Branch) -> np.ndarray:
        """A boolean mask over nodes: the records visible at the branch's HEAD (caller holds the store lock)."""
        size = len(lineage.nodes)
        view = self._views.get(branch.branch_id)
        head = branch.head
        if view is not None and view.head != head and not self._follow(lineage, view, head):
            view = None
        if view is None:
            paths = dict(lineage.view(branch))
            mask = np.zeros(max(size, 1024), dtype=bool)
            if paths:
                mask[np.fromiter(paths.values(), dtype=np.int64, count=len(paths))] = True
            view = self._views[branch.branch_id] = _View(head, mask, paths)
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
                self._queries.move_to_end(query)
                return cached
        vector = self._embed([query])[0]
        with self._lock:
            self._queries[query] = vector
            while len(self._queries) > QUERY_CACHE_SIZE:
                self._queries.popitem(last=False)
        return vector

    def recall(self, query: str, k: int, tree: Filter | None, branch_name: str) -> list[tuple[Opened, float]]:
        vector = self.query_vector(query)
        terms = text.tokens(query)
        index = self._vector_index(int(vector.shape[0]))
        self.wait_ready()
        for attempt in range(3):
            with self._store.reading() as lineage:
                self.sync(lineage)
                branch = self._store.branch(branch_name)
                visible = self.visible(lineage, branch)
                self._check_damage(visible)
                with self._lock:
                    visible = self.catalog.searchable(visible)
                missing = index.missing_in(visible)
                if len(missing) == 0 or attempt == 2:
                    return self._rank(lineage, index, vector, terms, k, tree, visible)
                texts = [memory_text(self._store.open(int(i)).entry) for i in missing]
            index.add(missing.tolist(), self._embed(texts))  # outside the lock: embedding can be slow
        raise AssertionError("unreachable")

    def by_vector(self, vector: np.ndarray, k: int, tree: Filter | None, branch_name: str) -> list[tuple[Opened, float]]:
        """Dense search only among the records visible at the branch's HEAD; scores are cosine similarities."""
        with self._store.reading() as lineage:
            if len(lineage.nodes) == 0:
                return []  # no index yet, and nothing to find
        index = self._vector_index(int(vector.shape[0]))
        if index.dim != int(vector.shape[0]):
            from ..errors import InvalidInputError

            raise InvalidInputError(f"the vector has {vector.shape[0]} dimensions; this store's index has {index.dim}")
        self.wait_ready()
        for attempt in range(3):
            with self._store.reading() as lineage:
                self.sync(lineage)
                branch = self._store.branch(branch_name)
                visible = self.visible(lineage, branch)
                self._check_damage(visible)
                with self._lock:
                    visible = self.catalog.searchable(visible)
                missing = index.missing_in(visible)
                if len(missing) == 0 or attempt == 2:
                    with self._lock:
                        allowed = visible if tree is None else visible & self.catalog.mask(tree, len(visible))
                    if not allowed.any():
                        return []
                    nodes, scores = index.search_arrays(vector, k, allowed)
                    return [(self._store.open(int(n)), float(s)) for n, s in zip(nodes.tolist(), scores.tolist(), strict=True)]
                texts = [memory_text(self._store.open(int(i)).entry) for i in missing]
            index.add(missing.tolist(), self._embed(texts))  # outside the lock: embedding can be slow
        raise AssertionError("unreachable")

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
            for idx, reason in self.catalog.damage.items():
                if idx < len(visible) and visible[idx]:
                    raise IntegrityError(f"a memory visible at this HEAD cannot be opened, so recall cannot rank it: {reason}")

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
        p = self.params
        size = len(visible)
        with self._lock:
            allowed = visible if tree is None else visible & self.catalog.mask(tree, size)
            if not allowed.any():
                return []
            want = max(p.candidates, 2 * k)
            if p.fusion == "keyword":
                dense_nodes = np.zeros(0, dtype=np.int64)
            else:
                dense_nodes, _ = index.search_arrays(vector, want, allowed)
            if p.fusion == "dense" or not terms:
                bm = np.zeros(size, dtype=np.float32)
            else:
                bm = self.keywords.scores(terms, size, p.bm25_k1, p.bm25_b)
                bm *= allowed
            bm_max = float(bm.max()) if size else 0.0
            if bm_max > 0:
                hits = np.flatnonzero(bm)
                if len(hits) > want:
                    hits = hits[np.argpartition(-bm[hits], want - 1)[:want]]
                kw_nodes = hits[np.lexsort((hits, -bm[hits]))]
            else:
                kw_nodes = np.zeros(0, dtype=np.int64)
            if p.fusion == "dense":
                candidates = dense_nodes
            elif p.fusion == "keyword":
                candidates = kw_nodes
            else:
                candidates = _distinct([dense_nodes, kw_nodes], size)
            if not len(candidates):
                return []
            radius = len(p.neighbor_weights)
            parent, child = self.catalog.parent, self.catalog.child
            pool = candidates
            if radius:
                # Neighbours of the best candidates join the pool: a record can be found through its context.
                first = self._base(index, vector, candidates, bm, bm_max, dense_nodes, kw_nodes)
                seeds = candidates[np.argsort(-first, kind="stable")[: max(_SEEDS, 2 * k)]]
                near = [seeds]
                up = down = seeds
                for _ in range(radius):
                    up, down = _step(parent, up), _step(child, down)
                    near += [up, down]
                extra = np.concatenate(near)
                extra = extra[extra >= 0]
                pool = _distinct([candidates, extra[allowed[extra]]], size)
            ups, downs = [pool], [pool]
            for _ in range(radius):
                ups.append(_step(parent, ups[-1]))
                downs.append(_step(child, downs[-1]))
            every = _distinct(ups + downs, size)
            every = every[visible[every]]
            base = self._base(index, vector, every, bm, bm_max, dense_nodes, kw_nodes)
            fused = _lookup(every, base, pool)
            gate = self._coherence(index, pool, visible) if radius else 0.0
            if gate:
                # The best-scoring neighbour within reach is the context, not the sum of all of them: a
                # sum credits a record for every vaguely similar neighbour (in a conversation, all are).
                context = np.zeros(len(pool))
                for r, weight in enumerate(p.neighbor_weights, 1):
                    if weight:
                        near_r = np.maximum(_lookup(every, base, ups[r]), _lookup(every, base, downs[r]))
                        context = np.maximum(context, weight * near_r)
                fused = fused + gate * context
            types = self.catalog.type_code[pool]
        return self._finish(lineage, pool, fused, types, k)

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
        ok = parents >= 0
        ok[ok] = visible[parents[ok]]
        if ok.sum() < 4:
            return 1.0  # too little evidence either way: trust the lineage
        near = index.pair_similarity(pool[ok], parents[ok])
        far_nodes = (pool[ok] + size // 2) % size
        far_nodes = np.where(visible[far_nodes], far_nodes, -1)
        far = index.pair_similarity(pool[ok], far_nodes)
        if np.isnan(near).all() or np.isnan(far).all():
            return 1.0
        return float(np.clip((np.nanmean(near) - np.nanmean(far)) / full, 0.0, 1.0))

    def _base(
        self,
        index: VectorIndex,
        vector: np.ndarray,
        nodes: np.ndarray,
        bm: np.ndarray,
        bm_max: float,
        dense_nodes: np.ndarray,
        kw_nodes: np.ndarray,
    ) -> np.ndarray:
        p = self.params
        if p.fusion == "rrf":
            out = np.zeros(len(nodes), dtype=np.float64)
            for ranked in (dense_nodes, kw_nodes):
                ranks = {int(n): r for r, n in enumerate(ranked.tolist(), 1)}
                out += np.array([1.0 / (p.rrf_k + ranks[n]) if n in ranks else 0.0 for n in nodes.tolist()])
            return out
        keyword = bm[nodes].astype(np.float64) / bm_max if bm_max > 0 else np.zeros(len(nodes))
        if p.fusion == "keyword":
            return keyword
        dense = np.nan_to_num(index.scores_for(vector, nodes).astype(np.float64), nan=-1.0)
        if p.fusion == "dense":
            return (1.0 + dense) / 2.0
        return p.dense_weight * np.maximum(dense, 0.0) + p.keyword_weight * keyword

    def _finish(self, lineage: Lineage, pool: np.ndarray, fused: np.ndarray, types: np.ndarray, k: int) -> list[tuple[Opened, float]]:
        """Decay and reinforcement over the pool, then the top k (ties: the newer record), opened."""
        p = self.params
        nodes = lineage.nodes
        picked = [nodes[i] for i in pool.tolist()]
        last = np.fromiter(
            (n.last_reinforced if n.last_reinforced is not None else n.created_at for n in picked), dtype=np.float64, count=len(picked)
        )
        counts = np.fromiter((n.reinforce_count for n in picked), dtype=np.float64, count=len(picked))
        halves = np.array([p.half_life_days[t] for t in MEMORY_TYPES] + [p.half_life_days["semantic"]])
        half = halves[np.where((types >= 0) & (types < len(MEMORY_TYPES)), types, len(MEMORY_TYPES))]
        age = np.maximum(0.0, (self.now() - last) / _DAY)
        decayed = p.decay_floor + (1.0 - p.decay_floor) * np.power(0.5, age / half)
        boost = np.minimum(p.reinforcement_cap, 1.0 + p.reinforcement_weight * np.log1p(counts))
        score = fused * decayed * boost
        top = np.lexsort((-pool, -score))[:k]
        return [(self._store.open(int(pool[i])), float(score[i])) for i in top]


def _distinct(parts: list[np.ndarray], size: int) -> np.ndarray:
    """The distinct non-negative node numbers (< size) of ``parts``, sorted."""
    mark = np.zeros(size, dtype=bool)
    for part in parts:
        mark[part[(part >= 0) & (part < size)]] = True
    return np.flatnonzero(mark)


def _step(links: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """One step along ``links`` (parent or child) for each node; -1 stays -1."""
    out = np.full(len(nodes), -1, dtype=np.int64)
    ok = (nodes >= 0) & (nodes < len(links))
    out[ok] = links[nodes[ok]]
    return out


def _lookup(keys: np.ndarray, values: np.ndarray, nodes: np.ndarray) -> np.ndarray:
    """values[keys == node] for each node (keys sorted); 0 where the node is -1 or not a key."""
    if not len(keys):
        return np.zeros(len(nodes))
    pos = np.clip(np.searchsorted(keys, nodes), 0, len(keys) - 1)
    hit = (keys[pos] == nodes) & (nodes >= 0)
    return np.where(hit, values[pos], 0.0)
