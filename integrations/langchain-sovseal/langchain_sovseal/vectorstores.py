"""``SovsealVectorStore``: a LangChain vector store whose every document is a sealed sovseal record."""

from __future__ import annotations

import asyncio
import dataclasses
import os
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.vectorstores import VectorStore
from langchain_core.vectorstores.utils import maximal_marginal_relevance

from sovseal import LogEntry, Memory, Sovseal
from sovseal.embed import Embedder
from sovseal.errors import InvalidArgumentTypeError, InvalidInputError
from sovseal.integration import EmbedFn, Erasure, HandleOwner, check_key, check_segment, deletion, index_text, open_handle, qualified_name

from ._common import PARTS, ROOT, scoped_filter, to_document
from .embeddings import SovsealEmbeddings
from .retrievers import SovsealRetriever

if TYPE_CHECKING:
    from typing import Self


#: Documents embedded and stored per batch by add_documents (one embeddings call and one durable
#: ``store_many`` each). Large, so a typical ingest is one call: the on-device embedder sorts a
#: call's texts by length and pads each model batch to its longest, so one big call pads least
#: (2,000 LoCoMo turns embed 7 % faster at once than in batches of 256).
EMBED_BATCH = 2048


class _Embedder:
    """The ``embed(texts)`` callable a store gives the sovseal handle it opens: its ``Embeddings``.

    ``add_documents`` stores each batch with one ``Sovseal.store_many``, which makes one call here
    for the whole batch (what an embeddings API or a batched model wants).
    """

    def __init__(self, embedding: Embeddings) -> None:
        self.embedding = embedding
        self._inner: Callable[[list[str]], Any] = (
            embedding.embedder if isinstance(embedding, SovsealEmbeddings) else embedding.embed_documents
        )

    @property
    def fingerprint(self) -> Any:
        """The wrapped model's fingerprint (or its name), so that the store's index is recorded as
        the same model whether this store or the SDK opened it (docs/embedder.md)."""
        declared = getattr(self._inner, "fingerprint", None)
        return declared if declared is not None else {"callable": qualified_name(self._inner)}

    def ready(self) -> None:
        warm = getattr(self._inner, "ready", None)
        if callable(warm):
            warm()

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return np.asarray(self._inner(list(texts)), dtype=np.float32)


class _HandleEmbeddings(Embeddings):
    """A handle's ``embed(texts) -> vectors`` callable as a LangChain ``Embeddings`` (a query is
    embedded as a one-text batch): what a store given ``client=`` embeds with."""

    def __init__(self, embed: EmbedFn) -> None:
        self._embed = embed

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        vectors: list[list[float]] = np.asarray(self._embed(list(texts)), dtype=np.float32).reshape(len(texts), -1).tolist()
        return vectors

    def embed_query(self, text: str) -> list[float]:
        return self.embed_documents([text])[0]


def _embeddings_of(client: Sovseal) -> Embeddings:
    """The ``Embeddings`` of a shared handle's own model (``Sovseal.embedder``), so documents and
    queries are embedded as the handle embeds its records: the LangChain model or the sovseal
    ``Embedder`` it was opened with as itself (query embedding and caching kept), anything else wrapped."""
    embed = client.embedder
    if isinstance(embed, _Embedder):  # a handle another SovsealVectorStore opened
        return embed.embedding
    if isinstance(embed, Embedder):
        return SovsealEmbeddings(embedder=embed)
    return _HandleEmbeddings(embed)


class SovsealVectorStore(HandleOwner, VectorStore):
    """A LangChain ``VectorStore`` on sovseal: encrypted at rest, lineage-tracked, replicated as ciphertext.

    Each document is a sovseal record at ``langchain/<collection>/<id>``: ``page_content`` is the payload,
    ``metadata`` the record's metadata (kept exactly: ints stay ints), and the embedded text is exactly
    ``page_content``. Adding a document with an existing id is an upsert: a new snapshot on the same path,
    the old version stays in the lineage. Several collections (and other sovseal memories) can share one
    store; every search is scoped to this store's collection.

    Lineage is reachable from here: :meth:`snapshot`, :meth:`rollback`, :meth:`fork` (a new store on a new
    branch), :meth:`log`. Lineage fields (snapshot id, timestamps, reinforcement) are never put in
    ``Document.metadata``; :meth:`get_memories` returns them.

    Args:
        embedding: any LangChain ``Embeddings``; default :class:`SovsealEmbeddings` (on-device), or with
            ``client=`` that client's own embedder (``client.embedder``).
        client: an open ``sovseal.Sovseal`` to use (this store then never closes it). Without ``embedding``
            the store embeds with the client's embedder, so its queries match the vectors of everything the
            client stores; an ``embedding`` given must be that same model. Without ``client``, a handle is
            opened from ``path``, ``key`` and ``client_kwargs`` (e.g. ``endpoint=``, ``api_key=`` for
            replication) with ``embedding`` as its embedder, and closed by :meth:`close`.
        path: the sovseal store directory (default ``$SOVSEAL_HOME`` / ``~/.sovseal``).
        key: the store's 32-byte master key (default: the OS keychain).
        collection: the namespace of this store's documents.
        branch: the branch to open (default ``main``).
        memory_type: the sovseal memory type of stored documents (``semantic``, ``episodic``,
            ``procedural``), which sets their decay in :class:`SovsealRetriever`'s recall.
        erase_on_delete: make :meth:`delete` erase (``Sovseal.purge``: every version, unreadable for
            good, bytes off the disk) instead of appending a tombstone (history kept, rollback works).
            Default False: a delete is cheap and reversible; ``delete(ids, erase=True)`` erases one call.

    Filters (``filter=`` on every search) are metadata conditions, e.g. ``{"source": "a.md"}``,
    ``{"year": {"$gte": 2020}}``, ``{"$or": [{...}, {...}]}``; ``sovseal_filter=`` takes sovseal's own
    filter language (``type``, ``provenance``, ``path``, ...). Scores from
    :meth:`similarity_search_with_score` are cosine similarities in [-1, 1]; relevance scores are
    ``(1 + cosine) / 2`` in [0, 1].

    Example:
        .. code-block:: python

            from langchain_sovseal import SovsealVectorStore

            store = SovsealVectorStore(collection="docs")  # the store at $SOVSEAL_HOME (~/.sovseal)
            store.add_texts(["sovseal seals every record"], metadatas=[{"source": "readme"}], ids=["r1"])
            store.similarity_search("what is sealed?", k=1, filter={"source": "readme"})
    """

    def __init__(
        self,
        embedding: Embeddings | None = None,
        *,
        client: Sovseal | None = None,
        path: str | os.PathLike[str] | None = None,
        key: bytes | str | None = None,
        collection: str = "default",
        branch: str | None = None,
        memory_type: str = "semantic",
        erase_on_delete: bool = False,
        **client_kwargs: Any,
    ) -> None:
        if not isinstance(erase_on_delete, bool):
            raise InvalidArgumentTypeError(f"erase_on_delete must be a bool (True or False), got {type(erase_on_delete).__name__}")
        self._erase_on_delete = erase_on_delete
        self._collection = check_segment(collection, "collection")
        self._prefix = f"{ROOT}/{collection}/"
        if client_kwargs.get("embedder") is not None:
            raise InvalidInputError("pass embedding= (a LangChain Embeddings); the store gives the sovseal handle its embedder")
        # Only a handle this store opens gets this store's embeddings (else sovseal's default, the model
        # of SovsealEmbeddings); a client passed in keeps its own.
        self._client, self._owns_client = open_handle(
            client,
            path=path,
            key=key,
            embedder=_Embedder(embedding) if client is None and embedding is not None else None,
            branch=branch,
            client_kwargs=client_kwargs,
        )
        self._embedding: Embeddings = embedding if embedding is not None else _embeddings_of(self._client)
        self._memory_type = memory_type

    # -- properties and lifecycle ------------------------------------------------------------

    @property
    def embeddings(self) -> Embeddings:
        return self._embedding

    @property
    def collection(self) -> str:
        return self._collection

    @property
    def path_prefix(self) -> str:
        """The sovseal path prefix of this collection's records (``langchain/<collection>/``)."""
        return self._prefix

    @property
    def branch(self) -> str:
        """The branch this store reads and writes."""
        return self._client.branch

    # -- ids and records -----------------------------------------------------------------------

    def _path(self, doc_id: str) -> str:
        return self._prefix + check_key(doc_id, "a document id")

    def _document(self, memory: Memory) -> Document:
        return to_document(self._client, memory, self._prefix)

    def _filter(self, filter: dict[str, Any] | None, sovseal_filter: dict[str, Any] | None) -> dict[str, Any] | None:
        return scoped_filter(self._prefix, filter, sovseal_filter)

    # -- writing -------------------------------------------------------------------------------

    def add_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """Store ``documents``; ``ids=`` (else each ``Document.id``, else a new UUID) names them.

        An id that exists is overwritten (a new snapshot on its path); the input documents are not
        modified. Returns the ids, in order. Each ``page_content`` is embedded whole with this store's
        ``Embeddings`` (``embed_documents``, up to :data:`EMBED_BATCH` texts a call), as
        ``InMemoryVectorStore`` does, the empty string too. All documents are stored with one
        ``Sovseal.store_many``: every document is checked first, so one that sovseal refuses stores
        none of them. A ``page_content`` over 128 KiB of JSON is stored in part records.
        """
        ids: Sequence[str | None] | None = kwargs.pop("ids", None)
        memory_type = kwargs.pop("memory_type", self._memory_type)
        if ids is not None and len(ids) != len(documents):
            raise InvalidInputError(f"got {len(ids)} ids for {len(documents)} documents: pass one id per document (None for a new one)")
        out: list[str] = []
        parts: list[dict[str, Any]] = []
        records: list[dict[str, Any]] = []
        for i, doc in enumerate(documents):
            # an empty id is no id, as in InMemoryVectorStore: "" would name the collection itself
            doc_id = (ids[i] if ids is not None else None) or doc.id or str(uuid.uuid4())
            path = self._path(doc_id)  # every id is checked before the first write
            content = doc.page_content
            if not isinstance(content, str):
                raise InvalidArgumentTypeError(f"page_content must be a str, got {type(content).__name__} for document {doc_id!r}")
            payload, doc_parts = PARTS.pack(path, content, where=f"the page_content of document {doc_id!r}", group=self._prefix)
            parts.extend(doc_parts)
            records.append(
                {"path": path, "payload": payload, "metadata": dict(doc.metadata), "type": memory_type, "text": index_text(content)}
            )
            out.append(doc_id)
        if not records:
            return out
        texts = [doc.page_content for doc in documents]
        rows = [self._embedding.embed_documents(texts[i : i + EMBED_BATCH]) for i in range(0, len(texts), EMBED_BATCH)]
        embedded = np.concatenate([np.asarray(r, dtype=np.float32).reshape(len(r), -1) for r in rows])
        vectors = np.concatenate([np.zeros((len(parts), embedded.shape[1]), dtype=np.float32), embedded]) if parts else embedded
        old = [self._client.get(item["path"]) for item in records]
        self._client.store_many([*parts, *records], vectors=vectors)
        PARTS.drop(self._client, [m.payload for m in old if m is not None], [item["payload"] for item in records])
        return out

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete documents by id (missing ids are ignored); ``ids=None`` deletes the whole collection.

        By default a delete appends a tombstone: the documents disappear from every search and from
        :meth:`get_by_ids`, and their history stays in the lineage (:meth:`rollback` to an earlier
        snapshot brings them back; :meth:`log` lists them). It is cheap and reversible.

        ``erase=True`` (or ``erase_on_delete=True`` on the store) erases them instead, for good: every
        version of each document on every branch of the store, their part records (large content)
        included, becomes unreadable to anyone, the key holder too, and the journal is rewritten so
        that the bytes leave the disk (``Sovseal.purge``, one compaction for the whole call). With
        replication the server drops the sealed bodies and other devices erase them on their next
        pull. No rollback or fork brings them back. An id deleted earlier with a tombstone is erased
        too; with ``ids=None`` everything the collection ever held is erased. ``reason=`` (a short
        string, sealed with the redaction, no personal data) says why, for the audit trail.
        Use erasure for a right-to-erasure (GDPR) request or a secret stored by mistake.
        """
        erase, reason = deletion(kwargs, self._erase_on_delete)
        paths = None if ids is None else [self._path(i) for i in ids]  # every id is checked first
        if erase:
            with Erasure(self._client, PARTS, reason) as erasure:
                if paths is None:  # a collection name has no '/': nothing else is under its prefix
                    erasure.group(self._prefix, [m.payload for m in self._client.find({"path_prefix": self._prefix})])
                for path in dict.fromkeys(paths or ()):
                    old = self._client.get(path)
                    erasure.record(path, self._prefix, None if old is None else old.payload)
            return True
        if paths is None:
            found = self._client.find({"path_prefix": self._prefix})
        else:
            found = [m for m in map(self._client.get, dict.fromkeys(paths)) if m is not None]
        PARTS.delete(self._client, found)
        return True

    # -- reading -------------------------------------------------------------------------------

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The documents with these ids, in the order given; missing ids are skipped."""
        out: list[Document] = []
        for doc_id in ids:
            memory = self._client.get(self._path(doc_id))
            if memory is not None:
                out.append(self._document(memory))
        return out

    def get_memories(self, ids: Sequence[str]) -> dict[str, Memory]:
        """The sovseal records behind these ids: snapshot id, creation time, reinforcement, type.

        Lineage lives here, not in ``Document.metadata``. Missing ids are left out.
        """
        out: dict[str, Memory] = {}
        for doc_id in ids:
            memory = self._client.get(self._path(doc_id))
            if memory is not None:
                out[doc_id] = dataclasses.replace(memory, payload=PARTS.read(self._client, memory))
        return out

    # -- similarity search ---------------------------------------------------------------------

    def _by_vector(
        self,
        embedding: Sequence[float],
        k: int,
        filter: dict[str, Any] | None,
        sovseal_filter: dict[str, Any] | None,
    ) -> list[tuple[Document, float]]:
        scope = self._filter(filter, sovseal_filter)  # validated even when k == 0
        if k <= 0:
            return []
        found = self._client.recall_by_vector(list(map(float, embedding)), k=k, filter=scope)
        return [(self._document(m), float(m.score if m.score is not None else 0.0)) for m in found]

    def similarity_search_with_score_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        filter: dict[str, Any] | None = None,
        *,
        sovseal_filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """The ``k`` documents nearest to ``embedding`` with their cosine similarity, best first."""
        return self._by_vector(embedding, k, filter, sovseal_filter)

    def similarity_search_with_score(
        self,
        query: str,
        k: int = 4,
        filter: dict[str, Any] | None = None,
        *,
        sovseal_filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        """The ``k`` documents most similar to ``query`` with their cosine similarity, best first."""
        return self._by_vector(self._embedding.embed_query(query), k, filter, sovseal_filter)

    def similarity_search(
        self,
        query: str,
        k: int = 4,
        filter: dict[str, Any] | None = None,
        *,
        sovseal_filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        return [doc for doc, _ in self.similarity_search_with_score(query, k, filter, sovseal_filter=sovseal_filter)]

    def similarity_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        filter: dict[str, Any] | None = None,
        *,
        sovseal_filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        return [doc for doc, _ in self._by_vector(embedding, k, filter, sovseal_filter)]

    async def asimilarity_search_with_score(
        self,
        query: str,
        k: int = 4,
        filter: dict[str, Any] | None = None,
        *,
        sovseal_filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[tuple[Document, float]]:
        vector = await self._embedding.aembed_query(query)
        return await asyncio.to_thread(self._by_vector, vector, k, filter, sovseal_filter)

    async def asimilarity_search(
        self,
        query: str,
        k: int = 4,
        filter: dict[str, Any] | None = None,
        *,
        sovseal_filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        found = await self.asimilarity_search_with_score(query, k, filter, sovseal_filter=sovseal_filter)
        return [doc for doc, _ in found]

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        """Cosine similarity in [-1, 1] to a relevance score in [0, 1]."""
        return _cosine_to_relevance

    # -- maximal marginal relevance ------------------------------------------------------------

    def _mmr(
        self,
        embedding: Sequence[float],
        k: int,
        fetch_k: int,
        lambda_mult: float,
        filter: dict[str, Any] | None,
        sovseal_filter: dict[str, Any] | None,
        vectors_of: Callable[[list[str]], list[list[float]]],
    ) -> list[Document]:
        candidates = self._by_vector(embedding, max(fetch_k, k), filter, sovseal_filter)
        if not candidates or k <= 0:
            return []
        vectors = vectors_of([doc.page_content for doc, _ in candidates])
        chosen = maximal_marginal_relevance(np.asarray(embedding, dtype=np.float32), vectors, lambda_mult=lambda_mult, k=k)
        return [candidates[i][0] for i in chosen]

    def max_marginal_relevance_search_by_vector(
        self,
        embedding: list[float],
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: dict[str, Any] | None = None,
        *,
        sovseal_filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        """``k`` documents among the ``fetch_k`` nearest, chosen for relevance and diversity.

        ``lambda_mult`` runs from 0 (most diverse) to 1 (most relevant).
        """
        return self._mmr(embedding, k, fetch_k, lambda_mult, filter, sovseal_filter, self._embedding.embed_documents)

    def max_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: dict[str, Any] | None = None,
        *,
        sovseal_filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        return self.max_marginal_relevance_search_by_vector(
            self._embedding.embed_query(query), k, fetch_k, lambda_mult, filter, sovseal_filter=sovseal_filter
        )

    async def amax_marginal_relevance_search(
        self,
        query: str,
        k: int = 4,
        fetch_k: int = 20,
        lambda_mult: float = 0.5,
        filter: dict[str, Any] | None = None,
        *,
        sovseal_filter: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> list[Document]:
        vector = await self._embedding.aembed_query(query)
        return await self.amax_marginal_relevance_search_by_vector(
            vector, k, fetch_k, lambda_mult, filter=filter, sovseal_filter=sovseal_filter
        )

    # -- construction --------------------------------------------------------------------------

    @classmethod
    def from_texts(
        cls,
        texts: list[str],
        embedding: Embeddings,
        metadatas: list[dict[str, Any]] | None = None,
        *,
        ids: list[str] | None = None,
        **kwargs: Any,
    ) -> Self:
        """A store (opened with ``kwargs``: ``path=``, ``key=``, ``collection=``, ``client=``...) holding ``texts``."""
        store = cls(embedding, **kwargs)
        try:
            store.add_texts(texts, metadatas, ids=ids)
        except BaseException:
            store.close()
            raise
        return store

    # -- sovseal recall as a retriever ---------------------------------------------------------

    def as_recall_retriever(self, **kwargs: Any) -> SovsealRetriever:
        """A :class:`SovsealRetriever` over this collection: sovseal's full recall (hybrid dense + keyword,
        decay, reinforcement, lineage context), where ``as_retriever()`` gives plain vector search."""
        return SovsealRetriever(vectorstore=self, **kwargs)

    # -- lineage -------------------------------------------------------------------------------

    def snapshot(self) -> str | None:
        """The current snapshot id (HEAD of this branch), to :meth:`rollback` or :meth:`fork` from later.

        HEAD covers the whole sovseal store on this branch, not only this collection.
        """
        return self._client.snapshot()

    def rollback(self, snapshot_id: str) -> None:
        """Move this branch's HEAD back to ``snapshot_id``: the store shows what it held then.

        Nothing is deleted: later snapshots stay in the lineage (``fork`` from one to get it back). The
        rollback applies to everything on this branch of the sovseal store, not only this collection.
        """
        self._client.rollback(snapshot_id)

    async def arollback(self, snapshot_id: str) -> None:
        await asyncio.to_thread(self.rollback, snapshot_id)

    def fork(self, snapshot_id: str | None = None, *, branch: str | None = None) -> SovsealVectorStore:
        """A new store on a new branch starting at ``snapshot_id`` (default: this HEAD).

        This store stays on its branch; writes to either store are invisible to the other. The new
        store works through a view of this store's sovseal handle (``Sovseal.view``): it needs no key
        of its own, and it closes when this store's handle closes.
        """
        start = snapshot_id if snapshot_id is not None else self._client.snapshot()
        return self._on_sibling(lambda handle: handle.fork(start, branch=branch))

    def checkout(self, branch: str) -> SovsealVectorStore:
        """A new store on an existing ``branch`` of the same sovseal store (this one stays where it is)."""
        return self._on_sibling(lambda handle: handle.checkout(branch))

    def _on_sibling(self, move: Callable[[Sovseal], object]) -> SovsealVectorStore:
        """A copy of this store on a view of its handle (same open store, own branch), moved by ``move``."""
        handle = self._client.view()
        move(handle)
        other = type(self).__new__(type(self))
        other.__dict__.update(self.__dict__)
        other._client, other._owns_client = handle, False
        return other

    def branches(self) -> list[str]:
        return self._client.branches()

    def log(self, *, limit: int | None = None) -> list[LogEntry]:
        """The snapshots from HEAD back to genesis, newest first (all paths of the store on this branch)."""
        return self._client.log(limit=limit)


def _cosine_to_relevance(similarity: float) -> float:
    return (1.0 + similarity) / 2.0


__all__ = ["SovsealVectorStore"]
