"""Values larger than one sovseal record, stored as a record plus part records.

A sovseal record holds at most ``sovseal.entries.MAX_ENTRY_BYTES`` (256 KiB) of canonical JSON:
records are not blobs. A document, message or byte-store value whose payload is larger than
:data:`INLINE_BYTES` of canonical JSON is stored as

- the record itself, whose payload is a descriptor ``{"sovseal/parts": {"n", "bytes", "sha256",
  "kind", "at"}}`` (its metadata, type and recall text as for any record), and
- ``n`` part records at ``<parts root><at>/<i>``, each ``{"of": <record path>, "i", "n", "sha256",
  "s": <a slice of the value>}``, never indexed (``index=False``).

``at`` is ``<group hash>/<path hash>/<value hash>``: the group is what the record belongs to (a
collection, a chat session, a namespace), the value hash covers the record's path and the value's
SHA-256, so a new value never reuses another's parts and two devices that write one id at once never
mix their parts. Every part of every version of one record is therefore under
:func:`record_prefix`, and every part of a group under :func:`group_prefix`: an erasure
(``Sovseal.purge(prefix=...)``) reaches the parts of versions that were overwritten or deleted
long ago, whose descriptors can no longer be read. Values stored before this layout have an ``at``
of the value hash alone; their parts are found from the descriptor (:func:`part_paths`). The parts and the records of one
call go in one ``Sovseal.store_many`` (parts first: a crash keeps a prefix, at worst parts that no
record names). A read checks every part names its place and that the joined value has the recorded
size and hash (else ``IntegrityError``). Deleting or overwriting a value deletes the parts it no
longer names.

The same scheme, limits and descriptor are used by langchain-sovseal and llama-index-sovseal
(a copy of langchain_sovseal/_parts.py: the packages do not depend on each other).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from typing import Any

from sovseal.canonical import canonicalize
from sovseal.errors import IntegrityError, PayloadTooLargeError

#: A payload up to this many bytes of canonical JSON stays in its record (the rest of the 256 KiB
#: record is left for metadata and the recall text); a larger one goes to parts.
INLINE_BYTES = 128 * 1024
#: The canonical bytes of the slice one part record holds.
PART_BYTES = 192 * 1024
#: The largest value stored (UTF-8 bytes of its text, or of its canonical JSON).
MAX_VALUE_BYTES = 64 * 1024 * 1024
#: What recall embeds and keyword-matches of a record's text: its first characters (the on-device
#: model reads 256 tokens, fewer characters than this). The text is sealed with the record, so it is
#: kept short: a large value is stored once, not once more for recall.
INDEX_CHARS = 2048
MARK = "sovseal/parts"
#: Below this many characters a string's canonical JSON cannot exceed INLINE_BYTES (6 bytes a char at most).
_SURELY_INLINE = INLINE_BYTES // 6


def index_text(text: str) -> str:
    """The recall text of a record: the first :data:`INDEX_CHARS` characters, never empty.

    An empty text would make sovseal store the record unindexed, so ``""`` is indexed as ``" "``
    (which the on-device tokenizer reads exactly as ``""``)."""
    return text[:INDEX_CHARS] or " "


def _fits(payload: Any) -> bool:
    if isinstance(payload, str) and len(payload) <= _SURELY_INLINE:
        return True
    return len(canonicalize(payload, root="payload")) <= INLINE_BYTES


def _slices(text: str) -> list[str]:
    """``text`` cut into slices of at most :data:`PART_BYTES` canonical bytes each."""
    out: list[str] = []
    start = 0
    while start < len(text):
        size = PART_BYTES
        while True:
            piece = text[start : start + size]
            got = len(canonicalize(piece))
            if got <= PART_BYTES:
                break
            size = max(1, size * PART_BYTES // got - 16)
        out.append(piece)
        start += len(piece)
    return out


def _hash(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest()[:32]


def group_prefix(parts_root: str, group: str) -> str:
    """The path prefix of every part record of every record in ``group``."""
    return f"{parts_root}{_hash(group)}/"


def record_prefix(parts_root: str, group: str, path: str) -> str:
    """The path prefix of every part record of every version of the record at ``path``."""
    return f"{group_prefix(parts_root, group)}{_hash(path)}/"


def pack(path: str, payload: Any, parts_root: str, *, where: str, group: str) -> tuple[Any, list[dict[str, Any]]]:
    """The payload to store at ``path`` and the part items to store before it (none if it fits).

    A ``str`` payload is split as text; anything else as its canonical JSON (``where`` names the
    value in a too-large error). ``group`` is what the record belongs to (see :func:`group_prefix`):
    the same for every write of ``path``."""
    if _fits(payload):
        return payload, []
    if isinstance(payload, str):
        kind, text = "str", payload
    else:
        kind, text = "json", canonicalize(payload, root="payload").decode("utf-8")
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) > MAX_VALUE_BYTES:
        raise PayloadTooLargeError(
            f"{where} is {len(data):,} bytes; the limit is {MAX_VALUE_BYTES:,} (64 MiB). Store large content "
            "elsewhere and keep a reference."
        )
    sha = hashlib.sha256(data).hexdigest()
    value = hashlib.sha256(f"{path}\x00{sha}".encode("utf-8", errors="surrogatepass")).hexdigest()[:40]
    at = f"{_hash(group)}/{_hash(path)}/{value}"
    pieces = _slices(text)
    n = len(pieces)
    items = [
        {
            "path": f"{parts_root}{at}/{i}",
            "payload": {"of": path, "i": i, "n": n, "sha256": sha, "s": piece},
            "index": False,
        }
        for i, piece in enumerate(pieces)
    ]
    return {MARK: {"n": n, "bytes": len(data), "sha256": sha, "kind": kind, "at": at}}, items


def descriptor(payload: Any) -> dict[str, Any] | None:
    """The parts descriptor of a stored payload, or None for a payload stored whole."""
    if isinstance(payload, dict) and len(payload) == 1 and isinstance(found := payload.get(MARK), dict):
        return found
    return None


def part_paths(payload: Any, parts_root: str) -> list[str]:
    """The part records a stored payload names (none for a payload stored whole)."""
    d = descriptor(payload)
    if d is None or not isinstance(d.get("n"), int) or not isinstance(d.get("at"), str):
        return []
    return [f"{parts_root}{d['at']}/{i}" for i in range(d["n"])]


def outside(payload: Any, parts_root: str, prefix: str) -> list[str]:
    """The part records a stored payload names that are not under ``prefix``: a value stored before
    parts were grouped by record names them only in its descriptor."""
    return [p for p in part_paths(payload, parts_root) if not p.startswith(prefix)]


def unpack(path: str, payload: Any, parts_root: str, get: Callable[[str], Any]) -> Any:
    """The value stored at ``path``: ``payload`` itself, or its parts joined and checked.

    ``get(part_path)`` returns the part's payload (None if missing)."""
    d = descriptor(payload)
    if d is None:
        return payload
    pieces: list[str] = []
    n = d.get("n")
    for i, part_path in enumerate(part_paths(payload, parts_root)):
        part = get(part_path)
        if (
            not isinstance(part, dict)
            or part.get("of") != path
            or part.get("i") != i
            or part.get("n") != n
            or part.get("sha256") != d.get("sha256")
            or not isinstance(part.get("s"), str)
        ):
            raise IntegrityError(f"part {i} of {path!r} is missing or does not name its place; run verify()")
        pieces.append(part["s"])
    text = "".join(pieces)
    data = text.encode("utf-8", errors="surrogatepass")
    if len(data) != d.get("bytes") or hashlib.sha256(data).hexdigest() != d.get("sha256"):
        raise IntegrityError(f"the parts of {path!r} do not add up to the value its record names; run verify()")
    return text if d.get("kind") == "str" else json.loads(text)


def stale(old_payloads: Sequence[Any], new_payloads: Sequence[Any], parts_root: str) -> list[str]:
    """Part paths the old payloads named that none of the new ones does."""
    kept = {p for payload in new_payloads for p in part_paths(payload, parts_root)}
    return [p for payload in old_payloads for p in part_paths(payload, parts_root) if p not in kept]
