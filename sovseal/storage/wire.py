"""What leaves the device: replicable items, exactly as the replication server sees them.

An item is the sealed ``k_sync`` blob of one journal frame plus the keyed ids needed to put it
back in place. The server can see how items link (parents, branch ids) but can read nothing
and test no guess: every id is an HMAC under ``k_id`` or a hash of ciphertext. A second device
with the key turns items back into frames, checking every one (:meth:`LocalStore.import_items`).
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any, Literal

from sovseal.errors import InvalidInputError

from .frames import MAX_ERASED, Flag

ItemKind = Literal["record", "branch", "reinforce", "redaction"]
KINDS: tuple[str, ...] = ("record", "branch", "reinforce", "redaction")


@dataclass(frozen=True, slots=True)
class WireItem:
    kind: ItemKind
    id: str  # record: the snapshot's keyed wire id; events: sha256 of the sealed bytes
    parent: str  # record: parent wire id; branch: new HEAD's wire id; reinforce: target wire id ("" = none)
    branch: str  # record, branch: keyed branch id; reinforce: ""
    path_hash: str  # record: keyed path hash; events: ""
    sealed: bytes  # nonce ‖ ciphertext ‖ tag under k_sync, byte-identical on every retry
    created_at: float
    reason: str = ""  # branch: CREATE, ROLLBACK or ADVANCE (bound into the AAD); others: ""
    #: Frame flags (frames.Flag): LEGACY for what journal format 2 sealed, whose clock the AAD does
    #: not cover; otherwise ``created_at`` is the frame's clock (µs / 10^6) and is authenticated.
    flags: int = 0
    after: tuple[str, ...] = ()  # the heads of its branch it replaces, when they are not its parents
    parents: tuple[str, ...] = ()  # a format-3 record's parents, all of them (``parent`` is the first)
    #: A redaction's erased records: (wire id, skeleton seal) pairs (docs/design.md, "Redaction skeletons").
    erased: tuple[tuple[str, bytes], ...] = ()

    def to_json(self) -> dict[str, Any]:
        legacy_skeleton = {"redacted": True} if self.flags & Flag.REDACTED else {}
        extra: dict[str, Any] = legacy_skeleton if self.flags & Flag.LEGACY else {
            "format": 3,
            "flags": self.flags,
            "after": list(self.after),
            "parents": list(self.parents),
        }
        if self.kind == "redaction":
            extra["erased"] = [[wire, base64.b64encode(seal).decode("ascii")] for wire, seal in self.erased]
        return extra | {
            "kind": self.kind,
            "id": self.id,
            "parent": self.parent,
            "branch": self.branch,
            "path_hash": self.path_hash,
            "sealed": base64.b64encode(self.sealed).decode("ascii"),
            "created_at": self.created_at,
            "reason": self.reason,
        }

    @classmethod
    def from_json(cls, data: Any) -> WireItem:
        try:
            kind = data["kind"]
            if kind not in KINDS:
                raise ValueError(f"unknown kind {kind!r}")
            item = cls(
                kind,
                str(data["id"]),
                str(data["parent"]),
                str(data["branch"]),
                str(data["path_hash"]),
                base64.b64decode(data["sealed"], validate=True),
                float(data["created_at"]),
                str(data.get("reason", "")),
                *_format_3(data),
                _erased(data),
            )
            for name in ("id", "parent", "branch", "path_hash"):
                bytes.fromhex(getattr(item, name))
            for value in (*item.after, *item.parents):
                if len(bytes.fromhex(value)) != 32:
                    raise ValueError("an id in after or parents is not 32 bytes")
            if item.kind == "record" and item.parents[:1] != ((item.parent,) if item.parent else ()):
                raise ValueError("parent must be the first of parents")
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(f"not a sovseal wire item ({exc}): {ascii(data)[:200]}") from None
        return item


def _erased(data: Any) -> tuple[tuple[str, bytes], ...]:
    """A redaction's (wire id, skeleton seal) pairs; only a redaction has any, and it has at least one."""
    if data["kind"] != "redaction":
        if "erased" in data:
            raise ValueError("only a redaction erases records")
        return ()
    if data.get("format") != 3:
        raise ValueError("a redaction is a format-3 item")
    pairs = data.get("erased")
    if not isinstance(pairs, list) or not 0 < len(pairs) <= MAX_ERASED:
        raise ValueError(f"a redaction erases 1 to {MAX_ERASED} records")
    out = []
    for pair in pairs:
        if not (isinstance(pair, list) and len(pair) == 2 and all(isinstance(v, str) for v in pair)):
            raise ValueError("an erased record is [wire id, skeleton seal]")
        if len(bytes.fromhex(pair[0])) != 32:
            raise ValueError("an erased wire id is 32 bytes")
        out.append((pair[0], base64.b64decode(pair[1], validate=True)))
    return tuple(out)


def _format_3(data: Any) -> tuple[int, tuple[str, ...], tuple[str, ...]]:
    """(flags, after, parents) of an item: a format-3 item says so; one without ``format`` is LEGACY.

    A LEGACY record's parents are its one ``parent`` (or none), as format 2 had it.
    """
    if "format" not in data:
        parent = str(data["parent"])
        redacted = data.get("redacted", False)
        if redacted not in (True, False) or (redacted and data["kind"] != "record"):
            raise ValueError("redacted is true only on the skeleton of a format-2 record")
        flags = Flag.LEGACY | (Flag.REDACTED if redacted else Flag.NONE)
        return flags, (), ((parent,) if parent and data["kind"] == "record" else ())
    if data["format"] != 3:
        raise ValueError(f"unknown item format {data['format']!r}")
    flags, after, parents = data["flags"], data["after"], data["parents"]
    if not isinstance(flags, int) or isinstance(flags, bool) or not 0 <= flags < 256 or flags & Flag.LEGACY:
        raise ValueError("flags must be a byte without the LEGACY bit")
    for name, ids in (("after", after), ("parents", parents)):
        if not isinstance(ids, list) or len(ids) > 255 or not all(isinstance(a, str) for a in ids):
            raise ValueError(f"{name} must be a list of ids")
    if data["kind"] != "record" and parents:
        raise ValueError("only a record has parents")
    return flags, tuple(after), tuple(parents)
