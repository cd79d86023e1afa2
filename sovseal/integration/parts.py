"""Values larger than one sovseal record, stored as a record plus part records; the one size limit.

A sovseal record holds at most ``sovseal.storage.entries.MAX_ENTRY_BYTES`` (256 KiB) of canonical JSON:
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
:meth:`Parts.record_prefix`, and every part of a group under :meth:`Parts.group_prefix`: an erasure
(``Sovseal.purge(prefix=...)``) reaches the parts of versions that were overwritten or deleted long
ago, whose descriptors can no longer be read. Values stored before this layout have an ``at`` of the
value hash alone; their parts are found from the descriptor (:meth:`Parts.paths`). The parts and the
records of one call go in one ``Sovseal.store_many`` (parts first: a crash keeps a prefix, at worst
parts that no record names). A read checks that every part names its place and that the joined value
has the recorded size and hash (else ``IntegrityError``). Deleting or overwriting a value deletes the
parts it no longer names.

Each adapter package keeps its parts under its own root (``langchain-parts/``,
``llamaindex-parts/``): this layout is on disk in users' stores, so it does not change.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from sovseal.sdk.client import Sovseal

from ..canonical import canonicalize
from ..errors import RUN_VERIFY, RUN_VERIFY_CLI, IntegrityError, InvalidInputError, PayloadTooLargeError
from ..models import Memory

#: The largest value any adapter stores (UTF-8 bytes of its text, or of its canonical JSON): the one
#: limit of every adapter, so a value one framework takes is never refused by another.
MAX_VALUE_BYTES = 64 * 1024 * 1024
#: A payload up to this many bytes of canonical JSON stays in its record (the rest of the 256 KiB
#: record is left for metadata and the recall text); a larger one goes to parts.
INLINE_BYTES = 128 * 1024
#: The canonical bytes of the slice one part record holds.
PART_BYTES = 192 * 1024
#: What recall embeds and keyword-matches of a record's text: its first characters (the on-device
#: model reads 256 tokens, fewer characters than this). The text is sealed with the record, so it is
#: kept short: a large value is stored once, not once more for recall.
INDEX_CHARS = 2048
MARK = "sovseal/parts"
#: Below this many characters a string's canonical JSON cannot exceed INLINE_BYTES (6 bytes a char at most).
_SURELY_INLINE = INLINE_BYTES // 6


def check_size(size: int, where: str) -> None:
    """``PayloadTooLargeError`` for a value of ``size`` bytes over :data:`MAX_VALUE_BYTES`; ``where``
    names the value (``"the page_content of document 'a'"``), so the caller knows which one."""
    if size > MAX_VALUE_BYTES:
        raise PayloadTooLargeError(
            f"{where} is {size:,} bytes; the limit is {MAX_VALUE_BYTES:,} (64 MiB). Store large content "
            "elsewhere and keep a reference."
        )


def index_text(text: str) -> str:
    """The recall text of a record: the first :data:`INDEX_CHARS` characters, never empty.

    An empty text would make sovseal store the record unindexed, so ``""`` is indexed as ``" "``
    (which the on-device tokenizer reads exactly as ``""``)."""
    return text[:INDEX_CHARS] or " "


def as_text(value: Any) -> str:
    """A stored value as the text a framework shows (a document's content): a string as is,
    anything else (a memory stored by the SDK with a structured payload) as sorted JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, ensure_ascii=False, sort_keys=True)


def descriptor(payload: Any) -> dict[str, Any] | None:
    """The parts descriptor of a stored payload, or None for a payload stored whole."""
    if isinstance(payload, dict) and len(payload) == 1 and isinstance(found := payload.get(MARK), dict):
        return found
    return None


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


class Parts:
    """The part records of one adapter package, under its ``root`` (``"langchain-parts/"``)."""

    def __init__(self, root: str) -> None:
        if not root.endswith("/"):
            raise InvalidInputError(f"a parts root ends with '/', got {root!r}")
        self.root = root

    def group_prefix(self, group: str) -> str:
        """The path prefix of every part record of every record in ``group``."""
        return f"{self.root}{_hash(group)}/"

    def record_prefix(self, group: str, path: str) -> str:
        """The path prefix of every part record of every version of the record at ``path``."""
        return f"{self.group_prefix(group)}{_hash(path)}/"

    def pack(self, path: str, payload: Any, *, where: str, group: str) -> tuple[Any, list[dict[str, Any]]]:
        """The payload to store at ``path`` and the part items to store before it (none if it fits).

        A ``str`` payload is split as text; anything else as its canonical JSON (``where`` names the
        value in a too-large error). ``group`` is what the record belongs to (see
        :meth:`group_prefix`): the same for every write of ``path``."""
        if _fits(payload):
            return payload, []
        if isinstance(payload, str):
            kind, text = "str", payload
        else:
            kind, text = "json", canonicalize(payload, root="payload").decode("utf-8")
        data = text.encode("utf-8", errors="surrogatepass")
        check_size(len(data), where)
        sha = hashlib.sha256(data).hexdigest()
        value = hashlib.sha256(f"{path}\x00{sha}".encode("utf-8", errors="surrogatepass")).hexdigest()[:40]
        at = f"{_hash(group)}/{_hash(path)}/{value}"
        pieces = _slices(text)
        n = len(pieces)
        items = [
            {
                "path": f"{self.root}{at}/{i}",
                "payload": {"of": path, "i": i, "n": n, "sha256": sha, "s": piece},
                "index": False,
            }
            for i, piece in enumerate(pieces)
        ]
        return {MARK: {"n": n, "bytes": len(data), "sha256": sha, "kind": kind, "at": at}}, items

    def paths(self, payload: Any) -> list[str]:
        """The part records a stored payload names (none for a payload stored whole)."""
        d = descriptor(payload)
        if d is None or not isinstance(d.get("n"), int) or not isinstance(d.get("at"), str):
            return []
        return [f"{self.root}{d['at']}/{i}" for i in range(d["n"])]

    def outside(self, payload: Any, prefix: str) -> list[str]:
        """The part records a stored payload names that are not under ``prefix``: a value stored
        before parts were grouped by record names them only in its descriptor."""
        return [p for p in self.paths(payload) if not p.startswith(prefix)]

    def unpack(self, path: str, payload: Any, get: Callable[[str], Any]) -> Any:
        """The value stored at ``path``: ``payload`` itself, or its parts joined and checked.

        ``get(part_path)`` returns the part's payload (None if missing)."""
        d = descriptor(payload)
        if d is None:
            return payload
        pieces: list[str] = []
        n = d.get("n")
        for i, part_path in enumerate(self.paths(payload)):
            part = get(part_path)
            if (
                not isinstance(part, dict)
                or part.get("of") != path
                or part.get("i") != i
                or part.get("n") != n
                or part.get("sha256") != d.get("sha256")
                or not isinstance(part.get("s"), str)
            ):
                raise IntegrityError(
                    f"part {i} of {path!r} is missing or does not name its place",
                    advice=RUN_VERIFY,
                    cli_advice=RUN_VERIFY_CLI,
                )
            pieces.append(part["s"])
        text = "".join(pieces)
        data = text.encode("utf-8", errors="surrogatepass")
        if len(data) != d.get("bytes") or hashlib.sha256(data).hexdigest() != d.get("sha256"):
            raise IntegrityError(
                f"the parts of {path!r} do not add up to the value its record names",
                advice=RUN_VERIFY,
                cli_advice=RUN_VERIFY_CLI,
            )
        return text if d.get("kind") == "str" else json.loads(text)

    def read(self, client: Sovseal, memory: Memory, *, branch: str | None = None) -> Any:
        """A memory's value: its payload, or the parts it names read from ``branch`` (default: the
        handle's) and joined. A memory recalled from another branch is read with that branch."""
        if descriptor(memory.payload) is None:
            return memory.payload

        def get(part: str) -> Any:
            found = client.get(part, branch=branch)
            return None if found is None else found.payload

        return self.unpack(memory.path, memory.payload, get)

    def stale(self, old_payloads: Iterable[Any], new_payloads: Iterable[Any]) -> list[str]:
        """Part paths the old payloads named that none of the new ones does."""
        kept = {p for payload in new_payloads for p in self.paths(payload)}
        return [p for payload in old_payloads for p in self.paths(payload) if p not in kept]

    def drop(self, client: Sovseal, old_payloads: Iterable[Any], new_payloads: Iterable[Any] = ()) -> None:
        """Delete (tombstones, one batch) the part records the old payloads named and the new ones do not:
        what an overwrite leaves behind."""
        stale = self.stale(old_payloads, new_payloads)
        if stale:
            client.delete_many(stale)

    def delete(self, client: Sovseal, memories: Sequence[Memory]) -> None:
        """Delete these records and the part records they name, in one batch of tombstones."""
        paths = [m.path for m in memories]
        paths += [p for m in memories for p in self.paths(m.payload)]
        if paths:
            client.delete_many(paths)
