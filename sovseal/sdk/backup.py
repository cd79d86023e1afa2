"""Encrypted backup files: ``sovseal export`` and ``sovseal import`` (docs/design.md, "Chunked sealed files (backups and checkpoints)").

The sealed body is a :data:`sovseal.crypto.stream.BACKUP` chunk stream; this module owns the clear
header and what the body holds.
"""

from __future__ import annotations

import base64
import io
import json
import logging
import secrets
import time
from dataclasses import dataclass, field
from typing import IO, TYPE_CHECKING, Any

from sovseal.errors import IntegrityError, InvalidInputError, KeyUnavailableError
from sovseal.models import Progress

if TYPE_CHECKING:
    from .client import Sovseal

log = logging.getLogger(__name__)

_BACKUP_MAGIC = b"sovseal-backup v1\n"
_MAX_HEADER = 64 * 1024


@dataclass(frozen=True, slots=True)
class BackupInfo:
    """What a backup file holds (everything but ``items`` is readable without the key)."""

    key_id: str
    items: int
    created_at: float
    source_branches: list[str] = field(default_factory=list)
    skipped_damaged: int = 0


def _wire_items(mem: Sovseal) -> tuple[list[Any], int]:
    """Every replicable item of the store (records, branch and reinforce events), in journal order.

    SDK gap: reads the journal through the store's private handle. An SDK ``export_items()`` (the
    same items the replication worker sends, but all of them, acknowledged or not) replaces this.
    """
    from sovseal.storage import frames as fr

    store = mem._store  # see the SDK gap above
    items: list[Any] = []
    damaged = 0
    with store.reading():
        for frame in store._journal.scan(0).frames:
            if not frame.authentic:
                damaged += 1
                continue
            try:
                decoded = store.decode(frame.body)
            except ValueError:
                damaged += 1
                continue
            if isinstance(decoded, fr.AckFrame):
                continue
            items.append(store.wire_item(decoded))
    return items, damaged


def export_backup(mem: Sovseal, master: bytes, dest: IO[bytes], *, progress: Progress | None = None) -> BackupInfo:
    """Write the whole store (every branch, snapshot, reinforcement) to ``dest`` as an encrypted file.

    The items are the sealed bytes the store already holds; the file adds a second layer: AES-256-GCM
    under a key derived from ``master`` and a random salt, in 1 MiB chunks that cannot be reordered
    or truncated unnoticed. Only the key id, the item count and the creation time are in the clear.
    Restoring needs the same master key (``sovseal key export`` / ``key import``).
    """
    from sovseal.crypto.primitives import derive_subkeys
    from sovseal.crypto.stream import BACKUP, ChunkStream

    key_id = derive_subkeys(master).key_id
    if key_id != mem.status().key_id:
        raise KeyUnavailableError("the key given is not this store's key; export with the store's own key")
    items, damaged = _wire_items(mem)
    total = len(items)
    salt = secrets.token_bytes(32)
    info = BackupInfo(key_id, total, time.time(), mem.branches(), damaged)
    header = json.dumps(
        {
            "format": 1,
            "key_id": info.key_id,
            "items": info.items,
            "created_at": info.created_at,
            "salt": base64.b64encode(salt).decode("ascii"),
            "cipher": "AES-256-GCM, HKDF-SHA256 per-file key, STREAM chunks",
        },
        sort_keys=True,
    ).encode("utf-8")
    aad = _BACKUP_MAGIC + header
    dest.write(_BACKUP_MAGIC + header + b"\n")
    body = io.BytesIO()
    body.write(json.dumps({"branches": info.source_branches}).encode() + b"\n")
    for item in items:
        body.write(json.dumps(item.to_json(), separators=(",", ":")).encode("ascii") + b"\n")
    body.write(json.dumps({"end": total}).encode() + b"\n")
    data = body.getvalue()
    stream = ChunkStream(BACKUP, master, salt, aad)
    chunks = stream.chunks(len(data))
    for index, sealed in enumerate(stream.seal([data], len(data))):
        dest.write(sealed)
        if progress:
            progress(min(total, (index + 1) * total // chunks), total)
    dest.flush()
    return info


def read_backup_header(src: IO[bytes]) -> tuple[dict[str, Any], bytes]:
    """Read and check a backup file's clear header; returns (header, the header's AAD bytes)."""
    magic = src.read(len(_BACKUP_MAGIC))
    if magic != _BACKUP_MAGIC:
        raise InvalidInputError("not a sovseal backup file (it does not start with the backup header)")
    line = src.readline(_MAX_HEADER)
    if not line.endswith(b"\n"):
        raise InvalidInputError("the sovseal backup header is truncated or damaged")
    raw = line[:-1]
    try:
        header = json.loads(raw)
        if header.get("format") != 1:
            raise ValueError(f"unsupported backup format {header.get('format')!r}")
        base64.b64decode(header["salt"], validate=True)
        str(header["key_id"])
        int(header["items"])
    except (ValueError, KeyError, TypeError) as exc:
        raise InvalidInputError(f"the sovseal backup header is damaged ({exc})") from None
    return header, _BACKUP_MAGIC + raw


def import_backup(mem: Sovseal, master: bytes, src: IO[bytes], *, progress: Progress | None = None) -> BackupInfo:
    """Import a file written by :func:`export_backup` into ``mem``'s store (usually a fresh one).

    Every chunk is authenticated, and every record is opened and its snapshot id re-derived before it
    is written; items already present are skipped, so importing twice is harmless. The vector index
    is then brought up to date for every branch.

    """
    from sovseal.crypto.primitives import derive_subkeys
    from sovseal.crypto.stream import BACKUP, ChunkStream
    from sovseal.storage.wire import WireItem

    header, aad = read_backup_header(src)
    key_id = derive_subkeys(master).key_id
    if header["key_id"] != key_id:
        raise KeyUnavailableError(
            f"this backup was written by a store whose key id is {header['key_id']}, but the key for "
            f"{mem.path} has id {key_id}; import the source store's key first (`sovseal key export` on "
            "the source, `sovseal key import` into a fresh store directory)"
        )
    if header["key_id"] != mem.status().key_id:
        raise KeyUnavailableError("the store's key does not match the key given for the import")
    total = int(header["items"])
    try:
        body = ChunkStream(BACKUP, master, base64.b64decode(header["salt"]), aad).read(src)
    except IntegrityError as exc:  # cut short, altered, or written with another key
        raise IntegrityError(f"{exc}; nothing was imported") from None
    lines = bytes(body).split(b"\n")
    try:
        first = json.loads(lines[0])
        trailer = json.loads(lines[-2])
        items = [WireItem.from_json(json.loads(line)) for line in lines[1:-2]]
    except (ValueError, IndexError) as exc:
        raise IntegrityError(f"the backup file's contents are malformed ({exc}); nothing was imported") from None
    if trailer != {"end": total} or len(items) != total:
        raise IntegrityError(f"the backup file should hold {total} items but holds {len(items)}; nothing was imported")
    waiting: list[Any] = []
    batch = 512
    if progress:
        progress(0, total)
    for start in range(0, total, batch):
        waiting = mem.import_items(waiting + items[start : start + batch])
        if progress:
            progress(min(total, start + batch), total)
    if waiting:
        raise IntegrityError(
            f"{len(waiting)} items of the backup refer to snapshots it does not contain; the rest was imported"
        )
    previous = mem.branch
    for name in mem.branches():  # bring the vector index up to date on every branch
        mem.checkout(name)
        if mem.snapshot() is not None:
            mem.recall("sovseal backup import", k=1)
    mem.checkout(previous if previous in mem.branches() else "main")
    return BackupInfo(header["key_id"], total, float(header.get("created_at", 0.0)), list(first.get("branches", [])))
