"""Erasing what an adapter's delete names: every version, on every branch, with its part records.

A framework's delete appends tombstones (the history stays, a rollback brings it back); with
``erase=True`` it erases instead, for a right-to-erasure request or a secret stored by mistake.
Erasing one record means more than purging its path: the part records of every version it ever had
go too, those of versions overwritten or deleted long ago included (see :mod:`.parts`). And a
compaction rewrites the whole journal, so one call's purges share a single compaction at the end.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sovseal.sdk.client import Sovseal

from ..errors import InvalidArgumentTypeError, UnknownPathError
from ..models import Memory
from .parts import Parts


def erase_flag(value: object, default: bool) -> bool:
    """The ``erase`` of one call: ``None`` takes the component's ``erase_on_delete``."""
    if value is None:
        return default
    if not isinstance(value, bool):
        raise InvalidArgumentTypeError(f"erase must be a bool, got {type(value).__name__}")
    return value


def deletion(options: Mapping[str, Any], default: bool) -> tuple[bool, str]:
    """(erase?, reason) from a framework delete's keyword arguments; any other keyword is refused.

    Frameworks pass a delete's ``**kwargs`` through to the store (``index.delete_ref_doc(id,
    erase=True)``), so a misspelt keyword must fail loudly rather than delete without erasing.
    ``reason`` goes with an erasure only: a plain delete records none.
    """
    rest = dict(options)
    erase = erase_flag(rest.pop("erase", None), default)
    reason = rest.pop("reason", None)
    if rest:
        raise InvalidArgumentTypeError(f"unexpected arguments: {', '.join(sorted(rest))}; deleting takes erase= and reason= only")
    if reason is not None and not erase:
        raise InvalidArgumentTypeError("reason= goes with erase=True: a plain delete keeps the history and records no reason")
    if reason is not None and not isinstance(reason, str):
        raise InvalidArgumentTypeError(f"reason must be a str, got {type(reason).__name__}")
    return erase, reason or ""


class Erasure:
    """The purges of one erasing call: one ``Sovseal.purge(..., compact=False)`` per record (its path,
    the prefix of its part records and any part named outside it: one redaction), then one
    ``Sovseal.compact()`` at the end, because a compaction rewrites the whole journal. Use as a
    context manager: the compaction runs on the way out, after an error too (what was purged before
    it is compacted away).

    ``record(path, group, payload)`` erases every version of ``path`` on every branch, whether it is
    visible now or was deleted earlier, and every part record any version of it had (``payload``,
    the visible version's, names the parts of a value stored before parts were grouped by record).
    Nothing to erase at a path is not an error (as a delete of a missing id is not).
    """

    def __init__(self, client: Sovseal, parts: Parts, reason: str = "") -> None:
        if not isinstance(reason, str):
            raise InvalidArgumentTypeError(f"reason must be a str, got {type(reason).__name__}")
        self._client = client
        self._parts = parts
        self._reason = reason
        self._pending = False  # erased records whose sealed bytes the journal still holds
        self.erased = 0  # snapshots erased (every version of every record)

    def purge(self, path: str | Sequence[str] | None = None, *, prefix: str | Sequence[str] | None = None) -> None:
        """Erase every version of ``path`` and of every path under ``prefix`` (a path or prefix, or a
        list of them) in one redaction. Nothing there, or nothing named (empty lists), is no error."""
        paths = [path] if isinstance(path, str) else list(dict.fromkeys(path or ()))
        prefixes = [prefix] if isinstance(prefix, str) else list(dict.fromkeys(prefix or ()))
        if not paths and not prefixes:
            return
        try:
            result = self._client.purge(paths or None, prefix=prefixes or None, reason=self._reason, compact=False)
        except UnknownPathError:  # no version of any of them anywhere
            return
        self.erased += len(result.erased)
        self._pending = self._pending or bool(result.erased)

    def record(self, path: str, group: str, payload: Any = None) -> None:
        """Erase the record at ``path`` of ``group``, every version, and every part it ever had."""
        prefix = self._parts.record_prefix(group, path)
        self.purge([path, *self._parts.outside(payload, prefix)], prefix=prefix)

    def group(self, prefix: str, payloads: Iterable[Any] = ()) -> None:
        """Erase everything a group (a collection: its records are ``prefix``...) ever held, with
        every part of it; ``payloads``, the visible ones, name parts stored before the grouping."""
        parts = self._parts.group_prefix(prefix)
        self.purge([part for payload in payloads for part in self._parts.outside(payload, parts)], prefix=[prefix, parts])

    def finish(self) -> None:
        """Compact once if anything purged is still in the journal."""
        if self._pending:
            self._client.compact()
            self._pending = False

    def __enter__(self) -> Erasure:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()


def erase_records(
    client: Sovseal, parts: Parts, memories: Iterable[Memory], group: str, *, paths: Iterable[str] = (), reason: str = ""
) -> int:
    """Erase these records (every version, every branch, their parts) and ``paths`` (visible or not:
    an id deleted earlier with a tombstone is erased too), then compact once. Returns the snapshots erased."""
    with Erasure(client, parts, reason) as erasure:
        done: set[str] = set()
        for m in memories:
            if m.path not in done:
                done.add(m.path)
                erasure.record(m.path, group, m.payload)
        for path in paths:
            if path not in done:
                done.add(path)
                erasure.record(path, group)
    return erasure.erased
