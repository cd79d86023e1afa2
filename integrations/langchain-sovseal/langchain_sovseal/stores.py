"""``SovsealByteStore``: an encrypted key-value ``ByteStore`` on sovseal records."""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.stores import ByteStore

from sovseal import Sovseal
from sovseal.errors import InvalidArgumentTypeError
from sovseal.integration import Erasure, HandleOwner, check_key, check_segment, erase_flag, index_text, open_handle

from ._common import PARTS, ROOT


class SovsealByteStore(HandleOwner, ByteStore):
    """A LangChain ``ByteStore`` whose values are sealed sovseal records: encrypted at rest, in the
    lineage (overwrites and deletes are snapshots; nothing is lost), replicated as ciphertext.

    Useful as the docstore of ``CacheBackedEmbeddings`` or of a parent-document retriever. Keys live at
    ``langchain-kv/<namespace>/<key>``; values are stored base64-encoded, a value over 96 KiB in part
    records (values up to 48 MiB). ``mset`` is one ``Sovseal.store_many``: all pairs or none.

    ``mdelete`` appends tombstones by default (the values stay in the lineage; a rollback restores
    them). With ``erase_on_delete=True`` (or ``mdelete(keys, erase=True)``) it erases them for good
    (``Sovseal.purge``): every version of each key on every branch and its part records, unreadable
    to anyone, the key holder too, the journal rewritten once so the bytes leave the disk.

    Args:
        client: an open ``sovseal.Sovseal`` to share (this store never closes it).
        path, key, **client_kwargs: or open a handle (closed by :meth:`close`). Its embedder (``embedder=``,
            default sovseal's on-device model) is only used to index the keys: values are never embedded.
        namespace: keeps several byte stores apart in one sovseal store.
        erase_on_delete: make :meth:`mdelete` erase instead of appending tombstones (default False:
            a delete is cheap and reversible; erasure is irreversible and rewrites the journal).

    Example:
        .. code-block:: python

            from langchain_sovseal import SovsealByteStore

            kv = SovsealByteStore(path="kv-store", namespace="embedding-cache")
            kv.mset([("a", b"\\x00\\x01")])
            kv.mget(["a", "b"])  # [b"\\x00\\x01", None]
    """

    def __init__(
        self,
        client: Sovseal | None = None,
        *,
        path: str | os.PathLike[str] | None = None,
        key: bytes | str | None = None,
        namespace: str = "default",
        erase_on_delete: bool = False,
        **client_kwargs: Any,
    ) -> None:
        check_segment(namespace, "namespace")
        if not isinstance(erase_on_delete, bool):
            raise InvalidArgumentTypeError(f"erase_on_delete must be a bool (True or False), got {type(erase_on_delete).__name__}")
        self.erase_on_delete = erase_on_delete
        self._prefix = f"{ROOT}-kv/{namespace}/"
        self._client, self._owns_client = open_handle(client, path=path, key=key, client_kwargs=client_kwargs)

    def _path(self, key: str) -> str:
        return self._prefix + check_key(key, "a key")

    def mget(self, keys: Sequence[str]) -> list[bytes | None]:
        out: list[bytes | None] = []
        for key in keys:
            memory = self._client.get(self._path(key))
            out.append(None if memory is None else base64.b64decode(PARTS.read(self._client, memory)))
        return out

    def mset(self, key_value_pairs: Sequence[tuple[str, bytes]]) -> None:
        planned: list[tuple[str, str]] = []
        for key, value in key_value_pairs:
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise InvalidArgumentTypeError(
                    f"values of a ByteStore are bytes, got {type(value).__name__} for key {key!r}; encode text first (value.encode())"
                )
            planned.append((self._path(key), base64.b64encode(bytes(value)).decode("ascii")))
        parts: list[dict[str, Any]] = []
        items: list[dict[str, Any]] = []
        for path, encoded in planned:
            key = path[len(self._prefix) :]
            payload, value_parts = PARTS.pack(path, encoded, where=f"the value of key {key!r}", group=self._prefix)
            parts.extend(value_parts)
            items.append({"path": path, "payload": payload, "text": index_text(key)})  # the key, not kilobytes of base64
        if not items:
            return
        old = [self._client.get(item["path"]) for item in items]
        self._client.store_many([*parts, *items])
        PARTS.drop(self._client, [m.payload for m in old if m is not None], [item["payload"] for item in items])

    def mdelete(self, keys: Sequence[str], *, erase: bool | None = None) -> None:
        """Delete ``keys`` (missing ones are ignored): tombstones, or with ``erase`` (default: the
        store's ``erase_on_delete``) an erasure of every version of each, keys deleted earlier too,
        then one compaction."""
        paths = list(dict.fromkeys(self._path(key) for key in keys))  # every key is checked first
        found = [m for m in map(self._client.get, paths) if m is not None]
        if not erase_flag(erase, self.erase_on_delete):
            PARTS.delete(self._client, found)
            return
        payloads = {m.path: m.payload for m in found}
        with Erasure(self._client, PARTS) as erasure:
            for path in paths:
                erasure.record(path, self._prefix, payloads.get(path))

    def _keys(self, prefix: str | None) -> list[str]:
        start = len(self._prefix)
        return [p[start:] for p in self._client.paths(self._prefix + (prefix or ""))]

    def yield_keys(self, *, prefix: str | None = None) -> Iterator[str]:
        yield from self._keys(prefix)

    async def amget(self, keys: Sequence[str]) -> list[bytes | None]:
        return await asyncio.to_thread(self.mget, keys)

    async def amset(self, key_value_pairs: Sequence[tuple[str, bytes]]) -> None:
        await asyncio.to_thread(self.mset, key_value_pairs)

    async def amdelete(self, keys: Sequence[str], *, erase: bool | None = None) -> None:
        await asyncio.to_thread(lambda: self.mdelete(keys, erase=erase))

    async def ayield_keys(self, *, prefix: str | None = None) -> AsyncIterator[str]:
        for key in await asyncio.to_thread(self._keys, prefix):
            yield key


__all__ = ["SovsealByteStore"]
