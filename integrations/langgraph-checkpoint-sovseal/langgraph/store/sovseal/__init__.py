"""LangGraph long-term store backed by sovseal: ``SovsealStore``.

Every item is a sealed sovseal memory in the lineage; search by meaning runs through sovseal
recall (or an ``IndexConfig``). See docs/integrations/langgraph.md.
"""

from langgraph.store.sovseal.store import SovsealStore

__all__ = ["SovsealStore"]
