"""``SovsealChatMessageHistory``: chat messages per session as sealed sovseal records (compatibility path)."""

from __future__ import annotations

import asyncio
import os
import re
import threading
import time
import weakref
from collections.abc import Sequence
from typing import Any

from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.messages import BaseMessage, message_to_dict, messages_from_dict

from sovseal import Sovseal

from . import _parts
from ._common import (
    PARTS_ROOT,
    ROOT,
    Erasure,
    accepts,
    branch_heads,
    check_key,
    check_segment,
    drop_parts,
    has_method,
    open_client,
    visible_under,
)

#: Numbers are zero-padded so paths sort in conversation order.
_DIGITS = 8
_CHAT_ROOT = f"{ROOT}-chat/"
#: A message's name under its session: ``<base>.<batch>.<i>``, message i of a batch added when the
#: session showed ``base`` messages, or ``<n>``, message n as earlier releases named it.
_NAME = re.compile(rf"\d{{{_DIGITS}}}(?:\.[0-9a-f]{{24}}\.\d{{{_DIGITS}}})?")


def _batch_id() -> str:
    """A batch's id: the time in ns (16 hex digits), then 8 random ones, so concurrent batches sort by time."""
    return f"{time.time_ns():016x}{os.urandom(4).hex()}"


class _Listing:
    """The chat records a handle's branch shows (every session), and the heads and the store's
    erasure count they were read at (a purge changes what reads return without moving a head)."""

    __slots__ = ("erasures", "heads", "payloads")

    def __init__(self, heads: tuple[str | None, ...], erasures: int, payloads: dict[str, Any]) -> None:
        self.heads = heads
        self.erasures = erasures
        self.payloads = payloads


#: Per handle, per branch: reading a session lists the store's chat records (their names are not
#: known in advance), so the listing is kept until the branch's heads move under it. Writes of this
#: process update it in place.
_LISTINGS: weakref.WeakKeyDictionary[Sovseal, dict[str, _Listing]] = weakref.WeakKeyDictionary()
_LISTINGS_GUARD = threading.Lock()


def _listing(client: Sovseal) -> _Listing:
    heads = branch_heads(client)
    erasures = client.erasures() if has_method(client, "erasures") else 0  # type: ignore[attr-defined]
    with _LISTINGS_GUARD:
        found = _LISTINGS.setdefault(client, {}).get(client.branch)
    if found is not None and found.heads == heads and found.erasures == erasures:
        return found
    found = _Listing(heads, erasures, visible_under(client, _CHAT_ROOT))
    with _LISTINGS_GUARD:
        _LISTINGS.setdefault(client, {})[client.branch] = found
    return found


def _wrote(client: Sovseal, listing: _Listing, head: str | None, changes: dict[str, Any]) -> None:
    """Fold this process's writes into the listing they were planned from (``None``: deleted).

    Each write went on every head of the branch, so ``head`` is its one head now. Another writer
    that moved the branch in between is seen at the next read (the heads then differ).
    """
    with _LISTINGS_GUARD:
        if _LISTINGS.get(client, {}).get(client.branch) is not listing:
            return
        payloads = dict(listing.payloads)  # a new dict: a reader in another thread keeps the one it took
        for path, payload in changes.items():
            if payload is None:
                payloads.pop(path, None)
            else:
                payloads[path] = payload
        listing.payloads, listing.heads = payloads, (head,)


class SovsealChatMessageHistory(BaseChatMessageHistory):
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
            raise TypeError(f"erase_on_delete must be a bool, got {type(erase_on_delete).__name__}")
        self.erase_on_delete = erase_on_delete
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

    def _records(self) -> tuple[_Listing, dict[str, Any], list[str]]:
        """The listing read from, its records, and this session's message paths in conversation order."""
        listing = _listing(self._client)
        payloads = listing.payloads
        start = len(self._prefix)
        paths = sorted(p for p in payloads if p.startswith(self._prefix) and _NAME.fullmatch(p[start:]))
        return listing, payloads, paths

    def _value(self, path: str, payload: Any) -> Any:
        """A message's dict: the payload, or the parts it names joined (a message over 128 KiB)."""
        if _parts.descriptor(payload) is None:
            return payload

        def get(part: str) -> Any:
            found = self._client.get(part)
            return None if found is None else found.payload

        return _parts.unpack(path, payload, PARTS_ROOT, get)

    @property
    def messages(self) -> list[BaseMessage]:  # type: ignore[override]
        _, payloads, paths = self._records()
        return messages_from_dict([self._value(p, payloads[p]) for p in paths])

    async def aget_messages(self) -> list[BaseMessage]:
        return await asyncio.to_thread(lambda: self.messages)

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append ``messages`` with one ``Sovseal.store_many``: all of them or, if sovseal refuses one
        (metadata that is not JSON, a message over 64 MiB), none. A message whose JSON is over
        128 KiB is stored in part records; recall indexes the first 2,048 characters of each."""
        if not messages:
            return
        listing, _, paths = self._records()
        batch = f"{self._prefix}{len(paths):0{_DIGITS}d}.{_batch_id()}."
        parts: list[dict[str, Any]] = []
        items = []
        for i, message in enumerate(messages):
            path = f"{batch}{i:0{_DIGITS}d}"
            payload, message_parts = _parts.pack(
                path, message_to_dict(message), PARTS_ROOT, where=f"message {i} of the batch", group=self._prefix
            )
            parts.extend(message_parts)
            extra: dict[str, Any] = {"text": _parts.index_text(f"{message.type}: {message.text}")} if self._text else {}
            items.append(
                {
                    "path": path,
                    "payload": payload,
                    "metadata": {"session_id": self.session_id, "role": message.type},
                    "type": "episodic",
                    "provenance": "observed",
                    **extra,
                }
            )
        results = self._client.store_many([*parts, *items])
        stored = {item["path"]: self._client.get(item["path"]) for item in items}  # the payloads as a reader gets them
        _wrote(self._client, listing, results[-1].snapshot_id, {p: m.payload for p, m in stored.items() if m is not None})

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
        if erase is None:
            erase = self.erase_on_delete
        if not isinstance(erase, bool):
            raise TypeError(f"erase must be a bool, got {type(erase).__name__}")
        listing, payloads, paths = self._records()
        if erase:
            if not paths:
                return
            with Erasure(self._client) as erasure:
                for path in reversed(paths):
                    erasure.record(path, self._prefix, payloads[path])
            _wrote(self._client, listing, self._client.snapshot(), dict.fromkeys(paths))
            return
        head = None
        for path in reversed(paths):
            result = self._client.delete(path)
            if result is not None:
                head = result.snapshot_id
        if head is not None:
            _wrote(self._client, listing, head, dict.fromkeys(paths))
            drop_parts(self._client, [payloads[p] for p in paths], [])

    async def aclear(self, *, erase: bool | None = None) -> None:
        await asyncio.to_thread(lambda: self.clear(erase=erase))


__all__ = ["SovsealChatMessageHistory"]
