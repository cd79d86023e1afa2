"""The few things every sovseal LlamaIndex component does with the SDK, in one place.

Only public ``Sovseal`` methods are used. Where a capability is still missing from the SDK the
newer method is used when the installed sovseal has it and a slower path built on the existing
public methods is used otherwise (each is marked *SDK* below, with what it waits for):

- ``find``: every memory visible at HEAD matching a filter, without a query. Until the SDK has
  ``Sovseal.find``, ``state()`` lists the paths and ``get(path)`` opens the ones under the prefix.
- ``store_many`` / ``delete_many``: batched writes. Until then, one ``store`` / ``delete`` each.
- ``recall_by_vector``: dense search by a vector (``Memory.score`` = cosine). Until then, searches
  that have the query text use ``recall`` and the rest raise ``NotImplementedError``.
- ``purge`` / ``compact``: erasure (``erase=True``). Without them, erasing raises ``NotImplementedError``.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .filters import Plan

if TYPE_CHECKING:
    from sovseal import Sovseal
    from sovseal.models import Memory

#: The most memories one sovseal recall returns (``sovseal.client.MAX_RECALL_K``).
try:
    from sovseal.client import MAX_RECALL_K
except ImportError:  # pragma: no cover - older sovseal
    MAX_RECALL_K = 1000


class _LlamaEmbedder:
    """Any LlamaIndex ``BaseEmbedding`` as a sovseal ``embed(texts) -> vectors`` callable."""

    def __init__(self, model: Any) -> None:
        self.model = model

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_documents(texts)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self.model.get_text_embedding_batch(list(texts)), dtype=np.float32)

    def embed_query(self, text: str) -> np.ndarray:
        return np.asarray(self.model.get_query_embedding(text), dtype=np.float32)


def embed_fn(embedder: Any) -> Any:
    """The ``embed(texts) -> vectors`` callable behind ``embedder``.

    A ``SovsealEmbedding`` gives its sovseal embedder (one model shared); another LlamaIndex
    ``BaseEmbedding`` is wrapped (its texts go wherever that model sends them); a sovseal
    ``Embedder`` or any callable is used as is.
    """
    from llama_index.core.base.embeddings.base import BaseEmbedding

    inner = getattr(embedder, "embedder", None)
    if isinstance(embedder, BaseEmbedding):
        return inner if inner is not None else _LlamaEmbedder(embedder)
    if not callable(embedder):
        raise TypeError(
            f"embedder must be a SovsealEmbedding, a LlamaIndex BaseEmbedding or embed(texts) -> vectors; got {type(embedder).__name__}"
        )
    return embedder


def open_client(
    client: Sovseal | None,
    path: str | os.PathLike[str] | None,
    key: bytes | str | None,
    embedder: Any,
    client_kwargs: Mapping[str, Any] | None = None,
) -> tuple[Sovseal, Any, bool]:
    """(client, the embedder its vectors come from, whether we opened the client and must close it)."""
    from sovseal import Sovseal

    fn = embed_fn(embedder) if embedder is not None else None
    if client is not None:
        if path is not None or key is not None or client_kwargs:
            raise ValueError("pass either client= or path=/key=/client_kwargs=, not both")
        if fn is None:
            fn = getattr(client, "embedder", None)  # SDK: a public Sovseal.embedder, when it exists
        return client, fn, False
    if fn is None:
        from sovseal.embed import Embedder

        fn = Embedder()
    return Sovseal(path, key=key, embedder=fn, **dict(client_kwargs or {})), fn, True


class Queries:
    """Query embedding with the same model the store's vectors come from."""

    def __init__(self, embedder: Any) -> None:
        self._embedder = embedder

    @property
    def embedder(self) -> Any:
        if self._embedder is None:
            # The client came without an embedder: sovseal's default is this model, so its vectors match.
            from sovseal.embed import Embedder

            self._embedder = Embedder()
        return self._embedder

    def query(self, text: str) -> np.ndarray:
        fn = getattr(self.embedder, "embed_query", None)
        vector = np.asarray(fn(text) if callable(fn) else self.documents([text])[0], dtype=np.float32)
        return _unit(vector)

    def documents(self, texts: Sequence[str]) -> np.ndarray:
        fn = getattr(self.embedder, "embed_documents", self.embedder)
        return np.asarray(fn(list(texts)), dtype=np.float32)


def _unit(v: np.ndarray) -> np.ndarray:
    norm = float(np.linalg.norm(v))
    return v / norm if norm else v


# -- reads ---------------------------------------------------------------------------------------


def find(client: Sovseal, plan: Plan, *, prefix: str) -> list[Memory]:
    """Every memory visible at HEAD under ``prefix`` that matches ``plan``, in path order."""
    finder = getattr(client, "find", None)
    if callable(finder):  # SDK: Sovseal.find(filter=None, *, branch=None, limit=None) -> list[Memory]
        found = list(finder(plan.sdk))
    else:
        paths = [p for p in sorted(client.state()) if p.startswith(prefix)]
        found = [m for m in (client.get(p) for p in paths) if m is not None and plan.matches(m)]
    return sorted(found, key=lambda m: m.path)


def search(run: Callable[[int, dict[str, Any]], list[Memory]], k: int, plan: Plan) -> list[Memory]:
    """``run(k, filter)``: sovseal applies the whole filter inside the search."""
    return run(max(1, min(int(k), MAX_RECALL_K)), plan.sdk)


# -- writes --------------------------------------------------------------------------------------


def store_many(client: Sovseal, items: Iterable[Mapping[str, Any]], vectors: Any = None) -> None:
    """Store each ``{"path", "payload", "metadata", "type"}`` with one embedding batch (or ``vectors``)."""
    items = list(items)
    if items:
        client.store_many(items, vectors=vectors)


def delete_many(client: Sovseal, paths: Iterable[str]) -> None:
    """Delete each path (a tombstone each). SDK: one batched ``delete_many``."""
    paths = list(paths)
    if not paths:
        return
    batched = getattr(client, "delete_many", None)
    if callable(batched):
        batched(paths)
        return
    for path in paths:
        client.delete(path)


# -- values in parts (see _parts.py) --------------------------------------------------------------

#: Where the part records of values too large for one record live.
PARTS_ROOT = "llamaindex-parts/"


def read_payload(client: Sovseal | None, memory: Memory) -> Any:
    """A memory's value: its payload, or the parts it names joined and checked."""
    from . import _parts

    if client is None or _parts.descriptor(memory.payload) is None:
        return memory.payload

    def get(path: str) -> Any:
        found = client.get(path)
        return None if found is None else found.payload

    return _parts.unpack(memory.path, memory.payload, PARTS_ROOT, get)


def drop_parts(client: Sovseal, old_payloads: Iterable[Any], new_payloads: Iterable[Any]) -> None:
    """Delete the part records the old payloads named and the new ones do not."""
    from . import _parts

    delete_many(client, _parts.stale(list(old_payloads), list(new_payloads), PARTS_ROOT))


def delete_with_parts(client: Sovseal, memories: Iterable[Memory]) -> None:
    """Delete these records and the part records they name."""
    memories = list(memories)
    delete_many(client, [m.path for m in memories])
    drop_parts(client, [m.payload for m in memories], [])


def erase_flag(value: Any, default: bool) -> bool:
    """The ``erase`` of a call: ``None`` takes the store's ``erase_on_delete``."""
    if value is None:
        return default
    if not isinstance(value, bool):
        raise TypeError(f"erase must be a bool, got {type(value).__name__}")
    return value


class Erasure:
    """The purges of one erasing call: one ``Sovseal.purge(..., compact=False)`` per record path (and
    per prefix of its part records), then one ``Sovseal.compact()`` at the end, because a compaction
    rewrites the whole journal. Use as a context manager: the compaction runs on the way out, after
    an error too (what was purged before it is compacted away).

    ``record(path, group, payload)`` erases every version of ``path`` on every branch, whether it is
    visible now or was deleted earlier, and every part record any version of it had (``payload``,
    the visible version's, names the parts of a value stored before parts were grouped by record).
    Nothing to erase at a path is not an error (as a delete of a missing node is not).
    """

    def __init__(self, client: Sovseal, reason: str = "") -> None:
        if not callable(getattr(client, "purge", None)) or not callable(getattr(client, "compact", None)):
            raise NotImplementedError("erasure needs Sovseal.purge and Sovseal.compact: upgrade sovseal (pip install -U sovseal)")
        if not isinstance(reason, str):
            raise TypeError(f"reason must be a str, got {type(reason).__name__}")
        self._client = client
        self._reason = reason
        self._pending = False  # erased records whose sealed bytes the journal still holds
        self.erased = 0  # snapshots erased (every version of every record)

    def purge(self, path: str | None = None, *, prefix: str | None = None) -> None:
        from sovseal.errors import UnknownPathError

        try:
            result = self._client.purge(path, prefix=prefix, reason=self._reason, compact=False)
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
            self._client.compact()
            self._pending = False

    def __enter__(self) -> Erasure:
        return self

    def __exit__(self, *exc: object) -> None:
        self.finish()


def erase_records(client: Sovseal, memories: Iterable[Memory], group: str, *, paths: Iterable[str] = (), reason: str = "") -> None:
    """Erase these records (every version, every branch, their parts) and ``paths`` (visible or not), then compact once."""
    with Erasure(client, reason) as erasure:
        done: set[str] = set()
        for m in memories:
            if m.path not in done:
                done.add(m.path)
                erasure.record(m.path, group, m.payload)
        for path in paths:
            if path not in done:
                done.add(path)
                erasure.record(path, group)
