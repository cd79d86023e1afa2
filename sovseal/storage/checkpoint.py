"""The checkpoint file: named arrays, sealed under a per-checkpoint key, replaced atomically.

A checkpoint is a cache of what opening a store computes from its journal (docs/design.md,
"Checkpoints (cold open)"). This module knows only the file: a clear header (JSON) bound into the
AAD of every sealed chunk, then one sealed byte stream cut into 16 MiB chunks, each sealed with
AES-256-GCM under ``HKDF(k_rest, salt, "sovseal checkpoint v1")`` with its chunk number as the
nonce (:data:`sovseal.crypto.stream.CHECKPOINT`, docs/design.md "Chunked sealed files"). A fresh
random salt per checkpoint means a fresh key, so nonces never repeat and the journal's sealing
budget is not spent. The stream holds the arrays' layout (names, types,
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from sovseal.crypto.primitives import padme
from sovseal.crypto.stream import CHECKPOINT, ChunkStream, cut
from sovseal.durable import replacing
from sovseal.errors import IntegrityError

MAGIC = b"SOVSEALCP\n"
VERSION = 2  # 1: the layout was in the clear header (a version-1 file is refused: the journal is replayed)
_LAYOUT = struct.Struct(">I")  # the layout's length, at the start of the sealed stream
_PREFIX = struct.Struct(">10sI32sI")  # magic, version, salt, header length
_CHUNK = CHECKPOINT.chunk_size  # plaintext bytes per sealed chunk
_chunks = cut  # the sealed stream's pieces (a name of this module, so a crash test can stop the sealing)


class CheckpointRefused(Exception):
    """A checkpoint that cannot be used (missing, damaged, another key, another store or journal).

    Never an error to the user: the store replays its journal instead and writes a new one.
    """


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
    stream = ChunkStream(CHECKPOINT, k_rest, salt, digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    with replacing(path) as out:
        out.write(_PREFIX.pack(MAGIC, VERSION, salt, len(clear)) + clear)
        for sealed in stream.seal_chunks(_chunks(parts, _CHUNK), total):
            out.write(sealed)
        size = out.tell()
    return size


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
    stream = ChunkStream(CHECKPOINT, k_rest, salt, hashlib.sha256(clear).digest())
    sealed = memoryview(data)[start:]
    try:
        plain = stream.open(sealed)
    except IntegrityError as exc:  # cut short, altered, or sealed under another key
        raise CheckpointRefused(str(exc)) from None
    finally:
        sealed.release()
    del data
    total = len(plain)
    if total < _LAYOUT.size:
        raise CheckpointRefused("truncated")
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
