"""How LangGraph's checkpoints and writes map onto sovseal paths, branches and records.

Paths (each component percent-encoded, so ``/`` only separates):

- ``langgraph/checkpoint/<thread>/<ns>/<checkpoint id>``: a checkpoint and its metadata;
- ``langgraph/writes/<thread>/<ns>/<checkpoint id>/<task id>``: one task's pending writes;
- ``<either of those>/part/<blob>/<i>``: part ``i`` of a blob too large for its record.

sovseal binds the keyed hash of a record's path into the AAD of its ciphertext, so a record is
bound to (thread, namespace, checkpoint id[, task id]); the reader also checks that the fields
inside the payload name the same things.

Branches: ``langgraph:thread:<thread>`` holds a thread's checkpoints, ``...:writes`` its pending
writes and ``...:fork:<n>`` futures abandoned by time travel (see saver.py).
"""

from __future__ import annotations

import functools
import hashlib
import math
from dataclasses import dataclass
from typing import Any

from sovseal.errors import IntegrityError
from sovseal.integration import check_size

from ._common import (
    PART_BYTES,
    RECORD_BLOB_CHARS,
    decode_blob,
    encode_blob,
    latin1_size,
    q,
    uq,
)

#: The payload format written: 2 encodes blobs as Latin-1 ("b", see _common); 1 (hex, "d") is still read.
FORMAT = 2
FORMATS = (1, 2)
CHECKPOINT_ROOT = "langgraph/checkpoint/"
WRITES_ROOT = "langgraph/writes/"
BRANCH_PREFIX = "langgraph:thread:"


def checkpoint_path(thread_id: str, ns: str, checkpoint_id: str) -> str:
    return f"{CHECKPOINT_ROOT}{q(thread_id)}/{q(ns)}/{q(checkpoint_id)}"


def writes_path(thread_id: str, ns: str, checkpoint_id: str, task_id: str) -> str:
    return f"{WRITES_ROOT}{q(thread_id)}/{q(ns)}/{q(checkpoint_id)}/{q(task_id)}"


def thread_prefixes(thread_id: str) -> list[str]:
    """Every path a thread's records can have starts with one of these (parts included)."""
    return [f"{CHECKPOINT_ROOT}{q(thread_id)}/", f"{WRITES_ROOT}{q(thread_id)}/"]


def part_path(record_path: str, blob: str, i: int) -> str:
    return f"{record_path}/part/{q(blob)}/{i}"


@dataclass(frozen=True, slots=True)
class Parsed:
    kind: str  # "checkpoint", "writes" or "part"
    thread_id: str
    ns: str
    checkpoint_id: str
    task_id: str | None = None


@functools.lru_cache(maxsize=4096)
def parse_path(path: str) -> Parsed | None:
    """What a path names, or None for a path that is not the saver's (cached: every read and write asks)."""
    if path.startswith(CHECKPOINT_ROOT):
        parts = path[len(CHECKPOINT_ROOT) :].split("/")
        if len(parts) == 3:
            return Parsed("checkpoint", uq(parts[0]), uq(parts[1]), uq(parts[2]))
        if len(parts) == 6 and parts[3] == "part":
            return Parsed("part", uq(parts[0]), uq(parts[1]), uq(parts[2]))
    elif path.startswith(WRITES_ROOT):
        parts = path[len(WRITES_ROOT) :].split("/")
        if len(parts) == 4:
            return Parsed("writes", uq(parts[0]), uq(parts[1]), uq(parts[2]), uq(parts[3]))
        if len(parts) == 7 and parts[4] == "part":
            return Parsed("part", uq(parts[0]), uq(parts[1]), uq(parts[2]), uq(parts[3]))
    return None


# -- branches --------------------------------------------------------------------------------------


def live_branch(thread_id: str) -> str:
    return BRANCH_PREFIX + q(thread_id)


def writes_branch(thread_id: str) -> str:
    return BRANCH_PREFIX + q(thread_id) + ":writes"


def archive_branch(thread_id: str, n: int) -> str:
    return BRANCH_PREFIX + q(thread_id) + f":fork:{n}"


def parse_branch(name: str) -> tuple[str, str, int] | None:
    """(thread id, "live" | "writes" | "archive", archive number) of a saver branch, else None."""
    if not name.startswith(BRANCH_PREFIX):
        return None
    rest = name[len(BRANCH_PREFIX) :].split(":")
    if len(rest) == 1:
        return uq(rest[0]), "live", 0
    if len(rest) == 2 and rest[1] == "writes":
        return uq(rest[0]), "writes", 0
    if len(rest) == 3 and rest[1] == "fork" and rest[2].isdigit():
        return uq(rest[0]), "archive", int(rest[2])
    return None


# -- blobs -----------------------------------------------------------------------------------------


def pack_blobs(
    record_path: str, blobs: dict[str, tuple[str, bytes]], budget: int = RECORD_BLOB_CHARS
) -> tuple[dict[str, dict[str, Any]], list[tuple[str, dict[str, Any]]]]:
    """Descriptors for a record's payload and the part records of the blobs that do not fit in it.

    Small blobs go inline (smallest first) while their encoding fits in ``budget`` canonical
    bytes; a larger one is split into part records of ``PART_BYTES`` each, and its descriptor
    keeps the part count, the size and the SHA-256 of the whole, so a part that was swapped,
    dropped or replayed from another checkpoint fails the read.
    """
    descriptors: dict[str, dict[str, Any]] = {}
    parts: list[tuple[str, dict[str, Any]]] = []
    for name, (type_, data) in sorted(blobs.items(), key=lambda item: len(item[1][1])):
        if len(data) <= budget:  # else it cannot fit in any encoding
            how, text, size = encode_blob(data)
            if size <= budget:
                descriptors[name] = {"t": type_, how: text}
                budget -= size
                continue
        check_size(len(data), f"{name!r} of {record_path}")
        n = math.ceil(len(data) / PART_BYTES)
        descriptors[name] = {"t": type_, "n": n, "size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
        for i in range(n):
            how, text, _ = encode_blob(data[i * PART_BYTES : (i + 1) * PART_BYTES])
            payload = {"lg": "part", "format": FORMAT, "of": record_path, "blob": name, "i": i, "n": n, how: text}
            parts.append((part_path(record_path, name, i), payload))
    return descriptors, parts


def inline_chars(descriptor: dict[str, Any]) -> int:
    """The canonical bytes an inline blob takes in its record (0 for a blob stored in parts)."""
    if isinstance(text := descriptor.get("b"), str):
        return latin1_size(text.encode("latin-1", errors="replace"))
    data = descriptor.get("d")
    return len(data) if isinstance(data, str) else 0


def check_part(payload: Any, record_path: str, blob: str, i: int, n: int) -> bytes:
    where = f"part {i} of {blob!r} of {record_path}"
    if (
        not isinstance(payload, dict)
        or payload.get("lg") != "part"
        or payload.get("of") != record_path
        or payload.get("blob") != blob
        or payload.get("i") != i
        or payload.get("n") != n
    ):
        raise IntegrityError(f"{where} does not name its place; run verify()")
    return decode_blob(payload, where)


def join_parts(descriptor: dict[str, Any], chunks: list[bytes], where: str) -> bytes:
    data = b"".join(chunks)
    if len(data) != descriptor.get("size") or hashlib.sha256(data).hexdigest() != descriptor.get("sha256"):
        raise IntegrityError(f"{where}: the parts do not add up to the blob the record names; run verify()")
    return data


def typed(descriptor: Any, where: str) -> tuple[str, bool]:
    """The serializer type tag of a blob descriptor and whether it is inline."""
    if not isinstance(descriptor, dict) or not isinstance(descriptor.get("t"), str):
        raise IntegrityError(f"{where}: malformed blob descriptor; run verify()")
    if "b" in descriptor or "d" in descriptor:
        return descriptor["t"], True
    if not isinstance(descriptor.get("n"), int) or descriptor["n"] < 1:
        raise IntegrityError(f"{where}: malformed blob descriptor; run verify()")
    return descriptor["t"], False
