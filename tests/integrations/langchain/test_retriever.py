"""SovsealRetriever: sovseal's full recall behind LangChain's retriever interface."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_sovseal import SovsealRetriever, SovsealVectorStore
from pydantic import ValidationError

from sovseal import Sovseal

TEXTS = {
    "enc": ("memories are sealed with AES-256-GCM before they touch the disk", {"topic": "crypto", "year": 2024}),
    "dag": ("the lineage is an append-only DAG of snapshots", {"topic": "lineage", "year": 2023}),
    "fork": ("a fork starts a branch and a rollback moves HEAD", {"topic": "lineage", "year": 2025}),
    "rep": ("the server only ever receives ciphertext", {"topic": "replication", "year": 2022}),
    "kw": ("keyword candidates come from BM25 over an in-memory index", {"topic": "recall", "year": 2025}),
}


class SameVector(Embeddings):
    """Every text gets one vector: the dense side cannot tell documents apart, so what ranks is the keyword side."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [[1.0, 0.0, 0.0, 0.0] for _ in texts]

    def embed_query(self, text: str) -> list[float]:
        return [1.0, 0.0, 0.0, 0.0]


@pytest.fixture
def store(store_dir: Path, key: bytes) -> Iterator[SovsealVectorStore]:
    with SovsealVectorStore(SameVector(), path=store_dir, key=key, collection="kb") as s:
        s.add_documents([Document(id=i, page_content=t, metadata=m) for i, (t, m) in TEXTS.items()])
        yield s


def test_k_as_field_and_per_call(store: SovsealVectorStore) -> None:
    retriever = SovsealRetriever(vectorstore=store, k=2)
    assert len(retriever.invoke("snapshots")) == 2
    assert len(retriever.invoke("snapshots", k=4)) == 4
    assert len(retriever.invoke("snapshots", k=0)) == 0
    assert len(SovsealRetriever(vectorstore=store).invoke("snapshots")) == 4  # default k


def test_hybrid_recall_finds_keyword_matches(store: SovsealVectorStore) -> None:
    """The dense side ties every document (SameVector): the keyword side alone must find each one."""
    retriever = SovsealRetriever(vectorstore=store, k=1)
    for doc_id, word in [("enc", "AES-256-GCM"), ("dag", "DAG"), ("rep", "ciphertext"), ("kw", "BM25"), ("fork", "rollback")]:
        [doc] = retriever.invoke(word)
        assert doc == Document(id=doc_id, page_content=TEXTS[doc_id][0], metadata=TEXTS[doc_id][1])


def test_filters_per_field_and_per_call(store: SovsealVectorStore) -> None:
    retriever = SovsealRetriever(vectorstore=store, k=5, filter={"topic": "lineage"})
    assert sorted(d.id for d in retriever.invoke("anything")) == ["dag", "fork"]
    assert sorted(d.id for d in retriever.invoke("anything", filter={"year": {"$gte": 2025}})) == ["fork", "kw"]
    assert [d.id for d in retriever.invoke("anything", sovseal_filter={"type": "episodic"})] == []
    assert sorted(d.id for d in retriever.invoke("anything", sovseal_filter={"type": "semantic"})) == ["dag", "fork"]


def test_recall_is_scoped_to_the_collection(store: SovsealVectorStore) -> None:
    other = SovsealVectorStore(store.embeddings, client=store.client, collection="other")
    other.add_documents([Document(id="o", page_content="ciphertext ciphertext ciphertext")])
    store.client.store("agent.note", "ciphertext is all the server sees")
    ids = [d.id for d in SovsealRetriever(vectorstore=store, k=10).invoke("ciphertext")]
    assert "o" not in ids and "agent.note" not in ids and ids[0] == "rep"


def test_over_a_whole_sovseal_store(store_dir: Path, key: bytes) -> None:
    embed = DeterministicFakeEmbedding(size=16)
    with Sovseal(store_dir, key=key, embedder=embed.embed_documents) as mem:
        mem.store("user.editor", "the user edits with vim", metadata={"source": "chat"})
        mem.store("user.profile", {"name": "Ada", "langs": ["python", "ocaml"]}, type="episodic")
        retriever = SovsealRetriever(client=mem, k=1)
        assert retriever.invoke("vim") == [
            Document(id="user.editor", page_content="the user edits with vim", metadata={"source": "chat"})
        ]
        [doc] = retriever.invoke("ocaml")
        assert doc.id == "user.profile" and doc.metadata == {}
        assert doc.page_content == '{"langs": ["python", "ocaml"], "name": "Ada"}'
        assert [d.id for d in retriever.invoke("vim", sovseal_filter={"type": "episodic"})] == ["user.profile"]
        assert [d.id for d in retriever.invoke("anything", filter={"source": "chat"})] == ["user.editor"]


def test_reinforcement_and_lineage_through_recall_memories(store: SovsealVectorStore) -> None:
    store.add_documents([Document(id="dag", page_content=TEXTS["dag"][0], metadata=TEXTS["dag"][1])])  # same value again
    retriever = SovsealRetriever(vectorstore=store, k=1)
    [memory] = retriever.recall_memories("DAG")
    assert memory.path == "langchain/kb/dag" and memory.reinforce_count == 1 and memory.score is not None
    [doc] = retriever.invoke("DAG")
    assert doc.metadata == TEXTS["dag"][1]  # lineage stays out of the document


def test_branch_field_recalls_another_branch(store: SovsealVectorStore) -> None:
    base = store.snapshot()
    forked = store.fork(base, branch="side")
    with forked:
        forked.add_documents([Document(id="side-only", page_content="a note only the side branch has")])
        main = SovsealRetriever(vectorstore=store, k=10)
        side = SovsealRetriever(vectorstore=store, k=10, branch="side")
        assert "side-only" not in [d.id for d in main.invoke("note only")]
        assert next(d.id for d in side.invoke("side branch note")) == "side-only"


@pytest.mark.asyncio
async def test_async(store: SovsealVectorStore) -> None:
    retriever = SovsealRetriever(vectorstore=store, k=3)
    assert len(await retriever.ainvoke("DAG")) == 3
    docs = await retriever.ainvoke("DAG", k=1, filter={"topic": "lineage"})
    assert [d.id for d in docs] == ["dag"]


def test_validation(store: SovsealVectorStore) -> None:
    with pytest.raises(ValidationError):
        SovsealRetriever()
    with pytest.raises(ValidationError):
        SovsealRetriever(vectorstore=store, client=store.client)
    with pytest.raises(ValidationError):
        SovsealRetriever(vectorstore=store, k=-1)
