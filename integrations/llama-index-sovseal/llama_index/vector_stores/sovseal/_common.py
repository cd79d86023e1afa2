"""What the sovseal LlamaIndex components share beyond sovseal's kit (``sovseal.integration``): where
large values' parts live, and the embedder a store's vectors come from, for the query side."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding

from sovseal import Sovseal
from sovseal.errors import InvalidArgumentTypeError
from sovseal.integration import MAX_RECALL_K, Parts, open_handle

#: The part records of values too large for one record (sovseal.integration.parts).
PARTS = Parts("llamaindex-parts/")


def top_k(k: int) -> int:
    """A LlamaIndex ``similarity_top_k`` as a recall ``k``: sovseal answers 1 to ``MAX_RECALL_K``."""
    return max(1, min(int(k), MAX_RECALL_K))


class _LlamaEmbedder:
    """Any LlamaIndex ``BaseEmbedding`` as a sovseal ``embed(texts) -> vectors`` callable."""

    def __init__(self, model: BaseEmbedding) -> None:
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
    if isinstance(embedder, BaseEmbedding):
        inner = getattr(embedder, "embedder", None)
        return inner if inner is not None else _LlamaEmbedder(embedder)
    if not callable(embedder):
        raise InvalidArgumentTypeError(
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
    """(client, the embedder for query embeddings, whether we opened the client).

    A client opened here gets ``embedder`` (default: sovseal's on-device model). Queries are embedded
    with ``embedder`` when one is given, else with the client's own (``Sovseal.embedder``, what its
    records were embedded with): a shared client needs no embedder passed again."""
    fn = embed_fn(embedder) if embedder is not None else None
    opened, owned = open_handle(client, path=path, key=key, embedder=fn if client is None else None, client_kwargs=client_kwargs)
    return opened, fn if fn is not None else opened.embedder, owned


class Queries:
    """Query and MMR candidate embeddings from the model the store's vectors come from."""

    def __init__(self, embedder: Any) -> None:
        self.embedder = embedder

    def query(self, text: str) -> np.ndarray:
        fn = getattr(self.embedder, "embed_query", None)
        vector = np.asarray(fn(text) if callable(fn) else self.documents([text])[0], dtype=np.float32)
        norm = float(np.linalg.norm(vector))
        return vector / norm if norm else vector

    def documents(self, texts: Sequence[str]) -> np.ndarray:
        fn = getattr(self.embedder, "embed_documents", self.embedder)
        return np.asarray(fn(list(texts)), dtype=np.float32)
