"""``SovsealChatMessageHistory``: chat messages per session as sealed sovseal records (compatibility path)."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

from sovseal import Sovseal

from ._common import ROOT, accepts, check_key, check_segment, open_client

#: Message numbers are zero-padded so paths sort in conversation order.
_DIGITS = 8


class SovsealChatMessageHistory(BaseChatMessageHistory):
    """The messages of one chat session, each a sealed, lineage-tracked sovseal record.

    LangChain deprecated ``BaseChatMessageHistory`` and ``RunnableWithMessageHistory`` in favour of
    LangGraph persistence. New code should use sovseal's LangGraph integration,
    ``langgraph-checkpoint-sovseal`` (``langgraph.checkpoint.sovseal.SovsealSaver`` for a thread's state,
    ``langgraph.store.sovseal.SovsealStore`` for long-term memory). This class is the compatibility path
    for chains built on ``RunnableWithMessageHistory``.

    Message ``n`` of a session is the record ``langchain-chat/<namespace>/<session_id>/<n>`` with the
    message as its payload (``message_to_dict``), memory type ``episodic``, and metadata
    ``{"session_id": ..., "role": "human" | "ai" | ...}``, so a sovseal recall can find what was said.
    :meth:`clear` appends tombstones: the conversation stays in the lineage and a rollback restores it.
    One writer per session at a time (two processes appending to the same session at once can
    overwrite each other's message numbers).

    Example:
        .. code-block:: python

            from langchain_core.runnables.history import RunnableWithMessageHistory
            from langchain_sovseal import SovsealChatMessageHistory
            from sovseal import Sovseal

            mem = Sovseal()  # $SOVSEAL_HOME, default ~/.sovseal
            chain_with_history = RunnableWithMessageHistory(
                chain,
                lambda session_id: SovsealChatMessageHistory(session_id, client=mem),
                input_messages_key="question",
                history_messages_key="history",
            )
    """

    def __init__(
        self,
        session_id: str,
        client: Sovseal | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        key: bytes | str | None = None,
        namespace: str = "default",
        **client_kwargs: Any,
    ) -> None:
        check_key(session_id, "session_id")
        if not session_id:
            raise ValueError("session_id must be a non-empty string")
        check_segment(namespace, "namespace")
        self.session_id = session_id
        self._prefix = f"{ROOT}-chat/{namespace}/{session_id}/"
        self._client, self._owns_client = open_client(
            client, path=path, key=key, embedder=None, branch=client_kwargs.pop("branch", None), client_kwargs=client_kwargs
        )
        self._text = accepts(self._client.store, "text")

    @property
    def client(self) -> Sovseal:
        return self._client

    def close(self) -> None:
        if self._owns_client:
            self._client.close()

    def __enter__(self) -> SovsealChatMessageHistory:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _path(self, n: int) -> str:
        return f"{self._prefix}{n:0{_DIGITS}d}"

    def _payloads(self) -> list[Any]:
        """The session's messages in order: records 0, 1, 2, ... up to the first one missing."""
        out: list[Any] = []
        while True:
            memory = self._client.get(self._path(len(out)))
            if memory is None:
                return out
            out.append(memory.payload)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        return messages_from_dict(self._payloads())

    async def aget_messages(self) -> list[BaseMessage]:
        return await asyncio.to_thread(lambda: self.messages)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        start = len(self._payloads())
        for i, message in enumerate(messages, start):
            extra: dict[str, Any] = {"text": f"{message.type}: {message.text}"} if self._text else {}
            self._client.store(
                self._path(i),
                message_to_dict(message),
                metadata={"session_id": self.session_id, "role": message.type},
                type="episodic",
                provenance="observed",
                **extra,
            )

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await asyncio.to_thread(self.add_messages, messages)

    def clear(self) -> None:
        """Delete the session's messages, newest first (so a rollback never leaves a gap)."""
        for i in reversed(range(len(self._payloads()))):
            self._client.delete(self._path(i))

    async def aclear(self) -> None:
        await asyncio.to_thread(self.clear)


__all__ = ["SovsealChatMessageHistory"]
