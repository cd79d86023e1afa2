"""Chunked sealed files: the one owner of sealing a byte stream as a run of AES-256-GCM chunks.

Backup files and checkpoints are too large to seal as one AEAD message (it would have to sit in
memory whole, twice), so their contents are cut into chunks, each sealed on its own. Cutting opens
three attacks a single message does not have: chunks can be reordered, dropped from the end
(truncation) or swapped between files. Every chunked format here defeats all three the same way:

- a per-file key, ``HKDF-SHA256(secret, salt, info)`` with a fresh random ``salt`` in the file's
  clear header: no two files share a key, so deterministic nonces never repeat under one key, and
  a chunk moved from another file does not authenticate;
- the chunk's index in its nonce: a chunk moved within the file does not authenticate;
- the end marked inside the authentication: in the nonce's last byte (:data:`Layout.STREAM`, the
  STREAM construction of Hoang, Reyhanitabar, Rogaway and Vizár, 2015), or as the chunk count in
  every chunk's AAD (:data:`Layout.COUNTED`): a file cut at a chunk boundary does not open;
- the file's clear header (or its digest) in every chunk's AAD: a header changed under the chunks
  does not open.

The two formats sovseal writes (:data:`BACKUP`, :data:`CHECKPOINT`) predate this module and differ
in their layout, labels and chunk size; each is a :class:`ChunkFormat` here, so files already
written keep opening byte for byte. docs/design.md ("Chunked sealed files") describes both.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import IO

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from sovseal.errors import IntegrityError

from .primitives import KEY_SIZE, TAG_SIZE, hkdf_sha256

__all__ = ["BACKUP", "CHECKPOINT", "ChunkFormat", "ChunkStream", "Layout", "cut"]

_LENGTH = struct.Struct(">I")  # a STREAM chunk's sealed length, before it
_INDEX_COUNT = struct.Struct(">II")  # a COUNTED chunk's index and the file's chunk count, ending its AAD


class Layout(enum.Enum):
    """How chunks sit in the file and how the last one is marked."""

    #: ``length (4 bytes, big-endian) || sealed chunk``, repeated; nonce = 11-byte big-endian index
    #: || ``0x01`` on the last chunk, ``0x00`` on the others; AAD = label || context. Read front to
    #: back without knowing the length: the chunk that opens with the last-chunk flag ends it.
    STREAM = "stream"
    #: Sealed chunks back to back, every one but the last holding ``chunk_size`` bytes; nonce =
    #: 12-byte big-endian index; AAD = label || context || index (4 bytes) || chunk count (4 bytes).
    #: The count comes from the file's size, so a shorter file changes every chunk's AAD.
    COUNTED = "counted"


@dataclass(frozen=True, slots=True)
class ChunkFormat:
    """One kind of chunked sealed file: its layout, key label, chunk size and AAD label."""

    name: str  # what the file is called in an error ("the backup file")
    layout: Layout
    info: bytes  # HKDF info of the per-file key
    chunk_size: int  # plaintext bytes per chunk (the last may hold fewer)
    label: bytes = b""  # the start of every chunk's AAD


#: ``sovseal export`` files (sovseal.sdk.backup): 1 MiB chunks.
BACKUP = ChunkFormat("the backup file", Layout.STREAM, b"sovseal/v1/backup", 1 << 20)
#: Checkpoints (sovseal.storage.checkpoint): 16 MiB chunks, read whole at a store's open.
CHECKPOINT = ChunkFormat("the checkpoint", Layout.COUNTED, b"sovseal checkpoint v1", 16 << 20, b"sovseal-cp-v1")


def cut(parts: Iterable[bytes | bytearray | memoryview], size: int) -> Iterator[bytes]:
    """The concatenation of ``parts`` cut into pieces of ``size`` bytes (the last may be shorter,
    and there is always one, empty for an empty stream), one piece in memory at a time."""
    buffer = bytearray()
    sent = False
    for part in parts:
        view = memoryview(part).cast("B")
        start = 0
        while start < len(view):
            take = min(size - len(buffer), len(view) - start)
            buffer += view[start : start + take]
            start += take
            if len(buffer) == size:
                yield bytes(buffer)
                buffer.clear()
                sent = True
    if buffer or not sent:
        yield bytes(buffer)


class ChunkStream:
    """Seals and opens the chunks of one file: ``fmt`` under a key from ``secret`` and the file's
    ``salt``, bound to ``context`` (the file's clear header, or its digest)."""

    def __init__(self, fmt: ChunkFormat, secret: bytes, salt: bytes, context: bytes) -> None:
        self.format = fmt
        self._aead = AESGCM(hkdf_sha256(secret, salt=salt, info=fmt.info, length=KEY_SIZE))
        self._context = fmt.label + context

    def chunks(self, total: int) -> int:
        """How many chunks ``total`` plaintext bytes make (at least one)."""
        return max(1, -(-total // self.format.chunk_size))

    def _nonce(self, index: int, last: bool) -> bytes:
        if self.format.layout is Layout.STREAM:
            return index.to_bytes(11, "big") + (b"\x01" if last else b"\x00")
        return index.to_bytes(12, "big")

    def _aad(self, index: int, count: int) -> bytes:
        if self.format.layout is Layout.STREAM:
            return self._context
        return self._context + _INDEX_COUNT.pack(index, count)

    def seal(self, parts: Iterable[bytes | bytearray | memoryview], total: int) -> Iterator[bytes]:
        """The file's sealed body, chunk by chunk as it goes to disk (with its length prefix in
        STREAM); ``parts`` concatenated must be ``total`` bytes long."""
        return self.seal_chunks(cut(parts, self.format.chunk_size), total)

    def seal_chunks(self, pieces: Iterable[bytes], total: int) -> Iterator[bytes]:
        """:meth:`seal` for a body already cut into chunks (by :func:`cut`): every piece but the last
        ``chunk_size`` bytes long, ``total`` bytes in all (else ValueError, before that piece is sealed)."""
        count = self.chunks(total)
        size = self.format.chunk_size
        index = -1
        for index, piece in enumerate(pieces):
            expected = min(size, total - index * size)
            if index >= count or len(piece) != expected:
                raise ValueError(f"chunk {index} holds {len(piece)} bytes where {total} bytes cut into {size} give {max(expected, 0)}")
            sealed = self._aead.encrypt(self._nonce(index, index == count - 1), piece, self._aad(index, count))
            yield _LENGTH.pack(len(sealed)) + sealed if self.format.layout is Layout.STREAM else sealed
        if index != count - 1:
            raise ValueError(f"the pieces hold fewer than the {total} bytes announced")

    def _open(self, index: int, sealed: bytes | memoryview, last: bool, count: int) -> bytes:
        """One chunk's plaintext; IntegrityError naming it unless it authenticates."""
        try:
            return self._aead.decrypt(self._nonce(index, last), sealed, self._aad(index, count))
        except InvalidTag:
            raise IntegrityError(
                f"chunk {index} of {self.format.name} failed authentication (the file was altered, "
                "truncated, or was written with another key)"
            ) from None

    def open(self, body: bytes | bytearray | memoryview) -> bytearray:
        """The plaintext of a whole sealed body held in memory (every chunk authenticated).

        IntegrityError names the first chunk that does not open, or says the body is cut short.
        """
        view = memoryview(body).cast("B")
        if self.format.layout is Layout.STREAM:
            chunks: list[memoryview] = []
            offset = 0
            while offset < len(view):
                if offset + _LENGTH.size > len(view):
                    raise IntegrityError(f"{self.format.name} is truncated: its last chunk is cut short")
                size = _LENGTH.unpack_from(view, offset)[0]
                offset += _LENGTH.size
                if offset + size > len(view):
                    raise IntegrityError(f"{self.format.name} is truncated: its last chunk is cut short")
                chunks.append(view[offset : offset + size])
                offset += size
            if not chunks:
                raise IntegrityError(f"{self.format.name} is truncated: its last chunk is missing")
            plain = bytearray()
            for index, chunk in enumerate(chunks):
                plain += self._open(index, chunk, index == len(chunks) - 1, len(chunks))
            return plain
        whole = self.format.chunk_size + TAG_SIZE
        count = max(1, -(-len(view) // whole))  # every chunk but the last is whole
        total = len(view) - count * TAG_SIZE
        if total < 0:
            raise IntegrityError(f"{self.format.name} is truncated: its last chunk is cut short")
        plain = bytearray(total)
        step = self.format.chunk_size
        for index in range(count):
            size = min(step, total - index * step)
            start = index * whole
            plain[index * step : index * step + size] = self._open(index, view[start : start + size + TAG_SIZE], index == count - 1, count)
        return plain

    def read(self, src: IO[bytes]) -> bytearray:
        """The plaintext of a STREAM body read from ``src`` up to its last chunk, which must end it.

        IntegrityError when ``src`` ends before the last chunk, a chunk does not open (as the last
        chunk or as another), or bytes follow the last chunk.
        """
        if self.format.layout is not Layout.STREAM:
            raise ValueError(f"{self.format.name} is not read front to back: open() it whole")
        plain = bytearray()
        index = 0
        while True:
            length = src.read(_LENGTH.size)
            if len(length) < _LENGTH.size:
                raise IntegrityError(f"{self.format.name} is truncated: its last chunk is missing")
            sealed = src.read(_LENGTH.unpack(length)[0])
            try:
                plain += self._open(index, sealed, False, 0)
            except IntegrityError:
                plain += self._open(index, sealed, True, 0)
                if src.read(1):
                    raise IntegrityError(f"{self.format.name} has data after its last chunk") from None
                return plain
            index += 1
