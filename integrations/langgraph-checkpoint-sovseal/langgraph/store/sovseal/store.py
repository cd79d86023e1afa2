"""``SovsealStore``: LangGraph's long-term memory store, every item a sealed sovseal memory.

An item ``(namespace, key) -> value`` is the sovseal record at ``langgraph/store/<label>/.../=<key>``
(each component percent-encoded) on one branch (the handle's current branch by default), with the
value as its JSON payload. So the agent's long-term memories are ordinary sovseal memories: they
live in the lineage, `sovseal recall` finds them, and deleting one appends a tombstone.

Search by meaning has two modes:

- **sovseal recall** (default, no ``index=`` config): ``search(prefix, query=...)`` runs
  ``Sovseal.recall`` restricted to the prefix (a ``path_prefix`` filter) and to indexed items,
  with sovseal's own embedder, keyword index, decay and reinforcement. The record's whole value is
  what recall indexes (per-item ``index=[fields]`` cannot narrow it; ``index=False`` excludes the
  item from ranking). Scores are sovseal's fused scores.
- **an ``IndexConfig``** (``index={"dims": ..., "embed": ..., "fields": [...]}``): the store embeds
  the configured fields itself, as ``InMemoryStore`` does, keeps the vectors sealed inside the
  record (its metadata) and ranks by cosine similarity; ``index=`` per item works field by field.

Filters (``$eq $ne $gt $gte $lt $lte``, nested dicts, exact lists) are evaluated on decrypted
values in this process. ``supports_ttl`` is False.

A value whose canonical JSON does not fit in one record (a sovseal entry is at most 256 KiB) is
split as the checkpoint saver splits blobs: part records at ``<item path>/part/value/<i>``, stored
in the same ``store_many`` batch before the item's record, which names their count, size and
SHA-256 in its metadata (``value_parts``). Recall then indexes the first ``INDEX_CHARS``
characters of the value's text (the item's record carries them as ``text=``), as the LangChain and
LlamaIndex adapters do. A value over 64 MiB (``MAX_VALUE_BYTES``, the same in every adapter) raises
``PayloadTooLargeError``.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import os
import threading
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any, cast

import numpy as np
from langgraph.checkpoint.sovseal._common import RECORD_BLOB_CHARS, decode_bytes, encode_bytes, no_embedding, q, uq
from langgraph.checkpoint.sovseal._layout import (
    check_part,
    join_parts,
    pack_blobs,
    part_path,
)
from langgraph.store.base import (
    BaseStore,
    GetOp,
    IndexConfig,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    validate_op_namespace,
)
from langgraph.store.base.embed import (
    ensure_embeddings,
    get_text_at_path,
    tokenize_path,
)

from sovseal import Memory, Sovseal, StoreResult
from sovseal.errors import IntegrityError, InvalidArgumentTypeError, InvalidInputError, UnknownPathError
from sovseal.integration import INDEX_CHARS, canonicalize, check_size, loads, matches

__all__ = ["SovsealStore"]

ROOT = "langgraph/store/"
#: The most results one recall may return (the SDK's limit); deeper pages of a search by meaning end there.
MAX_RECALL_K = 1000
#: The blob name of a value stored in parts (``<item path>/part/value/<i>``).
VALUE_BLOB = "value"


def _recall_text(path: str, value: Any) -> str:
    """What recall indexes for a value stored in parts: as sovseal derives it from a payload (the path,
    then the leaves), cut at ``INDEX_CHARS`` as every adapter cuts it (walking no further than that)."""
    leaves: list[str] = []
    size = 0

    def walk(node: Any) -> None:
        nonlocal size
        if size > INDEX_CHARS:
            return
        if isinstance(node, dict):
            for key, item in node.items():
                leaves.append(f"{key}:")
                walk(item)
        elif isinstance(node, list):
            for item in node:
                walk(item)
        elif node is not None:
            leaves.append(str(node))
            size += len(leaves[-1])

    walk(value)
    text = f"{path.replace('.', ' ').replace('_', ' ')}: {' '.join(leaves)}"
    return text[:INDEX_CHARS]


def item_path(namespace: tuple[str, ...], key: str) -> str:
    return ROOT + "".join(q(label) + "/" for label in namespace) + "=" + q(key)


def prefix_path(namespace_prefix: tuple[str, ...]) -> str:
    return ROOT + "".join(q(label) + "/" for label in namespace_prefix)


def parse_item_path(path: str) -> tuple[tuple[str, ...], str] | None:
    if not path.startswith(ROOT):
        return None
    *labels, last = path[len(ROOT) :].split("/")
    if not last.startswith("=") or not labels:
        return None
    return tuple(uq(label) for label in labels), uq(last[1:])


@dataclass(slots=True)
class _Entry:
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    indexed: bool
    vectors: dict[str, np.ndarray]  # field path -> unit vector (IndexConfig mode)
    metadata: dict[str, Any]  # what was sealed with the value (to tell an unchanged put)


def _times(metadata: dict[str, Any], memory: Memory) -> tuple[datetime, datetime]:
    """An item's (created_at, updated_at) from its record: created when its first record was
    written (carried in the metadata of later ones), updated when this one was written or last
    reinforced (put again unchanged)."""
    carried = metadata.get("created_at")
    created = datetime.fromisoformat(carried) if carried is not None else memory.created_at
    updated = memory.created_at
    if memory.last_reinforced is not None and memory.last_reinforced > updated:
        updated = memory.last_reinforced
    return created, updated


def _encode_vector(vector: Sequence[float]) -> str:
    return encode_bytes(np.asarray(vector, dtype="<f4").tobytes())


def _decode_vector(text: Any, where: str) -> np.ndarray:
    return np.frombuffer(decode_bytes(text, where), dtype="<f4").astype(np.float32)


def _unit(vector: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(vector))
    return vector / norm if norm else vector


# -- filters: LangGraph's value filters, evaluated on decrypted values ---------------------------


def _compare(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(k.startswith("$") for k in wanted):
            return all(_operator(value, op, operand) for op, operand in wanted.items())
        return isinstance(value, dict) and all(_compare(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, (list, tuple)):
        return (
            isinstance(value, (list, tuple))
            and len(value) == len(wanted)
            and all(_compare(v, w) for v, w in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def _operator(value: Any, op: str, operand: Any) -> bool:
    """Equality as Python's (``InMemoryStore``'s); order as the core's filters: numbers with numbers,
    strings with strings, anything else no match (where ``InMemoryStore`` would raise)."""
    if op == "$eq":
        return bool(value == operand)
    if op == "$ne":
        return bool(value != operand)
    if op not in ("$gt", "$gte", "$lt", "$lte"):
        raise InvalidInputError(f"Unsupported operator: {op}; use $eq $ne $gt $gte $lt $lte")
    return matches(op, operand, True, value)


def _matches(value: dict[str, Any], filter: dict[str, Any] | None) -> bool:
    return not filter or all(_compare(value.get(k), v) for k, v in filter.items())


def _namespace_matches(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    if condition.match_type not in ("prefix", "suffix"):
        raise InvalidInputError(f"Unsupported match type: {condition.match_type}; use 'prefix' or 'suffix'")
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    found = namespace[: len(path)] if condition.match_type == "prefix" else namespace[len(namespace) - len(path) :]
    return all(p == "*" or n == p for n, p in zip(found, path, strict=True))


class SovsealStore(BaseStore):
    """LangGraph ``BaseStore`` whose items are sealed sovseal memories in a lineage.

    ``SovsealStore(sovseal)`` writes through a ``Sovseal`` handle you own (on its current branch,
    or ``branch=``); ``SovsealStore.open(path, key=...)`` opens (and closes) one. ``batch`` runs in
    the caller's thread, ``abatch`` in one worker thread (embedding with the ``IndexConfig``'s
    async methods first).
    """

    supports_ttl = False

    def __init__(
        self, sovseal: Sovseal, *, branch: str | None = None, index: IndexConfig | None = None, erase_on_delete: bool = False
    ) -> None:
        """``erase_on_delete``: a delete (``PutOp`` with ``value=None``) erases the item for good (every
        version, on every branch; the journal is compacted once per batch) instead of appending a
        tombstone that keeps its history (docs/integrations/langgraph.md, "Deleting and erasing")."""
        if not isinstance(erase_on_delete, bool):
            raise InvalidArgumentTypeError(f"erase_on_delete must be a bool (True or False), got {type(erase_on_delete).__name__}")
        self.erase_on_delete = erase_on_delete
        if not isinstance(sovseal, Sovseal):
            raise InvalidArgumentTypeError(
                f"SovsealStore needs a sovseal.Sovseal handle, got {type(sovseal).__name__}; "
                "or let SovsealStore.open(path, key=...) open one"
            )
        self._h = handle = sovseal
        self._lock = threading.RLock()
        self._owned = False
        self.index_config: IndexConfig | None = None
        self.embeddings = None
        self._fields: list[tuple[str, str | list[str]]] = []
        if index:
            self.index_config = dict(index)  # type: ignore[assignment]
            self.embeddings = ensure_embeddings(index.get("embed"))
            self._fields = [(p, p if p == "$" else tokenize_path(p)) for p in (index.get("fields") or ["$"])]
        self.branch = branch or handle.branch
        if self.branch not in handle.branches():
            with contextlib.suppress(InvalidInputError):  # another process created it just now
                handle.create_branch(self.branch)
        self._view = handle.view(self.branch)  # writes go to the store's branch, whatever the handle's is
        self._items: dict[str, _Entry] = {}
        # The branch's heads and the store's erasure count the items were read at (a purge changes
        # reads without moving a head); None: not read yet, or changed by this store's own write.
        self._seen: tuple[tuple[str | None, ...], int] | None = None

    @classmethod
    @contextmanager
    def open(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        key: bytes | str | None = None,
        embedder: Callable[[Sequence[str]], Any] | None = None,
        branch: str | None = None,
        index: IndexConfig | None = None,
        erase_on_delete: bool = False,
        **sovseal_kwargs: Any,
    ) -> Iterator[SovsealStore]:
        """Open the store at ``path`` (its own handle, closed on exit). Without ``embedder`` the
        on-device model embeds for recall; with an ``IndexConfig`` nothing else is embedded."""
        if embedder is None and index:
            embedder = no_embedding
        handle = Sovseal(path, key=key, embedder=embedder, **sovseal_kwargs)
        try:
            store = cls(handle, branch=branch, index=index, erase_on_delete=erase_on_delete)
            store._owned = True
        except BaseException:
            handle.close()
            raise
        try:
            yield store
        finally:
            store.close()

    @classmethod
    @asynccontextmanager
    async def aopen(cls, path: str | os.PathLike[str] | None = None, **kwargs: Any) -> AsyncIterator[SovsealStore]:
        """``open`` for async code: opening and closing run in a worker thread."""
        manager = cls.open(path, **kwargs)
        store = await asyncio.to_thread(manager.__enter__)
        try:
            yield store
        finally:
            await asyncio.to_thread(manager.__exit__, None, None, None)

    @property
    def sovseal(self) -> Sovseal:
        return self._h

    def close(self) -> None:
        if self._owned:
            self._h.close()

    # -- the item cache (decrypted values, in memory only), rebuilt when the branch moves ---------

    def _fresh(self) -> None:
        """Reload the items if the branch's heads are not the ones they were read at.

        All heads, not only HEAD: a pull can add one older than HEAD (the namespace was written on
        two devices), and the branch's state is then the merge of both (per item, the write with the
        newest clock wins, on every device alike).
        """
        seen = (tuple(self._h.heads_of(self.branch)), self._h.erasures())
        if seen == self._seen:
            return
        found = {m.path: m for m in self._h.find({"path_prefix": ROOT}, branch=self.branch)}  # items and their parts
        self._items = {
            path: self._entry(path, memory, self._parted_value(path, memory, found))
            for path, memory in found.items()
            if parse_item_path(path) is not None
        }
        self._seen = seen

    @staticmethod
    def _parted_value(path: str, memory: Memory, found: dict[str, Memory]) -> Any:
        """The value of an item stored in parts (read from them, checked against the record), else its payload."""
        meta = memory.metadata
        descriptor = meta.get("value_parts") if isinstance(meta, dict) else None
        if descriptor is None:
            return memory.payload
        where = f"the value of {path}"
        if not isinstance(descriptor, dict) or not isinstance(n := descriptor.get("n"), int) or n < 1:
            raise IntegrityError(f"{where}: malformed part descriptor; run verify()")
        chunks = []
        for i in range(n):
            part = found.get(part_path(path, VALUE_BLOB, i))
            if part is None:
                raise IntegrityError(f"{where}: part {i} of {n} is missing; run verify()")
            chunks.append(check_part(part.payload, path, VALUE_BLOB, i, n))
        value = loads(join_parts(descriptor, chunks, where))
        if not isinstance(value, dict):
            raise IntegrityError(f"{where} is not a mapping; run verify()")
        return value

    @staticmethod
    def _entry(path: str, memory: Memory, value: Any) -> _Entry:
        parsed = parse_item_path(path)
        meta = memory.metadata
        assert parsed is not None  # nosec B101 -- type narrowing: the path was written by this store
        if (
            not isinstance(meta, dict)
            or meta.get("langgraph") != "store"
            or tuple(meta.get("namespace") or ()) != parsed[0]
            or meta.get("key") != parsed[1]
            or not isinstance(value, dict)
        ):
            raise IntegrityError(f"the store record {path} does not match its path; run verify()")
        created, updated = _times(meta, memory)
        vectors = {field: _unit(_decode_vector(text, f"vector {field!r} of {path}")) for field, text in (meta.get("vectors") or {}).items()}
        return _Entry(
            namespace=parsed[0],
            key=parsed[1],
            value=value,
            created_at=created,
            updated_at=updated,
            indexed=bool(meta.get("indexed")),
            vectors=vectors,
            metadata=meta,
        )

    # -- batch -----------------------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        texts, queries = self._to_embed(ops)
        documents = self.embeddings.embed_documents(texts) if texts and self.embeddings else []
        query_vectors = {text: self.embeddings.embed_query(text) for text in queries} if self.embeddings else {}
        return self._execute(ops, texts, documents, query_vectors)

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        ops = list(ops)
        for op in ops:
            validate_op_namespace(op)
        texts, queries = self._to_embed(ops)
        documents: list[list[float]] = []
        query_vectors: dict[str, list[float]] = {}
        if self.embeddings is not None:
            if texts:
                documents = await self.embeddings.aembed_documents(texts)
            if queries:
                found = await asyncio.gather(*(self.embeddings.aembed_query(text) for text in queries))
                query_vectors = dict(zip(queries, found, strict=True))
        return await asyncio.to_thread(self._execute, ops, texts, documents, query_vectors)

    def _field_texts(self, op: PutOp) -> list[tuple[str, str]]:
        """(field path, text) pairs an item is embedded from in IndexConfig mode."""
        if self.embeddings is None or op.value is None or op.index is False:
            return []
        fields = self._fields if op.index is None else [(p, p if p == "$" else tokenize_path(p)) for p in op.index]
        out: list[tuple[str, str]] = []
        for name, tokens in fields:
            texts = get_text_at_path(op.value, tokens)
            if len(texts) > 1:
                out.extend((f"{name}.{i}", text) for i, text in enumerate(texts))
            elif texts:
                out.append((name, texts[0]))
        return out

    def _to_embed(self, ops: list[Op]) -> tuple[list[str], list[str]]:
        if self.embeddings is None:
            return [], []
        puts = self._dedupe(ops)
        texts = [text for op in puts.values() for _, text in self._field_texts(op)]
        queries = sorted({op.query for op in ops if isinstance(op, SearchOp) and op.query})
        return texts, queries

    @staticmethod
    def _dedupe(ops: list[Op]) -> dict[tuple[tuple[str, ...], str], PutOp]:
        puts: dict[tuple[tuple[str, ...], str], PutOp] = {}
        for op in ops:
            if isinstance(op, PutOp):
                puts[(tuple(op.namespace), op.key)] = op
        return puts

    def _execute(
        self, ops: list[Op], texts: list[str], documents: Sequence[Sequence[float]], query_vectors: Mapping[str, Sequence[float]]
    ) -> list[Result]:
        """Reads see the state before the batch's writes; writes apply last, the last put per item winning
        (``InMemoryStore``'s order)."""
        if len(documents) != len(texts):
            raise InvalidInputError(
                f"the embedder returned {len(documents)} vectors for {len(texts)} texts; "
                "the IndexConfig's embed must return one vector per text, in order"
            )
        with self._lock:
            self._fresh()
            results: list[Result] = []
            for op in ops:
                if isinstance(op, GetOp):
                    entry = self._items.get(item_path(tuple(op.namespace), op.key))
                    results.append(self._item(entry) if entry else None)
                elif isinstance(op, SearchOp):
                    results.append(self._search(op, query_vectors))
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._list_namespaces(op))
                elif isinstance(op, PutOp):
                    results.append(None)
                else:
                    raise InvalidArgumentTypeError(
                        f"Unknown operation type: {type(op)}; batch() takes GetOp, SearchOp, ListNamespacesOp and PutOp"
                    )
            vectors = iter(documents)
            erased = False
            for (namespace, key), op in self._dedupe(ops).items():
                embedded = {name: next(vectors) for name, _ in self._field_texts(op)}
                erased |= self._apply(namespace, key, op, embedded)
            if erased:  # one rewrite of the journal for the whole batch
                self._h.compact()
                self._seen = None
            return results

    def _apply(self, namespace: tuple[str, ...], key: str, op: PutOp, embedded: dict[str, Sequence[float]]) -> bool:
        """Write one item; True when it erased something (the caller compacts once for the batch)."""
        path = item_path(namespace, key)
        existing = self._items.get(path)
        old_parts = int((existing.metadata.get("value_parts") or {}).get("n", 0)) if existing else 0
        if op.value is None:
            self._wrote(self._view.delete_many([path, *(part_path(path, VALUE_BLOB, i) for i in range(old_parts))]))
            self._items.pop(path, None)
            return self.erase_on_delete and self._erase(path)
        value = dict(op.value)
        data = canonicalize(value)
        indexed = op.index is not False and (self.embeddings is None or bool(embedded))
        metadata: dict[str, Any] = {"langgraph": "store", "namespace": list(namespace), "key": key}
        # An item's first record is its creation (its own time); a later record that changes the
        # value carries that time. Unchanged, the metadata is too, and the put reinforces.
        created = existing.metadata.get("created_at") if existing else None
        if created is None and existing is not None and canonicalize(existing.value) != data:
            created = existing.created_at.isoformat()
        if created is not None:
            metadata["created_at"] = created
        metadata["indexed"] = indexed
        if op.index is not None and op.index is not False:
            metadata["index"] = list(op.index)
        if embedded:
            metadata["vectors"] = {name: _encode_vector(v) for name, v in embedded.items()}
        # With an IndexConfig the store ranks by its own vectors (in the metadata): sovseal's index
        # would hold vectors of no model for these records, so it is not given them.
        index = self.embeddings is None
        record: dict[str, Any] = {"path": path, "payload": value, "type": "semantic", "provenance": "explicit", "index": index}
        parts: list[tuple[str, dict[str, Any]]] = []
        check_size(len(data), f"the value of {path}")
        if len(data) + len(canonicalize(metadata)) > RECORD_BLOB_CHARS:  # a value too large for one record
            descriptors, parts = pack_blobs(path, {VALUE_BLOB: ("json", data)}, budget=0)
            metadata["value_parts"] = {k: v for k, v in descriptors[VALUE_BLOB].items() if k != "t"}
            record["payload"] = {"value_in_parts": len(parts)}
            if index:
                record["text"] = _recall_text(path, value)
        record["metadata"] = metadata
        part_meta = {"metadata": {"langgraph": "store-part"}, "type": "semantic", "provenance": "explicit", "index": False}
        # one durable batch, the parts before the record naming them
        self._wrote(self._view.store_many([*({"path": p, "payload": d, **part_meta} for p, d in parts), record]))
        if old_parts > len(parts):  # the former value's parts that the new one does not replace
            self._wrote(self._view.delete_many([part_path(path, VALUE_BLOB, i) for i in range(len(parts), old_parts)]))
        written = self._view.get(path)
        assert written is not None  # nosec B101 -- stored just above, under this store's lock
        created_at, updated_at = _times(metadata, written)  # the record's own times, as after a reopen
        self._items[path] = _Entry(
            namespace=namespace,
            key=key,
            value=cast(dict[str, Any], loads(data)),  # what was sealed, as a reader gets it back
            created_at=created_at,
            updated_at=updated_at,
            indexed=indexed,
            vectors={name: _unit(np.asarray(v, dtype=np.float32)) for name, v in embedded.items()},
            metadata=metadata,
        )
        return False

    def _wrote(self, results: Sequence[StoreResult | None]) -> None:
        """A write of this store went on every head of its branch: the items in memory are the state at it."""
        for result in results:
            if result is not None and not result.reinforced and self._seen is not None:
                self._seen = ((result.snapshot_id,), self._seen[1])

    def _erase(self, path: str) -> bool:
        """Purge every version of the item and of its value's parts, not compacting (the batch does)."""
        parts = part_path(path, VALUE_BLOB, 0).rsplit("/", 1)[0] + "/"
        try:
            return bool(self._h.purge(path, prefix=parts, reason="langgraph store delete", compact=False).erased)
        except UnknownPathError:  # never stored
            return False

    # -- reads -----------------------------------------------------------------------------------

    @staticmethod
    def _item(entry: _Entry) -> Item:
        return Item(
            value=copy.deepcopy(entry.value),
            key=entry.key,
            namespace=entry.namespace,
            created_at=entry.created_at,
            updated_at=entry.updated_at,
        )

    @staticmethod
    def _found(entry: _Entry, score: float | None = None) -> SearchItem:
        return SearchItem(entry.namespace, entry.key, copy.deepcopy(entry.value), entry.created_at, entry.updated_at, score)

    def _search(self, op: SearchOp, query_vectors: Mapping[str, Sequence[float]]) -> list[SearchItem]:
        prefix = tuple(op.namespace_prefix)
        candidates = {
            path: entry
            for path, entry in self._items.items()
            if entry.namespace[: len(prefix)] == prefix and _matches(entry.value, op.filter)
        }
        if not candidates:
            return []
        if not op.query:
            ordered = sorted(candidates.values(), key=lambda e: (e.updated_at, e.namespace, e.key), reverse=True)
            return [self._found(e) for e in ordered[op.offset : op.offset + op.limit]]
        if self.embeddings is not None:
            ranked = self._rank_by_vectors(candidates, query_vectors[op.query])
        else:
            ranked = self._rank_by_recall(op, prefix, candidates)
        page = [self._found(candidates[path], score) for path, score in ranked[op.offset : op.offset + op.limit]]
        if len(page) < op.limit:  # as InMemoryStore: fill with the items that are not indexed, unscored
            scored = {path for path, _ in ranked}
            rest = sorted(
                (e for p, e in candidates.items() if p not in scored and not (e.indexed if self.embeddings is None else e.vectors)),
                key=lambda e: (e.updated_at, e.namespace, e.key),
                reverse=True,
            )
            page.extend(self._found(e) for e in rest[: op.limit - len(page)])
        return page

    def _rank_by_vectors(self, candidates: dict[str, _Entry], query: Sequence[float]) -> list[tuple[str, float]]:
        q_vec = _unit(np.asarray(query, dtype=np.float32))
        scored = [
            (path, max(float(np.dot(v, q_vec)) for v in entry.vectors.values())) for path, entry in candidates.items() if entry.vectors
        ]
        scored.sort(key=lambda item: (-item[1], item[0]))
        return scored

    def _rank_by_recall(self, op: SearchOp, prefix: tuple[str, ...], candidates: dict[str, _Entry]) -> list[tuple[str, float]]:
        allowed = {path for path, entry in candidates.items() if entry.indexed}
        if not allowed:
            return []
        want = op.offset + op.limit
        k = min(MAX_RECALL_K, max(2 * want, 10))
        flt = {"path_prefix": prefix_path(prefix), "metadata": {"langgraph": "store", "indexed": True}}
        while True:
            memories = self._h.recall(op.query, k=k, filter=flt, branch=self.branch)  # type: ignore[arg-type]
            ranked = [(m.path, float(m.score or 0.0)) for m in memories if m.path in allowed]
            if len(ranked) >= want or len(memories) < k or k >= MAX_RECALL_K:
                return ranked
            k = min(MAX_RECALL_K, 4 * k)

    def _list_namespaces(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        namespaces = {entry.namespace for entry in self._items.values()}
        if op.match_conditions:
            namespaces = {ns for ns in namespaces if all(_namespace_matches(c, ns) for c in op.match_conditions)}
        if op.max_depth is not None:
            namespaces = {ns[: op.max_depth] for ns in namespaces}
        return sorted(namespaces)[op.offset : op.offset + op.limit]
