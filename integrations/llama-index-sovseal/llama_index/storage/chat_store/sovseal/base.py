"""Chat stores on sovseal: every chat message is one sealed, lineage-tracked record.

- ``SovsealChatStore(AsyncDBChatStore)`` is the store ``llama_index.core.memory.Memory`` takes
  (``Memory.from_defaults(session_id=..., chat_store=SovsealChatStore(...))``): ACTIVE and ARCHIVED
  messages, limits and offsets, deleting and archiving the oldest.
- ``SovsealLegacyChatStore(BaseChatStore)`` is the same data behind the older interface that
  ``ChatMemoryBuffer`` takes.

A message of chat ``key`` lives at ``{prefix}{quote(key)}/{seq:012d}.{batch}``: the payload is the
``ChatMessage`` as JSON, the record metadata ``{"chat_key", "seq", "status", "role", "base",
"batch"}`` (sealed like the rest), the memory type ``episodic``. ``seq`` numbers the key's messages
from 0 (one more than the highest before) and is the "id" of :meth:`SovsealChatStore.delete_message`;
``batch`` is a unique id per call that adds messages (the time, then random digits) and ``base`` the
first ``seq`` of that call. Messages are ordered by ``(base, batch, seq)``: in the order added, and
when two devices added messages to one chat before seeing each other's, one device's batch whole and
then the other's (the earlier ``batch`` first), the same on every device after a sync. Those two
batches can share ``seq`` numbers; ``delete_message`` then deletes the first in that order. Records
written before ``batch`` existed (``{seq:012d}``) order by their ``seq``. Archiving stores the
record again with status ``archived``: a new snapshot, so the lineage shows when each message left
the active window.

Deleting appends tombstones by default (the messages stay in the lineage; a rollback brings them
back). With ``erase_on_delete=True`` on the store, or ``erase=True`` on one call, every delete
(``delete_messages``, ``delete_message``, ``delete_last_message``, ``delete_oldest_messages``, the
old messages ``set_messages`` replaces) erases instead (``Sovseal.purge``): every version of each
message on every branch (its archived version too) and its part records, unreadable for good, the
journal rewritten once per call so the bytes leave the disk.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from llama_index.core.base.llms.types import ChatMessage
from llama_index.core.bridge.pydantic import BaseModel, Field, PrivateAttr
from llama_index.core.storage.chat_store.base import BaseChatStore
from llama_index.core.storage.chat_store.base_db import AsyncDBChatStore, MessageStatus
from llama_index.vector_stores.sovseal._common import PARTS, open_client

from sovseal import Memory, Sovseal
from sovseal.errors import InvalidInputError
from sovseal.integration import HandleOwner, batch_id, descriptor, erase_flag, erase_records, index_text

DEFAULT_PREFIX = "llamaindex/chat/"


class _Chats:
    """The synchronous core both chat stores share."""

    def __init__(self, client: Sovseal, prefix: str, erase: Callable[[], bool] = lambda: False) -> None:
        self.client = client
        self.prefix = prefix
        self.erase = erase  # the store's erase_on_delete (read at each delete: the field can change)
        self.lock = threading.RLock()  # read-modify-write of a key's sequence numbers, in this process

    def _key_prefix(self, key: str) -> str:
        if not isinstance(key, str) or not key:
            raise InvalidInputError(f"a chat key is a non-empty string (one per conversation, such as 'user-42'), got {key!r}")
        return f"{self.prefix}{quote(key, safe='')}/"

    def records(self, key: str, status: MessageStatus | None = None) -> list[Memory]:
        kp = self._key_prefix(key)
        where = {"metadata": {"chat_key": key}}
        if status is not None:
            where["metadata"]["status"] = MessageStatus(status).value
        return sorted(self.client.find({"$and": [{"path_prefix": kp}, where]}), key=_order)

    def message(self, memory: Memory) -> ChatMessage:
        """The message a record holds (a message over 128 KiB of JSON is read back from its parts)."""
        return ChatMessage.model_validate(PARTS.read(self.client, memory))

    def messages(
        self, key: str, status: MessageStatus | None = MessageStatus.ACTIVE, limit: int | None = None, offset: int | None = None
    ) -> list[ChatMessage]:
        recs = self.records(key, status)
        start = offset or 0
        stop = None if limit is None else start + limit
        return [self.message(m) for m in recs[start:stop]]

    def count(self, key: str, status: MessageStatus | None = MessageStatus.ACTIVE) -> int:
        return len(self.records(key, status))

    def _items(self, key: str, first_seq: int, messages: list[ChatMessage], status: MessageStatus) -> list[dict[str, Any]]:
        """The records of ``messages`` (and, first, the part records of any over 128 KiB of JSON)."""
        kp = self._key_prefix(key)
        batch = batch_id()  # unique, and concurrent batches sort by time
        parts: list[dict[str, Any]] = []
        items: list[dict[str, Any]] = []
        for seq, message in enumerate(messages, first_seq):
            path = f"{kp}{seq:012d}.{batch}"
            payload, message_parts = PARTS.pack(path, message.model_dump(mode="json"), where=f"message {seq} of {key!r}", group=kp)
            item = {
                "path": path,
                "payload": payload,
                "metadata": {
                    "chat_key": key,
                    "seq": seq,
                    "status": MessageStatus(status).value,
                    "role": str(message.role.value),
                    "base": first_seq,
                    "batch": batch,
                },
                "type": "episodic",
            }
            if message_parts:  # recall would otherwise index the descriptor: index the message's start
                item["text"] = _recall_text(message)
            parts.extend(message_parts)
            items.append(item)
        return [*parts, *items]

    def remove(self, key: str, recs: list[Memory], erase: bool | None) -> None:
        """Delete these records of ``key``: tombstones, or an erasure (``erase``, default the store's flag)."""
        if erase_flag(erase, self.erase()):
            erase_records(self.client, PARTS, recs, self._key_prefix(key))
        else:
            PARTS.delete(self.client, recs)

    def add(self, key: str, messages: list[ChatMessage], status: MessageStatus = MessageStatus.ACTIVE) -> None:
        """Append ``messages`` with one ``Sovseal.store_many``: all of them, or none if one is refused."""
        if not messages:
            return
        with self.lock:
            recs = self.records(key)
            first = max(m.metadata["seq"] for m in recs) + 1 if recs else 0
            self.client.store_many(self._items(key, first, list(messages), status))

    def set(self, key: str, messages: list[ChatMessage], status: MessageStatus = MessageStatus.ACTIVE, erase: bool | None = None) -> None:
        """Replace the key's messages: the new ones are stored first (one ``store_many``; a refused
        message changes nothing), then the old ones are deleted (or erased)."""
        with self.lock:
            old = self.records(key)
            if messages:
                self.client.store_many(self._items(key, 0, list(messages), status))
            self.remove(key, old, erase)

    def delete(self, key: str, status: MessageStatus | None = None, erase: bool | None = None) -> list[ChatMessage]:
        with self.lock:
            recs = self.records(key, status)
            messages = [self.message(m) for m in recs]
            self.remove(key, recs, erase)
            return messages

    def delete_seq(self, key: str, seq: int, erase: bool | None = None) -> ChatMessage | None:
        with self.lock:
            for m in self.records(key):
                if m.metadata["seq"] == seq:
                    message = self.message(m)
                    self.remove(key, [m], erase)
                    return message
            return None

    def delete_position(self, key: str, idx: int, erase: bool | None = None) -> ChatMessage | None:
        with self.lock:
            recs = self.records(key)
            if not -len(recs) <= idx < len(recs):
                return None
            m = recs[idx]
            message = self.message(m)
            self.remove(key, [m], erase)
            return message

    def oldest(self, key: str, n: int, *, archive: bool, erase: bool | None = None) -> list[ChatMessage]:
        if n <= 0:
            return []
        with self.lock:
            recs = self.records(key, MessageStatus.ACTIVE)[:n]
            if archive:
                messages = [self.message(m) for m in recs]
                items = []
                for m, message in zip(recs, messages, strict=True):
                    archived = {**m.metadata, "status": MessageStatus.ARCHIVED.value}
                    item = {"path": m.path, "payload": m.payload, "metadata": archived, "type": m.type}
                    if descriptor(m.payload) is not None:  # the same recall text as when it was added
                        item["text"] = _recall_text(message)
                    items.append(item)
                if items:
                    self.client.store_many(items)  # one durable batch
                return messages
            messages = [self.message(m) for m in recs]
            self.remove(key, recs, erase)
            return messages

    def keys(self) -> list[str]:
        found = self.client.find({"path_prefix": self.prefix})
        return sorted({m.metadata["chat_key"] for m in found if "chat_key" in m.metadata})


def _order(memory: Memory) -> tuple[int, str, int]:
    """Where a message goes in its chat: (first seq of its batch, batch id, seq)."""
    meta = memory.metadata
    return (meta.get("base", meta["seq"]), meta.get("batch", ""), meta["seq"])


def _recall_text(message: ChatMessage) -> str:
    """What recall indexes of a message stored in parts (else it would index the descriptor)."""
    return index_text(f"{message.role.value}: {message.content or ''}")


class _OnSovseal(HandleOwner, BaseModel):
    """What both chat stores share: their fields, the handle and the chats on it."""

    prefix: str = Field(default=DEFAULT_PREFIX, description="The path prefix of the chat records.")
    erase_on_delete: bool = Field(default=False, description="Deletes erase (Sovseal.purge) instead of appending tombstones.")

    _client: Sovseal = PrivateAttr()
    _owns_client: bool = PrivateAttr(default=False)
    _chats: _Chats = PrivateAttr()

    def __init__(
        self,
        client: Sovseal | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        key: bytes | str | None = None,
        embedder: Any = None,
        prefix: str = DEFAULT_PREFIX,
        client_kwargs: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(prefix=prefix, **kwargs)
        self._client, _, self._owns_client = open_client(client, path, key, embedder, client_kwargs)
        self._chats = _Chats(self._client, prefix, lambda: self.erase_on_delete)


class SovsealChatStore(_OnSovseal, AsyncDBChatStore):
    """``AsyncDBChatStore`` on sovseal, for ``Memory.from_defaults(chat_store=...)``.

    Args:
        client: an open ``sovseal.Sovseal`` (shared), else one opened at ``path`` with ``key``.
        prefix: where the chats live in the store (default ``llamaindex/chat/``).
        embedder: the embedder of a client opened here (messages are embedded on-device, so
            sovseal's recall finds them too).
        erase_on_delete: every delete erases (``Sovseal.purge``) instead of appending tombstones.
            Default False: a delete is cheap and reversible; each delete method also takes
            ``erase=True`` / ``erase=False`` for one call.
    """

    @classmethod
    def class_name(cls) -> str:
        return "SovsealChatStore"

    async def get_messages(
        self,
        key: str,
        status: MessageStatus | None = MessageStatus.ACTIVE,
        limit: int | None = None,
        offset: int | None = None,
    ) -> list[ChatMessage]:
        """The key's messages with ``status`` (None: all), oldest first, after ``offset``, at most ``limit``."""
        return await asyncio.to_thread(self._chats.messages, key, status, limit, offset)

    async def count_messages(self, key: str, status: MessageStatus | None = MessageStatus.ACTIVE) -> int:
        return await asyncio.to_thread(self._chats.count, key, status)

    async def add_message(self, key: str, message: ChatMessage, status: MessageStatus = MessageStatus.ACTIVE) -> None:
        await asyncio.to_thread(self._chats.add, key, [message], status)

    async def add_messages(self, key: str, messages: list[ChatMessage], status: MessageStatus = MessageStatus.ACTIVE) -> None:
        await asyncio.to_thread(self._chats.add, key, list(messages), status)

    async def set_messages(
        self, key: str, messages: list[ChatMessage], status: MessageStatus = MessageStatus.ACTIVE, *, erase: bool | None = None
    ) -> None:
        """Replace every message of the key (whatever its status) with ``messages``; the old ones
        are deleted, or erased (``erase``, default ``erase_on_delete``)."""
        await asyncio.to_thread(self._chats.set, key, list(messages), status, erase)

    async def delete_message(self, key: str, idx: int, *, erase: bool | None = None) -> ChatMessage | None:
        """Delete the message whose sequence number is ``idx`` and return it (None if there is none).
        ``erase`` (default ``erase_on_delete``) erases it, every version, instead."""
        return await asyncio.to_thread(self._chats.delete_seq, key, idx, erase)

    async def delete_messages(self, key: str, status: MessageStatus | None = None, *, erase: bool | None = None) -> None:
        """Delete the key's messages with ``status`` (None: all); ``erase`` (default ``erase_on_delete``) erases them."""
        await asyncio.to_thread(self._chats.delete, key, status, erase)

    async def delete_oldest_messages(self, key: str, n: int, *, erase: bool | None = None) -> list[ChatMessage]:
        return await asyncio.to_thread(lambda: self._chats.oldest(key, n, archive=False, erase=erase))

    async def archive_oldest_messages(self, key: str, n: int) -> list[ChatMessage]:
        return await asyncio.to_thread(self._chats.oldest, key, n, archive=True)

    async def get_keys(self) -> list[str]:
        return await asyncio.to_thread(self._chats.keys)


class SovsealLegacyChatStore(_OnSovseal, BaseChatStore):
    """The older ``BaseChatStore`` interface (``ChatMemoryBuffer.from_defaults(chat_store=...)``) on
    the same records as :class:`SovsealChatStore`: a key's messages are all of its messages, in order,
    and ``idx`` is a position in that list. ``erase_on_delete=True`` makes its deletes erase, as
    for :class:`SovsealChatStore`."""

    @classmethod
    def class_name(cls) -> str:
        return "SovsealLegacyChatStore"

    def set_messages(self, key: str, messages: list[ChatMessage], *, erase: bool | None = None) -> None:
        self._chats.set(key, list(messages), erase=erase)

    def get_messages(self, key: str) -> list[ChatMessage]:
        return self._chats.messages(key, None)

    def add_message(self, key: str, message: ChatMessage) -> None:
        self._chats.add(key, [message])

    def delete_messages(self, key: str, *, erase: bool | None = None) -> list[ChatMessage] | None:
        """Delete the key's messages (``erase``, default ``erase_on_delete``: erase them)."""
        deleted = self._chats.delete(key, erase=erase)
        return deleted or None

    def delete_message(self, key: str, idx: int, *, erase: bool | None = None) -> ChatMessage | None:
        """Delete the message at position ``idx`` (negative: from the end, as ``SimpleChatStore`` does)."""
        return self._chats.delete_position(key, idx, erase)

    def delete_last_message(self, key: str, *, erase: bool | None = None) -> ChatMessage | None:
        return self._chats.delete_position(key, -1, erase)

    def get_keys(self) -> list[str]:
        return self._chats.keys()
