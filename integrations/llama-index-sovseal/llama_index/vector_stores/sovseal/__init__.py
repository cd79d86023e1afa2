from llama_index.vector_stores.sovseal.base import SovsealVectorStore, node_from_memory

__all__ = ["SovsealVectorStore", "node_from_memory"]
