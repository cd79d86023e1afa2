from llama_index.embeddings.sovseal.base import SovsealEmbedding

__all__ = ["SovsealEmbedding"]
