"""LangChain integration for sovseal: a local-first, encrypted, lineage-tracked memory engine.

- :class:`SovsealVectorStore` — a ``VectorStore``; every document is a sealed sovseal record, with
  snapshot / fork / rollback reachable from the store.
- :class:`SovsealRetriever` — sovseal's full recall (hybrid, decay, reinforcement, filters).
- :class:`SovsealEmbeddings` — sovseal's on-device embedder.
- :class:`SovsealByteStore` — an encrypted ``ByteStore``.
- :class:`SovsealChatMessageHistory` — chat history per session (compatibility path; prefer LangGraph).
"""

from langchain_sovseal.chat_message_histories import SovsealChatMessageHistory
from langchain_sovseal.embeddings import SovsealEmbeddings
from langchain_sovseal.retrievers import SovsealRetriever
from langchain_sovseal.stores import SovsealByteStore
from langchain_sovseal.vectorstores import SovsealVectorStore

__all__ = [
    "SovsealByteStore",
    "SovsealChatMessageHistory",
    "SovsealEmbeddings",
    "SovsealRetriever",
    "SovsealVectorStore",
]
__version__ = "0.1.0"
