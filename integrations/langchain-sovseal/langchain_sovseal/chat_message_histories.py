"""``SovsealChatMessageHistory``: chat messages per session as sealed sovseal records (compatibility path)."""

from __future__ import annotations

import asyncio
import os
import re
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

from sovseal import Memory, Sovseal
from sovseal.errors import InvalidArgumentTypeError, InvalidInputError
from sovseal.integration import Erasure, HandleOwner, batch_id, check_key, check_segment, erase_flag, index_text, open_handle

from ._common import PARTS, ROOT

#: Numbers are zero-padded so paths sort in conversation order.
_DIGITS = 8
#: A message's name under its session: ``<base>.<batch>.<i>``, message i of a batch added when the
#: session showed ``base`` messages, or ``<n>``, message n as earlier releases named it.
_NAME = re.compile(rf"\d{{{_DIGITS}}}(?:\.[0-9a-f]{{24}}\.\d{{{_DIGITS}}})?")

#: The message records already read, per handle, per session: {path: Memory}. A message's path is
#: written once (its name holds its batch's unique id), so it shows one value for ever; which paths
#: are visible is asked of the catalog at every read (``Sovseal.paths``: nothing decrypted) and only
#: messages not read before are opened. ``RunnableWithMessageHistory`` makes a new history per call,
#: hence per handle, not per history. What is no longer visible (deleted, erased) is dropped, and a
#: name of an earlier release (``<n>``, which that release could write again) is always read afresh.
_READ: weakref.WeakKeyDictionary[Sovseal, dict[str, dict[str, Memory]]] = weakref.WeakKeyDictionary()
_READ_GUARD = threading.Lock()


class SovsealChatMessageHistory(HandleOwner, BaseChatMessageHistory):
    """The messages of one chat session, each a sealed, lineage-tracked sovseal record.

    LangChain deprecated ``BaseChatMessageHistory`` and ``RunnableWithMessageHistory`` in favour of
    LangGraph persistence. New code should use sovseal's LangGraph integration,
    ``langgraph-checkpoint-sovseal`` (``langgraph.checkpoint.sovseal.SovsealSaver`` for a thread's state,
    ``langgraph.store.sovseal.SovsealStore`` for long-term memory). This class is the compatibility path
    for chains built on ``RunnableWithMessageHistory``.

    Each message is a record under ``langchain-chat/<namespace>/<session_id>/``, named
    ``<base>.<batch>.<i>``: message ``i`` of the batch ``add_messages`` stored when the session showed
    ``base`` messages, ``batch`` a unique id that starts with the time. Its payload is the message
    (``message_to_dict``), its memory type ``episodic``, its metadata
    ``{"session_id": ..., "role": "human" | "ai" | ...}``, so a sovseal recall can find what was said.
    Messages are read in name order: by ``base``, then by batch (time, then its random part), then
    in the batch's order. Sessions written before this scheme (records named ``<n>``) read as before.

    No two writers ever write the same record, so a session written on two devices at once (or by
    two processes) keeps every message: after a sync both devices show both batches, each batch
    whole, in the same order.

    :meth:`clear` appends tombstones by default: the conversation stays in the lineage and a rollback
    restores it. With ``erase_on_delete=True`` (or ``clear(erase=True)``) it erases the messages
    instead (``Sovseal.purge``): every version of each on every branch, their part records too,
    unreadable for good (to the key holder too), the journal rewritten so the bytes leave the disk;
    with replication the server and the other devices drop them too. Use that for a right-to-erasure
    request; the default stays the cheap, reversible tombstone.

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
        erase_on_delete: bool = False,
        **client_kwargs: Any,
    ) -> None:
        check_key(session_id, "session_id")
        if not isinstance(erase_on_delete, bool):
            raise InvalidArgumentTypeError(f"erase_on_delete must be a bool (True or False), got {type(erase_on_delete).__name__}")
        self.erase_on_delete = erase_on_delete
        if not session_id:
            raise InvalidInputError("session_id must be a non-empty string: pass one id per conversation, such as 'user-42'")
        check_segment(namespace, "namespace")
        self.session_id = session_id
        self._prefix = f"{ROOT}-chat/{namespace}/{session_id}/"
        self._client, self._owns_client = open_handle(client, path=path, key=key, client_kwargs=client_kwargs)

    def _paths(self) -> list[str]:
        """This session's message paths in conversation order (name order), from the catalog. The
        prefix of session ``a`` also covers a session ``a/b``: only this session's names count."""
        start = len(self._prefix)
        return [p for p in self._client.paths(self._prefix) if _NAME.fullmatch(p, start)]

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        with _READ_GUARD:
            seen = _READ.setdefault(self._client, {}).get(self._prefix, {})
        now: dict[str, Memory] = {}
        for path in self._paths():
            memory = seen[path] if path in seen and "." in path[len(self._prefix) :] else self._client.get(path)
            if memory is not None:  # None: deleted since it was listed
                now[path] = memory
        with _READ_GUARD:
            _READ.setdefault(self._client, {})[self._prefix] = now
        # the parts of a large message are read and checked each time, as a record is when opened
        return messages_from_dict([PARTS.read(self._client, m) for m in now.values()])

    async def aget_messages(self) -> list[BaseMessage]:
        return await asyncio.to_thread(lambda: self.messages)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` with one ``Sovseal.store_many``: all of them or, if sovseal refuses one
        (metadata that is not JSON, a message over 64 MiB), none. A message whose JSON is over
        128 KiB is stored in part records; recall indexes the first 2,048 characters of each."""
        if not messages:
            return
        batch = f"{self._prefix}{len(self._paths()):0{_DIGITS}d}.{batch_id()}."
        parts: list[dict[str, Any]] = []
        items = []
        for i, message in enumerate(messages):
            path = f"{batch}{i:0{_DIGITS}d}"
            payload, message_parts = PARTS.pack(path, message_to_dict(message), where=f"message {i} of the batch", group=self._prefix)
            parts.extend(message_parts)
            items.append(
                {
                    "path": path,
                    "payload": payload,
                    "metadata": {"session_id": self.session_id, "role": message.type},
                    "type": "episodic",
                    "provenance": "observed",
                    "text": index_text(f"{message.type}: {message.text}"),
                }
            )
        self._client.store_many([*parts, *items])

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        await asyncio.to_thread(self.add_messages, messages)

    def clear(self, *, erase: bool | None = None) -> None:
        """Delete the session's messages, newest first.

        ``erase`` (default: this history's ``erase_on_delete``) erases them for good instead of
        appending tombstones: every version of each message the session shows, on every branch, and
        its part records, then one compaction (see the class docstring). Messages an earlier plain
        ``clear()`` removed are not shown any more, so a later erasing clear does not reach them:
        set ``erase_on_delete=True`` from the start where conversations must be erasable.
        """
        recs = [m for m in map(self._client.get, reversed(self._paths())) if m is not None]
        if not erase_flag(erase, self.erase_on_delete):
            PARTS.delete(self._client, recs)
        elif recs:
            with Erasure(self._client, PARTS) as erasure:
                for m in recs:
                    erasure.record(m.path, self._prefix, m.payload)

    async def aclear(self, *, erase: bool | None = None) -> None:
        await asyncio.to_thread(lambda: self.clear(erase=erase))


__all__ = ["SovsealChatMessageHistory"]
