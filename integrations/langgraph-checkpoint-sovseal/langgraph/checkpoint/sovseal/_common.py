"""What the saver and the store share: the handle lock, branch switching, the anchor, paths, blobs.

Everything here goes through the public ``Sovseal`` API. A ``Sovseal`` handle has one current
branch, so every operation that reads or writes another branch runs under a per-handle lock,
switches to that branch and switches back (``on_branch``); a saver and a store given the same
handle therefore share the lock and never see each other's branch.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote, unquote

import numpy as np

from sovseal import Sovseal
from sovseal.entries import MAX_ENTRY_BYTES
from sovseal.errors import IntegrityError, InvalidInputError

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
                    handle.store(ANCHOR_PATH, {"anchor": "langgraph"}, type="procedural", provenance="observed")
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


def q(component: str) -> str:
    return quote(component, safe="")


def uq(component: str) -> str:
    return unquote(component)


# -- blobs: serialized bytes inside JSON payloads --------------------------------------------------

#: The 16 hex digits written as ASCII punctuation that JSON does not escape. A blob is the hex of
#: its bytes in this alphabet (2 characters a byte), not base64: sovseal keyword-indexes the text of
#: every record in memory (letters and digits only), and base64 would fill that index with hundreds
#: of random "words" per checkpoint. Punctuation is no word, so a blob adds no term at all.
_HEX = "0123456789abcdef"
_ALPHABET = "!#$%&'()*+,-./:;"
_ENCODE = str.maketrans(_HEX, _ALPHABET)
#: Every other ASCII character (whitespace included, which ``bytes.fromhex`` would skip) becomes a
#: character ``fromhex`` rejects, so only the alphabet decodes.
_DECODE = {c: ord("z") for c in range(128)} | {ord(a): ord(h) for a, h in zip(_ALPHABET, _HEX, strict=True)}

#: Room a record keeps for everything but its blobs (path, ids, field names, JSON syntax).
RECORD_OVERHEAD = 16 * 1024
#: Encoded blob characters one record may carry.
RECORD_BLOB_CHARS = MAX_ENTRY_BYTES - RECORD_OVERHEAD
#: Bytes of a blob one part record carries (2 characters a byte).
PART_BYTES = RECORD_BLOB_CHARS // 2


def encode_bytes(data: bytes) -> str:
    return data.hex().translate(_ENCODE)


def decode_bytes(text: object, where: str) -> bytes:
    try:
        if not isinstance(text, str):
            raise TypeError(type(text).__name__)
        return bytes.fromhex(text.translate(_DECODE))
    except (TypeError, ValueError):
        raise IntegrityError(f"{where}: a blob is not in the adapter's encoding; run verify()") from None
