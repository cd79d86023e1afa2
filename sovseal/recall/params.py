"""The knobs of recall, with the defaults chosen on the LoCoMo development split (docs/recall.md).

score(memory) = fused(memory) × decay(type, age) × reinforcement(count)

fused (``fusion="weighted"``, the default):
    base(n)  = dense_weight × max(0, cos(query, n)) + keyword_weight × bm25(n) / max bm25 over the allowed records
    fused(n) = base(n) + g × max_r neighbor_weights[r-1] × max(base(ancestor_r(n)), base(descendant_r(n)))
  where ancestor_r / descendant_r are the records r steps before / after n in the lineage (stored just
  before / after it), counted only when visible at the recalled HEAD. Records stored next to each other
  are context for each other: in a conversation, the turn that answers a question is often next to the
  one that names it. The best neighbour counts, not the sum: a sum would credit every record for each of
  its vaguely similar neighbours. The gate g = clip((mean cos(n, parent) − mean cos(n, far record)) / context_coherence,
  0, 1) over the candidates: full context where consecutive records are more alike than distant ones,
  none where they are not (documents ingested in bulk in arbitrary order).
``fusion="rrf"``: Σ 1 / (rrf_k + rank) over the dense and the keyword candidate lists (the baseline).
``fusion="dense"`` / ``"keyword"``: one retriever alone (for benchmarks).

decay(type, age) = decay_floor + (1 − decay_floor) × 0.5 ** (age_days / half_life[type]),
    age from ``last_reinforced`` if the memory was reinforced, else from ``created_at``.
reinforcement(count) = min(reinforcement_cap, 1 + reinforcement_weight × ln(1 + reinforce_count)).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from sovseal.storage.entries import MEMORY_TYPES

from ..errors import InvalidInputError

FUSIONS = ("weighted", "rrf", "dense", "keyword")


def _half_lives() -> dict[str, float]:
    return {"episodic": 14.0, "semantic": 90.0, "procedural": 180.0}


@dataclass(frozen=True)
class RecallParams:
    #: How dense and keyword scores are combined: weighted (default), rrf, dense or keyword.
    fusion: str = "weighted"
    #: Weight of the cosine similarity in the weighted fusion.
    #: Cosine spreads less over the candidates than max-normalised BM25 does, hence more weight.
    dense_weight: float = 0.7
    #: Weight of the max-normalised BM25 score in the weighted fusion.
    keyword_weight: float = 0.3
    #: Weight of the best fused score among the records 1, 2, ... steps away in the lineage (empty: off).
    neighbor_weights: tuple[float, ...] = (0.6, 0.6)
    #: Lineage context gets full weight when neighbours are this much more alike (mean cosine) than
    #: records far apart in the lineage, proportionally less below, none if not more alike; 0: always full.
    context_coherence: float = 0.1
    #: RRF's k (fusion="rrf").
    rrf_k: int = 60
    #: Candidates taken from each retriever before fusion (at least 2 × k are always taken).
    candidates: int = 100
    #: BM25 term-frequency saturation.
    bm25_k1: float = 1.2
    #: BM25 length normalisation (0: none, 1: full). Memories are short; 0.5 was best on LoCoMo dev.
    bm25_b: float = 0.5
    #: Half-life in days of each memory type's decay.
    half_life_days: dict[str, float] = field(default_factory=_half_lives)
    #: The decay never takes a memory below this fraction of its relevance: old but exact still wins.
    decay_floor: float = 0.25
    #: Reinforcement boost per ln(1 + reinforce_count).
    reinforcement_weight: float = 0.1
    #: The reinforcement factor never exceeds this.
    reinforcement_cap: float = 1.5

    def __post_init__(self) -> None:
        if self.fusion not in FUSIONS:
            raise InvalidInputError(f"fusion must be one of {', '.join(FUSIONS)}; got {self.fusion!r}")
        for name in ("dense_weight", "keyword_weight", "bm25_k1", "bm25_b", "decay_floor", "reinforcement_weight", "context_coherence"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value) or value < 0:
                raise InvalidInputError(f"{name} must be a finite number >= 0; got {value!r}")
        if self.bm25_b > 1 or self.decay_floor > 1:
            raise InvalidInputError("bm25_b and decay_floor are between 0 and 1")
        if not isinstance(self.rrf_k, int) or self.rrf_k < 1 or not isinstance(self.candidates, int) or self.candidates < 1:
            raise InvalidInputError("rrf_k and candidates must be integers >= 1")
        if not isinstance(self.reinforcement_cap, (int, float)) or self.reinforcement_cap < 1:
            raise InvalidInputError("reinforcement_cap must be >= 1")
        weights = tuple(self.neighbor_weights)
        if len(weights) > 8 or any(not isinstance(w, (int, float)) or not math.isfinite(w) or w < 0 for w in weights):
            raise InvalidInputError("neighbor_weights is at most 8 finite numbers >= 0")
        object.__setattr__(self, "neighbor_weights", weights)
        half = dict(self.half_life_days)
        if set(half) != set(MEMORY_TYPES) or any(not isinstance(v, (int, float)) or not v > 0 for v in half.values()):
            raise InvalidInputError(f"half_life_days maps each of {', '.join(MEMORY_TYPES)} to a number of days > 0")
        object.__setattr__(self, "half_life_days", half)


def decay(params: RecallParams, type_: str, age_days: float) -> float:
    """The decay factor of a memory of ``type_`` last stored or reinforced ``age_days`` ago."""
    half = params.half_life_days.get(type_, params.half_life_days["semantic"])
    fresh: float = 0.5 ** (max(0.0, age_days) / half)  # a float: the base is positive
    return params.decay_floor + (1.0 - params.decay_floor) * fresh


def reinforcement(params: RecallParams, count: int) -> float:
    """The reinforcement factor of a memory stored again ``count`` times."""
    return min(params.reinforcement_cap, 1.0 + params.reinforcement_weight * math.log1p(max(0, count)))
