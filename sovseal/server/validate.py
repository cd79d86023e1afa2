"""Checking pushed items without any key: shape, sizes, and what a blind server *can* verify.

The server cannot open anything, but it can refuse what no honest client sends: unknown fields
(a buggy client must not be able to leak a ``path`` or an embedding into the database by adding a
key), ids that are not lowercase hex of the right length, event ids that are not the sha256 of
their sealed bytes (the restic model: content-named blobs are checkable without the key), and
oversized blobs. Everything is turned into one canonical JSON text whose sha256 is the item's
*digest*: equal digests are duplicates, a different digest under a known id is a conflict.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
from dataclasses import dataclass
from typing import Any

_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_HEX32 = re.compile(r"[0-9a-f]{32}\Z")
_FIELDS = frozenset({"kind", "id", "parent", "branch", "path_hash", "sealed", "created_at", "reason"})
_REASONS = frozenset({"CREATE", "ROLLBACK", "ADVANCE"})
#: nonce (12) + tag (16): the smallest sealed blob there is.
MIN_SEALED = 28
#: A record holds at most a 256 KiB entry; sealed and with room for metadata, 400 KiB is ample.
MAX_SEALED = 400 * 1024


class TooManyItems(ValueError):
    """A push holds more items than the server accepts in one request (413)."""


class ItemError(ValueError):
    """One pushed item is malformed; ``index`` is its position in the batch, ``id`` its id if readable."""

    def __init__(self, index: int, item_id: str, message: str) -> None:
        super().__init__(message)
        self.index = index
        self.item_id = item_id


@dataclass(frozen=True, slots=True)
class Item:
    """A validated item: the clear fields the server reasons about, and its canonical body."""

    kind: str
    id: str
    parent: str
    branch: str
    body: str  # canonical JSON of the item, what pull returns
    digest: str  # sha256 of body: duplicate detection


def _hex(value: object, pattern: re.Pattern[str], *, empty_ok: bool) -> bool:
    return isinstance(value, str) and ((empty_ok and value == "") or bool(pattern.match(value)))


def validate_item(index: int, raw: Any) -> Item:
    """Check one item of a push body; raises ItemError naming what is wrong."""
    if not isinstance(raw, dict):
        raise ItemError(index, "", f"item {index} is not a JSON object")
    item_id = raw.get("id") if isinstance(raw.get("id"), str) else ""

    def bad(message: str) -> ItemError:
        return ItemError(index, str(item_id)[:64], f"item {index}: {message}")

    keys = set(raw)
    if keys != _FIELDS:
        extra, missing = sorted(keys - _FIELDS), sorted(_FIELDS - keys)
        raise bad(f"fields must be exactly {sorted(_FIELDS)} (unknown: {extra}, missing: {missing})")
    kind = raw["kind"]
    if kind not in ("record", "branch", "reinforce"):
        raise bad(f"unknown kind {kind!r}")
    if not _hex(raw["id"], _HEX64, empty_ok=False):
        raise bad("id must be 64 lowercase hex digits")
    sealed_text = raw["sealed"]
    if not isinstance(sealed_text, str) or len(sealed_text) > (MAX_SEALED * 4) // 3 + 4:
        raise bad(f"sealed must be base64 of at most {MAX_SEALED} bytes")
    try:
        sealed = base64.b64decode(sealed_text, validate=True)
    except (binascii.Error, ValueError):
        raise bad("sealed is not valid base64") from None
    if not MIN_SEALED <= len(sealed) <= MAX_SEALED:
        raise bad(f"sealed is {len(sealed)} bytes; it must be {MIN_SEALED} to {MAX_SEALED}")
    created = raw["created_at"]
    if isinstance(created, bool) or not isinstance(created, (int, float)) or not math.isfinite(created) or not 0 <= created < 1e11:
        raise bad("created_at must be a unix time in seconds")
    parent, branch, path_hash, reason = raw["parent"], raw["branch"], raw["path_hash"], raw["reason"]
    if kind == "record":
        ok = (
            _hex(parent, _HEX64, empty_ok=True)
            and _hex(branch, _HEX32, empty_ok=False)
            and _hex(path_hash, _HEX64, empty_ok=False)
            and reason == ""
        )
        if not ok:
            raise bad("a record needs parent (64 hex or empty), branch (32 hex), path_hash (64 hex) and an empty reason")
    else:
        if hashlib.sha256(sealed).hexdigest() != raw["id"]:
            raise bad("an event's id must be the sha256 of its sealed bytes")
        if kind == "branch":
            ok = _hex(parent, _HEX64, empty_ok=True) and _hex(branch, _HEX32, empty_ok=False) and path_hash == "" and reason in _REASONS
            if not ok:
                raise bad("a branch event needs parent (64 hex or empty), branch (32 hex), no path_hash and a known reason")
        else:
            ok = _hex(parent, _HEX64, empty_ok=False) and branch == "" and path_hash == "" and reason == ""
            if not ok:
                raise bad("a reinforcement needs parent (64 hex) and no branch, path_hash or reason")
    clean = {
        "kind": kind,
        "id": raw["id"],
        "parent": parent,
        "branch": branch,
        "path_hash": path_hash,
        "sealed": sealed_text,
        "created_at": created,
        "reason": reason,
    }
    body = json.dumps(clean, sort_keys=True, separators=(",", ":"))
    return Item(kind, raw["id"], parent, branch, body, hashlib.sha256(body.encode()).hexdigest())


def parse_push(data: Any, max_items: int) -> tuple[list[Item], str]:
    """Validate a whole push body ``{"records": [...], "after": "..."}``; raises ValueError or ItemError."""
    if not isinstance(data, dict):
        raise ValueError("the body must be a JSON object with 'records'")
    unknown = set(data) - {"records", "after"}
    if unknown:
        raise ValueError(f"unknown top-level fields {sorted(unknown)}")
    records = data.get("records")
    if not isinstance(records, list):
        raise ValueError("'records' must be a list")
    if len(records) > max_items:
        raise TooManyItems(f"a push holds at most {max_items} items; this one has {len(records)}")
    after = data.get("after", "")
    if not _hex(after, _HEX64, empty_ok=True):
        raise ValueError("'after' must be an item id (64 hex) or empty")
    return [validate_item(i, raw) for i, raw in enumerate(records)], after
