"""The checkpoint file: named arrays, sealed under a per-checkpoint key, replaced atomically.

A checkpoint is a cache of what opening a store computes from its journal (docs/design.md,
"Checkpoints (cold open)"). This module knows only the file: a clear header (JSON) bound into the
AAD of every sealed chunk, then one sealed byte stream cut into 16 MiB chunks, each sealed with
AES-256-GCM under ``HKDF(k_rest, salt, "sovseal checkpoint v1")`` with its chunk number as the
nonce. A fresh random salt per checkpoint means a fresh key, so nonces never repeat and the
journal's sealing budget is not spent. The stream holds the arrays' layout (names, types,
shapes), then the arrays, then zeros up to a Padmé length (sovseal.crypto.primitives.padme): the clear part
tells only what fitting the journal needs, and the file's size no more than the padded journal's
does, so comparing two checkpoints does not give the exact size of what a purge erased. What
the arrays mean is the lineage's and the catalog's business; what makes a checkpoint fit a
journal is the store's.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from sovseal.crypto.primitives import padme
from sovseal.durable import fsync_dir, fsync_fd

MAGIC = b"SOVSEALCP\n"
VERSION = 2  # 1: the layout was in the clear header (a version-1 file is refused: the journal is replayed)
_LAYOUT = struct.Struct(">I")  # the layout's length, at the start of the sealed stream
_PREFIX = struct.Struct(">10sI32sI")  # magic, version, salt, header length
_CHUNK = 16 * 1024 * 1024
_AAD = b"sovseal-cp-v1"
_INFO = b"sovseal checkpoint v1"
_TAG = 16


class CheckpointRefused(Exception):
    """A checkpoint that cannot be used (missing, damaged, another key, another store or journal).

    Never an error to the user: the store replays its journal instead and writes a new one.
    """


def _key(k_rest: bytes, salt: bytes) -> AESGCM:
    return AESGCM(HKDF(algorithm=hashes.SHA256(), length=32, salt=salt, info=_INFO).derive(k_rest))


def _aad(header_digest: bytes, chunk: int, chunks: int) -> bytes:
    return _AAD + header_digest + struct.pack(">II", chunk, chunks)


def write(path: Path, k_rest: bytes, header: dict[str, Any], arrays: dict[str, np.ndarray]) -> int:
    """Seal ``arrays`` with ``header`` into ``path`` atomically; returns the file's size.

    The new file is written beside the old one under a name of its own (two processes may
    checkpoint at once: the last rename wins, and either file is whole), fsynced, renamed over
    ``path``, and the directory fsynced.
    """
    layout = []
    parts: list[memoryview] = []
    for name, array in arrays.items():
        data = np.ascontiguousarray(array)
        layout.append([name, data.dtype.str, list(data.shape), data.nbytes])
        parts.append(data.data.cast("B"))
    described = json.dumps(layout, separators=(",", ":")).encode()
    parts.insert(0, memoryview(_LAYOUT.pack(len(described)) + described))
    content = sum(len(p) for p in parts)
    total = padme(content)
    parts.append(memoryview(bytes(total - content)))
    clear = json.dumps(header, sort_keys=True, separators=(",", ":")).encode()
    digest = hashlib.sha256(clear).digest()
    salt = os.urandom(32)
    aead = _key(k_rest, salt)
    chunks = max(1, -(-total // _CHUNK))
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    try:
        with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as out:
            out.write(_PREFIX.pack(MAGIC, VERSION, salt, len(clear)) + clear)
            for index, chunk in enumerate(_chunks(parts, _CHUNK)):
                out.write(aead.encrypt(index.to_bytes(12, "big"), chunk, _aad(digest, index, chunks)))
            out.flush()
            fsync_fd(out.fileno())
            size = out.tell()
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)
    return size


def _chunks(parts: Sequence[memoryview], size: int) -> Iterator[bytes]:
    """The concatenation of ``parts`` cut into pieces of ``size`` bytes (the last may be shorter,
    and there is always one), one piece in memory at a time."""
    buffer = bytearray()
    sent = False
    for part in parts:
        start = 0
        while start < len(part):
            take = min(size - len(buffer), len(part) - start)
            buffer += part[start : start + take]
            start += take
            if len(buffer) == size:
                yield bytes(buffer)
                buffer.clear()
                sent = True
    if buffer or not sent:
        yield bytes(buffer)


def read(path: Path, k_rest: bytes) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """(header, arrays) of the checkpoint at ``path``; CheckpointRefused if it cannot be used."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise CheckpointRefused("no checkpoint") from None
    except OSError as exc:
        raise CheckpointRefused(f"unreadable: {exc}") from None
    if len(data) < _PREFIX.size:
        raise CheckpointRefused("truncated")
    magic, version, salt, length = _PREFIX.unpack_from(data)
    if magic != MAGIC or version != VERSION:
        raise CheckpointRefused("not a checkpoint of this version")
    start = _PREFIX.size + length
    clear = data[_PREFIX.size : start]
    try:
        header = json.loads(clear)
    except ValueError as exc:
        raise CheckpointRefused(f"unreadable header: {exc}") from None
    if not isinstance(header, dict):
        raise CheckpointRefused("unreadable header")
    sealed_total = len(data) - start
    chunks = max(1, -(-sealed_total // (_CHUNK + _TAG)))  # every chunk but the last is whole
    total = sealed_total - chunks * _TAG
    if total < _LAYOUT.size:
        raise CheckpointRefused("truncated")
    digest = hashlib.sha256(clear).digest()
    aead = _key(k_rest, salt)
    plain = bytearray(total)
    sealed = memoryview(data)
    offset, position = start, 0
    try:
        for index in range(chunks):
            size = min(_CHUNK, total - index * _CHUNK)
            opened = aead.decrypt(index.to_bytes(12, "big"), sealed[offset : offset + size + _TAG], _aad(digest, index, chunks))
            plain[position : position + size] = opened
            offset, position = offset + size + _TAG, position + size
    except InvalidTag:
        raise CheckpointRefused("does not authenticate under this store's key") from None
    sealed.release()
    del data
    try:
        described = _LAYOUT.unpack_from(plain)[0]
        layout = [
            (str(n), np.dtype(d), tuple(int(x) for x in shape), int(b))
            for n, d, shape, b in json.loads(bytes(plain[_LAYOUT.size : _LAYOUT.size + described]))
        ]
    except (ValueError, TypeError, struct.error) as exc:  # authentic, yet not what this version writes
        raise CheckpointRefused(f"unreadable layout: {exc}") from None
    position = _LAYOUT.size + described
    if position + sum(size for *_, size in layout) > total:
        raise CheckpointRefused("the arrays are longer than the checkpoint")
    arrays: dict[str, np.ndarray] = {}
    for name, dtype, shape, size in layout:
        count = size // dtype.itemsize if dtype.itemsize else 0
        arrays[name] = np.frombuffer(plain, dtype=dtype, count=count, offset=position).reshape(shape)
        position += size
    return header, arrays


# -- packing strings and bytes into arrays ---------------------------------------------------------


def pack(values: Sequence[bytes | None]) -> tuple[np.ndarray, np.ndarray]:
    """Variable-length byte strings as (blob, ends): value i is ``blob[ends[i-1]:ends[i]]``.

    ``None`` is stored as end -1 after the previous end (a negative end marks it).
    """
    ends = np.empty(len(values), dtype=np.int64)
    pieces = []
    position = 0
    for i, value in enumerate(values):
        if value is None:
            ends[i] = -position - 1
        else:
            pieces.append(value)
            position += len(value)
            ends[i] = position
    return np.frombuffer(b"".join(pieces), dtype=np.uint8), ends


def unpack(blob: np.ndarray, ends: np.ndarray) -> list[bytes | None]:
    raw = blob.tobytes()
    out: list[bytes | None] = []
    previous = 0
    for end in ends.tolist():
        if end < 0:
            out.append(None)
            previous = -end - 1
        else:
            out.append(raw[previous:end])
            previous = end
    return out


def pack_fixed(values: Sequence[bytes], width: int) -> np.ndarray:
    """Byte strings of one length as an array of ``V<width>`` (``tolist()`` gives them back whole;
    ``S`` would drop trailing zero bytes)."""
    if any(len(v) != width for v in values):
        raise ValueError(f"pack_fixed: every value must be {width} bytes")
    return np.frombuffer(b"".join(values), dtype=f"V{width}").copy() if values else np.zeros(0, dtype=f"V{width}")
