"""Recall filters: a small, MongoDB-like language, checked before anything is searched.

A filter is a dict; every key must hold (AND)::

    {"path_prefix": "user."}                              paths that start with "user."
    {"path": {"$in": ["user.editor", "user.shell"]}}      exact paths ($eq $ne $in $nin $prefix)
    {"type": "episodic"}                                   episodic | semantic | procedural ($eq $ne $in $nin)
    {"provenance": {"$ne": "observed"}}                    explicit | observed ($eq $ne $in $nin)
    {"metadata": {"source": "chat", "session": {"$gte": 3, "$lt": 10}}}
    {"$or": [{"type": "procedural"}, {"metadata": {"pinned": true}}]}   also "$and": [...] and "$not": {...}

A plain value means equality; a dict whose keys all start with ``$`` is a set of operators (all must
hold). Operators: ``$eq $ne $gt $gte $lt $lte $in $nin $exists $prefix``, and on metadata fields also
``$contains $any $all $substring $isubstring``.

- Equality is JSON equality: ``1`` equals ``1.0``, ``true`` is not ``1``, dicts and lists compare whole.
- ``$gt $gte $lt $lte`` take a number or a string and match values of the same kind only (numbers
  with numbers, strings with strings, by code point); other values do not match.
- ``$contains`` matches a list holding a JSON-equal item, or a string holding the (string) operand;
  ``$any`` / ``$all`` take a list and match a list holding any / all of its items (``$all`` of ``[]``:
  any list); ``$substring`` / ``$isubstring`` take a string and match a string containing it
  (``$isubstring`` compares both lower-cased, as ``str.lower`` does).
- A metadata field the record lacks matches only ``$ne``, ``$nin`` and ``{"$exists": false}``.
- Metadata field names are matched exactly (``"a.b"`` is the key ``"a.b"``, not a nested lookup).

Anything else (an unknown key or operator, an operand of the wrong type, an unknown memory type)
raises :class:`~sovseal.errors.InvalidInputError` before the search starts.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sovseal.storage.entries import MEMORY_TYPES, PROVENANCES

from ..errors import InvalidInputError

FIELDS = ("path_prefix", "path", "type", "provenance", "metadata", "$and", "$or", "$not")
OPERATORS = (
    "$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$in", "$nin", "$exists", "$prefix",
    "$contains", "$any", "$all", "$substring", "$isubstring",
)  # fmt: skip
#: Operators on metadata values only (the path, type and provenance fields do not take them).
CONTAINMENT = ("$contains", "$any", "$all", "$substring", "$isubstring")
_ORDERED = ("$gt", "$gte", "$lt", "$lte")
_ENUM_OPS = ("$eq", "$ne", "$in", "$nin")
_PATH_OPS = ("$eq", "$ne", "$in", "$nin", "$prefix")
#: Nesting depth and total size limits keep a hostile filter from costing more than a search.
MAX_DEPTH = 16
MAX_NODES = 1024


@dataclass(frozen=True, slots=True)
class Cond:
    """One operator applied to one field: ``field`` is "path", "type", "provenance" or ("metadata", name)."""

    field: str | tuple[str, str]
    op: str
    operand: Any


@dataclass(frozen=True, slots=True)
class All:
    parts: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class AnyOf:
    parts: tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Not:
    part: Any


Filter = Cond | All | AnyOf | Not


def parse(spec: object) -> Filter | None:
    """Validate ``spec`` into a filter tree (None: no filter). Raises InvalidInputError."""
    if spec is None:
        return None
    counter = [0]
    tree = _parse(spec, 0, counter, "filter")
    return tree


def _fail(message: str) -> InvalidInputError:
    return InvalidInputError(f"{message} (see docs/recall.md, 'Filters')")


def _parse(spec: object, depth: int, counter: list[int], where: str) -> Filter:
    if depth > MAX_DEPTH:
        raise _fail(f"the filter nests deeper than {MAX_DEPTH} levels")
    if not isinstance(spec, dict):
        raise _fail(f"{where} must be a dict such as {{'type': 'episodic'}}, got {type(spec).__name__}")
    parts: list[Filter] = []
    for key, value in spec.items():
        counter[0] += 1
        if counter[0] > MAX_NODES:
            raise _fail(f"the filter has more than {MAX_NODES} conditions")
        if key == "path_prefix":
            if not isinstance(value, str):
                raise _fail(f"path_prefix must be a string, got {type(value).__name__}")
            parts.append(Cond("path", "$prefix", value))
        elif key == "path":
            parts.extend(_conditions("path", value, _PATH_OPS, _check_path))
        elif key == "type":
            parts.extend(_conditions("type", value, _ENUM_OPS, _enum_checker("type", MEMORY_TYPES)))
        elif key == "provenance":
            parts.extend(_conditions("provenance", value, _ENUM_OPS, _enum_checker("provenance", PROVENANCES)))
        elif key == "metadata":
            if not isinstance(value, dict):
                raise _fail(f"metadata must be a dict of field -> value or operators, got {type(value).__name__}")
            for name, condition in value.items():
                if not isinstance(name, str):
                    raise _fail(f"metadata field names are strings, got {name!r}")
                counter[0] += 1
                parts.extend(_conditions(("metadata", name), condition, OPERATORS, _check_json))
        elif key in ("$and", "$or"):
            if not isinstance(value, list) or not value:
                raise _fail(f"{key} takes a non-empty list of filters")
            sub = tuple(_parse(item, depth + 1, counter, f"an item of {key}") for item in value)
            parts.append(All(sub) if key == "$and" else AnyOf(sub))
        elif key == "$not":
            parts.append(Not(_parse(value, depth + 1, counter, "$not")))
        else:
            raise _fail(f"unknown filter field {key!r}; the fields are {', '.join(FIELDS)}")
    return parts[0] if len(parts) == 1 else All(tuple(parts))


def _is_operator_dict(value: object) -> bool:
    if not isinstance(value, dict) or not value:
        return False
    dollar = [isinstance(k, str) and k.startswith("$") for k in value]
    if any(dollar) and not all(dollar):
        raise _fail(f"a condition mixes operators and plain keys: {sorted(map(str, value))}")
    return all(dollar)


def _conditions(field: str | tuple[str, str], value: object, allowed: tuple[str, ...], check: Any) -> list[Cond]:
    label = field if isinstance(field, str) else f"metadata field {field[1]!r}"
    if not _is_operator_dict(value):
        check(label, value)
        return [Cond(field, "$eq", value)]
    assert isinstance(value, dict)  # nosec B101 -- type narrowing: every non-dict value returned above
    out: list[Cond] = []
    for op, operand in value.items():
        if op not in OPERATORS:
            raise _fail(f"unknown operator {op!r} on {label}; the operators are {', '.join(OPERATORS)}")
        if op not in allowed:
            raise _fail(f"operator {op} does not apply to {label}; use one of {', '.join(allowed)}")
        if op in ("$in", "$nin", "$any", "$all"):
            if not isinstance(operand, list):
                raise _fail(f"{op} on {label} takes a list, got {type(operand).__name__}")
            for item in operand:
                check(label, item)
        elif op in _ORDERED:
            if isinstance(operand, bool) or not isinstance(operand, (int, float, str)):
                raise _fail(f"{op} on {label} takes a number or a string, got {type(operand).__name__}")
            check(label, operand)
        elif op == "$exists":
            if not isinstance(operand, bool):
                raise _fail(f"$exists on {label} takes true or false, got {type(operand).__name__}")
        elif op in ("$prefix", "$substring", "$isubstring"):
            if not isinstance(operand, str):
                raise _fail(f"{op} on {label} takes a string, got {type(operand).__name__}")
        else:
            check(label, operand)
        out.append(Cond(field, op, operand))
    return out


def _check_path(label: str, value: object) -> None:
    if not isinstance(value, str):
        raise _fail(f"{label} values are strings, got {type(value).__name__}")


def _enum_checker(name: str, allowed: tuple[str, ...]) -> Any:
    def check(label: str, value: object) -> None:
        if value not in allowed:
            raise _fail(f"{name} must be one of {', '.join(allowed)}; got {value!r}")

    return check


def _check_json(label: str, value: object) -> None:
    """Operands must be JSON values, as stored metadata is."""
    if value is None or isinstance(value, (bool, str)):
        return
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise _fail(f"{label}: {value} is not a JSON number")
        return
    if isinstance(value, list):
        for item in value:
            _check_json(label, item)
        return
    if isinstance(value, dict):
        for k, item in value.items():
            if not isinstance(k, str):
                raise _fail(f"{label}: JSON object keys are strings, got {k!r}")
            _check_json(label, item)
        return
    raise _fail(f"{label}: {type(value).__name__} is not a JSON value")


# -- matching one value (used for metadata; path/type/provenance have indexed fast paths) ------------


def value_key(value: Any) -> tuple[Any, ...]:
    """A hashable key under which JSON-equal values coincide (1 == 1.0, true != 1)."""
    if isinstance(value, bool):
        return ("b", value)
    if isinstance(value, (int, float)):
        return ("n", float(value)) if isinstance(value, float) or abs(value) < 2**53 else ("i", value)
    if isinstance(value, str):
        return ("s", value)
    if value is None:
        return ("z",)
    if isinstance(value, list):
        return ("l", tuple(value_key(v) for v in value))
    if isinstance(value, dict):
        return ("d", tuple(sorted((k, value_key(v)) for k, v in value.items())))
    return ("?", repr(value))


def _kind(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return "n"
    if isinstance(value, str):
        return "s"
    return None


def matches(op: str, operand: Any, present: bool, value: Any) -> bool:
    """Does a record's value (``present`` False: the field is missing) satisfy ``op operand``?"""
    if op == "$exists":
        return present is operand
    if not present:
        return op in ("$ne", "$nin")
    if op == "$eq":
        return value_key(value) == value_key(operand)
    if op == "$ne":
        return value_key(value) != value_key(operand)
    if op == "$in":
        return value_key(value) in {value_key(o) for o in operand}
    if op == "$nin":
        return value_key(value) not in {value_key(o) for o in operand}
    if op == "$prefix":
        return isinstance(value, str) and value.startswith(operand)
    if op in CONTAINMENT:
        return _contained(op, operand, value)
    kind = _kind(value)
    if kind is None or kind != _kind(operand):
        return False
    if op == "$gt":
        return bool(value > operand)
    if op == "$gte":
        return bool(value >= operand)
    if op == "$lt":
        return bool(value < operand)
    return bool(value <= operand)  # $lte


def _holds(container: list[Any], item: Any) -> bool:
    key = value_key(item)
    return any(value_key(x) == key for x in container)


def _contained(op: str, operand: Any, value: Any) -> bool:
    if op == "$contains":
        if isinstance(value, str):
            return isinstance(operand, str) and operand in value
        return isinstance(value, list) and _holds(value, operand)
    if op == "$any":
        return isinstance(value, list) and any(_holds(value, o) for o in operand)
    if op == "$all":
        return isinstance(value, list) and all(_holds(value, o) for o in operand)
    if not isinstance(value, str):
        return False
    if op == "$substring":
        return operand in value
    return operand.lower() in value.lower()  # $isubstring


# -- a whole filter on one record (what the catalog computes in bulk, for a record in hand) ---------

_MISSING = object()


def evaluate(tree: Filter | None, *, path: str, type: str, provenance: str, metadata: dict[str, Any]) -> bool:
    """Does one record (its path, memory type, provenance and metadata) match a parsed filter?

    The same semantics as recall's filtering, for callers that hold records already (an adapter
    scanning what it listed). ``tree`` comes from :func:`parse`; None matches everything.
    """
    if tree is None:
        return True
    if isinstance(tree, All):
        return all(evaluate(p, path=path, type=type, provenance=provenance, metadata=metadata) for p in tree.parts)
    if isinstance(tree, AnyOf):
        return any(evaluate(p, path=path, type=type, provenance=provenance, metadata=metadata) for p in tree.parts)
    if isinstance(tree, Not):
        return not evaluate(tree.part, path=path, type=type, provenance=provenance, metadata=metadata)
    field = tree.field
    if isinstance(field, tuple):
        value = metadata.get(field[1], _MISSING)
        return matches(tree.op, tree.operand, value is not _MISSING, value)
    value = {"path": path, "type": type, "provenance": provenance}[field]
    return matches(tree.op, tree.operand, True, value)
