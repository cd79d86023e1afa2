"""Checking pushed items without any key: shape, sizes, and what a blind server *can* verify.

The server cannot open anything, but it can refuse what no honest client sends: unknown fields
(a buggy client must not be able to leak a ``path`` or an embedding into the database by adding a
key), ids that are not lowercase hex of the right length, event ids that are not the sha256 of
their sealed bytes (the restic model: content-named blobs are checkable without the key), and
oversized blobs. Everything is turned into one canonical JSON text whose sha256 is the item's
*digest*: equal digests are duplicates, a different digest under a known id is a conflict.

Error messages name only the protocol's own fields and limits, never a value from the request:
a reply that echoed input could carry a lone surrogate (unencodable: a 500) or megabytes back.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sovseal.storage.frames import MAX_ERASED  # the most records one redaction names (a larger purge is several)

_HEX64 = re.compile(r"[0-9a-f]{64}\Z")
_HEX32 = re.compile(r"[0-9a-f]{32}\Z")
_FIELDS = frozenset({"kind", "id", "parent", "branch", "path_hash", "sealed", "created_at", "reason"})
#: Journal format 3 items also carry these (docs/design.md, "Journal format 3"); format-2 items do not.
_FORMAT_3_FIELDS = frozenset({"format", "flags", "after", "parents"})
_REASONS = frozenset({"CREATE", "ROLLBACK", "ADVANCE", "DELETE"})
_KINDS = ("record", "branch", "reinforce", "redaction")
#: nonce (12) + tag (16): the smallest sealed blob there is.
MIN_SEALED = 28
#: A record holds at most a 256 KiB entry; sealed and with room for metadata, 400 KiB is ample.
MAX_SEALED = 400 * 1024
#: A skeleton seal is ``{"sid": …, "redacted": true}`` sealed and padded: under 100 bytes. 4 KiB is ample.
MAX_SKELETON_SEAL = 4096
#: The erased pairs one push may carry, all its redactions together: 16 full redactions. Each pair
#: is a JSON list, so this is also the extra lists a push may hold before it is parsed.
MAX_ERASED_PER_PUSH = 16 * MAX_ERASED
#: Per item, at most this many JSON objects and lists, and values: the bounds checked before parsing.
_CONTAINERS = 4  # the item, its after, its parents and (a redaction) its erased list
_VALUES = 530  # up to 255 ids in each of after and parents, and the fields


class TooManyItems(ValueError):
    """A push holds more items than the server accepts in one request (413)."""


class ItemError(ValueError):
    """One pushed item is malformed; ``index`` is its position in the batch, ``item_id`` its id if it is a valid one."""

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
    #: A format-3 record: two devices that wrote the same entry on the same parents made two versions
    #: of one snapshot (same id, other clock), and both are kept (docs/design.md). Anything else
    #: under a known id with another body is a conflict.
    versioned: bool = False
    parents: tuple[str, ...] = ()  # a format-3 record's parents, all of them (``parent`` is the first)
    #: A redaction's (wire id, skeleton seal in base64) pairs: the records whose bodies it replaces.
    erased: tuple[tuple[str, str], ...] = ()


def _hex(value: object, pattern: re.Pattern[str], *, empty_ok: bool) -> bool:
    return isinstance(value, str) and ((empty_ok and value == "") or bool(pattern.match(value)))


def validate_item(index: int, raw: Any) -> Item:
    """Check one item of a push body; raises ItemError naming what is wrong."""
    if not isinstance(raw, dict):
        raise ItemError(index, "", f"item {index} is not a JSON object")
    # Only a well-formed id is named back (the client quarantines by it); anything else is input.
    item_id = raw["id"] if _hex(raw.get("id"), _HEX64, empty_ok=False) else ""

    def bad(message: str) -> ItemError:
        return ItemError(index, item_id, f"item {index}: {message}")

    keys = set(raw)
    format_3 = "format" in keys
    erased = _erased(raw, bad) if raw.get("kind") == "redaction" or "erased" in keys else ()
    keys.discard("erased")
    legacy_skeleton = not format_3 and raw.get("kind") == "record" and "redacted" in keys
    if legacy_skeleton:
        if raw["redacted"] is not True:
            raise bad("redacted, on a format-2 record, is true (its skeleton) or absent")
        keys.discard("redacted")
    if format_3:
        keys -= _FORMAT_3_FIELDS
        if raw["format"] != 3 or set(raw) & _FORMAT_3_FIELDS != _FORMAT_3_FIELDS:
            raise bad("a format-3 item has format 3, flags, after and parents")
        flags, after, parents = raw["flags"], raw["after"], raw["parents"]
        if isinstance(flags, bool) or not isinstance(flags, int) or not 0 <= flags < 256:
            raise bad("flags must be an integer from 0 to 255")
        if not isinstance(after, list) or len(after) > 255 or not all(_hex(a, _HEX64, empty_ok=False) for a in after):
            raise bad("after must be a list of at most 255 ids of 64 hex digits")
        if not isinstance(parents, list) or len(parents) > 255 or not all(_hex(a, _HEX64, empty_ok=False) for a in parents):
            raise bad("parents must be a list of at most 255 ids of 64 hex digits")
        if raw.get("kind") == "record" and parents[:1] != ([raw.get("parent")] if raw.get("parent") else []):
            raise bad("a record's parent must be the first of its parents")
        if raw.get("kind") != "record" and parents:
            raise bad("only a record has parents")
    if keys != _FIELDS:
        unknown, missing = len(keys - _FIELDS), sorted(_FIELDS - keys)
        raise bad(f"fields must be exactly {sorted(_FIELDS)} ({unknown} unknown, missing: {missing})")
    kind = raw["kind"]
    if kind not in _KINDS:
        raise bad("kind must be 'record', 'branch', 'reinforce' or 'redaction'")
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
        elif kind == "reinforce":
            ok = _hex(parent, _HEX64, empty_ok=False) and branch == "" and path_hash == "" and reason == ""
            if not ok:
                raise bad("a reinforcement needs parent (64 hex) and no branch, path_hash or reason")
        elif not (parent == "" and branch == "" and path_hash == "" and reason == ""):
            raise bad("a redaction has no parent, branch, path_hash or reason")
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
    if format_3:
        clean |= {"format": 3, "flags": raw["flags"], "after": raw["after"], "parents": raw["parents"]}
    if legacy_skeleton:
        clean["redacted"] = True
    if kind == "redaction":
        clean["erased"] = [list(pair) for pair in erased]
    body = canonical(clean)
    return Item(
        kind,
        raw["id"],
        parent,
        branch,
        body,
        body_digest(body),
        format_3 and kind == "record",
        tuple(raw["parents"]) if format_3 else (),
        erased,
    )


def canonical(item: dict[str, Any]) -> str:
    """The one JSON text of an item: what is stored, served, and hashed into its digest."""
    return json.dumps(item, sort_keys=True, separators=(",", ":"))


def body_digest(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()


def _erased(raw: dict[str, Any], bad: Callable[[str], ItemError]) -> tuple[tuple[str, str], ...]:
    """A redaction's pairs, checked: a format-3 redaction names 1 to MAX_ERASED distinct records, each
    ``[wire id (64 hex), skeleton seal (base64 of MIN_SEALED to MAX_SKELETON_SEAL bytes)]``."""
    if raw.get("kind") != "redaction":
        raise bad("only a redaction has erased")
    if raw.get("format") != 3:
        raise bad("a redaction is a format-3 item (format 3, flags, after, parents and erased)")
    pairs = raw.get("erased")
    if not isinstance(pairs, list) or not 0 < len(pairs) <= MAX_ERASED:
        raise bad(f"a redaction's erased must be a list of 1 to {MAX_ERASED} [wire id, skeleton seal] pairs")
    out: list[tuple[str, str]] = []
    for n, pair in enumerate(pairs):
        if not (isinstance(pair, list) and len(pair) == 2 and _hex(pair[0], _HEX64, empty_ok=False) and isinstance(pair[1], str)):
            raise bad(f"erased[{n}] must be [wire id (64 lowercase hex), skeleton seal (base64)]")
        if len(pair[1]) > (MAX_SKELETON_SEAL * 4) // 3 + 4:
            raise bad(f"erased[{n}]: a skeleton seal is at most {MAX_SKELETON_SEAL} bytes")
        try:
            seal = base64.b64decode(pair[1], validate=True)
        except (binascii.Error, ValueError):
            raise bad(f"erased[{n}]: the skeleton seal is not valid base64") from None
        if not MIN_SEALED <= len(seal) <= MAX_SKELETON_SEAL:
            raise bad(f"erased[{n}]: the skeleton seal is {len(seal)} bytes; it must be {MIN_SEALED} to {MAX_SKELETON_SEAL}")
        out.append((pair[0], pair[1]))
    if len({wire for wire, _ in out}) != len(out):
        raise bad("a redaction names each erased record once")
    return tuple(out)


def parse_push(data: Any, max_items: int) -> tuple[list[Item], str]:
    """Validate a whole push body ``{"records": [...], "after": "..."}``; raises ValueError or ItemError."""
    if not isinstance(data, dict):
        raise ValueError("the body must be a JSON object with 'records'")
    unknown = set(data) - {"records", "after"}
    if unknown:
        raise ValueError(f"the body may hold only 'records' and 'after' ({len(unknown)} other field(s))")
    records = data.get("records")
    if not isinstance(records, list):
        raise ValueError("'records' must be a list")
    if len(records) > max_items:
        raise TooManyItems(f"a push holds at most {max_items} items; this one has {len(records)}")
    after = data.get("after", "")
    if not _hex(after, _HEX64, empty_ok=True):
        raise ValueError("'after' must be an item id (64 hex) or empty")
    items = [validate_item(i, raw) for i, raw in enumerate(records)]
    pairs = sum(len(it.erased) for it in items)
    if pairs > MAX_ERASED_PER_PUSH:
        raise TooManyItems(f"a push names at most {MAX_ERASED_PER_PUSH} erased records in all its redactions; this one names {pairs}")
    return items, after


def decode_push(body: bytes, max_items: int) -> tuple[list[Item], str]:
    """Parse and validate a push body; raises ValueError (400), TooManyItems (413) or ItemError (400).

    Before parsing, the body's shape is bounded by counting bytes, because ``json.loads`` builds
    every value before anything can be checked: 16 MiB of ``{},{},…`` became 5.6 million dicts
    and 432 MB of memory (measured) before the item count was even looked at. A push is one
    object holding one list of items, each an object of a few fields; none of its strings (hex,
    base64, a few fixed words) can contain a brace, bracket or comma. So at most ``_CONTAINERS``
    braces and brackets and ``_VALUES`` commas per item (room for an item to carry a list of ids)
    bound what the parser can build to a few megabytes of objects, and nesting to a depth the
    parser refuses cleanly. A redaction's pairs are lists too: a push may hold up to
    ``MAX_ERASED_PER_PUSH`` of them in all (a few megabytes more, parsed).
    """
    containers = _CONTAINERS * max_items + 2 + MAX_ERASED_PER_PUSH
    values = _VALUES * max_items + 1 + 2 * MAX_ERASED_PER_PUSH
    if body.count(b"{") + body.count(b"[") > containers or body.count(b",") > values:
        raise TooManyItems(f"a push holds at most {max_items} items, each an object of a few fields")
    # Strict UTF-8 first: json.loads on bytes would sniff UTF-16/32 and skip a BOM, accepting what
    # the protocol refuses (a body that is not UTF-8 JSON, docs/replication.md).
    if body.startswith(b"\xef\xbb\xbf"):
        raise ValueError("the body is not UTF-8 JSON: it starts with a byte order mark (send UTF-8 without one)")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("the body is not UTF-8 JSON") from None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested past the parser's limit
        raise ValueError("the body is not JSON") from None
    return parse_push(data, max_items)
