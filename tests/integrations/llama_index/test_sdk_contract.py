"""The SDK methods the adapter is built on: batched writes and deletes, scans answered by
``Sovseal.find`` and dense search by ``Sovseal.recall_by_vector``. ``CountingSovseal`` records
which of sovseal's own methods the adapter calls and delegates to them, so the test shows the
adapter takes the batched and catalog paths (one ``store_many``, one ``find``, one ``delete_many``)
rather than a loop of single calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

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

from sovseal import Sovseal


class CountingSovseal(Sovseal):
    calls: list[str]

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.calls = []

    def find(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append("find")
        return super().find(*args, **kwargs)

    def recall_by_vector(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append("recall_by_vector")
        return super().recall_by_vector(*args, **kwargs)

    def store_many(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append("store_many")
        return super().store_many(*args, **kwargs)

    def store(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append("store")
        return super().store(*args, **kwargs)

    def delete_many(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append("delete_many")
        return super().delete_many(*args, **kwargs)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        self.calls.append("delete")
        return super().delete(*args, **kwargs)


@pytest.fixture
def future(store_dir: Path, key: bytes, embed_model):
    with CountingSovseal(store_dir, key=key, embedder=embed_model.embedder) as client:
        yield client


def test_the_adapter_uses_the_batched_and_scan_methods(future, embed_model) -> None:
    store = SovsealVectorStore(future, embedder=embed_model)
    store.add([TextNode(id_=f"n{i}", text=f"note {i}", metadata={"i": i}) for i in range(4)])
    assert future.calls == ["store_many"]
    tagged = MetadataFilters(filters=[MetadataFilter(key="i", value=2, operator=FilterOperator.GTE)])
    assert [n.node_id for n in store.get_nodes(filters=tagged)] == ["n2", "n3"]
    store.delete_nodes(filters=tagged)
    assert future.calls[-2:] == ["find", "delete_many"] and "delete" not in future.calls and "store" not in future.calls
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
