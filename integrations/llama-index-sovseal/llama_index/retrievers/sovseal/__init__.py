from llama_index.retrievers.sovseal.base import SovsealRetriever

__all__ = ["SovsealRetriever"]
