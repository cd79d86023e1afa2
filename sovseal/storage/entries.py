"""What a user stores: the entry, its validation, its canonical bytes and its snapshot id."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from typing import Any, Literal

from sovseal.canonical import canonicalize, loads
from sovseal.errors import RUN_VERIFY, RUN_VERIFY_CLI, IntegrityError, InvalidInputError, PayloadTooLargeError

MemoryType = Literal["episodic", "semantic", "procedural"]
Provenance = Literal["explicit", "observed"]
MEMORY_TYPES: tuple[str, ...] = ("episodic", "semantic", "procedural")
PROVENANCES: tuple[str, ...] = ("explicit", "observed")

#: Records are not blobs: a canonical entry over this many bytes is refused.
MAX_ENTRY_BYTES = 256 * 1024
MAX_PATH_CHARS = 1024
#: The fields every sealed entry holds (``text`` is optional).
_ENTRY_FIELDS = frozenset({"op", "path", "payload", "metadata", "type", "provenance"})


@dataclass(frozen=True, slots=True)
class Entry:
    """The unit that is hashed and sealed. Timestamps are deliberately not part of it."""

    op: Literal["store", "delete"]
    path: str
    payload: Any
    metadata: dict[str, Any]
    type: str
    provenance: str
    #: The text embedded and keyword-indexed instead of memory_text(entry); sealed with the entry,
    #: in the canonical bytes only when set (existing snapshot ids do not change).
    text: str | None = None
    #: The canonical bytes, computed once: validation, hashing and sealing all need them.
    _canonical: bytes | None = field(default=None, init=False, repr=False, compare=False)

    def canonical(self) -> bytes:
        if self._canonical is not None:
            return self._canonical
        body = {
            "op": self.op,
            "path": self.path,
            "payload": self.payload,
            "metadata": self.metadata,
            "type": self.type,
            "provenance": self.provenance,
        }
        if self.text is not None:
            body["text"] = self.text
        data = canonicalize(body, root="entry")
        if len(data) > MAX_ENTRY_BYTES:
            raise PayloadTooLargeError(
                f"the entry for {self.path!r} is {len(data):,} bytes canonicalized; the limit is "
                f"{MAX_ENTRY_BYTES:,}. Records are not blobs: put large content in object storage and store a reference."
            )
        object.__setattr__(self, "_canonical", data)
        return data

    @classmethod
    def from_canonical(cls, data: bytes) -> Entry:
        raw = loads(data)
        if not isinstance(raw, dict) or not raw.keys() >= _ENTRY_FIELDS:  # authentic, yet not what a writer writes
            raise IntegrityError(
                "an authentic record holds no entry object (op, path, payload, metadata, type, provenance)",
                advice=RUN_VERIFY,
                cli_advice=RUN_VERIFY_CLI,
            )
        entry = cls(raw["op"], raw["path"], raw["payload"], raw["metadata"], raw["type"], raw["provenance"], raw.get("text"))
        object.__setattr__(entry, "_canonical", bytes(data))  # the bytes that were hashed: no need to rebuild them
        return entry


def validate_path(path: object) -> str:
    if not isinstance(path, str):
        raise InvalidInputError(f"path must be a non-empty string such as 'user.preferences.editor', got {type(path).__name__}")
    if not path or not path.strip():
        raise InvalidInputError("path must be a non-empty string such as 'user.preferences.editor'")
    if len(path) > MAX_PATH_CHARS:
        raise InvalidInputError(f"path is {len(path)} characters; the limit is {MAX_PATH_CHARS}")
    if "\x00" in path:
        raise InvalidInputError("path must not contain NUL characters")
    return path


def make_entry(
    op: Literal["store", "delete"],
    path: object,
    payload: Any = None,
    *,
    metadata: object = None,
    type: object = "semantic",
    provenance: object = "explicit",
    text: object = None,
) -> Entry:
    """Validate user input into an Entry; every rejection is an InvalidInputError that says what to pass."""
    path = validate_path(path)
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict):
        raise InvalidInputError(f"metadata must be a dict of JSON values, got {metadata.__class__.__name__}")
    if type not in MEMORY_TYPES:
        raise InvalidInputError(f"type must be one of {', '.join(MEMORY_TYPES)}; got {type!r}")
    if provenance not in PROVENANCES:
        raise InvalidInputError(f"provenance must be one of {', '.join(PROVENANCES)}; got {provenance!r}")
    if text is not None and not isinstance(text, str):
        raise InvalidInputError(f"text must be a str, got {text.__class__.__name__}")
    return Entry(op, path, payload, metadata, str(type), str(provenance), text)


def snapshot_id(canonical_entry: bytes, parent_id: str) -> str:
    """``snap_`` + hex(sha256(canonical(entry) ‖ parent_id)); parent_id is empty for a genesis snapshot."""
    digest = hashlib.sha256(canonical_entry)  # hashed in two updates: no copy of the entry's bytes
    digest.update(parent_id.encode("ascii"))
    return "snap_" + digest.hexdigest()


def memory_text(entry: Entry) -> str:
    """The text that is embedded and keyword-indexed for an entry.

    A string payload is the memory itself; a structured payload is flattened to its leaf values.
    The path is prefixed because paths like ``user.preferences.editor`` carry meaning too.
    """
    if entry.text is not None:
        return entry.text
    leaves: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                leaves.append(f"{key}:")
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)
        elif value is not None:
            leaves.append(str(value))

    walk(entry.payload)
    return f"{entry.path.replace('.', ' ').replace('_', ' ')}: {' '.join(leaves)}"
