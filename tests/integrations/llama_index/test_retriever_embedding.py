"""SovsealRetriever (sovseal recall as NodeWithScore) and SovsealEmbedding (the on-device model)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llama_index.vector_stores.sovseal", reason="pip install -e integrations/llama-index-sovseal")

from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.base.embeddings.base import BaseEmbedding
from llama_index.core.embeddings import MockEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.query_engine import RetrieverQueryEngine
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import FilterOperator, MetadataFilter, MetadataFilters
from llama_index.embeddings.sovseal import SovsealEmbedding
from llama_index.retrievers.sovseal import SovsealRetriever
from llama_index.vector_stores.sovseal import SovsealVectorStore

from sovseal import Sovseal

MEMORIES = [
    ("user.preferences.editor", "Prefers Neovim with a light colour scheme", "semantic", {"source": "chat"}),
    ("user.pets", "Has a grey cat called Miso", "semantic", {"source": "profile"}),
    ("episode.2024-05-01", "Debugged a flaky CI job caused by a timezone bug", "episodic", {"source": "chat"}),
    ("howto.deploy", "Deploy with make release then tag the commit", "procedural", {"source": "docs"}),
]


@pytest.fixture
def client(store_dir: Path, key: bytes, embed_model):
    with Sovseal(store_dir, key=key, embedder=embed_model.embedder) as c:
        for path, text, type_, md in MEMORIES:
            c.store(path, text, type=type_, metadata=md)
        yield c


def test_retriever_is_a_llama_index_retriever(client) -> None:
    assert isinstance(SovsealRetriever(client), BaseRetriever)


def test_recall_as_nodes_with_scores(client) -> None:
    hits = SovsealRetriever(client, similarity_top_k=2).retrieve("what pet does the user have?")
    assert len(hits) == 2
    assert hits[0].node.node_id == "user.pets" and hits[0].node.get_content() == "Has a grey cat called Miso"
    assert hits[0].node.metadata == {"source": "profile"}  # exactly the stored metadata
    assert hits[0].score >= hits[1].score > 0


def test_filters_as_metadata_filters_or_sovseal_dicts(client) -> None:
    chat_only = MetadataFilters(filters=[MetadataFilter(key="source", value="chat")])
    hits = SovsealRetriever(client, similarity_top_k=4, filters=chat_only).retrieve("anything at all")
    assert {h.node.node_id for h in hits} == {"user.preferences.editor", "episode.2024-05-01"}
    hits = SovsealRetriever(client, similarity_top_k=4, filters={"type": "procedural"}).retrieve("how to ship")
    assert [h.node.node_id for h in hits] == ["howto.deploy"]
    hits = SovsealRetriever(client, similarity_top_k=4, path_prefix="user.").retrieve("user")
    assert {h.node.node_id for h in hits} == {"user.preferences.editor", "user.pets"}
    text = MetadataFilters(filters=[MetadataFilter(key="source", value="PRO", operator=FilterOperator.TEXT_MATCH_INSENSITIVE)])
    assert [h.node.node_id for h in SovsealRetriever(client, filters=text).retrieve("cat")] == ["user.pets"]


def test_lineage_fields_are_opt_in(client) -> None:
    [hit] = SovsealRetriever(client, similarity_top_k=1, include_lineage=True).retrieve("Neovim")
    md = hit.node.metadata
    assert md["source"] == "chat" and md["sovseal_path"] == "user.preferences.editor"
    assert md["sovseal_snapshot_id"].startswith("snap_") and md["sovseal_type"] == "semantic"
    assert "sovseal_snapshot_id" in hit.node.excluded_llm_metadata_keys
    assert "sovseal_snapshot_id" in hit.node.excluded_embed_metadata_keys


def test_recall_another_branch_without_switching(client) -> None:
    base = client.snapshot()
    client.fork(base, branch="what-if")
    client.store("user.pets", "Has a golden retriever called Biscuit")
    client.checkout("main")
    on_main = SovsealRetriever(client, similarity_top_k=1).retrieve("pet")
    on_fork = SovsealRetriever(client, similarity_top_k=1, branch="what-if").retrieve("pet")
    assert "Miso" in on_main[0].node.get_content() and "Biscuit" in on_fork[0].node.get_content()
    assert client.branch == "main"


def test_retriever_over_a_vector_store_collection_and_in_a_query_engine(client, embed_model) -> None:
    store = SovsealVectorStore(client, embedder=embed_model, collection="kb")
    VectorStoreIndex.from_documents(
        [Document(text="The office wifi password rotates every Monday.", doc_id="it-faq")],
        storage_context=StorageContext.from_defaults(vector_store=store),
        embed_model=embed_model,
    )
    retriever = SovsealRetriever.from_vector_store(store, similarity_top_k=3)
    hits = retriever.retrieve("wifi password")
    assert [h.node.ref_doc_id for h in hits] == ["it-faq"]  # the stored node, and only this collection's
    engine = RetrieverQueryEngine.from_args(retriever, llm=MockLLM())
    assert engine.query("when does the wifi password change?").source_nodes[0].node.ref_doc_id == "it-faq"
    assert asyncio.run(retriever.aretrieve("wifi"))[0].node.ref_doc_id == "it-faq"


def test_bad_top_k_is_refused(client) -> None:
    with pytest.raises(ValueError):
        SovsealRetriever(client, similarity_top_k=0)


# -- SovsealEmbedding -------------------------------------------------------------------------------


def test_embedding_is_the_on_device_model(embed_model) -> None:
    assert isinstance(embed_model, BaseEmbedding) and SovsealEmbedding.class_name() == "SovsealEmbedding"
    texts = [f"sentence number {i} about {'cats' if i % 2 else 'stock markets'}" for i in range(70)]
    batch = np.array(embed_model.get_text_embedding_batch(texts))  # 70 texts: two batches of 64 and 6
    assert batch.shape == (70, 384)
    assert np.allclose(np.linalg.norm(batch, axis=1), 1.0, atol=1e-4)
    single = np.array(embed_model.get_text_embedding(texts[3]))
    assert np.allclose(single, batch[3], atol=1e-4)
    direct = embed_model.embedder.embed_documents([texts[3]])[0]
    assert np.allclose(single, direct, atol=1e-5)
    query = np.array(embed_model.get_query_embedding("cats"))
    assert float(query @ batch[1]) > float(query @ batch[0])


def test_embedding_async(embed_model) -> None:
    async def run():
        q = await embed_model.aget_query_embedding("hello")
        t = await embed_model.aget_text_embedding("hello")
        b = await embed_model.aget_text_embedding_batch(["hello", "world"])
        return q, t, b

    q, t, b = asyncio.run(run())
    assert np.allclose(q, t, atol=1e-5) and np.allclose(b[0], t, atol=1e-5) and len(b) == 2


def test_any_llama_index_embedding_can_be_the_store_embedder(tmp_path: Path, key: bytes) -> None:
    """A user may choose another model (here LlamaIndex's MockEmbedding stands in for a remote one)."""
    with SovsealVectorStore(path=tmp_path / "mock", key=key, embedder=MockEmbedding(embed_dim=8)) as store:
        store.add([TextNode(id_="a", text="alpha"), TextNode(id_="b", text="beta")])
        assert sorted(n.node_id for n in store.get_nodes()) == ["a", "b"]
        hits = SovsealRetriever(store.client, path_prefix=store.path_prefix).retrieve("beta")
        assert hits[0].node.node_id == "b"  # the keyword half of recall still ranks
