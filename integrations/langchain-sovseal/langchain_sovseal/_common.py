"""What every component shares: opening a ``Sovseal`` handle, record paths, SDK feature checks, filters.

The adapter only talks to sovseal's public SDK (``sovseal.Sovseal``). Where it needs a capability a
given sovseal release lacks, it raises :class:`SovsealFeatureUnavailable` naming the method, instead
of reaching into storage or crypto or silently degrading.
"""

from __future__ import annotations

import inspect
import json
import os
from collections.abc import Callable, Iterable
from typing import Any

from sovseal import Memory, Sovseal

#: Every LangChain record lives under this top-level path segment, so it never mixes with memories
#: an agent stores directly (``user.preferences.editor``) and a recall can be scoped to it.
ROOT = "langchain"
#: Where the part records of values too large for one record live (see _parts.py).
PARTS_ROOT = f"{ROOT}-parts/"


class SovsealFeatureUnavailable(NotImplementedError):
    """The installed sovseal has no SDK method this adapter needs for the call that was made."""

    def __init__(self, what: str, needed_by: str) -> None:
        super().__init__(
            f"{needed_by} needs {what}, which the installed sovseal does not provide. "
            "Upgrade sovseal (pip install -U sovseal) to a release that has it."
        )


def has_method(client: Sovseal, name: str) -> bool:
    return callable(getattr(client, name, None))


def accepts(method: Callable[..., Any], parameter: str) -> bool:
    """Does ``method`` take the keyword ``parameter``? (Feature detection across sovseal releases.)"""
    try:
        params = inspect.signature(method).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without a signature
        return False
    return parameter in params or any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())


def check_segment(value: object, what: str) -> str:
    """A path segment the adapter builds prefixes from: a non-empty string without ``/`` or NUL."""
    if not isinstance(value, str) or not value or "/" in value or "\x00" in value:
        raise ValueError(f"{what} must be a non-empty string without '/' or NUL characters; got {value!r}")
    return value


def check_key(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {type(value).__name__}")
    if "\x00" in value:
        raise ValueError(f"{what} must not contain NUL characters")
    return value


def open_client(
    client: Sovseal | None,
    *,
    path: str | os.PathLike[str] | None,
    key: bytes | str | None,
    embedder: Callable[[list[str]], Any] | None,
    branch: str | None,
    client_kwargs: dict[str, Any],
) -> tuple[Sovseal, bool]:
    """The handle to use and whether this component opened it (and so closes it)."""
    if client is not None:
        if path is not None or key is not None or branch is not None or client_kwargs:
            raise ValueError("pass either client= (an open Sovseal) or path=/key=/branch=/... to open one, not both")
        if not isinstance(client, Sovseal):
            raise TypeError(f"client must be a sovseal.Sovseal, got {type(client).__name__}")
        return client, False
    kwargs = dict(client_kwargs)
    if branch is not None:
        kwargs["branch"] = branch
    if embedder is not None:
        kwargs.setdefault("embedder", embedder)
    return Sovseal(path, key=key, **kwargs), True


def list_paths(client: Sovseal, prefix: str) -> list[str]:
    """The paths visible at this handle's HEAD that start with ``prefix``, sorted.

    Uses ``Sovseal.paths(prefix)`` when the SDK has it; otherwise folds ``state()``, which opens every
    visible record of the store (correct, but linear in the whole store's size).
    """
    if has_method(client, "paths"):
        return sorted(client.paths(prefix))  # type: ignore[attr-defined]
    return sorted(p for p in client.state() if p.startswith(prefix))


def visible_under(client: Sovseal, prefix: str) -> dict[str, Any]:
    """Every path visible at this handle's HEAD that starts with ``prefix``, and its payload.

    Uses ``Sovseal.paths(prefix)`` and ``get`` when the SDK has it; otherwise ``state()``, which
    opens every visible record of the store (correct, but linear in the whole store's size).
    """
    if has_method(client, "paths"):
        found = {p: client.get(p) for p in client.paths(prefix)}  # type: ignore[attr-defined]
        return {p: m.payload for p, m in found.items() if m is not None}
    return {p: v for p, v in client.state().items() if p.startswith(prefix)}


def branch_heads(client: Sovseal) -> tuple[str | None, ...]:
    """Every head of this handle's branch, newest first.

    After a pull a branch can have several heads (two devices wrote it), and a pull that brings in a
    head older than HEAD leaves ``snapshot()`` as it was: a cache is keyed on all of them. Uses
    ``Sovseal.heads_of(branch)`` when the SDK has it; otherwise ``status().heads`` (every branch).
    """
    if has_method(client, "heads_of"):
        return tuple(client.heads_of(client.branch))  # type: ignore[attr-defined]
    return tuple(client.status().heads.get(client.branch, ()))


def read_payload(client: Sovseal, memory: Memory) -> Any:
    """A memory's value: its payload, or the parts it names joined (see _parts.py)."""
    from . import _parts

    if _parts.descriptor(memory.payload) is None:
        return memory.payload

    def get(path: str) -> Any:
        found = client.get(path)
        return None if found is None else found.payload

    return _parts.unpack(memory.path, memory.payload, PARTS_ROOT, get)


def drop_parts(client: Sovseal, old_payloads: list[Any], new_payloads: list[Any]) -> None:
    """Delete the part records the old payloads named and the new ones do not (tombstones)."""
    from . import _parts

    for path in _parts.stale(old_payloads, new_payloads, PARTS_ROOT):
        client.delete(path)


class Erasure:
    """The purges of one erasing call: one ``Sovseal.purge(..., compact=False)`` per record path (and
    per prefix of its part records), then one ``Sovseal.compact()`` at the end, because a compaction
    rewrites the whole journal. Use as a context manager: the compaction runs on the way out, after
    an error too (what was purged before it is compacted away).

    ``record(path, group, payload)`` erases every version of ``path`` on every branch, whether it is
    visible now or was deleted earlier, and every part record any version of it had (``payload``,
    the visible version's, names the parts of a value stored before parts were grouped by record).
    Nothing to erase at a path is not an error (as a delete of a missing id is not).
    """

    def __init__(self, client: Sovseal, reason: str = "") -> None:
        if not has_method(client, "purge") or not has_method(client, "compact"):
            raise SovsealFeatureUnavailable("Sovseal.purge(path, *, prefix, reason, compact) and Sovseal.compact()", "erasure (erase=True)")
        if not isinstance(reason, str):
            raise TypeError(f"reason must be a str, got {type(reason).__name__}")
        self._client = client
        self._reason = reason
        self._pending = False  # erased records whose sealed bytes the journal still holds
        self.erased = 0  # snapshots erased (every version of every record)

    def purge(self, path: str | None = None, *, prefix: str | None = None) -> None:
        from sovseal.errors import UnknownPathError

        try:
            result = self._client.purge(path, prefix=prefix, reason=self._reason, compact=False)  # type: ignore[attr-defined]
        except UnknownPathError:
            return
        self.erased += len(result.erased)
        if result.compacted:  # the store compacted by itself (its threshold): everything so far is gone
            self._pending = False
        elif result.erased:
            self._pending = True

    def record(self, path: str, group: str, payload: Any = None) -> None:
        from . import _parts

        self.purge(path)
        prefix = _parts.record_prefix(PARTS_ROOT, group, path)
        self.purge(prefix=prefix)
        for part in _parts.outside(payload, PARTS_ROOT, prefix):
            self.purge(part)

    def finish(self) -> None:
        if self._pending:
            self._client.compact()  # type: ignore[attr-defined]
            self._pending = False

    def __enter__(self) -> Erasure:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()


def payload_text(payload: Any) -> str:
    """A memory's payload as the text of a Document: a string as is, anything else as JSON."""
    if isinstance(payload, str):
        return payload
    return json.dumps(payload, ensure_ascii=False, sort_keys=True)


def memory_metadata(memory: Memory) -> dict[str, Any]:
    """A copy of the user's metadata: lineage fields are never mixed in."""
    return dict(memory.metadata)


_LOGICAL = ("$and", "$or")


def translate_filter(filter: dict[str, Any] | None) -> dict[str, Any] | None:
    """A LangChain-style metadata filter to sovseal's filter language.

    LangChain stores take filters on metadata fields, e.g. ``{"source": "a.md", "year": {"$gte": 2020}}``
    with ``$and`` / ``$or`` lists and ``$not`` at the top. Field conditions are sovseal's operators
    (``$eq $ne $gt $gte $lt $lte $in $nin $exists $prefix``). Each field becomes a condition of
    ``{"metadata": {...}}``; sovseal validates the operators and operands.
    """
    if filter is None:
        return None
    if not isinstance(filter, dict):
        raise TypeError(f"filter must be a dict of metadata conditions such as {{'source': 'a.md'}}, got {type(filter).__name__}")
    parts: list[dict[str, Any]] = []
    fields: dict[str, Any] = {}
    for name, condition in filter.items():
        if name in _LOGICAL:
            if not isinstance(condition, list) or not condition:
                raise ValueError(f"{name} takes a non-empty list of filters")
            parts.append({name: [translate_filter(item) or {} for item in condition]})
        elif name == "$not":
            parts.append({"$not": translate_filter(condition) or {}})
        elif isinstance(name, str) and name.startswith("$"):
            raise ValueError(f"unknown filter operator {name!r} at the top level; use $and, $or, $not or a metadata field")
        else:
            fields[name] = condition
    if fields:
        parts.insert(0, {"metadata": fields})
    if not parts:
        return None
    return parts[0] if len(parts) == 1 else {"$and": parts}


def scoped_filter(prefix: str, filter: dict[str, Any] | None, sovseal_filter: dict[str, Any] | None) -> dict[str, Any]:
    """The collection's path prefix AND the metadata filter AND a raw sovseal filter."""
    parts: list[dict[str, Any]] = [{"path_prefix": prefix}]
    translated = translate_filter(filter)
    if translated is not None:
        parts.append(translated)
    if sovseal_filter is not None:
        if not isinstance(sovseal_filter, dict):
            raise TypeError(f"sovseal_filter must be a dict in sovseal's filter language, got {type(sovseal_filter).__name__}")
        parts.append(sovseal_filter)
    return parts[0] if len(parts) == 1 else {"$and": parts}


def chunked(items: Iterable[Any], size: int) -> Iterable[list[Any]]:
    batch: list[Any] = []
    for item in items:
        batch.append(item)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch
