"""The keyword index's top-k (``KeywordIndex.best``) against BM25 computed node by node.

``best`` merges a query's postings sparsely when they are few against the store and adds them into
an array over the nodes when they are many; these tests check that both ways return exactly the
nodes and float32 scores of BM25 computed node by node, with frequent and rare terms, records
added out of node order, masks and a ``size`` cut.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sovseal.recall import keyword
from sovseal.recall.keyword import KeywordIndex

K1, B = 1.2, 0.75


def brute(index: KeywordIndex, docs: dict[int, list[str]], terms: list[str], size: int, allowed: np.ndarray) -> dict[int, np.float32]:
    """BM25 of every allowed node below ``size`` holding a query term, summed in float32 term by term."""
    documents = len(docs)
    average = sum(len(t) for t in docs.values()) / documents
    out: dict[int, np.float32] = {}
    for term in dict.fromkeys(terms):
        holders = [n for n, words in docs.items() if term in words]
        if not holders:
            continue
        df = len(holders)
        idf = math.log(1.0 + (documents - df + 0.5) / (df + 0.5))
        for n in holders:
            if n >= size or not allowed[n]:
                continue
            tf = np.float32(docs[n].count(term))
            norm = K1 * (1.0 - B + B * np.float32(len(docs[n])) / average)
            contribution = np.float32((idf * (K1 + 1.0)) * tf / (tf + norm))
            out[n] = np.float32(out.get(n, np.float32(0)) + contribution)
    return out


def check(docs: dict[int, list[str]], order: list[int], terms: list[str], size: int, mask_seed: int, want: int) -> None:
    index = KeywordIndex()
    for n in order:
        index.add(n, docs[n])
    top = max(docs) + 1
    allowed = np.random.default_rng(mask_seed).random(top) < 0.8
    expected = brute(index, docs, terms, size, allowed)
    ranked = sorted(expected, key=lambda n: (-expected[n], n))[:want]
    nodes, scores = index.best(terms, size, K1, B, allowed, want)
    assert nodes.tolist() == ranked
    probe = np.arange(-1, top + 2)
    looked = scores[probe]
    for n, value in zip(probe.tolist(), looked.tolist(), strict=True):
        assert value == expected.get(n, 0.0), (n, value, expected.get(n))


VOCAB = ["common", "frequent", "usual", "rare", "odd", "unique", "mid"]


@st.composite
def corpora(draw: st.DrawFn) -> tuple[dict[int, list[str]], list[int]]:
    count = draw(st.integers(1, 120))
    docs: dict[int, list[str]] = {}
    for n in range(count):
        words = ["common"] * draw(st.integers(0, 3)) + ["frequent"] * draw(st.integers(0, 1))
        words += draw(st.lists(st.sampled_from(VOCAB), max_size=6))
        docs[n] = words or ["filler"]
    order = draw(st.permutations(list(docs)))
    return docs, order


@pytest.mark.parametrize("share", [0, 10**9], ids=["sparse", "dense"])
@settings(max_examples=200, deadline=None)
@given(
    corpora(), st.lists(st.sampled_from([*VOCAB, "absent"]), min_size=1, max_size=5), st.integers(0, 10**6), st.integers(1, 30), st.data()
)
def test_best_is_the_exact_top(
    share: int, corpus: tuple[dict[int, list[str]], list[int]], terms: list[str], mask_seed: int, want: int, data: st.DataObject
) -> None:
    docs, order = corpus
    size = data.draw(st.integers(1, max(docs) + 2))
    saved = keyword._DENSE_SHARE
    keyword._DENSE_SHARE = share  # 0: always merged sparsely; 10**9: always added densely
    try:
        check(docs, order, terms, size, mask_seed, want)
    finally:
        keyword._DENSE_SHARE = saved


def test_frequent_terms_at_scale() -> None:
    """50,000 records, a term in every other one (the dense way), checked against every node."""
    rng = np.random.default_rng(7)
    docs = {}
    for n in range(50_000):
        words = ["everywhere"] if n % 2 else ["filler"]
        if rng.random() < 0.001:
            words.append("needle")
        if rng.random() < 0.01:
            words.append("hay")
        docs[n] = words
    check(docs, list(docs), ["everywhere", "hay", "needle"], 50_000, 3, 100)


def test_the_contributions_kept_between_recalls_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """However many distinct terms are asked about, at most CACHE_POSTINGS postings' contributions
    are kept (least recently used go first); the scores do not change; a new record empties it."""
    monkeypatch.setattr(keyword, "CACHE_POSTINGS", 250)
    docs = {n: [f"t{n % 40}", f"u{n % 7}", "filler"] for n in range(1000)}  # t*: 25 postings, u*: ~143
    index = KeywordIndex()
    for n, words in docs.items():
        index.add(n, words)
    allowed = np.ones(1000, dtype=bool)
    first = {t: index.best([t], 1000, K1, B, allowed, 10)[0].tolist() for t in (f"t{i}" for i in range(40))}
    assert index._cache.currsize <= 250 and len(index._cache) == 10  # 10 terms of 25 postings
    assert list(index._cache)[-1] == "t39"  # the most recent last
    index.best(["u1"], 1000, K1, B, allowed, 10)
    assert index._cache.currsize <= 250 and "u1" in index._cache and "t0" not in index._cache  # the oldest went
    again = {t: index.best([t], 1000, K1, B, allowed, 10)[0].tolist() for t in first}
    assert again == first
    index.best(["u2", "u3", "u4"], 1000, K1, B, allowed, 10)
    assert index._cache.currsize <= 250 and "u4" in index._cache
    index.add(1000, ["t1"])
    index.best(["t1"], 1001, K1, B, np.ones(1001, dtype=bool), 10)
    assert list(index._cache) == ["t1"]  # computed under the new statistics only


def test_a_term_with_more_postings_than_the_budget_is_kept_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """A term holding more than CACHE_POSTINGS postings is still kept (alone, every other term goes)
    and goes first when a term asked for after it needs room."""
    monkeypatch.setattr(keyword, "CACHE_POSTINGS", 10)
    index = KeywordIndex()
    for n in range(50):
        index.add(n, ["big"] + (["small"] if n < 3 else []) + (["other"] if n >= 45 else []))
    allowed = np.ones(50, dtype=bool)
    index.best(["small"], 50, K1, B, allowed, 5)
    index.best(["big"], 50, K1, B, allowed, 5)
    assert list(index._cache) == ["big"]
    index.best(["other"], 50, K1, B, allowed, 5)
    assert list(index._cache) == ["other"]
