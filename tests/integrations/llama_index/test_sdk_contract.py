"""The SDK methods the adapter asks of sovseal, exercised through stand-ins built on public methods.

``Sovseal.find`` and ``Sovseal.delete_many`` are not in the SDK yet; the adapter uses them when
present (``recall_by_vector`` and ``store_many`` are, and the stand-in only records their calls). ``FutureSovseal`` implements each with
the exact signature and semantics asked for (slowly, on ``state``/``get``/``store``/``delete``), so
the adapter's code paths for them are tested today and the real methods can drop in.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("llama_index.vector_stores.sovseal", reason="pip install -e integrations/llama-index-sovseal")

from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import (
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)
from llama_index.vector_stores.sovseal import SovsealVectorStore
from llama_index.vector_stores.sovseal.filters import matches_sdk

from sovseal import Sovseal
from sovseal.recall import parse_filter


class FutureSovseal(Sovseal):
    calls: list[str]

    def __init__(self, *args, embedder, **kwargs):
        super().__init__(*args, embedder=embedder, **kwargs)
        self._embedder_fn = embedder
        self.calls = []

    def find(self, filter=None, *, branch=None, limit=None):
        """Every memory visible at HEAD matching ``filter`` (recall's filter language), in path order."""
        self.calls.append("find")
        parse_filter(filter)
        assert branch is None
        found = [self.get(p) for p in sorted(self.state())]
        found = [m for m in found if m is not None and (filter is None or matches_sdk(filter, m))]
        return found[:limit]

    def recall_by_vector(self, vector, *, k=5, filter=None, branch=None):
        """The k memories visible at HEAD nearest to ``vector`` by cosine (``Memory.score``), best first."""
        self.calls.append("recall_by_vector")
        found = [m for m in (self.get(p) for p in self.state()) if m is not None and (filter is None or matches_sdk(filter, m))]
        if not found:
            return []
        q = np.asarray(vector, dtype=np.float32)
        q = q / np.linalg.norm(q)
        vectors = np.asarray(self._embedder_fn.embed_documents([str(m.payload) for m in found]))
        scores = vectors @ q
        order = np.argsort(-scores)[:k]
        return [replace(found[i], score=float(scores[i])) for i in order]

    def store_many(self, items, *, vectors=None):
        self.calls.append("store_many")
        return super().store_many(items, vectors=vectors)

    def delete_many(self, paths):
        self.calls.append("delete_many")
        return [self.delete(p) for p in paths]


@pytest.fixture
def future(store_dir: Path, key: bytes, embed_model):
    with FutureSovseal(store_dir, key=key, embedder=embed_model.embedder) as client:
        yield client


def test_the_adapter_uses_the_batched_and_scan_methods(future, embed_model) -> None:
    store = SovsealVectorStore(future, embedder=embed_model)
    store.add([TextNode(id_=f"n{i}", text=f"note {i}", metadata={"i": i}) for i in range(4)])
    assert future.calls == ["store_many"]
    tagged = MetadataFilters(filters=[MetadataFilter(key="i", value=2, operator=FilterOperator.GTE)])
    assert [n.node_id for n in store.get_nodes(filters=tagged)] == ["n2", "n3"]
    store.delete_nodes(filters=tagged)
    assert future.calls[-2:] == ["find", "delete_many"]
    assert [n.node_id for n in store.get_nodes()] == ["n0", "n1"]


def test_dense_query_and_mmr_through_recall_by_vector(future, embed_model) -> None:
    store = SovsealVectorStore(future, embedder=embed_model)
    store.add(
        [
            TextNode(id_="physics", text="quantum physics lecture notes", metadata={"kind": "study"}),
            TextNode(id_="cake", text="chocolate cake recipe with cocoa", metadata={"kind": "food"}),
            TextNode(id_="cake2", text="chocolate cake recipe with cocoa", metadata={"kind": "food"}),
            TextNode(id_="bread", text="how to bake sourdough bread", metadata={"kind": "food"}),
        ]
    )
    vector = embed_model.get_query_embedding("baking a chocolate cake")
    result = store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=2))
    assert set(result.ids) == {"cake", "cake2"} and all(0 < s <= 1 for s in result.similarities)
    study = MetadataFilters(filters=[MetadataFilter(key="kind", value="study")])
    assert store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=2, filters=study)).ids == ["physics"]
    mmr = store.query(
        VectorStoreQuery(
            query_str="baking a chocolate cake", similarity_top_k=2, mode=VectorStoreQueryMode.MMR, mmr_threshold=0.2
        )
    )
    assert mmr.ids[0] in {"cake", "cake2"} and mmr.ids[1] not in {"cake", "cake2"}
    assert "recall_by_vector" in future.calls
