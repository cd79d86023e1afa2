"""``SovsealRetriever``: sovseal's recall as a LlamaIndex retriever.

It searches every memory of a sovseal store (or those under a path prefix): nodes a
``SovsealVectorStore`` wrote come back as the nodes that were added, and any other memory (stored
with the SDK, the CLI or the MCP server) as a ``TextNode`` whose id is its path.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.callbacks.base import CallbackManager
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.core.vector_stores.types import MetadataFilters
from llama_index.vector_stores.sovseal._common import open_client, top_k
from llama_index.vector_stores.sovseal.base import node_from_memory
from llama_index.vector_stores.sovseal.filters import scope

from sovseal import Memory, Sovseal
from sovseal.errors import InvalidInputError
from sovseal.integration import MAX_RECALL_K, HandleOwner

LINEAGE_KEYS = ("sovseal_path", "sovseal_snapshot_id", "sovseal_type", "sovseal_created_at")


class SovsealRetriever(HandleOwner, BaseRetriever):
    """Recall from sovseal: dense and keyword fused, lineage context, decay and reinforcement.

    Args:
        client: an open ``sovseal.Sovseal`` (shared), else one opened at ``path`` with ``key``.
        similarity_top_k: how many memories a retrieval returns (1..1000).
        filters: LlamaIndex ``MetadataFilters`` (every operator) or a sovseal filter dict
            (``{"type": "episodic", "metadata": {...}}``, see sovseal's docs/recall.md).
        path_prefix: only memories under this prefix (a ``SovsealVectorStore``'s
            ``store.path_prefix`` limits recall to its collection).
        branch: recall another branch's HEAD without switching the client.
        include_lineage: add ``sovseal_path``, ``sovseal_snapshot_id``, ``sovseal_type`` and
            ``sovseal_created_at`` to each node's metadata (kept out of what the LLM and the
            embedder see). Off by default: nodes carry exactly the metadata they were stored with.
    """

    def __init__(
        self,
        client: Sovseal | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        key: bytes | str | None = None,
        embedder: Any = None,
        similarity_top_k: int = 5,
        filters: MetadataFilters | dict[str, Any] | None = None,
        path_prefix: str = "",
        branch: str | None = None,
        include_lineage: bool = False,
        client_kwargs: dict[str, Any] | None = None,
        callback_manager: CallbackManager | None = None,
        verbose: bool = False,
    ) -> None:
        super().__init__(callback_manager=callback_manager, verbose=verbose)
        if not isinstance(similarity_top_k, int) or not 1 <= similarity_top_k <= MAX_RECALL_K:
            raise InvalidInputError(f"similarity_top_k must be an integer from 1 to {MAX_RECALL_K}, got {similarity_top_k!r}")
        self._client, _, self._owns_client = open_client(client, path, key, embedder, client_kwargs)
        self.similarity_top_k = similarity_top_k
        self.filters = filters
        self.path_prefix = path_prefix
        self.branch = branch
        self.include_lineage = include_lineage

    @classmethod
    def from_vector_store(cls, vector_store: Any, **kwargs: Any) -> SovsealRetriever:
        """A retriever over one ``SovsealVectorStore`` collection, sharing its client."""
        return cls(vector_store.client, path_prefix=vector_store.path_prefix, **kwargs)

    def _node(self, memory: Memory) -> NodeWithScore:
        node = node_from_memory(memory, self._client, branch=self.branch)
        if self.include_lineage:
            node.metadata.update(
                sovseal_path=memory.path,
                sovseal_snapshot_id=memory.snapshot_id,
                sovseal_type=memory.type,
                sovseal_created_at=memory.created_at.isoformat() if memory.created_at else None,
            )
            for keys in (node.excluded_embed_metadata_keys, node.excluded_llm_metadata_keys):
                keys.extend(k for k in LINEAGE_KEYS if k not in keys)
        return NodeWithScore(node=node, score=memory.score)

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        where = scope(self.path_prefix, self.filters)
        found = self._client.recall(query_bundle.query_str, k=top_k(self.similarity_top_k), filter=where, branch=self.branch)
        return [self._node(m) for m in found]

    async def _aretrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        return await asyncio.to_thread(self._retrieve, query_bundle)
