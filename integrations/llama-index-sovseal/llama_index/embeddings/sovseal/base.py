"""``SovsealEmbedding``: sovseal's on-device embedder (all-MiniLM-L6-v2 on onnxruntime) for LlamaIndex.

Nothing leaves the machine: use it as the ``embed_model`` of every LlamaIndex component that sits on
sovseal, so node text is never sent to a remote embedding API.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.bridge.pydantic import Field, PrivateAttr

DEFAULT_MODEL_NAME = "sovseal/all-MiniLM-L6-v2"


class SovsealEmbedding(BaseEmbedding):
    """sovseal's on-device embedder as a LlamaIndex ``BaseEmbedding``.

    ``embedder`` is a ``sovseal.embed.Embedder`` (or any ``embed(texts) -> vectors`` callable) to
    share with a ``Sovseal`` handle, so one model is loaded once; without it a new ``Embedder`` is
    made from ``model_dir`` / ``allow_download`` / ``threads`` (offline by default). Texts are
    embedded ``embed_batch_size`` at a time; the embedder sorts each batch by length so padding
    costs little, hence the large default.
    """

    model_name: str = Field(default=DEFAULT_MODEL_NAME, description="The embedding model.")
    embed_batch_size: int = Field(default=64, gt=0, le=2048, description="Texts per embedder call.")
    model_dir: str | None = Field(default=None, description="A local model directory (see sovseal docs/embedder.md).")
    allow_download: bool = Field(default=False, description="Allow the explicit, optional hub download.")
    threads: int | None = Field(default=None, description="onnxruntime intra-op threads.")

    _embedder: Any = PrivateAttr()

    def __init__(
        self,
        embedder: Any = None,
        *,
        model_dir: str | None = None,
        allow_download: bool = False,
        threads: int | None = None,
        **kwargs: Any,
    ) -> None:
        # fields of this class: mypy sees the base's __init__ (no pydantic plugin)
        super().__init__(model_dir=model_dir, allow_download=allow_download, threads=threads, **kwargs)  # type: ignore[call-arg]
        if embedder is None:
            from sovseal.embed import Embedder

            embedder = Embedder(model_dir, allow_download=allow_download, threads=threads)
        self._embedder = embedder

    @classmethod
    def class_name(cls) -> str:
        return "SovsealEmbedding"

    @property
    def embedder(self) -> Any:
        """The underlying sovseal embedder: pass it to ``Sovseal(embedder=...)`` to share one loaded model."""
        return self._embedder

    def ready(self) -> None:
        """Load and warm the model now instead of on the first call."""
        warm = getattr(self._embedder, "ready", None)
        if callable(warm):
            warm()

    # -- BaseEmbedding ------------------------------------------------------------------------

    def _documents(self, texts: Sequence[str]) -> list[list[float]]:
        fn: Callable[[Sequence[str]], Any] = getattr(self._embedder, "embed_documents", self._embedder)
        return np.asarray(fn(list(texts)), dtype=np.float32).tolist()

    def _get_query_embedding(self, query: str) -> list[float]:
        embed_query = getattr(self._embedder, "embed_query", None)
        if callable(embed_query):
            return np.asarray(embed_query(query), dtype=np.float32).tolist()
        return self._documents([query])[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return await asyncio.to_thread(self._get_query_embedding, query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._documents([text])[0]

    async def _aget_text_embedding(self, text: str) -> list[float]:
        return await asyncio.to_thread(self._get_text_embedding, text)

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._documents(texts)

    async def _aget_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return await asyncio.to_thread(self._documents, texts)
