"""Recall: HEAD-visible hybrid (dense + BM25) search with decay and reinforcement. See docs/recall.md."""

from sovseal.recall.engine import QUERY_CACHE_SIZE, RecallEngine
from sovseal.recall.filters import parse as parse_filter
from sovseal.recall.params import FUSIONS, RecallParams, decay, reinforcement

__all__ = ["FUSIONS", "QUERY_CACHE_SIZE", "RecallEngine", "RecallParams", "decay", "parse_filter", "reinforcement"]
