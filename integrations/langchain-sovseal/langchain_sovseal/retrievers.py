"""``SovsealRetriever``: sovseal's full recall (hybrid, decay, reinforcement, filters) as a LangChain retriever."""

from __future__ import annotations

import asyncio
from typing import Any, cast

from langchain_core.callbacks import AsyncCallbackManagerForRetrieverRun, CallbackManagerForRetrieverRun
from langchain_core.documents import Document
from langchain_core.retrievers import BaseRetriever
from langchain_core.vectorstores import VectorStore
from pydantic import ConfigDict, model_validator

from sovseal import Memory, Sovseal
from sovseal.errors import InvalidInputError

from ._common import scoped_filter, to_document


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

    # Typed as LangChain's VectorStore (checked to be a SovsealVectorStore below), so that this module
    # and vectorstores.py (whose as_recall_retriever makes one of these) do not import each other.
    vectorstore: VectorStore | None = None
    """Recall within this ``SovsealVectorStore``'s collection."""
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
            raise InvalidInputError("pass exactly one of vectorstore= (a SovsealVectorStore) or client= (a sovseal.Sovseal)")
        if self.vectorstore is not None and not isinstance(getattr(self.vectorstore, "client", None), Sovseal):
            raise InvalidInputError(
                f"vectorstore must be a SovsealVectorStore, got {type(self.vectorstore).__name__}; "
                "for another vector store use its own as_retriever()"
            )
        _check_k(self.k)
        return self

    def _handle(self) -> Sovseal:
        handle = self.client if self.vectorstore is None else self.vectorstore.client  # type: ignore[attr-defined]
        return cast(Sovseal, handle)  # checked by _one_source

    def _prefix(self) -> str:
        return "" if self.vectorstore is None else str(self.vectorstore.path_prefix)  # type: ignore[attr-defined]

    def recall_memories(
        self,
        query: str,
        *,
        k: int | None = None,
        filter: dict[str, Any] | None = None,
        sovseal_filter: dict[str, Any] | None = None,
    ) -> list[Memory]:
        """The recalled sovseal memories themselves, with their lineage fields and recall scores."""
        k = _check_k(self.k if k is None else k)
        scope = scoped_filter(
            self._prefix(),
            self.filter if filter is None else filter,
            self.sovseal_filter if sovseal_filter is None else sovseal_filter,
        )
        if k == 0:
            return []
        return self._handle().recall(query, k=k, filter=scope, branch=self.branch)

    def _documents(self, found: list[Memory]) -> list[Document]:
        return [to_document(self._handle(), m, self._prefix(), branch=self.branch) for m in found]

    def _get_relevant_documents(
        self,
        query: str,
        *,
        run_manager: CallbackManagerForRetrieverRun,
        k: int | None = None,
        filter: dict[str, Any] | None = None,
        sovseal_filter: dict[str, Any] | None = None,
    ) -> list[Document]:
        return self._documents(self.recall_memories(query, k=k, filter=filter, sovseal_filter=sovseal_filter))

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
        return await asyncio.to_thread(self._documents, found)


def _check_k(k: object) -> int:
    if isinstance(k, bool) or not isinstance(k, int) or k < 0:
        raise InvalidInputError(f"k must be an integer >= 0 (how many documents to return), got {k!r}")
    return k


__all__ = ["SovsealRetriever"]
