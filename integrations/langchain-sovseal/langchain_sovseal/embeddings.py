"""``SovsealEmbeddings``: sovseal's on-device embedder (all-MiniLM-L6-v2 on onnxruntime) for LangChain."""

from __future__ import annotations

import os
from collections.abc import Sequence

from langchain_core.embeddings import Embeddings

from sovseal.embed import DIM, Embedder
from sovseal.errors import InvalidInputError


class SovsealEmbeddings(Embeddings):
    """sovseal's on-device text embedder as a LangChain ``Embeddings``: 384-d unit vectors, offline.

    The model comes from an installed package (or ``model_dir`` / ``SOVSEAL_MODEL_DIR``) and never from
    the network unless ``allow_download=True``; see sovseal's docs/embedder.md. Texts never leave the
    machine. Query embeddings are cached (the last 256 distinct queries).

    Example:
        .. code-block:: python

            from langchain_sovseal import SovsealEmbeddings

            embeddings = SovsealEmbeddings()
            vector = embeddings.embed_query("what editor does the user prefer?")
    """

    #: The dimension of the vectors.
    dim: int = DIM

    def __init__(
        self,
        model_dir: str | os.PathLike[str] | None = None,
        *,
        allow_download: bool = False,
        threads: int | None = None,
        embedder: Embedder | None = None,
    ) -> None:
        if embedder is not None and (model_dir is not None or allow_download or threads is not None):
            raise InvalidInputError("pass either embedder= (a loaded sovseal Embedder) or model_dir=/allow_download=/threads=")
        self._embedder = embedder if embedder is not None else Embedder(model_dir, allow_download=allow_download, threads=threads)

    @property
    def embedder(self) -> Embedder:
        """The underlying ``sovseal.embed.Embedder`` (what a ``Sovseal`` handle takes as ``embedder=``)."""
        return self._embedder

    def ready(self) -> None:
        """Load and warm the model now, so the first call is not slow."""
        self._embedder.ready()

    def embed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return self._embedder.embed_documents(list(texts)).tolist()

    def embed_query(self, text: str) -> list[float]:
        return self._embedder.embed_query(text).tolist()

    async def aembed_documents(self, texts: Sequence[str]) -> list[list[float]]:
        return (await self._embedder.aembed_documents(list(texts))).tolist()

    async def aembed_query(self, text: str) -> list[float]:
        return (await self._embedder.aembed_query(text)).tolist()
