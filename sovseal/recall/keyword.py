"""The keyword index: BM25 over the catalog's records, in memory only.

Postings grow by appending (a record is added once, when it is first seen); those a checkpoint
restored stay in its flat arrays (one slice per term), those added since in per-term arrays. A query
scores the postings of its distinct terms (see :meth:`KeywordIndex.best`) and keeps the allowed
records (visible at HEAD, and passing a filter) with one vectorised mask. Collection statistics
(number of records, average length, document frequency) are over every record the catalog holds,
on every branch and shadowed or not: they are cheap to keep exact under appends, and differ from
HEAD-only statistics only where many records are shadowed.

    idf(t)   = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
    bm25(n)  = Σ_t idf(t) × tf(t, n) × (k1 + 1) / (tf(t, n) + k1 × (1 − b + b × len(n) / avg len))
"""

from __future__ import annotations

import math
from array import array
from collections import Counter

import numpy as np
from cachetools import LRUCache


class KeywordIndex:
    def __init__(self) -> None:
        self._nodes: dict[str, array[int]] = {}
        self._tfs: dict[str, array[float]] = {}
        # Postings a checkpoint restored: term -> its slot; slot i's nodes and term frequencies are
        # _base_nodes[_base_ends[i-1]:_base_ends[i]] (and _base_tfs likewise).
        self._base_terms: dict[str, int] = {}
        self._base_ends = np.zeros(0, dtype=np.int64)
        self._base_nodes = np.zeros(0, dtype=np.int32)
        self._base_tfs = np.zeros(0, dtype=np.float32)
        # term -> (its nodes, their BM25 contributions), least recently used first, all computed
        # under _cache_stats: the statistics change with every record added, so a term's
        # contributions are reused only while no record was (a burst of recalls between stores).
        # At most CACHE_POSTINGS postings are kept, however many distinct terms a long-lived
        # process is asked about (one term with more is kept alone: it counts as the whole budget).
        self._cache: LRUCache[str, tuple[np.ndarray, np.ndarray]] = LRUCache(CACHE_POSTINGS, getsizeof=_postings)
        self._cache_stats: tuple[int, int, float, float] | None = None
        self._length = np.zeros(1024, dtype=np.float32)
        self.documents = 0
        self._total = 0
        self._top = -1  # the highest node added

    def add(self, idx: int, terms: list[str]) -> None:
        if idx >= len(self._length):
            bigger = np.zeros(max(idx + 1, 2 * len(self._length)), dtype=np.float32)
            bigger[: len(self._length)] = self._length
            self._length = bigger
        self._length[idx] = len(terms)
        self._top = max(self._top, idx)
        self.documents += 1
        self._total += len(terms)
        for term, count in Counter(terms).items():
            nodes = self._nodes.get(term)
            if nodes is None:
                nodes = self._nodes[term] = array("q")
                self._tfs[term] = array("f")
            nodes.append(idx)
            self._tfs[term].append(count)

    def postings(self, term: str) -> tuple[np.ndarray, np.ndarray] | None:
        """(nodes, term frequencies) of ``term``, or None when no record holds it."""
        slot = self._base_terms.get(term)
        nodes = self._nodes.get(term)
        if slot is None and nodes is None:
            return None
        parts_nodes, parts_tfs = [], []
        if slot is not None:
            start = int(self._base_ends[slot - 1]) if slot else 0
            end = int(self._base_ends[slot])
            parts_nodes.append(self._base_nodes[start:end].astype(np.int64))
            parts_tfs.append(self._base_tfs[start:end])
        if nodes is not None:
            parts_nodes.append(np.array(nodes, dtype=np.int64))
            parts_tfs.append(np.array(self._tfs[term], dtype=np.float32))
        if len(parts_nodes) == 1:
            return parts_nodes[0], parts_tfs[0]
        return np.concatenate(parts_nodes), np.concatenate(parts_tfs)

    def _contributions(self, term: str, k1: float, b: float) -> tuple[np.ndarray, np.ndarray] | None:
        """The nodes holding ``term`` (ascending) and the BM25 score it gives each of them."""
        stats = (self.documents, self._total, k1, b)  # documents grow whenever postings do
        if stats != self._cache_stats:
            self._forget_contributions()
            self._cache_stats = stats
        cached = self._cache.get(term)
        if cached is None:
            found = self.postings(term)
            if found is None:
                return None
            held, tf = found
            if len(held) > 1 and not bool((held[1:] > held[:-1]).all()):  # added out of node order
                order = np.argsort(held, kind="stable")
                held, tf = held[order], tf[order]
            average = max(self._total / self.documents, 1e-9)
            df = len(held)
            idf = math.log(1.0 + (self.documents - df + 0.5) / (df + 0.5))
            # k1 * (1 - b + b * length / average), then idf * (k1 + 1) * tf / (tf + that), computed
            # in place, operation by operation in that order (the same float32 as the formula):
            # fresh temporaries of a common term's size cost more than the arithmetic.
            out = self._length.take(held)
            out *= b
            out /= average
            out += 1.0 - b
            out *= k1
            out += tf
            scores = (idf * (k1 + 1.0)) * tf
            scores /= out
            cached = self._cache[term] = (held, scores)  # least recently used terms go to make room
        return cached

    def _forget_contributions(self) -> None:
        self._cache.clear()

    def best(
        self, terms: list[str], size: int, k1: float, b: float, allowed: np.ndarray, want: int
    ) -> tuple[np.ndarray, QueryScores]:
        """The ``want`` allowed nodes below ``size`` with the highest BM25 for the query ``terms``
        (best first, ties by node), and the query's BM25 of any node (0 where it holds no query
        term or is not allowed).

        Scores are float32 sums, term by term in query order. Where the query's postings are few
        against the store, they are merged sparsely (a store of a million records then pays for
        its postings, not its size); where they are many (common terms in a large store: half a
        million postings for a dozen terms), they are added into one array over the nodes, a
        sequential pass per term, since each term's postings are sorted by node.
        """
        found = []
        for term in dict.fromkeys(terms):  # distinct, in order
            pair = self._contributions(term, k1, b) if self.documents else None
            if pair is not None:
                nodes, score = pair
                if self._top >= size:  # only when the caller asks about fewer nodes than were added
                    end = int(np.searchsorted(nodes, size))
                    nodes, score = nodes[:end], score[:end]
                found.append((nodes, score))
        mask = allowed[:size] if len(allowed) >= size else np.concatenate([allowed, np.zeros(size - len(allowed), dtype=bool)])
        if sum(len(nodes) for nodes, _ in found) * _DENSE_SHARE >= size:
            dense = np.zeros(size, dtype=np.float32)
            for nodes, score in found:
                np.add.at(dense, nodes, score)
            held = _contenders(dense, mask, found, want)
            values = dense[held]
            scores: QueryScores = DenseScores(dense, mask)
        else:
            held, values = _merged(found)
            keep = mask[held]
            held, values = held[keep], values[keep]
            scores = SparseScores(held, values)
        if len(held) > want:  # the want-th best score, and every node that ties it
            keep = values >= np.partition(values, len(values) - want)[len(values) - want]
            held, values = held[keep], values[keep]
        return held[np.lexsort((held, -values))][:want], scores

    def erase(self, nodes: list[int]) -> None:
        """Remove erased records' postings, and every term only they held (a term is plaintext too).

        The postings are rebuilt as one flat base without them: a pass over the whole index,
        which a purge (rare, and followed by a journal rewrite anyway) can afford.
        """
        gone = np.asarray(sorted(set(nodes)), dtype=np.int64)
        gone = gone[gone < len(self._length)]
        terms = sorted(self._base_terms.keys() | self._nodes.keys())
        kept_terms, kept_nodes, kept_tfs, ends = [], [], [], []
        position = 0
        for term in terms:
            held, tf = self.postings(term)  # type: ignore[misc]
            keep = ~np.isin(held, gone)
            if keep.any():
                kept_terms.append(term)
                kept_nodes.append(held[keep].astype(np.int32))
                kept_tfs.append(tf[keep].astype(np.float32))
                position += int(keep.sum())
                ends.append(position)
        erased = gone[self._length[gone] > 0]
        self.documents -= len(erased)
        self._total -= int(self._length[erased].sum())
        self._length[gone] = 0
        self._base_terms = dict(zip(kept_terms, range(len(kept_terms)), strict=True))
        self._base_ends = np.asarray(ends, dtype=np.int64)
        self._base_nodes = np.concatenate(kept_nodes) if kept_nodes else np.zeros(0, dtype=np.int32)
        self._base_tfs = np.concatenate(kept_tfs) if kept_tfs else np.zeros(0, dtype=np.float32)
        self._nodes, self._tfs = {}, {}
        self._forget_contributions()

    # -- checkpoints -------------------------------------------------------------------------------

    def to_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Add the postings to a checkpoint's arrays (the caller holds the engine's lock)."""
        terms = sorted(self._base_terms.keys() | self._nodes.keys())
        nodes, tfs, ends = [], [], np.empty(len(terms), dtype=np.int64)
        position = 0
        for i, term in enumerate(terms):
            held, tf = self.postings(term)  # type: ignore[misc]
            nodes.append(held.astype(np.int32))
            tfs.append(tf)
            position += len(held)
            ends[i] = position
        arrays["k.terms"] = np.frombuffer("\x00".join(terms).encode(), dtype=np.uint8)
        arrays["k.ends"] = ends
        arrays["k.nodes"] = np.concatenate(nodes) if nodes else np.zeros(0, dtype=np.int32)
        arrays["k.tfs"] = np.concatenate(tfs) if tfs else np.zeros(0, dtype=np.float32)
        arrays["k.length"] = self._length[: self._top + 1].copy()
        arrays["k.stats"] = np.array([self.documents, self._total, self._top], dtype=np.int64)

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> KeywordIndex:
        """Tokens are words (``[^\\W_]+``), so a NUL never occurs in one: it separates them."""
        index = cls()
        raw = arrays["k.terms"].tobytes().decode()
        terms = raw.split("\x00") if raw else []
        index._base_terms = dict(zip(terms, range(len(terms)), strict=True))
        index._base_ends, index._base_nodes, index._base_tfs = arrays["k.ends"], arrays["k.nodes"], arrays["k.tfs"]
        length = arrays["k.length"]
        index._length = np.zeros(max(len(length), 1024), dtype=np.float32)
        index._length[: len(length)] = length
        index.documents, index._total, index._top = (int(v) for v in arrays["k.stats"])
        return index


#: Postings whose BM25 contributions are kept between recalls (about 12 bytes each: 48 MB).
CACHE_POSTINGS = 4_000_000


def _postings(contributions: tuple[np.ndarray, np.ndarray]) -> int:
    """A cached term's size: its postings, capped at the whole budget, so that a term with more
    than CACHE_POSTINGS is still kept (alone) instead of being refused by the cache."""
    return min(len(contributions[0]), CACHE_POSTINGS)

#: A query whose postings number at least 1/_DENSE_SHARE of the nodes is scored in an array over
#: the nodes (see KeywordIndex.best): from there on merging them sparsely costs more.
_DENSE_SHARE = 16


def _merged(found: list[tuple[np.ndarray, np.ndarray]]) -> tuple[np.ndarray, np.ndarray]:
    """The distinct nodes of the terms' postings (ascending) and their scores summed term by term."""
    if not found:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.float32)
    held, where = np.unique(np.concatenate([nodes for nodes, _ in found]), return_inverse=True)
    out = np.zeros(len(held), dtype=np.float32)
    start = 0
    for nodes, score in found:
        np.add.at(out, where[start : start + len(nodes)], score)
        start += len(nodes)
    return held, out


def _contenders(dense: np.ndarray, allowed: np.ndarray, found: list[tuple[np.ndarray, np.ndarray]], want: int) -> np.ndarray:
    """The allowed nodes of ``dense`` (scores, 0 for none) that may be among the ``want`` best, ascending.

    The ``want``-th best score among the allowed nodes of the rarest terms is a floor for the
    ``want``-th best of all: only nodes at or above it are returned, found in one comparison pass
    instead of listing every node that scores (hundreds of thousands for common terms)."""
    seed = np.zeros(0, dtype=np.int64)
    for nodes, _ in sorted(found, key=lambda pair: len(pair[0])):  # rarest first
        seed = np.union1d(seed, nodes) if len(seed) else nodes
        values = dense[seed[allowed[seed]]]
        if len(values) >= want:
            above = np.flatnonzero(dense >= np.partition(values, len(values) - want)[len(values) - want])
            kept: np.ndarray = above[allowed[above]]
            return kept
    held = np.flatnonzero(dense)
    scoring: np.ndarray = held[allowed[held]]
    return scoring


class SparseScores:
    """One query's BM25 as the few allowed nodes that score (ascending) and their scores; any other node scores 0."""

    __slots__ = ("held", "values")

    def __init__(self, held: np.ndarray, values: np.ndarray) -> None:
        self.held, self.values = held, values

    def __getitem__(self, nodes: np.ndarray) -> np.ndarray:
        out = np.zeros(len(nodes), dtype=np.float32)
        if len(self.held):
            at = np.minimum(np.searchsorted(self.held, nodes), len(self.held) - 1)
            found = self.held[at] == nodes
            out[found] = self.values[at[found]]
        return out


class DenseScores:
    """One query's BM25 as an array over the nodes and the mask of the allowed ones (the mask is
    applied to the nodes asked for, not to the whole array); a node not allowed scores 0."""

    __slots__ = ("allowed", "dense")

    def __init__(self, dense: np.ndarray, allowed: np.ndarray) -> None:
        self.dense, self.allowed = dense, allowed

    def __getitem__(self, nodes: np.ndarray) -> np.ndarray:
        out = np.zeros(len(nodes), dtype=np.float32)
        inside = (nodes >= 0) & (nodes < len(self.dense))
        inside[inside] = self.allowed[nodes[inside]]
        out[inside] = self.dense[nodes[inside]]
        return out


#: What :meth:`KeywordIndex.best` returns besides the top nodes: the query's BM25 of any node.
QueryScores = SparseScores | DenseScores
