"""What the LangChain components share beyond sovseal's kit: where their records live, how a record
becomes a ``Document``, and LangChain's metadata filters in sovseal's filter language."""

from __future__ import annotations

from typing import Any

from langchain_core.documents import Document

from sovseal import Memory, Sovseal
from sovseal.errors import InvalidArgumentTypeError, InvalidInputError
from sovseal.integration import Parts, as_text

#: Every LangChain record lives under this top-level path segment, so it never mixes with memories
#: an agent stores directly (``user.preferences.editor``) and a recall can be scoped to it.
ROOT = "langchain"
#: The part records of values too large for one record (sovseal.integration.parts).
PARTS = Parts(f"{ROOT}-parts/")


def to_document(client: Sovseal, memory: Memory, prefix: str = "", *, branch: str | None = None) -> Document:
    """The ``Document`` a record holds: its id is the path after ``prefix``, its text the value
    (read from its parts on ``branch`` when large; JSON for a structured payload) and its metadata a
    copy of the user's (lineage fields are never mixed in)."""
    return Document(
        id=memory.path[len(prefix) :],
        page_content=as_text(PARTS.read(client, memory, branch=branch)),
        metadata=dict(memory.metadata),
    )


_LOGICAL = ("$and", "$or")


def translate_filter(filter: dict[str, Any] | None) -> dict[str, Any] | None:
    """A LangChain-style metadata filter to sovseal's filter language.

    LangChain stores take filters on metadata fields, e.g. ``{"source": "a.md", "year": {"$gte": 2020}}``
    with ``$and`` / ``$or`` lists and ``$not`` at the top. Field conditions are sovseal's operators
    (docs/recall.md); each field becomes a condition of ``{"metadata": {...}}`` and sovseal
    validates the operators and operands, so there is one filter language and one evaluator.
    """
    if filter is None:
        return None
    if not isinstance(filter, dict):
        raise InvalidArgumentTypeError(
            f"filter must be a dict of metadata conditions such as {{'source': 'a.md'}}, got {type(filter).__name__}"
        )
    parts: list[dict[str, Any]] = []
    fields: dict[str, Any] = {}
    for name, condition in filter.items():
        if name in _LOGICAL:
            if not isinstance(condition, list) or not condition:
                raise InvalidInputError(f"{name} takes a non-empty list of filters, such as [{{'source': 'a.md'}}, {{'year': 2024}}]")
            parts.append({name: [translate_filter(item) or {} for item in condition]})
        elif name == "$not":
            parts.append({"$not": translate_filter(condition) or {}})
        elif isinstance(name, str) and name.startswith("$"):
            raise InvalidInputError(f"unknown filter operator {name!r} at the top level; use $and, $or, $not or a metadata field")
        else:
            fields[name] = condition
    if fields:
        parts.insert(0, {"metadata": fields})
    return _all(parts)


def scoped_filter(prefix: str, filter: dict[str, Any] | None, sovseal_filter: dict[str, Any] | None) -> dict[str, Any] | None:
    """The path ``prefix`` (none when empty) AND the metadata filter AND a raw sovseal filter."""
    if sovseal_filter is not None and not isinstance(sovseal_filter, dict):
        raise InvalidArgumentTypeError(f"sovseal_filter must be a dict in sovseal's filter language, got {type(sovseal_filter).__name__}")
    parts = [{"path_prefix": prefix}] if prefix else []
    return _all([*parts, *(p for p in (translate_filter(filter), sovseal_filter) if p is not None)])


def _all(parts: list[dict[str, Any]]) -> dict[str, Any] | None:
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}
