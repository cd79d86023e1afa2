"""The in-memory catalog: per lineage node, what recall filters and ranks on.

Built on open by decrypting every record once (in a background thread), or restored from the
store's sealed checkpoint (docs/design.md, "Checkpoints"), and kept current by the store hook;
nothing of it is written to disk in the clear. Nodes are the lineage's node numbers; tombstones
and records that failed to open have no fields.

Restored from a checkpoint, paths and metadata stay packed until a filter reads them, and the
indexes over them (by path, by metadata field and value) are built on the first filter that
needs them: a cold open then costs what recall without a filter needs, the flat arrays.

Per node it keeps the path, type, provenance and metadata (for filters), the parent in the
lineage and one child (the neighbours used for context), and its keyword terms (see
:mod:`sovseal.recall.keyword`).
"""

from __future__ import annotations

import bisect
import json
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import numpy as np

from sovseal.storage import checkpoint as cp
from sovseal.storage.entries import MEMORY_TYPES, PROVENANCES

from . import filters as flt

_V = TypeVar("_V")

TYPE_CODES = {name: code for code, name in enumerate(MEMORY_TYPES)}
PROVENANCE_CODES = {name: code for code, name in enumerate(PROVENANCES)}

#: Node states.
ABSENT, RECORD, TOMBSTONE, DAMAGED = 0, 1, 2, 3


def _grow(array: np.ndarray, size: int, fill: Any) -> np.ndarray:
    if size <= len(array):
        return array
    bigger = np.full(max(size, 2 * len(array), 1024), fill, dtype=array.dtype)
    bigger[: len(array)] = array
    return bigger


class _Packed(Generic[_V]):
    """A list whose first items are packed bytes (a checkpoint's), each decoded when first read."""

    def __init__(self, blob: np.ndarray, ends: np.ndarray, decode: Callable[[bytes], _V]) -> None:
        self._raw = blob.tobytes()
        self._ends = ends
        self._decode = decode
        self._base = len(ends)
        self._made: dict[int, _V | None] = {}
        self._tail: list[_V | None] = []

    def __len__(self) -> int:
        return self._base + len(self._tail)

    def _span(self, idx: int) -> tuple[int, int] | None:
        end = int(self._ends[idx])
        if end < 0:
            return None
        previous = int(self._ends[idx - 1]) if idx else 0
        return (-previous - 1 if previous < 0 else previous), end

    def __getitem__(self, idx: int) -> _V | None:
        if idx >= self._base:
            return self._tail[idx - self._base]
        if idx in self._made:
            return self._made[idx]
        span = self._span(idx)
        value = None if span is None else self._decode(self._raw[span[0] : span[1]])
        self._made[idx] = value
        return value

    def __setitem__(self, idx: int, value: _V | None) -> None:
        if idx >= self._base:
            self._tail[idx - self._base] = value
        else:
            self._made[idx] = value

    def extend(self, values: list[_V | None]) -> None:
        self._tail.extend(values)

    def raw(self, idx: int) -> bytes | None:
        """The packed bytes of an item not changed since the checkpoint (else None)."""
        if idx >= self._base or idx in self._made:
            return None
        span = self._span(idx)
        return None if span is None else self._raw[span[0] : span[1]]


def _encode_metadata(value: dict[str, Any]) -> bytes:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()


def _decode_path(raw: bytes) -> str:
    return raw.decode()


class Catalog:
    def __init__(self) -> None:
        self.size = 0  # one past the highest node number seen
        self.state = np.zeros(0, dtype=np.int8)
        self.indexed = np.zeros(0, dtype=bool)  # records stored with index=True (recall can find them)
        self.type_code = np.zeros(0, dtype=np.int8)
        self.prov_code = np.zeros(0, dtype=np.int8)
        self.parent = np.zeros(0, dtype=np.int64)
        self.child = np.zeros(0, dtype=np.int64)
        self.paths: list[str | None] | _Packed[str] = []
        self.metadata: list[dict[str, Any] | None] | _Packed[dict[str, Any]] = []
        self.damage: dict[int, str] = {}
        self._indexes_ready = True  # False after a restore: built by the first filter (_ensure_indexes)
        # path -> nodes that hold it (every version), and the sorted distinct paths for prefixes
        self._by_path: dict[str, list[int]] = {}
        self._sorted_paths: list[str] = []
        # metadata field -> nodes that have it; (field, value key) -> nodes with that value
        self._field_nodes: dict[str, list[int]] = {}
        self._field_values: dict[tuple[str, Any], list[int]] = {}

    def _reserve(self, idx: int) -> None:
        if idx < self.size:
            return
        need = idx + 1
        self.state = _grow(self.state, need, ABSENT)
        self.indexed = _grow(self.indexed, need, False)
        self.type_code = _grow(self.type_code, need, -1)
        self.prov_code = _grow(self.prov_code, need, -1)
        # One spare slot past the last node, always -1: ``links[-1]`` is -1, so a step along the
        # links from "no node" (-1) is a plain gather (see recall.engine._step).
        self.parent = _grow(self.parent, need + 1, -1)
        self.child = _grow(self.child, need + 1, -1)
        self.paths.extend([None] * (need - len(self.paths)))
        self.metadata.extend([None] * (need - len(self.metadata)))
        self.size = need

    def known(self, idx: int) -> bool:
        return idx < self.size and self.state[idx] != ABSENT

    def _link(self, idx: int, parent: int) -> None:
        self.parent[idx] = parent
        if parent >= 0 and self.child[parent] < 0:
            self.child[parent] = idx

    def add_record(
        self, idx: int, parent: int, path: str, type_: str, provenance: str, metadata: dict[str, Any], *, indexed: bool = True
    ) -> None:
        self._reserve(idx)
        self._link(idx, parent)
        self.state[idx] = RECORD
        self.indexed[idx] = indexed
        self.type_code[idx] = TYPE_CODES.get(type_, -1)
        self.prov_code[idx] = PROVENANCE_CODES.get(provenance, -1)
        self.paths[idx] = path
        self.metadata[idx] = metadata
        if self._indexes_ready:
            self._index(idx, path, metadata)

    def _index(self, idx: int, path: str, metadata: dict[str, Any]) -> None:
        nodes = self._by_path.get(path)
        if nodes is None:
            self._by_path[path] = [idx]
            bisect.insort(self._sorted_paths, path)
        else:
            nodes.append(idx)
        self._index_fields(idx, metadata)

    def _index_fields(self, idx: int, metadata: dict[str, Any]) -> None:
        for name, value in metadata.items():
            self._field_nodes.setdefault(name, []).append(idx)
            try:
                self._field_values.setdefault((name, flt.value_key(value)), []).append(idx)
            except TypeError:  # an unhashable oddity: equality falls back to scanning
                pass

    def add_tombstone(self, idx: int, parent: int) -> None:
        self._reserve(idx)
        self._link(idx, parent)
        self.state[idx] = TOMBSTONE

    def add_damaged(self, idx: int, parent: int, reason: str) -> None:
        self._reserve(idx)
        self._link(idx, parent)
        self.state[idx] = DAMAGED
        self.damage[idx] = reason

    def paths_under(self, prefix: str) -> list[str]:
        """Every distinct path that starts with ``prefix``, of the records catalogued (any branch, any version)."""
        self._ensure_indexes()
        at = bisect.bisect_left(self._sorted_paths, prefix)
        out: list[str] = []
        while at < len(self._sorted_paths) and self._sorted_paths[at].startswith(prefix):
            out.append(self._sorted_paths[at])
            at += 1
        return out

    def erase(self, nodes: list[int]) -> None:
        """Forget erased records: no path, no metadata, no state a filter or recall could find.

        The path and field indexes are dropped and rebuilt by the next filter that needs them
        (from the records left), so no list anywhere still names an erased record.
        """
        for idx in nodes:
            if idx < self.size:
                self.state[idx] = TOMBSTONE
                self.indexed[idx] = False
                self.paths[idx] = None
                self.metadata[idx] = None
        self._by_path, self._sorted_paths, self._field_nodes, self._field_values = {}, [], {}, {}
        self._indexes_ready = False

    # -- filters -------------------------------------------------------------------------------

    def _ensure_indexes(self) -> None:
        """Build the path and metadata indexes a restore left out (every record, in node order)."""
        if self._indexes_ready:
            return
        paths, metadata = self.paths, self.metadata
        by_path: dict[str, list[int]] = {}
        for idx in np.flatnonzero(self.state[: self.size] == RECORD).tolist():
            path = paths[idx]
            by_path.setdefault(path, []).append(idx)  # type: ignore[arg-type]
            self._index_fields(idx, metadata[idx])  # type: ignore[arg-type]
        self._by_path = by_path
        self._sorted_paths = sorted(by_path)
        self._indexes_ready = True

    def mask(self, tree: flt.Filter, size: int) -> np.ndarray:
        """The nodes (of the first ``size``) whose record satisfies ``tree``."""
        self._ensure_indexes()
        if isinstance(tree, flt.All):
            out = np.ones(size, dtype=bool)
            for part in tree.parts:
                out &= self.mask(part, size)
            return out
        if isinstance(tree, flt.AnyOf):
            out = np.zeros(size, dtype=bool)
            for part in tree.parts:
                out |= self.mask(part, size)
            return out
        if isinstance(tree, flt.Not):
            kept: np.ndarray = self._records(size) & ~self.mask(tree.part, size)
            return kept
        return self._cond(tree, size)

    def searchable(self, visible: np.ndarray) -> np.ndarray:
        """``visible`` without the records stored with ``index=False``: recall never ranks those."""
        n = min(len(visible), self.size)
        out = np.zeros(len(visible), dtype=bool)
        np.logical_and(visible[:n], self.indexed[:n], out=out[:n])  # no temporary of the mask's size
        return out

    def _records(self, size: int) -> np.ndarray:
        out = np.zeros(size, dtype=bool)
        n = min(size, self.size)
        out[:n] = self.state[:n] == RECORD
        return out

    def _nodes_mask(self, nodes: list[int] | Any, size: int) -> np.ndarray:
        out = np.zeros(size, dtype=bool)
        if len(nodes):
            arr = np.asarray(nodes, dtype=np.int64)
            out[arr[arr < size]] = True
        return out

    def _cond(self, cond: flt.Cond, size: int) -> np.ndarray:
        field, op, operand = cond.field, cond.op, cond.operand
        if field in ("type", "provenance"):
            codes = TYPE_CODES if field == "type" else PROVENANCE_CODES
            column = self.type_code if field == "type" else self.prov_code
            wanted = [operand] if op in ("$eq", "$ne") else list(operand)
            hit = np.zeros(size, dtype=bool)
            n = min(size, self.size)
            hit[:n] = np.isin(column[:n], [codes[w] for w in wanted])
            if op in ("$ne", "$nin"):
                hit = self._records(size) & ~hit
            return hit
        if field == "path":
            if op == "$prefix":
                lo = bisect.bisect_left(self._sorted_paths, operand)
                nodes: list[int] = []
                for path in self._sorted_paths[lo:]:
                    if not path.startswith(operand):
                        break
                    nodes.extend(self._by_path[path])
                return self._nodes_mask(nodes, size)
            wanted_paths = [operand] if op in ("$eq", "$ne") else list(operand)
            nodes = [n for p in wanted_paths for n in self._by_path.get(p, ())]
            hit = self._nodes_mask(nodes, size)
            if op in ("$ne", "$nin"):
                hit = self._records(size) & ~hit
            return hit
        assert isinstance(field, tuple)  # nosec B101 -- type narrowing: the str cases returned above
        name = field[1]
        if op in ("$eq", "$in") or (op == "$exists" and operand):
            if op == "$exists":
                return self._nodes_mask(self._field_nodes.get(name, []), size)
            values = [operand] if op == "$eq" else list(operand)
            nodes = []
            for value in values:
                nodes.extend(self._field_values.get((name, flt.value_key(value)), ()))
            return self._nodes_mask(nodes, size)
        # $ne, $nin, $exists false, ordered comparisons and $prefix: records without the field
        # match $ne/$nin/$exists false; the others are checked value by value.
        having = self._field_nodes.get(name, [])
        if op in ("$ne", "$nin", "$exists"):
            positive = {"$ne": "$eq", "$nin": "$in", "$exists": "$exists"}[op]
            negated: np.ndarray = self._records(size) & ~self._cond(flt.Cond(field, positive, True if op == "$exists" else operand), size)
            return negated
        hits = [n for n in having if flt.matches(op, operand, True, self.metadata[n][name])]  # type: ignore[index]
        return self._nodes_mask(hits, size)

    # -- checkpoints -------------------------------------------------------------------------------

    def to_arrays(self, arrays: dict[str, np.ndarray]) -> None:
        """Add the catalog to a checkpoint's arrays (the caller holds the engine's lock)."""
        size = self.size
        arrays["c.state"] = self.state[:size].copy()
        arrays["c.indexed"] = self.indexed[:size].copy()
        arrays["c.type"] = self.type_code[:size].copy()
        arrays["c.prov"] = self.prov_code[:size].copy()
        arrays["c.parent"] = self.parent[:size].copy()
        arrays["c.child"] = self.child[:size].copy()
        paths, metadata = self.paths, self.metadata
        packed_paths: list[bytes | None] = []
        packed_meta: list[bytes | None] = []
        for idx in range(size):
            raw_path = paths.raw(idx) if isinstance(paths, _Packed) else None
            raw_meta = metadata.raw(idx) if isinstance(metadata, _Packed) else None
            path, meta = (None, None) if raw_path is not None and raw_meta is not None else (paths[idx], metadata[idx])
            packed_paths.append(raw_path if raw_path is not None else (None if path is None else path.encode()))
            packed_meta.append(raw_meta if raw_meta is not None else (None if meta is None else _encode_metadata(meta)))
        arrays["c.paths_blob"], arrays["c.paths_ends"] = cp.pack(packed_paths)
        arrays["c.meta_blob"], arrays["c.meta_ends"] = cp.pack(packed_meta)
        arrays["c.damage"] = np.frombuffer(json.dumps(sorted(self.damage.items())).encode(), dtype=np.uint8)

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> Catalog:
        catalog = cls()
        size = catalog.size = len(arrays["c.state"])
        catalog.state = arrays["c.state"].copy()
        catalog.indexed = arrays["c.indexed"].copy()
        catalog.type_code = arrays["c.type"].copy()
        catalog.prov_code = arrays["c.prov"].copy()
        for name in ("parent", "child"):  # with the spare -1 slot past the last node (see _reserve)
            links = np.full(size + 1, -1, dtype=np.int64)
            links[:size] = arrays[f"c.{name}"]
            setattr(catalog, name, links)
        catalog.paths = _Packed(arrays["c.paths_blob"], arrays["c.paths_ends"], _decode_path)
        catalog.metadata = _Packed(arrays["c.meta_blob"], arrays["c.meta_ends"], json.loads)
        catalog.damage = {int(k): str(v) for k, v in json.loads(arrays["c.damage"].tobytes())}
        catalog._indexes_ready = False
        return catalog
