"""The keyword index: BM25 over the catalog's records, in memory only.

Postings grow by appending (a record is added once, when it is first seen); a query scores the
postings of its distinct terms into one array over all nodes, so filtering by visibility and by a
filter is one vectorised mask. Collection statistics (number of records, average length, document
frequency) are over every record the catalog holds, on every branch and shadowed or not: they are
cheap to keep exact under appends, and differ from HEAD-only statistics only where many records
are shadowed.

    idf(t)   = ln(1 + (N − df(t) + 0.5) / (df(t) + 0.5))
    bm25(n)  = Σ_t idf(t) × tf(t, n) × (k1 + 1) / (tf(t, n) + k1 × (1 − b + b × len(n) / avg len))
"""

from __future__ import annotations

import math
from array import array
from collections import Counter

import numpy as np


class KeywordIndex:
    def __init__(self) -> None:
        self._nodes: dict[str, array] = {}
        self._tfs: dict[str, array] = {}
        # term -> (statistics it was computed under, its nodes, their BM25 contributions): the
        # statistics change with every record added, so a term's contributions are reused only
        # while no record was (a burst of recalls between stores).
        self._cache: dict[str, tuple[tuple[int, int, float, float], np.ndarray, np.ndarray]] = {}
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

    def _contributions(self, term: str, k1: float, b: float) -> tuple[np.ndarray, np.ndarray] | None:
        """The nodes holding ``term`` and the BM25 score it gives each of them."""
        nodes = self._nodes.get(term)
        if nodes is None:
            return None
        stats = (self.documents, self._total, k1, b)  # documents grow whenever postings do
        cached = self._cache.get(term)
        if cached is None or cached[0] != stats:
            held = np.array(nodes, dtype=np.int64)
            tf = np.array(self._tfs[term], dtype=np.float32)
            average = max(self._total / self.documents, 1e-9)
            df = len(nodes)
            idf = math.log(1.0 + (self.documents - df + 0.5) / (df + 0.5))
            norm = k1 * (1.0 - b + b * self._length[held] / average)
            cached = self._cache[term] = (stats, held, (idf * (k1 + 1.0)) * tf / (tf + norm))
        return cached[1], cached[2]

    def scores(self, terms: list[str], size: int, k1: float, b: float) -> np.ndarray:
        """BM25 of every node below ``size`` for the query ``terms`` (0 where nothing matches)."""
        out = np.zeros(size, dtype=np.float32)
        if not self.documents:
            return out
        for term in dict.fromkeys(terms):  # distinct, in order
            found = self._contributions(term, k1, b)
            if found is None:
                continue
            nodes, score = found
            if self._top >= size:  # only when the caller asks about fewer nodes than were added
                keep = nodes < size
                nodes, score = nodes[keep], score[keep]
            np.add.at(out, nodes, score)  # one call; the same float32 sums as out[nodes] += score
        return out
