"""``use_node_embeddings=True``: the vectors LlamaIndex computed with ``SovsealEmbedding`` are stored
as they are, so a ``VectorStoreIndex`` build embeds each node once instead of twice."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("llama_index.vector_stores.sovseal", reason="pip install -e integrations/llama-index-sovseal")

from llama_index.core import Document, StorageContext, VectorStoreIndex
from llama_index.core.schema import TextNode
from llama_index.vector_stores.sovseal import SovsealVectorStore

from sovseal import Sovseal

TEXTS = {
    "eiffel": "The Eiffel Tower is a wrought-iron lattice tower in Paris, France.",
    "bread": "Sourdough bread needs an active starter and a long, slow fermentation.",
    "rust": "Rust is a systems programming language focused on memory safety.",
}


class Counting:
    """The store's embedder, counting the texts sovseal itself embeds."""

    def __init__(self, inner) -> None:  # type: ignore[no-untyped-def]
        self.inner = inner
        self.texts: list[str] = []

    def __call__(self, texts):  # type: ignore[no-untyped-def]
        self.texts.extend(texts)
        return self.inner(texts)


@pytest.mark.parametrize("reuse", [True, False])
def test_an_index_build_embeds_each_node_once_when_the_vectors_are_reused(
    store_dir: Path, key: bytes, embed_model, reuse: bool
) -> None:
    counting = Counting(embed_model.embedder)
    with Sovseal(store_dir, key=key, embedder=counting) as client:
        store = SovsealVectorStore(client, embedder=embed_model, use_node_embeddings=reuse)
        docs = [Document(text=text, doc_id=doc_id) for doc_id, text in TEXTS.items()]
        index = VectorStoreIndex.from_documents(
            docs, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed_model
        )
        stored_texts = [t for t in counting.texts if any(text in t for text in TEXTS.values())]
        assert len(stored_texts) == (0 if reuse else len(TEXTS))
        found = index.as_retriever(similarity_top_k=1).retrieve("baking with a sourdough starter")
        assert found[0].node.ref_doc_id == "bread"
        assert client.verify().ok


def test_nodes_without_an_embedding_are_embedded_by_the_store(store_dir: Path, key: bytes, embed_model) -> None:
    counting = Counting(embed_model.embedder)
    with Sovseal(store_dir, key=key, embedder=counting) as client:
        store = SovsealVectorStore(client, embedder=embed_model, use_node_embeddings=True)
        store.add([TextNode(id_="rust", text=TEXTS["rust"])])
        assert any(TEXTS["rust"] in t for t in counting.texts)
