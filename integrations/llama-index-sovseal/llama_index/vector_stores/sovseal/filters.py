"""LlamaIndex ``MetadataFilters`` -> sovseal recall filters, and the same filters evaluated in Python.

Every LlamaIndex operator is supported, with AND / OR / NOT nesting:

==========================  =========================================  ==============================
LlamaIndex                  meaning on a record's metadata value v      sovseal filter
==========================  =========================================  ==============================
``==`` ``!=``               JSON equality (1 == 1.0, true != 1)         ``$eq`` ``$ne``
``>`` ``>=`` ``<`` ``<=``   same kind only (numbers / strings)          ``$gt`` ``$gte`` ``$lt`` ``$lte``
``in`` ``nin``              v is (not) one of the values                ``$in`` ``$nin``
``is_empty``                missing, null, "" or []                     ``$or`` of ``$exists``/``$eq``
``contains``                v is a list holding the value, or a         ``$contains`` (asked of the SDK)
                            string holding it as a substring
``any`` / ``all``           v is a list holding any / all values        ``$any`` / ``$all`` (asked)
``text_match``              v is a string containing the value          ``$substring`` (asked)
``text_match_insensitive``  the same, ignoring case                     ``$isubstring`` (asked)
==========================  =========================================  ==============================

A missing field matches only ``!=``, ``nin`` and ``is_empty`` (as in LlamaIndex's own stores). The
operators marked *asked* are not in sovseal's filter language yet: while the installed sovseal does
not accept them, the adapter sends the rest of the filter (a superset of the matches) and applies the
whole filter to the decrypted results, fetching more until it has ``k`` or the store is exhausted.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
)

_NATIVE = {
    FilterOperator.EQ: "$eq",
    FilterOperator.NE: "$ne",
    FilterOperator.GT: "$gt",
    FilterOperator.GTE: "$gte",
    FilterOperator.LT: "$lt",
    FilterOperator.LTE: "$lte",
    FilterOperator.IN: "$in",
    FilterOperator.NIN: "$nin",
}
#: Operators sovseal's filter language does not have yet, with the names asked of the SDK and a
#: sample operand used to probe whether the installed sovseal accepts them.
_EXTENDED = {
    FilterOperator.CONTAINS: ("$contains", "x"),
    FilterOperator.ANY: ("$any", ["x"]),
    FilterOperator.ALL: ("$all", ["x"]),
    FilterOperator.TEXT_MATCH: ("$substring", "x"),
    FilterOperator.TEXT_MATCH_INSENSITIVE: ("$isubstring", "x"),
}


@functools.cache
def sdk_supports(op: FilterOperator) -> bool:
    """Does the installed sovseal's filter language have ``op``? (Probed once per operator.)"""
    if op in _NATIVE or op == FilterOperator.IS_EMPTY:
        return True
    if op not in _EXTENDED:
        return False
    name, sample = _EXTENDED[op]
    try:
        from sovseal.recall import parse_filter

        parse_filter({"metadata": {"probe": {name: sample}}})
    except Exception:  # noqa: BLE001 - InvalidInputError: not (yet) part of the language
        return False
    return True


class Unsupported(Exception):
    """A filter has a part sovseal cannot evaluate (the caller falls back to evaluating it here)."""


# -- translation ----------------------------------------------------------------------------------


def _leaf(f: MetadataFilter) -> dict[str, Any]:
    op = FilterOperator(f.operator)
    value = f.value
    if op == FilterOperator.IS_EMPTY:
        return {
            "$or": [
                {"metadata": {f.key: {"$exists": False}}},
                {"metadata": {f.key: {"$eq": None}}},
                {"metadata": {f.key: {"$eq": ""}}},
                {"metadata": {f.key: {"$eq": []}}},
            ]
        }
    if op in (FilterOperator.IN, FilterOperator.NIN, FilterOperator.ANY, FilterOperator.ALL) and not isinstance(value, list):
        value = [value]
    if op in _NATIVE:
        return {"metadata": {f.key: {_NATIVE[op]: value}}}
    if op in _EXTENDED and sdk_supports(op):
        return {"metadata": {f.key: {_EXTENDED[op][0]: value}}}
    raise Unsupported(op.value)


def _combine(condition: FilterCondition | None, parts: list[dict[str, Any]]) -> dict[str, Any]:
    condition = FilterCondition(condition or FilterCondition.AND)
    if condition == FilterCondition.AND:
        return parts[0] if len(parts) == 1 else {"$and": parts}
    either = parts[0] if len(parts) == 1 else {"$or": parts}
    if condition == FilterCondition.OR:
        return either
    return {"$not": either}  # NOT: none of the filters match


def exact(filters: MetadataFilters | MetadataFilter) -> dict[str, Any] | None:
    """The sovseal filter with exactly the same matches (None: match everything); raises Unsupported.

    An empty group matches everything, whatever its condition."""
    if isinstance(filters, MetadataFilter):
        return _leaf(filters)
    condition = FilterCondition(filters.condition or FilterCondition.AND)
    subs = [exact(f) for f in filters.filters]
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


def relaxed(filters: MetadataFilters | MetadataFilter) -> dict[str, Any] | None:
    """A sovseal filter matching at least everything ``filters`` matches (None: everything)."""
    try:
        return exact(filters)
    except Unsupported:
        pass
    if isinstance(filters, MetadataFilter):
        return None
    condition = FilterCondition(filters.condition or FilterCondition.AND)
    if condition == FilterCondition.NOT:
        return None  # NOT of something inexact: no safe superset narrower than everything
    parts = [relaxed(f) for f in filters.filters]
    if condition == FilterCondition.OR:
        if any(p is None for p in parts):
            return None
        return _combine(condition, [p for p in parts if p is not None])
    kept = [p for p in parts if p is not None]
    return _combine(condition, kept) if kept else None


# -- evaluation in Python (for the parts sovseal does not evaluate yet) ----------------------------

_MISSING = object()


def _key(value: Any) -> Any:
    """A hashable key under which JSON-equal values coincide (1 == 1.0, true != 1)."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", float(value)) if isinstance(value, float) or abs(value) < 2**53 else ("i", value)
    if isinstance(value, str):
        return ("s", value)
    if value is None:
        return ("z",)
    if isinstance(value, (list, tuple)):
        return ("l", tuple(_key(v) for v in value))
    if isinstance(value, Mapping):
        return ("d", tuple(sorted((str(k), _key(v)) for k, v in value.items())))
    return ("?", repr(value))


def _kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return "n"
    if isinstance(value, str):
        return "s"
    return None


def _holds(container: Any, item: Any) -> bool:
    return isinstance(container, list) and _key(item) in {_key(x) for x in container}


def leaf_matches(f: MetadataFilter, metadata: Mapping[str, Any]) -> bool:
    op = FilterOperator(f.operator)
    v = metadata.get(f.key, _MISSING)
    operand = f.value
    if op == FilterOperator.IS_EMPTY:
        return v is _MISSING or v is None or v == "" or v == []
    if v is _MISSING:
        return op in (FilterOperator.NE, FilterOperator.NIN)
    if op in (FilterOperator.IN, FilterOperator.NIN, FilterOperator.ANY, FilterOperator.ALL) and not isinstance(operand, list):
        operand = [operand]
    if op == FilterOperator.EQ:
        return _key(v) == _key(operand)
    if op == FilterOperator.NE:
        return _key(v) != _key(operand)
    if op == FilterOperator.IN:
        return _key(v) in {_key(o) for o in operand}
    if op == FilterOperator.NIN:
        return _key(v) not in {_key(o) for o in operand}
    if op in (FilterOperator.GT, FilterOperator.GTE, FilterOperator.LT, FilterOperator.LTE):
        if _kind(v) is None or _kind(v) != _kind(operand):
            return False
        if op == FilterOperator.GT:
            return v > operand
        if op == FilterOperator.GTE:
            return v >= operand
        if op == FilterOperator.LT:
            return v < operand
        return v <= operand
    if op == FilterOperator.CONTAINS:
        if isinstance(v, str):
            return isinstance(operand, str) and operand in v
        return _holds(v, operand)
    if op == FilterOperator.ANY:
        return isinstance(v, list) and any(_holds(v, o) for o in operand)
    if op == FilterOperator.ALL:
        return isinstance(v, list) and all(_holds(v, o) for o in operand)
    if op == FilterOperator.TEXT_MATCH:
        return isinstance(v, str) and isinstance(operand, str) and operand in v
    if op == FilterOperator.TEXT_MATCH_INSENSITIVE:
        return isinstance(v, str) and isinstance(operand, str) and operand.lower() in v.lower()
    raise ValueError(f"unknown filter operator {op!r}")


def matches(filters: MetadataFilters | MetadataFilter, metadata: Mapping[str, Any]) -> bool:
    """Does ``metadata`` satisfy ``filters``? The same semantics as the translation above."""
    if isinstance(filters, MetadataFilter):
        return leaf_matches(filters, metadata)
    results = [matches(f, metadata) for f in filters.filters]
    condition = FilterCondition(filters.condition or FilterCondition.AND)
    if condition == FilterCondition.AND:
        return all(results)
    if condition == FilterCondition.OR:
        return any(results) if results else True
    return not any(results)


# -- the plan a search or a scan follows -----------------------------------------------------------


@dataclass(frozen=True)
class Plan:
    """What to send to sovseal (``sdk``) and, if that is only a superset, what to check after (``post``)."""

    sdk: dict[str, Any]
    post: Callable[[Mapping[str, Any]], bool] | None = None


def plan(
    path_prefix: str,
    filters: MetadataFilters | dict[str, Any] | None = None,
    *,
    paths: list[str] | None = None,
    doc_ids: list[str] | None = None,
) -> Plan:
    """The sovseal filter for records under ``path_prefix`` matching ``filters`` (LlamaIndex
    ``MetadataFilters``, or a sovseal filter dict passed through as is), ``paths`` and ``doc_ids``."""
    parts: list[dict[str, Any]] = [{"path_prefix": path_prefix}] if path_prefix else []
    if paths is not None:
        parts.append({"path": {"$in": list(paths)}})
    if doc_ids is not None:
        parts.append({"metadata": {"ref_doc_id": {"$in": list(doc_ids)}}})
    post = None
    if isinstance(filters, dict):
        parts.append(filters)
    elif filters is not None and filters.filters:
        try:
            spec = exact(filters)
        except Unsupported:
            spec = relaxed(filters)
            post = functools.partial(matches, filters)
        if spec is not None:
            parts.append(spec)
    if not parts:
        return Plan({"path_prefix": ""}, post)
    return Plan(parts[0] if len(parts) == 1 else {"$and": parts}, post)


# -- sovseal's own filter language evaluated in Python (used only while the SDK lacks ``find``) ---


def _sdk_cond(op: str, operand: Any, present: bool, value: Any) -> bool:
    if op == "$exists":
        return present is operand
    if not present:
        return op in ("$ne", "$nin")
    if op == "$eq":
        return _key(value) == _key(operand)
    if op == "$ne":
        return _key(value) != _key(operand)
    if op == "$in":
        return _key(value) in {_key(o) for o in operand}
    if op == "$nin":
        return _key(value) not in {_key(o) for o in operand}
    if op == "$prefix":
        return isinstance(value, str) and value.startswith(operand)
    if op in ("$gt", "$gte", "$lt", "$lte"):
        if _kind(value) is None or _kind(value) != _kind(operand):
            return False
        return {"$gt": value > operand, "$gte": value >= operand, "$lt": value < operand, "$lte": value <= operand}[op]
    for lli_op, (name, _) in _EXTENDED.items():
        if op == name:
            return leaf_matches(MetadataFilter.model_construct(key="v", value=operand, operator=lli_op), {"v": value})
    raise ValueError(f"unknown sovseal filter operator {op!r}")


def _sdk_field(value: Any, present: bool, spec: Any) -> bool:
    if isinstance(spec, dict) and spec and all(isinstance(k, str) and k.startswith("$") for k in spec):
        return all(_sdk_cond(op, operand, present, value) for op, operand in spec.items())
    return _sdk_cond("$eq", spec, present, value)


def matches_sdk(spec: Mapping[str, Any], memory: Any) -> bool:
    """Does a ``sovseal.Memory`` match the sovseal filter ``spec``? (Same rules as sovseal's recall.)"""
    for field, value in spec.items():
        if field == "path_prefix":
            ok = memory.path.startswith(value)
        elif field == "path":
            ok = _sdk_field(memory.path, True, value)
        elif field == "type":
            ok = _sdk_field(memory.type, True, value)
        elif field == "provenance":
            ok = _sdk_field(memory.provenance, True, value)
        elif field == "metadata":
            md = memory.metadata
            ok = all(_sdk_field(md.get(name), name in md, cond) for name, cond in value.items())
        elif field == "$and":
            ok = all(matches_sdk(s, memory) for s in value)
        elif field == "$or":
            ok = any(matches_sdk(s, memory) for s in value)
        elif field == "$not":
            ok = not matches_sdk(value, memory)
        else:
            raise ValueError(f"unknown sovseal filter field {field!r}")
        if not ok:
            return False
    return True
