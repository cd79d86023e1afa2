"""``SovsealByteStore``: an encrypted key-value ``ByteStore`` on sovseal records."""

from __future__ import annotations

import asyncio
import base64
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.stores import ByteStore

from sovseal import Sovseal

from . import _parts
from ._common import PARTS_ROOT, ROOT, Erasure, accepts, check_key, check_segment, drop_parts, list_paths, open_client, read_payload


class SovsealByteStore(ByteStore):
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
            raise TypeError(f"erase_on_delete must be a bool, got {type(erase_on_delete).__name__}")
        self.erase_on_delete = erase_on_delete
        self._prefix = f"{ROOT}-kv/{namespace}/"
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

    def __enter__(self) -> SovsealByteStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _path(self, key: str) -> str:
        return self._prefix + check_key(key, "a key")

    def mget(self, keys: Sequence[str]) -> list[bytes | None]:
        out: list[bytes | None] = []
        for key in keys:
            memory = self._client.get(self._path(key))
            out.append(None if memory is None else base64.b64decode(read_payload(self._client, memory)))
        return out

    def mset(self, key_value_pairs: Sequence[tuple[str, bytes]]) -> None:
        planned: list[tuple[str, str]] = []
        for key, value in key_value_pairs:
            if not isinstance(value, (bytes, bytearray, memoryview)):
                raise TypeError(f"values of a ByteStore are bytes, got {type(value).__name__} for key {key!r}")
            planned.append((self._path(key), base64.b64encode(bytes(value)).decode("ascii")))
        parts: list[dict[str, Any]] = []
        items: list[dict[str, Any]] = []
        for path, encoded in planned:
            payload, value_parts = _parts.pack(
                path, encoded, PARTS_ROOT, where=f"the value of key {path[len(self._prefix) :]!r}", group=self._prefix
            )
            parts.extend(value_parts)
            item = {"path": path, "payload": payload}
            if self._text:  # index the key, not kilobytes of base64
                item["text"] = _parts.index_text(path[len(self._prefix) :])
            items.append(item)
        if not items:
            return
        old = [self._client.get(item["path"]) for item in items]
        self._client.store_many([*parts, *items])
        drop_parts(self._client, [m.payload for m in old if m is not None], [item["payload"] for item in items])

    def mdelete(self, keys: Sequence[str], *, erase: bool | None = None) -> None:
        """Delete ``keys`` (missing ones are ignored): tombstones, or with ``erase`` (default: the
        store's ``erase_on_delete``) an erasure of every version of each, keys deleted earlier too,
        then one compaction."""
        if erase is None:
            erase = self.erase_on_delete
        if not isinstance(erase, bool):
            raise TypeError(f"erase must be a bool, got {type(erase).__name__}")
        if erase:
            paths = [self._path(key) for key in keys]
            with Erasure(self._client) as erasure:
                for path in dict.fromkeys(paths):
                    old = self._client.get(path)
                    erasure.record(path, self._prefix, None if old is None else old.payload)
            return
        for key in keys:
            path = self._path(key)
            old = self._client.get(path)
            if old is not None and self._client.delete(path) is not None:
                drop_parts(self._client, [old.payload], [])

    def _keys(self, prefix: str | None) -> list[str]:
        start = len(self._prefix)
        return [p[start:] for p in list_paths(self._client, self._prefix + (prefix or ""))]

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
