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

from .errors import InvalidInputError

ItemKind = Literal["record", "branch", "reinforce"]
KINDS: tuple[str, ...] = ("record", "branch", "reinforce")


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

    def to_json(self) -> dict[str, Any]:
        return {
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
            )
            for name in ("id", "parent", "branch", "path_hash"):
                bytes.fromhex(getattr(item, name))
        except (KeyError, TypeError, ValueError) as exc:
            raise InvalidInputError(f"not a sovseal wire item ({exc}): {str(data)[:200]}") from None
        return item
