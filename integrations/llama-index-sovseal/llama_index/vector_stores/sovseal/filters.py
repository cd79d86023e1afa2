"""LlamaIndex ``MetadataFilters`` -> sovseal's filter language, evaluated by sovseal itself.

Every LlamaIndex operator has a sovseal operator, with AND / OR / NOT nesting:

==========================  =========================================  ==============================
LlamaIndex                  meaning on a record's metadata value v      sovseal filter
==========================  =========================================  ==============================
``==`` ``!=``               JSON equality (1 == 1.0, true != 1)         ``$eq`` ``$ne``
``>`` ``>=`` ``<`` ``<=``   same kind only (numbers / strings)          ``$gt`` ``$gte`` ``$lt`` ``$lte``
``in`` ``nin``              v is (not) one of the values                ``$in`` ``$nin``
``is_empty``                missing, null, "" or []                     ``$or`` of ``$exists``/``$eq``
``contains``                v is a list holding the value, or a         ``$contains``
                            string holding it as a substring
``any`` / ``all``           v is a list holding any / all values        ``$any`` / ``$all``
``text_match``              v is a string containing the value          ``$substring``
``text_match_insensitive``  the same, ignoring case                     ``$isubstring``
==========================  =========================================  ==============================

A missing field matches only ``!=``, ``nin`` and ``is_empty`` (as in LlamaIndex's own stores). This
module only translates: there is one evaluator, sovseal's (``sovseal.recall.filters``), applied by
recall inside the search and by ``Sovseal.find`` for scans (``get_nodes``, deletes, the chat store).
"""

from __future__ import annotations

from typing import Any

from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

#: sovseal names its operators as LlamaIndex does (``EQ`` is ``$eq``, ``ANY`` is ``$any``), but these;
#: sovseal's own parser is the one list of operators, and refuses any it does not evaluate.
_RENAMED = {FilterOperator.TEXT_MATCH: "$substring", FilterOperator.TEXT_MATCH_INSENSITIVE: "$isubstring"}
_LISTS = (FilterOperator.IN, FilterOperator.NIN, FilterOperator.ANY, FilterOperator.ALL)


def _leaf(f: MetadataFilter) -> dict[str, Any]:
    op = FilterOperator(f.operator)
    value: Any = f.value
    if op == FilterOperator.IS_EMPTY:
        return {
            "$or": [
                {"metadata": {f.key: {"$exists": False}}},
                {"metadata": {f.key: {"$eq": None}}},
                {"metadata": {f.key: {"$eq": ""}}},
                {"metadata": {f.key: {"$eq": []}}},
            ]
        }
    if op in _LISTS and not isinstance(value, list):
        value = [value]
    return {"metadata": {f.key: {_RENAMED.get(op, f"${op.name.lower()}"): value}}}


def _combine(condition: FilterCondition | None, parts: list[dict[str, Any]]) -> dict[str, Any]:
    condition = FilterCondition(condition or FilterCondition.AND)
    if condition == FilterCondition.AND:
        return parts[0] if len(parts) == 1 else {"$and": parts}
    either = parts[0] if len(parts) == 1 else {"$or": parts}
    if condition == FilterCondition.OR:
        return either
    return {"$not": either}  # NOT: none of the filters match


def translate(filters: MetadataFilters | MetadataFilter) -> dict[str, Any] | None:
    """The sovseal filter with exactly the same matches (None: match everything).

    An empty group matches everything, whatever its condition."""
    if isinstance(filters, MetadataFilter):
        return _leaf(filters)
    condition = FilterCondition(filters.condition or FilterCondition.AND)
    subs = [translate(f) for f in filters.filters]
    if not subs:
        return None
    if any(s is None for s in subs):  # a part that matches everything
        if condition == FilterCondition.OR:
            return None
        if condition == FilterCondition.NOT:
            return _never()
    parts = [s for s in subs if s is not None]
    return _combine(condition, parts) if parts else None


def _never() -> dict[str, Any]:
    return {"$not": {"path_prefix": ""}}


def scope(
    path_prefix: str,
    filters: MetadataFilters | dict[str, Any] | None = None,
    *,
    paths: list[str] | None = None,
    doc_ids: list[str] | None = None,
) -> dict[str, Any]:
    """The sovseal filter for records under ``path_prefix`` matching ``filters`` (LlamaIndex
    ``MetadataFilters``, or a sovseal filter dict passed through as is), ``paths`` and ``doc_ids``.
    sovseal refuses a filter it cannot evaluate with ``InvalidInputError`` (a ``ValueError``)."""
    parts: list[dict[str, Any]] = [{"path_prefix": path_prefix}] if path_prefix else []
    if paths is not None:
        parts.append({"path": {"$in": list(paths)}})
    if doc_ids is not None:
        parts.append({"metadata": {"ref_doc_id": {"$in": list(doc_ids)}}})
    if isinstance(filters, dict):
        parts.append(filters)
    elif filters is not None and (spec := translate(filters)) is not None:
        parts.append(spec)
    if not parts:
        return {"path_prefix": ""}
    return parts[0] if len(parts) == 1 else {"$and": parts}
