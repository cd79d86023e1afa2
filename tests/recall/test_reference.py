"""Recall ranks exactly as the documented formula says: a differential test against a plain reference.

``reference`` below recomputes a recall from first principles with Python loops over the records
(visibility by walking the chain from HEAD, BM25 from the opened texts, cosines in float64, the
candidate pool, lineage context, the coherence gate, decay and reinforcement: docs/recall.md and
:mod:`sovseal.recall.params`). The engine, which does the same with numpy over arrays and caches,
must return the same records in the same order with the same scores (up to float32 rounding), on a
store with conversations, overwrites, deletes, reinforcements, unindexed records and a second
branch, for every fusion, with filters, and again after the store changed under its caches.
"""

from __future__ import annotations

import hashlib
import math
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sovseal import Sovseal
from sovseal.recall import RecallParams, text
from sovseal.recall.engine import _nanmean
from sovseal.storage.entries import Entry, memory_text
from sovseal.storage.frames import Op

DAY = 86400.0
NOW = 1_800_000_000.0
DIM = 48
TOPICS = [
    ["garden", "tomato", "soil", "water", "seed", "harvest"],
    ["painting", "lake", "sunrise", "canvas", "brush", "oils"],
    ["train", "ticket", "station", "delay", "platform", "journey"],
    ["guitar", "chord", "song", "concert", "stage", "practice"],
    ["recipe", "bread", "flour", "oven", "butter", "dough"],
    ["hiking", "trail", "mountain", "boots", "summit", "camp"],
]
COMMON = ["today", "weekend", "friend", "family", "happy", "busy", "plan", "idea", "morning", "evening"]
TYPES = ("episodic", "semantic", "procedural")


def word_embed(texts: Sequence[str]) -> np.ndarray:
    """Bag of words: each word a fixed random direction, plus a little noise per text. Texts that
    share words are alike, so dense and keyword search partly agree, and turns of one topic in a
    row make the lineage coherent."""
    out = np.zeros((len(texts), DIM), dtype=np.float32)
    for i, t in enumerate(texts):
        for word in t.lower().replace(":", " ").split():
            seed = int.from_bytes(hashlib.sha256(word.encode()).digest()[:8], "little")
            out[i] += np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
        seed = int.from_bytes(hashlib.sha256(t.encode()).digest()[:8], "little")
        out[i] += 0.3 * np.random.default_rng(seed).standard_normal(DIM).astype(np.float32)
    return out


# -- the reference ---------------------------------------------------------------------------------


@dataclass
class Record:
    idx: int
    parent: int
    path: str
    entry: Entry | None  # None: a tombstone
    vector: np.ndarray | None  # float64, unit; None when not indexed
    terms: list[str]
    created_at: float
    reinforce_count: int
    last_reinforced: float | None


def snapshot_records(mem: Sovseal) -> list[Record]:
    store = mem._store
    with store.reading() as lineage:
        nodes = list(lineage.nodes)
        opened = [store.open(n.idx).entry for n in nodes]
    out = []
    for node, entry in zip(nodes, opened, strict=True):
        path = entry.path
        entry = entry if node.op is Op.STORE else None
        vector, terms = None, []
        if entry is not None and entry.text != "":
            raw = word_embed([memory_text(entry)])[0]
            norm = np.linalg.norm(raw)
            vector = (raw / (norm if norm else 1)).astype(np.float32).astype(np.float64)
            terms = text.tokens(memory_text(entry))
        out.append(Record(node.idx, node.parent, path, entry, vector, terms, node.created_at, node.reinforce_count, node.last_reinforced))
    return out


def visible_at(mem: Sovseal, records: list[Record], branch: str) -> set[int]:
    """Walk the chain back from HEAD: the first record of each path is its state (a tombstone: gone)."""
    with mem._store.reading():
        idx = mem._store.branch(branch).head
    seen: set[str] = set()
    out: set[int] = set()
    while idx >= 0:
        rec = records[idx]
        if rec.path not in seen:
            seen.add(rec.path)
            if rec.entry is not None:
                out.add(idx)
        idx = rec.parent
    return out


class Reference:
    """One query over one state of the store, computed the plain way."""

    def __init__(
        self, records: list[Record], visible: set[int], query: str, p: RecallParams, keep: Callable[[Entry], bool] = lambda e: True
    ) -> None:
        self.records, self.p = records, p
        self.searchable = {i for i in visible if records[i].vector is not None}
        self.allowed = sorted(i for i in self.searchable if keep(records[i].entry))  # type: ignore[arg-type]
        self.allowed_set = set(self.allowed)
        qv = word_embed([query])[0].astype(np.float64)
        self.query = qv / np.linalg.norm(qv)
        # BM25 statistics: every indexed record the lineage holds (all branches, shadowed or not)
        docs = [r for r in records if r.terms]
        self.n_docs = len(docs)
        self.average = sum(len(r.terms) for r in docs) / self.n_docs
        self.df: dict[str, int] = {}
        for r in docs:
            for t in set(r.terms):
                self.df[t] = self.df.get(t, 0) + 1
        self.terms = list(dict.fromkeys(text.tokens(query)))
        self.use_keywords = p.fusion != "dense" and bool(self.terms)
        self.bm = {i: self.bm25(i) for i in self.allowed}
        self.bm_max = max(self.bm.values(), default=0.0)

    def cos(self, i: int) -> float:
        v = self.records[i].vector
        return -1.0 if v is None else float(v @ self.query)

    def bm25(self, i: int) -> float:
        if not self.use_keywords or i not in self.allowed_set:
            return 0.0
        p, r, score = self.p, self.records[i], 0.0
        for t in self.terms:
            tf = r.terms.count(t)
            if tf:
                idf = math.log(1 + (self.n_docs - self.df[t] + 0.5) / (self.df[t] + 0.5))
                score += idf * tf * (p.bm25_k1 + 1) / (tf + p.bm25_k1 * (1 - p.bm25_b + p.bm25_b * len(r.terms) / self.average))
        return score

    def retrievers(self) -> tuple[list[int], list[int]]:
        """Each retriever's allowed records, best first (ties: the lower node)."""
        dense = [] if self.p.fusion == "keyword" else sorted(self.allowed, key=lambda i: (-self.cos(i), i))
        keyword = sorted((i for i in self.allowed if self.bm[i] > 0), key=lambda i: (-self.bm[i], i))
        return dense, keyword

    def cut_is_tied(self, want: int) -> bool:
        """Do the records either retriever ranks ``want``-th and next score the same (to float32
        rounding)? Then which of them is a candidate is the engine's arbitrary choice."""
        dense, keyword = self.retrievers()
        for ranked, score in ((dense, self.cos), (keyword, self.bm.__getitem__)):
            if len(ranked) > want and abs(score(ranked[want - 1]) - score(ranked[want])) <= 1e-6 * max(1.0, abs(score(ranked[want]))):
                return True
        return False

    def ranking(self, k: int) -> list[tuple[str, float]]:
        p, records = self.p, self.records
        if not self.allowed:
            return []
        size = len(records)
        want = max(p.candidates, 2 * k)
        dense_list, kw_list = (ranked[:want] for ranked in self.retrievers())

        def base(i: int) -> float:
            if p.fusion == "rrf":
                return sum(1 / (p.rrf_k + ranked.index(i) + 1) for ranked in (dense_list, kw_list) if i in ranked)
            keyword = self.bm25(i) / self.bm_max if self.bm_max > 0 else 0.0
            if p.fusion == "keyword":
                return keyword
            if p.fusion == "dense":
                return (1 + self.cos(i)) / 2
            return p.dense_weight * max(0.0, self.cos(i)) + p.keyword_weight * keyword

        if p.fusion == "dense":
            candidates = dense_list
        elif p.fusion == "keyword":
            candidates = kw_list
        else:
            candidates = sorted(set(dense_list) | set(kw_list))
        if not candidates:
            return []
        children: dict[int, int] = {}
        for r in records:
            if r.parent >= 0 and r.parent not in children:
                children[r.parent] = r.idx

        def walk(i: int, steps: int, up: bool) -> int:
            for _ in range(steps):
                i = records[i].parent if up else children.get(i, -1)
                if i < 0:
                    return -1
            return i

        radius = len(p.neighbor_weights)
        pool = set(candidates)
        if radius:  # the best candidates' neighbours join the pool
            ranked = sorted(range(len(candidates)), key=lambda j: (-base(candidates[j]), j))
            for seed in (candidates[j] for j in ranked[: max(40, 2 * k)]):
                for r in range(1, radius + 1):
                    pool |= {n for n in (walk(seed, r, True), walk(seed, r, False)) if n in self.allowed_set}
        gate = 0.0
        if radius:
            gate = 1.0
            if p.context_coherence > 0:
                pairs = [(i, records[i].parent) for i in sorted(pool) if records[i].parent in self.searchable]
                if len(pairs) >= 4:
                    near = [float(records[i].vector @ records[j].vector) for i, j in pairs]  # type: ignore[operator]
                    far = [
                        float(records[i].vector @ records[(i + size // 2) % size].vector)  # type: ignore[operator]
                        for i, _ in pairs
                        if (i + size // 2) % size in self.searchable
                    ]
                    if far:
                        gate = min(1.0, max(0.0, (sum(near) / len(near) - sum(far) / len(far)) / p.context_coherence))

        def context_base(i: int) -> float:
            return base(i) if i >= 0 and i in self.searchable else 0.0

        scored = []
        for i in pool:
            fused = base(i)
            if gate:
                context = 0.0
                for r, weight in enumerate(p.neighbor_weights, 1):
                    context = max(context, weight * max(context_base(walk(i, r, True)), context_base(walk(i, r, False))))
                fused += gate * context
            rec = records[i]
            last = rec.last_reinforced if rec.last_reinforced is not None else rec.created_at
            age = max(0.0, (NOW - last) / DAY)
            decayed = p.decay_floor + (1 - p.decay_floor) * 0.5 ** (age / p.half_life_days[rec.entry.type])  # type: ignore[union-attr]
            boost = min(p.reinforcement_cap, 1 + p.reinforcement_weight * math.log1p(rec.reinforce_count))
            scored.append((fused * decayed * boost, i))
        scored.sort(key=lambda s: (-s[0], -s[1]))  # ties: the newer record
        return [(records[i].path, score) for score, i in scored[:k]]


def untied(ref: Reference, k: int) -> RecallParams:
    """The reference's params with the number of candidates nearest below (else above) the one
    asked whose cut-off is not tied."""
    p = ref.p
    for candidates in [*range(p.candidates, 0, -1), *range(p.candidates + 1, p.candidates + 200)]:
        if not ref.cut_is_tied(max(candidates, 2 * k)):
            return replace(p, candidates=candidates)
    raise AssertionError("every cut-off is tied")


def check(mem: Sovseal, records: list[Record], visible: set[int], query: str, k: int, p: RecallParams, label: str, **kwargs: Any) -> None:
    keep = kwargs.pop("keep", lambda e: True)
    ref = Reference(records, visible, query, p, keep)
    params = untied(ref, k)
    ref.p = params
    mem.recall_params = params
    try:
        assert_same([(m.path, m.score) for m in mem.recall(query, k=k, **kwargs)], ref.ranking(k), f"{label} {query!r} k={k}")  # type: ignore[misc]
    finally:
        mem.recall_params = RecallParams()


def assert_same(found: list[tuple[str, float]], expected: list[tuple[str, float]], label: str) -> None:
    """Same records, same order, same scores up to float32 rounding (the engine computes cosines
    and BM25 in float32; the reference in float64)."""
    assert [path for path, _ in found] == [path for path, _ in expected], label
    for (path, got), (_, want) in zip(found, expected, strict=True):
        assert got == pytest.approx(want, rel=1e-5, abs=1e-7), f"{label}: {path}"


# -- the store -------------------------------------------------------------------------------------


def turn_text(rng: np.random.Generator, topic: int) -> str:
    words = list(rng.choice(TOPICS[topic], size=int(rng.integers(2, 5)), replace=False))
    words += list(rng.choice(COMMON, size=int(rng.integers(1, 3)), replace=False))
    if rng.random() < 0.2:  # a word from another topic now and then
        words.append(str(rng.choice(TOPICS[int(rng.integers(0, len(TOPICS)))])))
    rng.shuffle(words)
    return "I " + " and the ".join(words)


def store_at(mem: Sovseal, monkeypatch: pytest.MonkeyPatch, when: float, *args: Any, **kwargs: Any) -> Any:
    with monkeypatch.context() as m:
        m.setattr("sovseal.storage.store.time.time", lambda: when)
        return mem.store(*args, **kwargs)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Sovseal, Path, bytes]]:
    rng = np.random.default_rng(42)
    path, key = tmp_path_factory.mktemp("reference") / "s", os.urandom(32)
    mp = pytest.MonkeyPatch()
    mem = Sovseal(path, key=key, embedder=word_embed)
    try:
        used: set[str] = set()
        when = NOW - 200 * DAY
        for conv in range(12):
            topic = conv % len(TOPICS)
            for turn in range(int(rng.integers(15, 30))):
                t = turn_text(rng, topic)
                while t in used:  # distinct texts: no exact ties for the candidate cut-offs
                    t = turn_text(rng, topic)
                used.add(t)
                when += float(rng.uniform(0.05, 1.0)) * DAY
                store_at(
                    mem, mp, when, f"conv.{conv}.{turn}", t, type=TYPES[turn % 3], metadata={"session": conv, "turn": turn}
                )
            if conv % 4 == 1:
                store_at(mem, mp, when, f"kv.{conv}", {"blob": conv}, index=False)  # never ranked
        for conv, turn in [(0, 3), (2, 5), (5, 1), (7, 2), (9, 0)]:  # overwrites shadow the old value
            store_at(mem, mp, when, f"conv.{conv}.{turn}", f"I rewrote it: {turn_text(rng, conv % len(TOPICS))} again")
        for conv, turn in [(1, 2), (4, 4), (8, 1)]:
            mem.delete(f"conv.{conv}.{turn}")
        for conv, turn in [(3, 1), (6, 2), (6, 2), (10, 3)]:  # the visible value again: reinforced
            found = mem.get(f"conv.{conv}.{turn}")
            assert found is not None
            result = store_at(mem, mp, when + DAY, found.path, found.payload, type=found.type, metadata=found.metadata)
            assert result.reinforced
        mem.fork(branch="exp")
        for i in range(15):
            store_at(mem, mp, when + 2 * DAY, f"exp.{i}", turn_text(rng, i % len(TOPICS)) + f" on branch {i}")
        mem.delete("conv.0.0")
        mem.checkout("main")
        mem._recall_engine().now = lambda: NOW
        yield mem, path, key
    finally:
        mem.close()
        mp.undo()


QUERIES = [
    "painting the lake at sunrise with oils",
    "train delay at the station",
    "bread dough in the oven",
    "guitar concert practice",
    "hiking boots for the summit",
    "garden tomato harvest this weekend",
    "a busy morning with family",
    "what about the canvas and the brush",
    "the and of it",  # stop words only: dense alone
    "zeppelin",  # no keyword hit
    "mountain camp bread",
    "happy friend plan idea",
]
PARAMS = {
    "default": RecallParams(),
    "rrf": RecallParams(fusion="rrf"),
    "dense": RecallParams(fusion="dense", neighbor_weights=()),
    "keyword": RecallParams(fusion="keyword"),
    "few candidates": RecallParams(candidates=6),
    "always context": RecallParams(context_coherence=0.0, neighbor_weights=(0.5, 0.3, 0.2)),
    "one step, no decay": RecallParams(neighbor_weights=(0.6,), decay_floor=1.0),
    "skipped weight": RecallParams(neighbor_weights=(0.0, 0.6), reinforcement_weight=0.5),
}


@pytest.mark.parametrize("name", list(PARAMS))
def test_recall_matches_the_reference(built: tuple[Sovseal, Path, bytes], name: str) -> None:
    mem = built[0]
    records = snapshot_records(mem)
    visible = visible_at(mem, records, "main")
    for query in QUERIES:
        for k in (1, 5, 25):
            check(mem, records, visible, query, k, PARAMS[name], name)


FILTERS: list[tuple[dict[str, Any], Callable[[Entry], bool]]] = [
    ({"metadata": {"session": {"$lte": 3}}}, lambda e: isinstance(e.metadata.get("session"), int) and e.metadata["session"] <= 3),
    ({"type": "episodic"}, lambda e: e.type == "episodic"),
    ({"path_prefix": "conv.5."}, lambda e: e.path.startswith("conv.5.")),
]


@pytest.mark.parametrize("which", range(len(FILTERS)))
def test_filtered_recall_matches_the_reference(built: tuple[Sovseal, Path, bytes], which: int) -> None:
    mem = built[0]
    spec, keep = FILTERS[which]
    records = snapshot_records(mem)
    visible = visible_at(mem, records, "main")
    for query in QUERIES[:6]:
        check(mem, records, visible, query, 8, RecallParams(), str(spec), filter=spec, keep=keep)


def test_recall_on_another_branch_matches_the_reference(built: tuple[Sovseal, Path, bytes]) -> None:
    mem = built[0]
    records = snapshot_records(mem)
    visible = visible_at(mem, records, "exp")
    assert any(records[i].path.startswith("exp.") for i in visible)
    for query in QUERIES[:6]:
        check(mem, records, visible, query, 10, RecallParams(), "exp", branch="exp")


def test_recall_matches_the_reference_after_the_store_changed_under_its_caches(
    built: tuple[Sovseal, Path, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    """What recall keeps between calls (each node's reinforcement, its cosines to its parent and to
    its far node, each term's BM25 contributions) follows stores, reinforcements, and a
    reinforcement by another handle (as by another process)."""
    mem, path, key = built
    for query in QUERIES[:4]:
        mem.recall(query, k=10)  # fill the caches
    rng = np.random.default_rng(7)
    for i in range(5):
        store_at(mem, monkeypatch, NOW - DAY, f"late.{i}", turn_text(rng, 1) + " late")
    painting = mem.recall("painting the lake at sunrise with oils", k=3)[-1]
    assert store_at(mem, monkeypatch, NOW - DAY, painting.path, painting.payload, type=painting.type, metadata=painting.metadata).reinforced
    with Sovseal(path, key=key, embedder=word_embed) as other:
        train = other.recall("train delay at the station", k=2)[-1]
        assert store_at(other, monkeypatch, NOW - 2 * DAY, train.path, train.payload, type=train.type, metadata=train.metadata).reinforced
    records = snapshot_records(mem)
    visible = visible_at(mem, records, "main")
    assert any(records[i].path == train.path and records[i].reinforce_count for i in visible)
    for query in QUERIES:
        check(mem, records, visible, query, 10, RecallParams(), "after changes")


def test_nanmean_is_numpys() -> None:
    rng = np.random.default_rng(3)
    for n in (1, 5, 64, 300, 1000):
        values = rng.standard_normal(n).astype(np.float32)
        values[rng.random(n) < 0.2] = np.nan
        if np.isnan(values).all():
            assert _nanmean(values) is None
            continue
        ours = _nanmean(values)
        assert ours is not None and ours.dtype == np.float32 and ours == np.nanmean(values)
    assert _nanmean(np.full(4, np.nan, dtype=np.float32)) is None
