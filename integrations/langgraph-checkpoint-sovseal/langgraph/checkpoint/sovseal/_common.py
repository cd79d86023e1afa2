"""What the saver and the store share: the handle lock, branch switching, the anchor, paths, blobs.

Everything here goes through the public ``Sovseal`` API. A ``Sovseal`` handle has one current
branch, so every operation that reads or writes another branch runs under a per-handle lock,
switches to that branch and switches back (``on_branch``); a saver and a store given the same
handle therefore share the lock and never see each other's branch.
"""

from __future__ import annotations

import functools
import threading
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote, unquote

import numpy as np

from sovseal import Sovseal
from sovseal.entries import MAX_ENTRY_BYTES
from sovseal.errors import (
    IntegrityError,
    InvalidInputError,
    PayloadTooLargeError,
    UnknownBranchError,
)

# -- the per-handle lock ---------------------------------------------------------------------------

_LOCKS: weakref.WeakKeyDictionary[Sovseal, threading.RLock] = weakref.WeakKeyDictionary()
_LOCKS_GUARD = threading.Lock()


def handle_lock(handle: Sovseal) -> threading.RLock:
    """The lock every LangGraph adapter takes before it touches ``handle`` (one per handle)."""
    with _LOCKS_GUARD:
        lock = _LOCKS.get(handle)
        if lock is None:
            lock = _LOCKS[handle] = threading.RLock()
        return lock


@contextmanager
def on_branch(handle: Sovseal, branch: str) -> Iterator[Sovseal]:
    """Run with ``handle`` on ``branch``, then put it back on the branch it was on (hold the lock)."""
    previous = handle.branch
    if previous != branch:
        handle.checkout(branch)
    try:
        yield handle
    finally:
        if handle.branch != previous:
            handle.checkout(previous)


def branch_heads(handle: Sovseal, branches: Iterable[str], *, status: Any = None) -> dict[str, tuple[str | None, ...]]:
    """Every head of each branch, newest first (``()`` for a branch that does not exist).

    A pull can leave a branch with several heads (two devices wrote it): ``snapshot()`` is only the
    newest, and a pull that brings in an *older* head leaves it unchanged, so a cache keyed on
    ``snapshot()`` would never see the other device's records. The adapters key theirs on all heads.

    SDK: ``Sovseal.heads_of(branch)`` when the installed sovseal has it (one branch, cheap); until
    then ``Sovseal.status().heads``, which lists every branch of the store (its cost grows with the
    number of branches). ``status`` reuses a ``Status`` the caller already has.
    """
    names = list(branches)
    heads_of = getattr(handle, "heads_of", None)
    if callable(heads_of):
        out: dict[str, tuple[str | None, ...]] = {}
        for name in names:
            try:
                out[name] = tuple(heads_of(name))
            except UnknownBranchError:
                out[name] = ()
        return out
    every = (status if status is not None else handle.status()).heads
    return {name: tuple(every.get(name, ())) for name in names}


def no_embedding(texts: Any) -> np.ndarray:
    """The embedder of a store opened for checkpoints only: checkpoints are never recalled by meaning.

    ``Sovseal.store`` embeds every record it writes; a one-dimensional zero vector makes that free.
    """
    return np.zeros((len(texts), 1), dtype=np.float32)


# -- the anchor: a snapshot whose view is empty, to root new branches on ---------------------------

ANCHOR_BRANCH = "langgraph:anchor"
ANCHOR_PATH = "langgraph/anchor"


def ensure_anchor(handle: Sovseal) -> str:
    """The snapshot id every LangGraph branch is rooted on: a HEAD at which no path is visible.

    The SDK can fork a branch only at a snapshot (or at an empty branch's nothing), and cannot
    delete a branch. So the first adapter to open a store creates the branch ``langgraph:anchor``
    whose HEAD is a tombstone with an empty view: on an empty current branch by storing and
    deleting one marker record, on a store that already holds memories by forking, rolling back
    to the first snapshot and deleting it. A thread forked at the anchor starts empty, and
    ``rollback(anchor)`` empties a branch in one step, deleting nothing (append-only).
    Caller holds ``handle_lock(handle)``.
    """
    if ANCHOR_BRANCH not in handle.branches():
        with on_branch(handle, handle.branch):
            head = handle.snapshot()
            try:
                handle.fork(head, branch=ANCHOR_BRANCH)  # switches to the anchor
            except InvalidInputError:
                if ANCHOR_BRANCH not in handle.branches():  # not a race with another process: a real error
                    raise
            else:
                if head is None:
                    # index=False: opening a store for checkpoints never loads the vector index
                    handle.store(ANCHOR_PATH, {"anchor": "langgraph"}, type="procedural", provenance="observed", index=False)
                    handle.delete(ANCHOR_PATH)
                else:
                    genesis = handle.log()[-1]
                    handle.rollback(genesis.snapshot_id)
                    handle.delete(genesis.path)
    with on_branch(handle, ANCHOR_BRANCH):
        sid = handle.snapshot()
    if sid is None:  # another process created the branch and has not written its tombstone yet
        raise IntegrityError(f"the branch {ANCHOR_BRANCH!r} has no snapshot; open the saver again")
    return sid


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
#: The largest value an adapter stores: a serialized checkpoint, metadata or write, or a Store item's
#: canonical JSON. The same limit as langchain-sovseal's and llama-index-sovseal's (their _parts.py).
MAX_VALUE_BYTES = 64 * 1024 * 1024


def check_size(size: int, where: str) -> None:
    """PayloadTooLargeError for a value over :data:`MAX_VALUE_BYTES`, worded as the other adapters word it."""
    if size > MAX_VALUE_BYTES:
        raise PayloadTooLargeError(
            f"{where} is {size:,} bytes; the limit is {MAX_VALUE_BYTES:,} (64 MiB). Store large content "
            "elsewhere and keep a reference."
        )


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
    try:
        if not isinstance(text, str):
            raise TypeError(type(text).__name__)
        return text.encode("latin-1")
    except (TypeError, UnicodeEncodeError):
        raise IntegrityError(f"{where}: a blob is not in the adapter's encoding; run verify()") from None


def encode_bytes(data: bytes) -> str:
    return data.hex().translate(_ENCODE)


def decode_bytes(text: object, where: str) -> bytes:
    try:
        if not isinstance(text, str):
            raise TypeError(type(text).__name__)
        return bytes.fromhex(text.translate(_DECODE))
    except (TypeError, ValueError):
        raise IntegrityError(f"{where}: a blob is not in the adapter's encoding; run verify()") from None
