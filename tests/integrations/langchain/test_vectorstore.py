"""SovsealVectorStore beyond the standard suite: scores, MMR, filters, search by vector, from_texts,
collections, metadata fidelity, lineage (snapshot, fork, rollback) and the async twins."""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.vectorstores import VectorStoreRetriever
from langchain_sovseal import SovsealRetriever, SovsealVectorStore
from langchain_sovseal.vectorstores import EMBED_BATCH

from sovseal import Sovseal
from sovseal.errors import CanonicalizationError, InvalidInputError, UnknownSnapshotError
from tests.fakes import fake_embed


class AxisEmbeddings(Embeddings):
    """Known geometry: each word is an axis, a text is the sum of its words' axes.

    Lets tests state exact cosine similarities and MMR choices instead of trusting hash-seeded vectors.
    """

    WORDS = ("apple", "banana", "cherry", "date", "elder", "fig")

    def _one(self, text: str) -> list[float]:
        v = [float(text.split().count(w)) for w in self.WORDS]
        return v if any(v) else [0.0] * (len(self.WORDS) - 1) + [1e-3]

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return [self._one(t) for t in texts]

    def embed_query(self, text: str) -> list[float]:
        return self._one(text)


@pytest.fixture
def store(store_dir: Path, key: bytes) -> Iterator[SovsealVectorStore]:
    with SovsealVectorStore(AxisEmbeddings(), path=store_dir, key=key) as s:
        yield s


def _docs() -> list[Document]:
    return [
        Document(id="a", page_content="apple", metadata={"source": "x", "year": 2019, "rank": 1}),
        Document(id="ab", page_content="apple banana", metadata={"source": "x", "year": 2021, "rank": 2}),
        Document(id="b", page_content="banana", metadata={"source": "y", "year": 2022, "rank": 3}),
        Document(id="c", page_content="cherry", metadata={"source": "y", "year": 2023, "rank": 4}),
        Document(id="aa", page_content="apple apple", metadata={"source": "z", "year": 2024, "rank": 5}),
    ]


def test_scores_are_cosine_similarities(store: SovsealVectorStore) -> None:
    store.add_documents(_docs())
    found = store.similarity_search_with_score("apple", k=5)
    got = {doc.id: score for doc, score in found}
    assert [doc.id for doc, _ in found][:2] in (["a", "aa"], ["aa", "a"])
    assert got["a"] == pytest.approx(1.0, abs=1e-5)
    assert got["aa"] == pytest.approx(1.0, abs=1e-5)
    assert got["ab"] == pytest.approx(1 / math.sqrt(2), abs=1e-5)
    assert got["b"] == pytest.approx(0.0, abs=1e-5)
    scores = [s for _, s in found]
    assert scores == sorted(scores, reverse=True)


def test_relevance_scores_and_threshold_retriever(store: SovsealVectorStore) -> None:
    store.add_documents(_docs())
    found = {d.id: s for d, s in store.similarity_search_with_relevance_scores("apple", k=5)}
    assert found["a"] == pytest.approx(1.0, abs=1e-5)
    assert found["ab"] == pytest.approx((1 + 1 / math.sqrt(2)) / 2, abs=1e-5)
    assert found["c"] == pytest.approx(0.5, abs=1e-5)
    assert all(0.0 <= s <= 1.0 for s in found.values())
    retriever = store.as_retriever(search_type="similarity_score_threshold", search_kwargs={"score_threshold": 0.8, "k": 5})
    assert isinstance(retriever, VectorStoreRetriever)
    assert sorted(d.id for d in retriever.invoke("apple")) == ["a", "aa", "ab"]


def test_search_by_vector(store: SovsealVectorStore) -> None:
    store.add_documents(_docs())
    docs = store.similarity_search_by_vector([0.0, 0.0, 1.0, 0.0, 0.0, 0.0], k=1)
    assert docs == [Document(id="c", page_content="cherry", metadata={"source": "y", "year": 2023, "rank": 4})]
    scored = store.similarity_search_with_score_by_vector([0.0, 2.0, 0.0, 0.0, 0.0, 0.0], k=2)
    assert scored[0][0].id == "b" and scored[0][1] == pytest.approx(1.0, abs=1e-5)
    assert scored[1][0].id == "ab"


def test_mmr_prefers_diverse_documents(store: SovsealVectorStore) -> None:
    store.add_documents(_docs())
    # Plain similarity to "apple banana": ab (1.0), then a, aa, b (0.707 each).
    # MMR with a low lambda skips the near-duplicates of what it already took.
    plain = [d.id for d in store.similarity_search("apple banana", k=3)]
    assert plain[0] == "ab"
    mmr = [d.id for d in store.max_marginal_relevance_search("apple banana", k=3, fetch_k=5, lambda_mult=0.1)]
    assert mmr[0] == "ab"
    assert "c" in mmr  # orthogonal to everything chosen: diversity wins
    by_vector = store.max_marginal_relevance_search_by_vector([1.0, 1.0, 0, 0, 0, 0], k=3, fetch_k=5, lambda_mult=0.1)
    assert [d.id for d in by_vector] == mmr
    retriever = store.as_retriever(search_type="mmr", search_kwargs={"k": 3, "fetch_k": 5, "lambda_mult": 0.1})
    assert [d.id for d in retriever.invoke("apple banana")] == mmr
    assert store.max_marginal_relevance_search("apple", k=2, fetch_k=10, filter={"source": "y"})[0].metadata["source"] == "y"


def test_metadata_filters(store: SovsealVectorStore) -> None:
    store.add_documents(_docs())

    def ids(**kwargs: object) -> list[str]:
        return sorted(d.id for d in store.similarity_search("apple", k=10, **kwargs))  # type: ignore[arg-type]

    assert ids(filter={"source": "x"}) == ["a", "ab"]
    assert ids(filter={"year": {"$gte": 2022}}) == ["aa", "b", "c"]
    assert ids(filter={"source": "y", "year": {"$lt": 2023}}) == ["b"]
    assert ids(filter={"$or": [{"source": "z"}, {"rank": 1}]}) == ["a", "aa"]
    assert ids(filter={"$and": [{"source": {"$in": ["x", "y"]}}, {"$not": {"rank": {"$lte": 2}}}]}) == ["b", "c"]
    assert ids(filter={"missing": {"$exists": False}}) == ["a", "aa", "ab", "b", "c"]
    assert ids(filter={"source": "nowhere"}) == []
    assert ids(sovseal_filter={"type": "semantic"}) == ["a", "aa", "ab", "b", "c"]
    assert ids(sovseal_filter={"type": "episodic"}) == []
    with pytest.raises(InvalidInputError):
        store.similarity_search("apple", filter={"year": {"$near": 3}})
    with pytest.raises(ValueError):
        store.similarity_search("apple", filter={"$xor": []})
    retriever = store.as_retriever(search_kwargs={"k": 10, "filter": {"source": "y"}})
    assert sorted(d.id for d in retriever.invoke("apple")) == ["b", "c"]


def test_metadata_round_trips_exactly(store: SovsealVectorStore) -> None:
    metadata = {
        "int": 7,
        "big": 2**53 - 1,
        "neg": -3,
        "float": 0.25,
        "bool": True,
        "none": None,
        "text": "héllo ☃",
        "list": [1, "two", 3.5],
        "nested": {"a": {"b": [True, None]}},
        "id": 9,
    }
    store.add_documents([Document(id="m", page_content="apple", metadata=metadata)])
    [doc] = store.get_by_ids(["m"])
    assert doc.metadata == metadata
    assert type(doc.metadata["int"]) is int and type(doc.metadata["big"]) is int and type(doc.metadata["float"]) is float
    assert type(doc.metadata["bool"]) is bool
    [(found, _)] = store.similarity_search_with_score("apple", k=1)
    assert found == Document(id="m", page_content="apple", metadata=metadata)
    # JSON numbers are IEEE doubles (RFC 8785): an integral float comes back as an equal int, and an
    # integer a double cannot hold exactly is refused with a message instead of being rounded.
    store.add_documents([Document(id="f", page_content="apple", metadata={"x": 2.0})])
    assert store.get_by_ids(["f"])[0].metadata == {"x": 2}
    with pytest.raises(CanonicalizationError, match="store it as a string"):
        store.add_documents([Document(id="g", page_content="apple", metadata={"big": 2**60})])
    with pytest.raises(CanonicalizationError):
        store.add_documents([Document(id="g", page_content="apple", metadata={"when": object()})])
    assert store.get_by_ids(["g"]) == []


def test_lineage_never_enters_metadata_but_is_reachable(store: SovsealVectorStore) -> None:
    store.add_documents([Document(id="d1", page_content="apple", metadata={"k": 1})])
    store.add_documents([Document(id="d1", page_content="apple", metadata={"k": 1})])  # the same value: reinforced
    [doc] = store.similarity_search("apple", k=1)
    assert doc.metadata == {"k": 1}
    memories = store.get_memories(["d1", "nope"])
    assert list(memories) == ["d1"]
    memory = memories["d1"]
    assert memory.snapshot_id.startswith("snap_") and memory.reinforce_count == 1
    assert memory.path == store.path_prefix + "d1" and memory.type == "semantic"


def test_input_documents_and_ids(store: SovsealVectorStore) -> None:
    docs = [Document(page_content="apple"), Document(id="given", page_content="banana"), Document(id="x", page_content="cherry")]
    ids = store.add_documents(docs, ids=[None, None, "override"])  # type: ignore[list-item]
    assert ids[1:] == ["given", "override"] and isinstance(ids[0], str) and ids[0]
    assert docs[0].id is None and docs[2].id == "x"  # the input is not modified
    assert store.get_by_ids(["x"]) == []
    with pytest.raises(ValueError):
        store.add_documents(docs, ids=["only-one"])
    assert store.get_by_ids(["given", "missing", ids[0]]) == [
        Document(id="given", page_content="banana"),
        Document(id=ids[0], page_content="apple"),
    ]
    # an empty id is no id (InMemoryVectorStore gives it a new one): "" would name the collection's prefix
    [fresh] = store.add_texts(["papaya"], ids=[""])
    [named] = store.add_documents([Document(id="", page_content="kiwi")])
    assert fresh and named and fresh != named
    assert store.get_by_ids([fresh, named]) == [Document(id=fresh, page_content="papaya"), Document(id=named, page_content="kiwi")]


def test_add_texts_and_from_texts(tmp_path: Path) -> None:
    key = os.urandom(32)
    store = SovsealVectorStore.from_texts(
        ["apple", "banana"],
        AxisEmbeddings(),
        metadatas=[{"n": 1}, {"n": 2}],
        ids=["1", "2"],
        path=tmp_path / "s",
        key=key,
        collection="fruit",
    )
    try:
        assert store.collection == "fruit"
        assert store.similarity_search("banana", k=1) == [Document(id="2", page_content="banana", metadata={"n": 2})]
        assert store.add_texts(["cherry"], ids=["3"]) == ["3"]
        assert [d.id for d in store.similarity_search("cherry", k=1)] == ["3"]
    finally:
        store.close()
    # Everything is durable: a new handle with the same key sees it.
    with SovsealVectorStore(AxisEmbeddings(), path=tmp_path / "s", key=key, collection="fruit") as again:
        assert sorted(d.id for d in again.get_by_ids(["1", "2", "3"])) == ["1", "2", "3"]


def test_from_documents_keeps_document_ids(tmp_path: Path) -> None:
    store = SovsealVectorStore.from_documents(
        [Document(id="k1", page_content="apple", metadata={"s": 1})], AxisEmbeddings(), path=tmp_path / "s", key=os.urandom(32)
    )
    with store:
        assert store.get_by_ids(["k1"]) == [Document(id="k1", page_content="apple", metadata={"s": 1})]


def test_collections_share_a_store_without_mixing(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=AxisEmbeddings().embed_documents) as client:
        one = SovsealVectorStore(AxisEmbeddings(), client=client, collection="one")
        two = SovsealVectorStore(AxisEmbeddings(), client=client, collection="two")
        one.add_documents([Document(id="same", page_content="apple", metadata={"c": 1})])
        two.add_documents([Document(id="same", page_content="banana", metadata={"c": 2})])
        client.store("user.editor", "apple apple")  # a memory stored outside LangChain
        assert one.similarity_search("apple", k=5) == [Document(id="same", page_content="apple", metadata={"c": 1})]
        assert two.similarity_search("apple", k=5) == [Document(id="same", page_content="banana", metadata={"c": 2})]
        one.delete()  # ids=None: the whole collection, nothing else
        assert one.similarity_search("apple", k=5) == []
        assert two.get_by_ids(["same"]) != [] and client.get("user.editor") is not None
        one.close()  # a client passed in is not closed by the store
        assert client.get("user.editor") is not None
    with pytest.raises(ValueError):
        SovsealVectorStore(AxisEmbeddings(), path=store_dir, key=key, collection="a/b")


def test_a_client_without_embedding_embeds_with_its_own_embedder(store_dir: Path, key: bytes) -> None:
    """client= alone: documents and queries are embedded with client.embedder (here a fake 32-d
    model, not sovseal's default), so dense search and MMR match the client's vectors."""
    with Sovseal(store_dir, key=key, embedder=fake_embed) as client:
        store = SovsealVectorStore(client=client)
        assert store.embeddings.embed_query("fig") == pytest.approx(fake_embed(["fig"])[0].tolist())
        store.add_texts(["apple", "banana", "cherry"], ids=["a", "b", "c"])
        client.store("note", "fig")  # embedded by the client itself: the same space
        assert [d.id for d in store.similarity_search("banana", k=1)] == ["b"]
        assert store.max_marginal_relevance_search("cherry", k=2, fetch_k=3)[0].id == "c"
        assert client.recall_by_vector(store.embeddings.embed_query("fig"), k=1)[0].path == "note"
        # a store that opened its handle lends that handle's embeddings to the next one sharing it
        with SovsealVectorStore(AxisEmbeddings(), path=store_dir.parent / "axis", key=key) as first:
            second = SovsealVectorStore(client=first.client, collection="other")
            assert second.embeddings is first.embeddings


def test_k_edge_cases(store: SovsealVectorStore) -> None:
    assert store.similarity_search("apple", k=3) == []
    store.add_documents(_docs())
    assert store.similarity_search("apple", k=0) == []
    assert len(store.similarity_search("apple", k=50)) == 5


def test_snapshot_and_rollback(store: SovsealVectorStore) -> None:
    store.add_documents(_docs()[:2])
    before = store.snapshot()
    assert before is not None
    store.add_documents([Document(id="a", page_content="cherry", metadata={"changed": True})])
    store.delete(["ab"])
    store.add_documents(_docs()[2:3])
    assert sorted(d.id for d in store.similarity_search("apple", k=10)) == ["a", "b"]
    store.rollback(before)
    assert store.snapshot() == before
    assert sorted(d.id for d in store.similarity_search("apple", k=10)) == ["a", "ab"]
    assert store.get_by_ids(["a"]) == [_docs()[0]]
    # Nothing was deleted: the log still reaches the rolled-back history through its snapshot ids.
    assert len(store.log()) == 2
    with pytest.raises(UnknownSnapshotError):
        store.rollback("snap_" + "0" * 64)


def test_fork_returns_a_store_on_the_new_branch(store: SovsealVectorStore) -> None:
    store.add_documents(_docs()[:2])
    base = store.snapshot()
    store.add_documents(_docs()[2:3])
    forked = store.fork(base, branch="experiment")
    try:
        assert forked.branch == "experiment" and store.branch == "main"
        assert sorted(d.id for d in forked.similarity_search("apple", k=10)) == ["a", "ab"]
        forked.add_documents([Document(id="f", page_content="fig", metadata={})])
        forked.delete(["a"])
        assert sorted(d.id for d in forked.similarity_search("fig", k=10)) == ["ab", "f"]
        assert sorted(d.id for d in store.similarity_search("fig", k=10)) == ["a", "ab", "b"]
        assert sorted(store.branches()) == ["experiment", "main"]
        # Another store on an existing branch; and a fork of the current HEAD by default.
        again = store.checkout("experiment")
        with again:
            assert sorted(d.id for d in again.similarity_search("fig", k=10)) == ["ab", "f"]
        current = store.fork()
        with current:
            assert current.branch not in ("main", "experiment")
            assert sorted(d.id for d in current.similarity_search("fig", k=10)) == ["a", "ab", "b"]
    finally:
        forked.close()
    assert store.similarity_search("apple", k=1)  # the original store is still open and on main


def test_recall_retriever_from_the_store(store: SovsealVectorStore) -> None:
    store.add_documents(_docs())
    retriever = store.as_recall_retriever(k=2)
    assert isinstance(retriever, SovsealRetriever)
    docs = retriever.invoke("cherry")
    assert docs[0] == _docs()[3] and len(docs) == 2


@pytest.mark.asyncio
async def test_async_methods(store: SovsealVectorStore) -> None:
    ids = await store.aadd_documents(_docs())
    assert ids == ["a", "ab", "b", "c", "aa"]
    assert [d.id for d in await store.asimilarity_search("cherry", k=1)] == ["c"]
    [(doc, score)] = await store.asimilarity_search_with_score("banana", k=1)
    assert doc.id == "b" and score == pytest.approx(1.0, abs=1e-5)
    rel = await store.asimilarity_search_with_relevance_scores("banana", k=1)
    assert rel[0][1] == pytest.approx(1.0, abs=1e-5)
    assert [d.id for d in await store.asimilarity_search_by_vector([0, 0, 1.0, 0, 0, 0], k=1)] == ["c"]
    mmr = await store.amax_marginal_relevance_search("apple banana", k=3, fetch_k=5, lambda_mult=0.1)
    assert [d.id for d in mmr] == [
        d.id for d in store.max_marginal_relevance_search("apple banana", k=3, fetch_k=5, lambda_mult=0.1)
    ]
    assert [d.id for d in await store.aget_by_ids(["c", "zz"])] == ["c"]
    snap = store.snapshot()
    await store.adelete(["c"])
    assert await store.aget_by_ids(["c"]) == []
    assert snap is not None
    await store.arollback(snap)
    assert [d.id for d in await store.aget_by_ids(["c"])] == ["c"]
    assert [d.id for d in await store.as_retriever(search_kwargs={"k": 1}).ainvoke("cherry")] == ["c"]


@pytest.mark.asyncio
async def test_afrom_texts(tmp_path: Path) -> None:
    store = await SovsealVectorStore.afrom_texts(
        ["apple", "banana"], AxisEmbeddings(), ids=["1", "2"], path=tmp_path / "s", key=os.urandom(32)
    )
    with store:
        assert [d.id for d in await store.asimilarity_search("banana", k=1)] == ["2"]


def test_fake_embeddings_of_any_dimension(tmp_path: Path) -> None:
    for size in (3, 6, 64):
        with SovsealVectorStore(DeterministicFakeEmbedding(size=size), path=tmp_path / f"s{size}", key=os.urandom(32)) as s:
            s.add_texts(["foo", "bar", "baz"], ids=["1", "2", "3"])
            assert s.similarity_search("baz", k=1)[0].id == "3"
            vector = np.asarray(s.embeddings.embed_query("bar"))
            assert s.similarity_search_by_vector(list(vector), k=1)[0].id == "2"


class CountingEmbeddings(AxisEmbeddings):
    def __init__(self) -> None:
        self.calls: list[int] = []

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls.append(len(texts))
        return super().embed_documents(texts)


def test_add_documents_embeds_in_batches(store_dir: Path, key: bytes) -> None:
    """One embed_documents call per batch of documents, not one per document (an embeddings API bills per call)."""
    embeddings = CountingEmbeddings()
    with SovsealVectorStore(embeddings, path=store_dir, key=key) as store:
        store.add_texts(["apple"], ids=["warm"])  # the handle's first write also probes the dimension
        embeddings.calls.clear()
        n = EMBED_BATCH + 44
        texts = [f"apple {'banana ' * (i % 3)}cherry{i}" for i in range(n)]
        store.add_texts(texts, ids=[str(i) for i in range(n)])
        assert embeddings.calls == [EMBED_BATCH, 44]
        assert store.similarity_search_with_score("apple banana banana", k=1)[0][1] == pytest.approx(1.0, abs=1e-5)
        assert len(store.get_by_ids([str(i) for i in range(n)])) == n


def test_fork_of_a_store_on_a_client_with_an_explicit_key(store_dir: Path, key: bytes) -> None:
    """fork/checkout work on a view of the given handle: no second open, no keychain lookup."""
    with Sovseal(store_dir, key=key, embedder=AxisEmbeddings().embed_documents) as client:
        store = SovsealVectorStore(AxisEmbeddings(), client=client)
        store.add_documents(_docs()[:2])
        forked = store.fork(branch="experiment")
        forked.add_documents([Document(id="f", page_content="fig", metadata={})])
        assert client.branch == "main" and forked.branch == "experiment"
        assert sorted(d.id for d in store.similarity_search("fig", k=10)) == ["a", "ab"]
        assert sorted(d.id for d in store.checkout("experiment").similarity_search("fig", k=10)) == ["a", "ab", "f"]
        forked.close()  # closes nothing: the client stays open
        assert store.similarity_search("apple", k=1)
