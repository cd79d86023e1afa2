"""SovsealVectorStore through LlamaIndex's own surface: VectorStoreIndex, query engines, filters,
delete_ref_doc, hybrid and MMR queries, async methods, restart, lineage and what reaches the disk."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llama_index.vector_stores.sovseal", reason="pip install -e integrations/llama-index-sovseal")

from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.llms import MockLLM
from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    BasePydanticVectorStore,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)
from llama_index.vector_stores.sovseal import SovsealVectorStore

from sovseal import Sovseal
from sovseal.errors import SovsealError
from tests.fakes import fake_embed

DOCS = [
    ("eiffel", "The Eiffel Tower is a wrought-iron lattice tower in Paris, France.", {"topic": "travel", "year": 2019}),
    ("python", "Python is a programming language created by Guido van Rossum.", {"topic": "tech", "year": 2021}),
    ("bread", "Sourdough bread needs an active starter and a long, slow fermentation.", {"topic": "food", "year": 2023}),
    ("rust", "Rust is a systems programming language focused on memory safety.", {"topic": "tech", "year": 2015}),
    ("alps", "The Alps are the highest mountain range in Europe, crossing eight countries.", {"topic": "travel", "year": 2010}),
]


def _documents() -> list[Document]:
    return [Document(text=text, metadata=dict(md), doc_id=doc_id) for doc_id, text, md in DOCS]


def _index(store: SovsealVectorStore, embed_model) -> VectorStoreIndex:
    return VectorStoreIndex.from_documents(
        _documents(), storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed_model
    )


def test_is_a_llama_index_vector_store() -> None:
    names = [b.__name__ for b in SovsealVectorStore.__mro__]
    assert BasePydanticVectorStore.__name__ in names
    assert SovsealVectorStore.class_name() == "SovsealVectorStore"
    assert SovsealVectorStore.model_fields["stores_text"].default is True


def test_index_query_engine_answers_from_the_right_document(vector_store, embed_model) -> None:
    index = _index(vector_store, embed_model)
    engine = index.as_query_engine(llm=MockLLM(), similarity_top_k=1)
    response = engine.query("Who created the Python language?")
    assert response.source_nodes[0].node.ref_doc_id == "python"
    assert response.source_nodes[0].node.metadata == {"topic": "tech", "year": 2021}
    assert str(response)  # MockLLM answered from the retrieved context

    async def run():
        return await engine.aquery("Where is the wrought-iron tower?")

    assert asyncio.run(run()).source_nodes[0].node.ref_doc_id == "eiffel"


def test_retriever_scores_are_ordered(vector_store, embed_model) -> None:
    hits = _index(vector_store, embed_model).as_retriever(similarity_top_k=3).retrieve("mountains in Europe")
    assert hits[0].node.ref_doc_id == "alps"
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)


def test_restart_and_find_everything_again(store_dir: Path, key: bytes, embed_model) -> None:
    with SovsealVectorStore(path=store_dir, key=key, embedder=embed_model) as store:
        _index(store, embed_model)
        before = {n.node_id: n for n in store.get_nodes()}
    assert len(before) == len(DOCS)
    with SovsealVectorStore(path=store_dir, key=key, embedder=embed_model) as store:
        after = {n.node_id: n for n in store.get_nodes()}
        assert after.keys() == before.keys()
        for node_id, node in after.items():
            assert node.get_content() == before[node_id].get_content()
            assert node.metadata == before[node_id].metadata
            assert node.ref_doc_id == before[node_id].ref_doc_id
        index = VectorStoreIndex.from_vector_store(store, embed_model=embed_model)
        hit = index.as_retriever(similarity_top_k=1).retrieve("sourdough starter")[0]
        assert hit.node.ref_doc_id == "bread"
        assert index.as_query_engine(llm=MockLLM()).query("bread?").source_nodes


def test_delete_ref_doc(vector_store, embed_model) -> None:
    index = _index(vector_store, embed_model)
    index.delete_ref_doc("python")
    assert {n.ref_doc_id for n in vector_store.get_nodes()} == {"eiffel", "bread", "rust", "alps"}
    hits = index.as_retriever(similarity_top_k=5).retrieve("Guido van Rossum Python")
    assert "python" not in {h.node.ref_doc_id for h in hits}
    vector_store.delete("no-such-document")  # deleting what is not there is harmless


def test_a_document_split_into_nodes_is_deleted_whole(vector_store) -> None:
    source = RelatedNodeInfo(node_id="manual")
    nodes = [
        TextNode(id_=f"manual-{i}", text=f"Chapter {i} of the manual.", relationships={NodeRelationship.SOURCE: source})
        for i in range(3)
    ] + [TextNode(id_="other", text="Something else entirely.")]
    assert vector_store.add(nodes) == ["manual-0", "manual-1", "manual-2", "other"]
    vector_store.delete("manual")
    assert [n.node_id for n in vector_store.get_nodes()] == ["other"]


def test_upsert_replaces_a_node(vector_store) -> None:
    vector_store.add([TextNode(id_="n1", text="first version", metadata={"v": 1})])
    vector_store.add([TextNode(id_="n1", text="second version", metadata={"v": 2})])
    [node] = vector_store.get_nodes(node_ids=["n1"])
    assert (node.get_content(), node.metadata) == ("second version", {"v": 2})
    assert len(vector_store.client.log()) == 2  # both versions are in the lineage


def test_get_and_delete_nodes(vector_store) -> None:
    vector_store.add([TextNode(id_=f"n{i}", text=f"note number {i}", metadata={"i": i}) for i in range(6)])
    assert [n.node_id for n in vector_store.get_nodes(node_ids=["n4", "n1"])] == ["n4", "n1"]
    assert vector_store.get_nodes(node_ids=[]) == []
    assert vector_store.get_nodes(node_ids=["missing"]) == []
    odd = MetadataFilters(filters=[MetadataFilter(key="i", value=[1, 3, 5], operator=FilterOperator.IN)])
    assert [n.node_id for n in vector_store.get_nodes(filters=odd)] == ["n1", "n3", "n5"]
    assert [n.node_id for n in vector_store.get_nodes(node_ids=["n1", "n2"], filters=odd)] == ["n1"]
    vector_store.delete_nodes(filters=odd)
    vector_store.delete_nodes(node_ids=["n0"])
    assert [n.node_id for n in vector_store.get_nodes()] == ["n2", "n4"]
    with pytest.raises(ValueError):
        vector_store.delete_nodes()  # deleting everything is clear(), never an accident
    vector_store.clear()
    assert vector_store.get_nodes() == []


def test_collections_do_not_see_each_other(store_dir: Path, key: bytes, embed_model) -> None:
    with Sovseal(store_dir, key=key, embedder=embed_model.embedder) as client:
        a = SovsealVectorStore(client, embedder=embed_model, collection="a")
        b = SovsealVectorStore(client, embedder=embed_model, collection="b")
        a.add([TextNode(id_="x", text="apples and pears")])
        b.add([TextNode(id_="x", text="apples and oranges")])
        assert [n.get_content() for n in a.get_nodes()] == ["apples and pears"]
        hits = b.query(VectorStoreQuery(query_str="apples", similarity_top_k=5)).nodes
        assert [n.get_content() for n in hits] == ["apples and oranges"]
        b.clear()
        assert len(a.get_nodes()) == 1


def test_a_client_alone_embeds_queries_with_its_own_embedder(store_dir: Path, key: bytes) -> None:
    """client= without embedder=: MMR queries and candidates are embedded with client.embedder (a
    fake 32-d model here, not sovseal's default), the model the client's vectors come from."""
    embedded: list[list[str]] = []

    def embed(texts: Sequence[str]) -> np.ndarray:
        embedded.append(list(texts))
        return fake_embed(texts)

    with Sovseal(store_dir, key=key, embedder=embed) as client:
        store = SovsealVectorStore(client)
        store.add([TextNode(id_=name, text=name) for name in ("apples", "pears", "plums")])
        embedded.clear()
        query = VectorStoreQuery(query_str="pears", similarity_top_k=2, mode=VectorStoreQueryMode.MMR)
        result = store.query(query)
        assert embedded[0] == ["pears"]  # the query, by the client's model
        assert result.ids[0] == "pears" and result.similarities[0] == pytest.approx(1.0, abs=1e-5)


def test_hybrid_mode_finds_an_exact_rare_token(vector_store, embed_model) -> None:
    nodes = [TextNode(id_=f"n{i}", text=f"Routine maintenance log entry {i}: all systems nominal.") for i in range(12)]
    nodes.append(TextNode(id_="ticket", text="Maintenance log entry: error code ZX-4471 on pump three."))
    vector_store.add(nodes)
    index = VectorStoreIndex.from_vector_store(vector_store, embed_model=embed_model)
    retriever = index.as_retriever(vector_store_query_mode="hybrid", similarity_top_k=2, alpha=0.5)
    assert retriever.retrieve("ZX-4471")[0].node.node_id == "ticket"
    result = vector_store.query(
        VectorStoreQuery(query_str="ZX-4471", mode=VectorStoreQueryMode.HYBRID, similarity_top_k=1, hybrid_top_k=3)
    )
    assert result.ids[0] == "ticket" and len(result.ids) == 3


def test_mmr_prefers_diverse_results(vector_store) -> None:
    same = "The cat sat on the warm windowsill in the afternoon sun."
    vector_store.add(
        [TextNode(id_=f"dup{i}", text=same) for i in range(4)]
        + [TextNode(id_="dog", text="A dog slept on the porch in the afternoon sun.")]
    )
    plain = vector_store.query(VectorStoreQuery(query_str="cat on the windowsill", similarity_top_k=2))
    assert all(i.startswith("dup") for i in plain.ids)
    diverse = vector_store.query(
        VectorStoreQuery(query_str="cat on the windowsill", similarity_top_k=2, mode=VectorStoreQueryMode.MMR, mmr_threshold=0.3)
    )
    assert diverse.ids[0].startswith("dup") and diverse.ids[1] == "dog"
    assert all(-1.0 <= s <= 1.0 for s in diverse.similarities)


def test_unsupported_modes_say_so(vector_store) -> None:
    vector_store.add([TextNode(id_="n", text="anything")])
    with pytest.raises(NotImplementedError):
        vector_store.query(VectorStoreQuery(query_str="x", mode=VectorStoreQueryMode.SVM))


def test_query_by_embedding_alone(vector_store, embed_model) -> None:
    vector_store.add([TextNode(id_="a", text="quantum physics lecture"), TextNode(id_="b", text="chocolate cake recipe")])
    vector = embed_model.get_query_embedding("how to bake a cake")
    result = vector_store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=1))
    assert result.ids == ["b"] and 0 < result.similarities[0] <= 1


def test_async_methods(vector_store) -> None:
    async def run():
        ids = await vector_store.async_add([TextNode(id_=f"n{i}", text=f"async note {i}", metadata={"i": i}) for i in range(4)])
        assert ids == ["n0", "n1", "n2", "n3"]
        found = await vector_store.aquery(VectorStoreQuery(query_str="async note 2", similarity_top_k=1))
        assert found.ids == ["n2"]
        assert [n.node_id for n in await vector_store.aget_nodes(node_ids=["n3"])] == ["n3"]
        await vector_store.adelete_nodes(node_ids=["n3"])
        await vector_store.adelete("no-doc")
        assert len(await vector_store.aget_nodes()) == 3
        await vector_store.aclear()
        assert await vector_store.aget_nodes() == []

    asyncio.run(run())


def test_lineage_through_the_vector_store(vector_store, embed_model) -> None:
    index = _index(vector_store, embed_model)
    checkpoint = vector_store.snapshot()
    index.insert(Document(text="Kyoto has over a thousand Buddhist temples.", doc_id="kyoto"))
    index.delete_ref_doc("python")
    assert {n.ref_doc_id for n in vector_store.get_nodes()} == {"eiffel", "bread", "rust", "alps", "kyoto"}

    latest = vector_store.snapshot()
    vector_store.rollback(checkpoint)  # the index shows the documents as they were
    assert {n.ref_doc_id for n in vector_store.get_nodes()} == {"eiffel", "python", "bread", "rust", "alps"}
    assert index.as_retriever(similarity_top_k=1).retrieve("Guido")[0].node.ref_doc_id == "python"
    vector_store.rollback(latest)  # nothing was deleted: roll forward again
    assert "kyoto" in {n.ref_doc_id for n in vector_store.get_nodes()}

    main = vector_store.branch
    branch = vector_store.fork(checkpoint, branch="experiment")
    assert branch == "experiment" and vector_store.branch == "experiment"
    vector_store.clear()
    assert vector_store.get_nodes() == []
    vector_store.checkout(main)
    assert len(vector_store.get_nodes()) == 5
    assert set(vector_store.branches()) >= {main, "experiment"}
    assert vector_store.log(limit=1)[0].snapshot_id == vector_store.snapshot()
    assert vector_store.verify().ok


def test_nothing_in_the_clear_on_disk(store_dir: Path, key: bytes, embed_model) -> None:
    secret_text = "Patient Zelda Quistgaard was prescribed 40mg of Xanopril."
    with SovsealVectorStore(path=store_dir, key=key, embedder=embed_model) as store:
        index = VectorStoreIndex.from_documents(
            [Document(text=secret_text, metadata={"clinic": "Brightwater Oncology"}, doc_id="chart-7781")],
            storage_context=StorageContext.from_defaults(vector_store=store),
            embed_model=embed_model,
        )
        node_id = store.get_nodes()[0].node_id
        assert index.as_retriever().retrieve("prescription")[0].node.get_content() == secret_text
    needles = [b"Quistgaard", b"Xanopril", b"Brightwater", b"chart-7781", node_id.encode(), b"llamaindex/default"]
    blobs = [p.read_bytes() for p in store_dir.rglob("*") if p.is_file()]
    assert blobs
    for needle in needles:
        for form in (needle, needle.decode().encode("utf-16-le")):
            assert not any(form in blob for blob in blobs), needle


def test_a_wrong_key_opens_nothing(store_dir: Path, key: bytes, embed_model) -> None:
    with SovsealVectorStore(path=store_dir, key=key, embedder=embed_model) as store:
        store.add([TextNode(id_="n", text="sealed")])
    with pytest.raises(SovsealError), SovsealVectorStore(path=store_dir, key=os.urandom(32), embedder=embed_model) as other:
        other.get_nodes()
