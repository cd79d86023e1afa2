from llama_index.storage.chat_store.sovseal.base import SovsealChatStore, SovsealLegacyChatStore

__all__ = ["SovsealChatStore", "SovsealLegacyChatStore"]
