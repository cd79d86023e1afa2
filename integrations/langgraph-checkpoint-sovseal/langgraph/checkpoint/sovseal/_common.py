"""What the saver and the store share: paths, blobs, and the embedder of a checkpoint store."""

from __future__ import annotations

import contextlib
import functools
from typing import Any
from urllib.parse import quote, unquote

import numpy as np

from sovseal.errors import IntegrityError
from sovseal.integration import MAX_ENTRY_BYTES


def no_embedding(texts: Any) -> np.ndarray:
    """The embedder of a store opened for checkpoints only: checkpoints are never recalled by meaning.

    ``Sovseal.store`` embeds every record it writes; a one-dimensional zero vector makes that free.
    """
    return np.zeros((len(texts), 1), dtype=np.float32)


# -- paths: every path component is percent-encoded, so "/" separates and nothing else does --------


@functools.lru_cache(maxsize=4096)
def q(component: str) -> str:
    """The percent-encoded component (cached: a thread's id and namespace are encoded on every operation)."""
    return quote(component, safe="")


def uq(component: str) -> str:
    return unquote(component) if "%" in component else component  # most ids need no decoding: skip the call


# -- blobs: serialized bytes inside JSON payloads --------------------------------------------------
#
# Two encodings of bytes as a JSON string. A blob descriptor or part names the one it uses by its key.
#
# - "b" (format 2, written by default): the bytes decoded as Latin-1, one character per byte. Mostly
#   ASCII serializer output (msgpack of text) stays about its own size in canonical JSON, and both
#   directions are single C calls. Checkpoint records are stored with ``index=False``, so no keyword
#   index ever sees this text. Bytes 0x80-0xff take two bytes of UTF-8 and control bytes are escaped,
#   so binary data can grow to 2-6 bytes a byte: a blob that would exceed 2 bytes a byte is written
#   as "d" instead, which bounds every blob at 2 bytes a byte, as format 1 did.
# - "d" (format 1, and the fallback): hex in 16 ASCII punctuation characters that JSON does not
#   escape, 2 characters a byte. (Format 1 chose punctuation so that sovseal's keyword index, which
#   then saw every record, found no words in it.)

_HEX = "0123456789abcdef"
_ALPHABET = "!#$%&'()*+,-./:;"
_ENCODE = str.maketrans(_HEX, _ALPHABET)
#: Every other ASCII character (whitespace included, which ``bytes.fromhex`` would skip) becomes a
#: character ``fromhex`` rejects, so only the alphabet decodes.
_DECODE = {c: ord("z") for c in range(128)} | {ord(a): ord(h) for a, h in zip(_ALPHABET, _HEX, strict=True)}

#: What each byte costs in canonical JSON beyond one byte, grouped so ``bytes.translate`` counts them:
#: 0x80-0xff are two bytes of UTF-8; \b \t \n \f \r, ``"`` and ``\`` are two-character escapes; every
#: other control byte is a six-character ``\u00hh`` escape (RFC 8785 section 3.2.2.2).
_ONE_MORE = bytes(range(0x80, 0x100)) + b'\b\t\n\f\r"\\'
_FIVE_MORE = bytes(c for c in range(0x20) if c not in b"\b\t\n\f\r")

#: Room a record keeps for everything but its blobs (path, ids, field names, JSON syntax).
RECORD_OVERHEAD = 16 * 1024
#: Canonical bytes of encoded blobs one record may carry.
RECORD_BLOB_CHARS = MAX_ENTRY_BYTES - RECORD_OVERHEAD
#: Bytes of a blob one part record carries (at most 2 canonical bytes a byte).
PART_BYTES = RECORD_BLOB_CHARS // 2


#: The bytes that cost one byte each: printable ASCII other than ``"`` and ``\``.
_CHEAP = bytes(c for c in range(256) if c not in _ONE_MORE and c not in _FIVE_MORE)


def latin1_size(data: bytes) -> int:
    """The canonical JSON size of ``data`` encoded as "b", without its quotes (counted in C).

    One pass keeps only the bytes that cost more than one (usually a small part of serializer
    output); the control bytes among those are counted on that remainder.
    """
    costly = data.translate(None, _CHEAP)
    if not costly:
        return len(data)
    return len(data) + len(costly) + 4 * (len(costly) - len(costly.translate(None, _FIVE_MORE)))


def encode_blob(data: bytes) -> tuple[str, str, int]:
    """(descriptor key, encoded text, canonical size) of ``data``: "b" unless "d" is smaller."""
    size = latin1_size(data)
    if size <= 2 * len(data):
        return "b", data.decode("latin-1"), size
    return "d", encode_bytes(data), 2 * len(data)


def decode_blob(holder: dict[str, Any], where: str) -> bytes:
    """The bytes a descriptor or part holds under "b" or "d" (IntegrityError for anything else)."""
    text = holder.get("b")
    if text is None:
        return decode_bytes(holder.get("d"), where)
    if isinstance(text, str):
        with contextlib.suppress(UnicodeEncodeError):
            return text.encode("latin-1")
    raise _not_ours(where)


def encode_bytes(data: bytes) -> str:
    return data.hex().translate(_ENCODE)


def decode_bytes(text: object, where: str) -> bytes:
    if isinstance(text, str):
        with contextlib.suppress(ValueError):
            return bytes.fromhex(text.translate(_DECODE))
    raise _not_ours(where)


def _not_ours(where: str) -> IntegrityError:
    """A blob that is not a string in the adapter's encoding: stored bytes were changed or damaged."""
    return IntegrityError(f"{where}: a blob is not in the adapter's encoding; run verify()")
