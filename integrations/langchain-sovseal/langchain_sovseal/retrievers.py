"""``SovsealRetriever``: sovseal's full recall (hybrid, decay, reinforcement, filters) as a LangChain retriever."""

from __future__ import annotations

import asyncio
from typing import Any

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from pydantic import ConfigDict, model_validator

from sovseal import Memory, Sovseal

from ._common import memory_metadata, payload_text, read_payload, scoped_filter, translate_filter
from .vectorstores import SovsealVectorStore


class SovsealRetriever(BaseRetriever):
    """Retrieve with sovseal's recall: dense and keyword (BM25) candidates fused, weighted by decay and
    reinforcement, with the lineage neighbours' context (sovseal's docs/recall.md).

    Over a :class:`SovsealVectorStore` (``vectorstore=``) it recalls that collection's documents and returns
    them as that store does (same ids, exact metadata). Over a whole sovseal store (``client=``) it
    recalls every memory: ``page_content`` is the payload (JSON for structured payloads), ``metadata``
    the memory's metadata and ``id`` its sovseal path.

    ``k`` is a field and can be overridden per call: ``retriever.invoke(query, k=2)``; so can ``filter``
    (metadata conditions, as on the vector store) and ``sovseal_filter`` (sovseal's filter language).
    ``branch`` recalls another branch's HEAD without switching. Lineage fields are never added to
    ``Document.metadata``: use ``SovsealVectorStore.get_memories`` or :meth:`recall_memories`.

    Example:
        .. code-block:: python

            retriever = SovsealRetriever(vectorstore=store, k=4)
            docs = retriever.invoke("what did the user decide about the launch?")
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    vectorstore: SovsealVectorStore | None = None
    """Recall within this vector store's collection."""
    client: Sovseal | None = None
    """Or recall over a whole sovseal store (every memory, not only LangChain documents)."""
    k: int = 4
    """How many documents to return."""
    filter: dict[str, Any] | None = None
    """Metadata conditions, e.g. ``{"source": "a.md", "year": {"$gte": 2020}}``."""
    sovseal_filter: dict[str, Any] | None = None
    """A filter in sovseal's language (``type``, ``provenance``, ``path_prefix``, ``metadata``, ...)."""
    branch: str | None = None
    """Recall this branch's HEAD (default: the handle's current branch)."""

    @model_validator(mode="after")
    def _one_source(self) -> SovsealRetriever:
        if (self.vectorstore is None) == (self.client is None):
            raise ValueError("pass exactly one of vectorstore= (a SovsealVectorStore) or client= (a sovseal.Sovseal)")
        if isinstance(self.k, bool) or not isinstance(self.k, int) or self.k < 0:
            raise ValueError(f"k must be an integer >= 0, got {self.k!r}")
        return self

    def _handle(self) -> Sovseal:
        return self.vectorstore.client if self.vectorstore is not None else self.client  # type: ignore[return-value]

    def _scope(self, filter: dict[str, Any] | None, sovseal_filter: dict[str, Any] | None) -> dict[str, Any] | None:
        if self.vectorstore is not None:
            return scoped_filter(self.vectorstore.path_prefix, filter, sovseal_filter)
        parts = [p for p in (translate_filter(filter), sovseal_filter) if p is not None]
        if not parts:
            return None
        return parts[0] if len(parts) == 1 else {"$and": parts}

    def _document(self, memory: Memory) -> Document:
        if self.vectorstore is not None:
            return self.vectorstore._document(memory)
        return Document(id=memory.path, page_content=payload_text(read_payload(self._handle(), memory)), metadata=memory_metadata(memory))

    def recall_memories(
        self,
        query: str,
        *,
        k: int | None = None,
        filter: dict[str, Any] | None = None,
        sovseal_filter: dict[str, Any] | None = None,
    ) -> list[Memory]:
        """The recalled sovseal memories themselves, with their lineage fields and recall scores."""
        k = self.k if k is None else k
        if isinstance(k, bool) or not isinstance(k, int) or k < 0:
            raise ValueError(f"k must be an integer >= 0, got {k!r}")
        scope = self._scope(
            self.filter if filter is None else filter, self.sovseal_filter if sovseal_filter is None else sovseal_filter
        )
        if k == 0:
            return []
        return self._handle().recall(query, k=k, filter=scope, branch=self.branch)

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: dict[str, Any] | None = None,
        sovseal_filter: dict[str, Any] | None = None,
    ) -> list[Document]:
        found = self.recall_memories(query, k=k, filter=filter, sovseal_filter=sovseal_filter)
        return [self._document(m) for m in found]

    async def _aget_relevant_documents(
        self,
        query: str,
        *,
        run_manager: AsyncCallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: dict[str, Any] | None = None,
        sovseal_filter: dict[str, Any] | None = None,
    ) -> list[Document]:
        found = await asyncio.to_thread(self.recall_memories, query, k=k, filter=filter, sovseal_filter=sovseal_filter)
        return [self._document(m) for m in found]


__all__ = ["SovsealRetriever"]
