"""``SovsealVectorStore``: a LlamaIndex vector store whose nodes are sealed sovseal records.

Each node is one record: the node id is the path ``{path_prefix}{node_id}``, the node's text is the
payload, and its metadata plus LlamaIndex's node fields (``_node_content`` without the text,
``_node_type``, ``ref_doc_id``/``doc_id``/``document_id``) are the record's metadata, so metadata
filters run inside sovseal. Everything is encrypted on disk, appended to the lineage and replicated
like any other memory; re-adding a node id stores a new snapshot on the same path.

sovseal embeds every record itself, on-device, with the store's embedder: the ``embedding`` LlamaIndex
puts on a node is not used unless ``use_node_embeddings=True`` says it came from that same embedder
(use ``SovsealEmbedding`` as ``embed_model`` so no text leaves the machine). Queries therefore need
the query *text*; ``is_embedding_query`` is False so LlamaIndex does not embed queries for nothing.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

import numpy as np
from llama_index.core.bridge.pydantic import Field, PrivateAttr
from llama_index.core.schema import BaseNode, MetadataMode, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
    VectorStoreQueryResult,
)
from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict

from sovseal import LogEntry, Memory, Sovseal, VerifyReport
from sovseal.errors import InvalidInputError
from sovseal.integration import HandleOwner, as_text, deletion, erase_records, index_text

from ._common import PARTS, Queries, open_client, top_k
from .filters import scope

#: Modes answered by sovseal's recall (hybrid dense + keyword, lineage context, decay, reinforcement).
_RECALL_MODES = (VectorStoreQueryMode.DEFAULT, VectorStoreQueryMode.HYBRID, VectorStoreQueryMode.SEMANTIC_HYBRID)
DEFAULT_MMR_PREFETCH = 4


def node_from_memory(memory: Memory, client: Sovseal | None = None, *, branch: str | None = None) -> BaseNode:
    """The LlamaIndex node a sovseal memory holds: the stored node for records the vector store
    wrote, else a ``TextNode`` whose id is the path and whose metadata is the memory's metadata.

    With ``client``, a text stored in part records is read back whole (from ``branch``, the one it
    was recalled from; default the client's)."""
    text = as_text(memory.payload if client is None else PARTS.read(client, memory, branch=branch))
    if "_node_content" in memory.metadata:
        return metadata_dict_to_node(dict(memory.metadata), text=text)
    return TextNode(id_=memory.path, text=text, metadata=dict(memory.metadata))


class SovsealVectorStore(HandleOwner, BasePydanticVectorStore):
    """A LlamaIndex vector store on sovseal: encrypted at rest, lineage-tracked, local-first.

    Args:
        client: an open ``sovseal.Sovseal`` to share (with a chat store, a retriever, the MCP
            server...). Otherwise one is opened at ``path`` with ``key`` (and ``client_kwargs``,
            e.g. ``endpoint=``/``api_key=`` for replication) and closed by :meth:`close`.
        embedder: what the store's vectors come from, used for query and MMR embeddings: a
            ``SovsealEmbedding``, a ``sovseal.embed.Embedder``, another LlamaIndex embedding, or
            any ``embed(texts) -> vectors`` callable (default: sovseal's on-device model). With
            ``client=``, the default is that client's own embedder (``client.embedder``, what it
            embeds records with), so queries match its vectors without naming the model again.
        collection: nodes live under the path prefix ``llamaindex/{collection}/``; collections in
            one sovseal store never see each other's nodes.
        memory_type: the sovseal memory type of the records (sets recall's decay half-life).
        use_node_embeddings: keep the embedding LlamaIndex put on each node as the record's vector
            instead of embedding the node's text again. Set it only when the index's
            ``embed_model`` is the store's own embedder (``SovsealEmbedding``): the vectors must
            share the space queries are embedded in. Nodes without an embedding are embedded here.
        erase_on_delete: make :meth:`delete` (``index.delete_ref_doc``), :meth:`delete_nodes` and
            :meth:`clear` erase (``Sovseal.purge``: every version on every branch, unreadable for
            good, the bytes off the disk) instead of appending tombstones. Default False: a delete
            is cheap and reversible (history, rollback, fork keep working); ``erase=True`` on one
            call erases, ``erase=False`` keeps history for one call.

    Deleting and erasing: a delete appends tombstones, so the nodes leave every query and
    ``get_nodes`` while their history stays (``rollback`` brings them back). ``erase=True`` (a
    keyword of ``delete``/``delete_nodes``, so ``index.delete_ref_doc(doc_id, erase=True)`` and
    ``index.delete_nodes(ids, erase=True)`` pass it through) erases them for good instead, with
    their part records; ``reason=`` (sealed with the redaction, no personal data) says why. Use
    erasure for a right-to-erasure (GDPR) request or a secret stored by mistake.
    """

    stores_text: bool = True
    is_embedding_query: bool = False
    flat_metadata: bool = False
    collection: str = Field(default="default", description="Nodes live under llamaindex/{collection}/.")
    path_prefix: str = Field(default="", description="The path prefix of this collection's records.")
    memory_type: str = Field(default="semantic", description="episodic | semantic | procedural")
    mmr_prefetch_factor: int = Field(default=DEFAULT_MMR_PREFETCH, ge=1, description="MMR candidates per result.")
    erase_on_delete: bool = Field(
        default=False,
        description="Deletes erase (Sovseal.purge: every version, for good) instead of appending tombstones.",
    )
    use_node_embeddings: bool = Field(
        default=False,
        description="Store the embedding LlamaIndex computed for each node instead of embedding it again "
        "(only when embed_model is the store's own embedder, e.g. SovsealEmbedding).",
    )

    _client: Sovseal = PrivateAttr()
    _queries: Any = PrivateAttr()
    _owns_client: bool = PrivateAttr(default=False)

    def __init__(
        self,
        client: Sovseal | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        key: bytes | str | None = None,
        embedder: Any = None,
        collection: str = "default",
        path_prefix: str | None = None,
        memory_type: str = "semantic",
        client_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(collection, str) or not collection:
            raise InvalidInputError(f"collection must be a non-empty string, such as 'docs'; got {collection!r}")
        if memory_type not in ("episodic", "semantic", "procedural"):
            raise InvalidInputError(f"memory_type must be episodic, semantic or procedural; got {memory_type!r}")
        prefix = path_prefix if path_prefix is not None else f"llamaindex/{collection}/"
        # fields of this class: mypy sees the base's __init__ (no pydantic plugin)
        super().__init__(collection=collection, path_prefix=prefix, memory_type=memory_type, **kwargs)  # type: ignore[call-arg]
        self._client, fn, self._owns_client = open_client(client, path, key, embedder, client_kwargs)
        self._queries = Queries(fn)

    @classmethod
    def class_name(cls) -> str:
        return "SovsealVectorStore"

    # -- mapping -------------------------------------------------------------------------------

    def _path(self, node_id: str) -> str:
        return f"{self.path_prefix}{node_id}"

    def _item(self, node: BaseNode) -> tuple[dict[str, Any], list[dict[str, Any]]]:
        metadata = node_to_metadata_dict(node, remove_text=True, flat_metadata=self.flat_metadata)
        content = node.get_content(metadata_mode=MetadataMode.NONE)
        path = self._path(node.node_id)
        payload, parts = PARTS.pack(path, content, where=f"the text of node {node.node_id!r}", group=self.path_prefix)
        return {
            "path": path,
            "payload": payload,
            "metadata": metadata,
            "type": self.memory_type,
            # embed and match the node's text alone, not its generated path ("" too, as " ")
            "text": index_text(content),
        }, parts

    def _scope(
        self,
        filters: MetadataFilters | dict[str, Any] | None = None,
        node_ids: Sequence[str] | None = None,
        doc_ids: Sequence[str] | None = None,
    ) -> dict[str, Any]:
        paths = None if node_ids is None else [self._path(i) for i in node_ids]
        return scope(self.path_prefix, filters, paths=paths, doc_ids=None if doc_ids is None else list(doc_ids))

    # -- writes --------------------------------------------------------------------------------

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Store each node as a sealed record (durable when this returns); returns the node ids."""
        packed = [self._item(node) for node in nodes]  # every node is serialised before anything is written
        items = [item for item, _ in packed]
        parts = [part for _, node_parts in packed for part in node_parts]
        vectors = None
        if self.use_node_embeddings and nodes and all(node.embedding is not None for node in nodes):
            rows = np.asarray([node.embedding for node in nodes], dtype=np.float32)
            vectors = np.concatenate([np.zeros((len(parts), rows.shape[1]), dtype=np.float32), rows]) if parts else rows
        if not items:
            return []
        old = [m for m in (self._client.get(item["path"]) for item in items) if m is not None]
        self._client.store_many([*parts, *items], vectors=vectors)  # one durable batch: all nodes or none
        PARTS.drop(self._client, [m.payload for m in old], [item["payload"] for item in items])
        return [node.node_id for node in nodes]

    async def async_add(self, nodes: Sequence[BaseNode], **kwargs: Any) -> list[str]:
        return await asyncio.to_thread(self.add, nodes, **kwargs)

    def _remove(self, found: list[Memory], erase: bool, reason: str, paths: Sequence[str] = ()) -> None:
        if erase:
            erase_records(self._client, PARTS, found, self.path_prefix, paths=paths, reason=reason)
        else:
            PARTS.delete(self._client, found)

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete every node of the source document ``ref_doc_id``: tombstones (history stays), or
        with ``erase=True`` (or ``erase_on_delete``) an erasure of every version of each node."""
        erase, reason = deletion(delete_kwargs, self.erase_on_delete)
        self._remove(self._client.find(self._scope(doc_ids=[ref_doc_id])), erase, reason)

    async def adelete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        await asyncio.to_thread(self.delete, ref_doc_id, **delete_kwargs)

    def delete_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        **delete_kwargs: Any,
    ) -> None:
        """Delete the nodes with these ids and/or matching these filters (both: both must hold).

        ``erase=True`` (or ``erase_on_delete``) erases them instead; with ``node_ids`` alone, a node
        an earlier plain delete removed is erased too."""
        erase, reason = deletion(delete_kwargs, self.erase_on_delete)
        if node_ids is None and filters is None:
            raise InvalidInputError("delete_nodes needs node_ids or filters; clear() deletes every node of the collection")
        if node_ids is not None and not node_ids:
            return
        found = self._client.find(self._scope(filters, node_ids=node_ids))
        paths = [self._path(i) for i in node_ids] if erase and node_ids is not None and filters is None else []
        self._remove(found, erase, reason, paths)

    async def adelete_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
        **delete_kwargs: Any,
    ) -> None:
        await asyncio.to_thread(self.delete_nodes, node_ids, filters, **delete_kwargs)

    def clear(self) -> None:
        """Delete every node of this collection (the lineage keeps them: ``rollback`` brings them back).
        With ``erase_on_delete`` every node the collection shows is erased instead."""
        self._remove(self._client.find(self._scope()), self.erase_on_delete, "")

    async def aclear(self) -> None:
        await asyncio.to_thread(self.clear)

    # -- reads ---------------------------------------------------------------------------------

    def get_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
    ) -> list[BaseNode]:
        """The nodes with these ids (in that order) and/or matching these filters (else all, by id)."""
        if node_ids is not None and not node_ids:
            return []
        found = self._client.find(self._scope(filters, node_ids=node_ids))
        nodes = [node_from_memory(m, self._client) for m in found]
        if node_ids is not None:
            rank = {node_id: i for i, node_id in enumerate(node_ids)}
            nodes.sort(key=lambda n: rank.get(n.node_id, len(rank)))
        return nodes

    async def aget_nodes(
        self,
        node_ids: list[str] | None = None,
        filters: MetadataFilters | None = None,
    ) -> list[BaseNode]:
        return await asyncio.to_thread(self.get_nodes, node_ids, filters)

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """Search the collection.

        - ``DEFAULT``, ``HYBRID`` (and ``SEMANTIC_HYBRID``) with a query text: sovseal's recall,
          dense and keyword fused, with lineage context, decay and reinforcement. ``alpha`` is not
          applied yet (sovseal's recall takes no per-call weights).
        - ``MMR``: dense candidates re-ranked for diversity (``mmr_threshold``, default 0.5).
        - A query with only ``query_embedding``, or a blank ``query_str`` (no words for recall):
          dense search by that vector (``Sovseal.recall_by_vector``), as ``SimpleVectorStore``
          ranks any query; a ``query_embedding`` must come from the store's embedder.

        Filters, ``doc_ids`` and ``node_ids`` are applied exactly. Scores are sovseal's recall
        scores (higher is better), cosine similarities for dense and MMR searches.
        """
        mode = VectorStoreQueryMode(query.mode)
        # VectorStoreIndex passes node_ids=[] for stores that keep the text: empty means "no restriction".
        where = self._scope(query.filters, node_ids=query.node_ids or None, doc_ids=query.doc_ids or None)
        k = query.similarity_top_k
        if mode == VectorStoreQueryMode.HYBRID and query.hybrid_top_k:
            k = query.hybrid_top_k
        if mode == VectorStoreQueryMode.MMR:
            threshold = query.mmr_threshold if query.mmr_threshold is not None else kwargs.get("mmr_threshold")
            found = self._mmr(query, k, where, threshold)
        elif mode in _RECALL_MODES and query.query_str and query.query_str.strip():
            found = self._client.recall(query.query_str, k=top_k(k), filter=where)
        elif mode in _RECALL_MODES and query.query_embedding is not None:
            found = self._client.recall_by_vector(query.query_embedding, k=top_k(k), filter=where)
        elif mode in _RECALL_MODES and query.query_str:  # blank: recall finds no words in it, the vector still ranks
            found = self._client.recall_by_vector(self._queries.query(query.query_str), k=top_k(k), filter=where)
        elif mode in _RECALL_MODES:
            raise InvalidInputError("a sovseal query needs query_str (or query_embedding from the store's embedder)")
        else:
            raise NotImplementedError(f"SovsealVectorStore does not answer {mode.value!r} queries: use default, hybrid or mmr")
        nodes = [node_from_memory(m, self._client) for m in found]
        return VectorStoreQueryResult(
            nodes=nodes,
            similarities=[float(m.score) if m.score is not None else 0.0 for m in found],
            ids=[n.node_id for n in nodes],
        )

    async def aquery(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        return await asyncio.to_thread(self.query, query, **kwargs)

    def _mmr(self, query: VectorStoreQuery, k: int, where: dict[str, Any], threshold: float | None) -> list[Memory]:
        from dataclasses import replace

        from llama_index.core.indices.query.embedding_utils import get_top_k_mmr_embeddings

        prefetch = top_k(k * self.mmr_prefetch_factor)
        if query.query_str:
            vector = self._queries.query(query.query_str)
        elif query.query_embedding is not None:
            vector = np.asarray(query.query_embedding, dtype=np.float32)
        else:
            raise InvalidInputError("an MMR query needs query_str or query_embedding: set one on the VectorStoreQuery")
        candidates = self._client.recall_by_vector(vector, k=prefetch, filter=where)
        if not candidates:
            return []
        texts = [node_from_memory(m, self._client).get_content(metadata_mode=MetadataMode.NONE) for m in candidates]
        embeddings = self._queries.documents(texts)
        norms = np.linalg.norm(embeddings, axis=1, keepdims=True)
        embeddings = embeddings / np.where(norms == 0, 1, norms)
        _, ids = get_top_k_mmr_embeddings(
            vector.tolist(),
            embeddings.tolist(),
            similarity_top_k=k,
            embedding_ids=list(range(len(candidates))),
            mmr_threshold=threshold,
        )
        cosine = embeddings @ (vector / (np.linalg.norm(vector) or 1.0))
        return [replace(candidates[i], score=float(cosine[i])) for i in ids]

    # -- lineage -------------------------------------------------------------------------------

    def snapshot(self) -> str | None:
        """The current branch's HEAD snapshot id: pass it to :meth:`rollback` or :meth:`fork` later."""
        return self._client.snapshot()

    def rollback(self, snapshot_id: str) -> None:
        """Move the branch's HEAD back to ``snapshot_id``: the index shows the nodes as they were then.
        Nothing is deleted; a later snapshot id rolls forward again."""
        self._client.rollback(snapshot_id)

    def fork(self, snapshot_id: str | None = None, *, branch: str | None = None) -> str:
        """Create a branch at ``snapshot_id`` (default: HEAD) and switch the client to it; returns its name."""
        return self._client.fork(snapshot_id, branch=branch)

    def checkout(self, branch: str) -> None:
        """Switch the client to another branch."""
        self._client.checkout(branch)

    @property
    def branch(self) -> str:
        return self._client.branch

    def branches(self) -> list[str]:
        return self._client.branches()

    def log(self, *, limit: int | None = None) -> list[LogEntry]:
        """The snapshots from HEAD back to genesis, newest first (all collections of the store)."""
        return self._client.log(limit=limit)

    def verify(self) -> VerifyReport:
        """Open every record and re-derive every snapshot id (tamper evidence)."""
        return self._client.verify()
