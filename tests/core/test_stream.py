"""Chunked sealed files (sovseal.crypto.stream): the bytes of both formats, and every tampering refused.

What it proves: (1) the backup and checkpoint formats seal exactly the bytes the code before
sovseal.crypto.stream wrote (digests recorded from that code, for bodies of no, one, part of a,
exactly one and more than one chunk), so every file already on a disk still opens; (2) a body cut
into several chunks round-trips however its parts are split; (3) reordering, dropping, cutting,
extending or flipping a bit of the sealed chunks, or opening them with another key, salt or header,
raises IntegrityError and returns no plaintext, in both layouts and through both readers.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
from collections.abc import Callable

import pytest

from sovseal.crypto.stream import BACKUP, CHECKPOINT, ChunkFormat, ChunkStream, Layout, cut
from sovseal.errors import IntegrityError

SECRET = bytes(range(32))
SALT = bytes(range(100, 132))
BACKUP_CONTEXT = b"sovseal-backup v1\n" + b'{"format":1}'
CHECKPOINT_CONTEXT = hashlib.sha256(b'{"h":1}').digest()
MiB = 1 << 20


def pattern(size: int) -> bytes:
    return (bytes(range(251)) * (size // 251 + 1))[:size]


#: sha256 of the sealed body written by the code before sovseal.crypto.stream, by plaintext size.
BACKUP_GOLDEN = {
    0: "ae463234581327a1311a3b566e1a87091de4196518feed85656e595e7a330f98",
    1000: "f407c18ae8d980d8c95ac0383a11a6ed218c46e93277401a36022af25a7b38f8",
    MiB: "e2ebfb80ca5160b80cdc9cb3b9471c6bc215bd6345d7378ade8afe16ee6c40b4",
    MiB + 1: "c9990fa6963cd8245ae81b6b5232e3bb5f7cc1c89e3cad3c4dc33fb603e3c4cc",
}
CHECKPOINT_GOLDEN = {
    0: "4b988142f9a396b6e7ac3eaf9e0f086e3b0eed2dc495fe26fd6b0e700442dc0c",
    1000: "29ec58571d0dcd225018e6b102263a61fc3d383596162be8eeb8517ff3561117",
    16 * MiB: "56885285d258255f6a551878ba197496d2451c856ad1525bab4ecd21e6e5f621",
    16 * MiB + 5: "d163918304097fd7c22485fc21d49f154569c3bf7071cada9853b0666eba0e50",
}


@pytest.mark.parametrize("size", sorted(BACKUP_GOLDEN))
def test_backup_bodies_keep_their_bytes(size: int) -> None:
    data = pattern(size)
    body = b"".join(ChunkStream(BACKUP, SECRET, SALT, BACKUP_CONTEXT).seal([data], size))
    assert hashlib.sha256(body).hexdigest() == BACKUP_GOLDEN[size]
    assert ChunkStream(BACKUP, SECRET, SALT, BACKUP_CONTEXT).read(io.BytesIO(body)) == data
    assert ChunkStream(BACKUP, SECRET, SALT, BACKUP_CONTEXT).open(body) == data


@pytest.mark.parametrize("size", sorted(CHECKPOINT_GOLDEN))
def test_checkpoint_bodies_keep_their_bytes(size: int) -> None:
    data = pattern(size)
    body = b"".join(ChunkStream(CHECKPOINT, SECRET, SALT, CHECKPOINT_CONTEXT).seal([data], size))
    assert hashlib.sha256(body).hexdigest() == CHECKPOINT_GOLDEN[size]
    assert ChunkStream(CHECKPOINT, SECRET, SALT, CHECKPOINT_CONTEXT).open(body) == data


# -- small chunks: many of them in a few bytes ------------------------------------------------------

SMALL = [dataclasses.replace(BACKUP, chunk_size=16), dataclasses.replace(CHECKPOINT, chunk_size=16)]
IDS = ["stream", "counted"]


def chunks_of(fmt: ChunkFormat, body: bytes) -> list[bytes]:
    """The sealed chunks of ``body`` as they sit in the file (with their length prefix in STREAM)."""
    out, offset = [], 0
    while offset < len(body):
        size = int.from_bytes(body[offset : offset + 4], "big") + 4 if fmt.layout is Layout.STREAM else fmt.chunk_size + 16
        out.append(body[offset : offset + size])
        offset += size
    return out


def opens(fmt: ChunkFormat, body: bytes) -> list[bytes]:
    """What each reader of ``fmt`` returns for ``body`` (both readers for STREAM)."""
    stream = ChunkStream(fmt, SECRET, SALT, b"ctx")
    found = [bytes(stream.open(body))]
    if fmt.layout is Layout.STREAM:
        found.append(bytes(stream.read(io.BytesIO(body))))
    return found


@pytest.mark.parametrize("fmt", SMALL, ids=IDS)
@pytest.mark.parametrize("size", [0, 1, 15, 16, 17, 48, 50])
def test_round_trip_however_the_parts_are_split(fmt: ChunkFormat, size: int) -> None:
    data = pattern(size)
    parts = [data[:3], b"", memoryview(data[3:20]), bytearray(data[20:])]
    body = b"".join(ChunkStream(fmt, SECRET, SALT, b"ctx").seal(parts, size))
    assert len(chunks_of(fmt, body)) == max(1, -(-size // 16))
    assert set(opens(fmt, body)) == {data}


def refused(fmt: ChunkFormat, body: bytes, *, context: bytes = b"ctx", salt: bytes = SALT, secret: bytes = SECRET) -> None:
    """Every reader of ``fmt`` raises IntegrityError on ``body``."""
    stream = ChunkStream(fmt, secret, salt, context)
    with pytest.raises(IntegrityError):
        stream.open(body)
    if fmt.layout is Layout.STREAM:
        with pytest.raises(IntegrityError):
            stream.read(io.BytesIO(body))


#: Ways to damage a body of four chunks (the last of 2 bytes), given the body and its chunks.
TAMPERING: dict[str, Callable[[bytes, list[bytes]], bytes]] = {
    "two chunks swapped": lambda body, c: b"".join([c[1], c[0], *c[2:]]),
    "the last chunk dropped": lambda body, c: b"".join(c[:3]),
    "cut inside the last chunk": lambda body, c: body[:-1],
    "cut inside the first chunk": lambda body, c: body[:10],
    "nothing left": lambda body, c: b"",
    "data after the last chunk": lambda body, c: body + b"\x00",
    "the last chunk repeated": lambda body, c: b"".join([*c, c[-1]]),
    "a bit flipped": lambda body, c: body[:20] + bytes([body[20] ^ 1]) + body[21:],
}


@pytest.mark.parametrize("fmt", SMALL, ids=IDS)
@pytest.mark.parametrize("damage", sorted(TAMPERING))
def test_every_tampering_is_refused(fmt: ChunkFormat, damage: str) -> None:
    data = pattern(50)
    body = b"".join(ChunkStream(fmt, SECRET, SALT, b"ctx").seal([data], len(data)))
    chunks = chunks_of(fmt, body)
    assert len(chunks) == 4
    refused(fmt, TAMPERING[damage](body, chunks))


@pytest.mark.parametrize("fmt", SMALL, ids=IDS)
def test_another_key_salt_header_or_label_is_refused(fmt: ChunkFormat) -> None:
    body = b"".join(ChunkStream(fmt, SECRET, SALT, b"ctx").seal([pattern(50)], 50))
    refused(fmt, body, context=b"cty")
    refused(fmt, body, salt=bytes(32))
    refused(fmt, body, secret=bytes(32))
    refused(dataclasses.replace(fmt, info=fmt.info + b"x"), body)
    refused(dataclasses.replace(fmt, label=fmt.label + b"x"), body)


def test_a_backup_says_what_is_wrong() -> None:
    fmt = SMALL[0]
    body = b"".join(ChunkStream(fmt, SECRET, SALT, b"ctx").seal([pattern(40)], 40))
    chunks = chunks_of(fmt, body)
    read = ChunkStream(fmt, SECRET, SALT, b"ctx").read
    with pytest.raises(IntegrityError, match=r"^the backup file is truncated: its last chunk is missing$"):
        read(io.BytesIO(b"".join(chunks[:2])))
    with pytest.raises(IntegrityError, match=r"^chunk 1 of the backup file failed authentication"):
        read(io.BytesIO(chunks[0] + chunks[2]))
    with pytest.raises(IntegrityError, match=r"^the backup file has data after its last chunk$"):
        read(io.BytesIO(body + b"more"))


def test_a_counted_body_is_opened_whole_only() -> None:
    with pytest.raises(ValueError, match="open"):
        ChunkStream(CHECKPOINT, SECRET, SALT, b"").read(io.BytesIO(b""))


@pytest.mark.parametrize("fmt", SMALL, ids=IDS)
def test_pieces_must_be_cut_as_announced(fmt: ChunkFormat) -> None:
    stream = ChunkStream(fmt, SECRET, SALT, b"ctx")
    with pytest.raises(ValueError):
        list(stream.seal_chunks([b"x" * 15, b"x"], 16))  # a short chunk before the last
    with pytest.raises(ValueError):
        list(stream.seal([b"x" * 20], 16))  # more than announced
    with pytest.raises(ValueError):
        list(stream.seal([b"x" * 20], 40))  # fewer than announced
    assert list(cut([b"ab", b"cde"], 2)) == [b"ab", b"cd", b"e"]
    assert list(cut([], 2)) == [b""]
    assert list(cut([b"abcd"], 2)) == [b"ab", b"cd"]
