"""One master key's subkeys and everything sealed or keyed with them.

The store seals and keys every frame through one :class:`Sealing`; key rotation holds two, the
old key's to open and the new key's to seal again (:mod:`sovseal.storage.rotation`). What the AAD of each
replicable frame binds is specified in docs/design.md ("Authenticated clear fields").
"""

from __future__ import annotations

from typing import Any

from sovseal.canonical import loads
from sovseal.errors import RUN_VERIFY, RUN_VERIFY_CLI, IntegrityError
from sovseal.storage import frames as fr

from .primitives import LEGACY_FORMAT_VERSION, IdKey, Sealer, derive_subkeys, keyed_id, pad, record_aad, record_fields_aad, unpad

#: How many path hashes / branch ids / wire ids are remembered before starting over (bounded memory).
_ID_CACHE = 65_536


class Sealing:
    def __init__(self, master: bytes) -> None:
        self.keys = derive_subkeys(master)
        self.key_id = self.keys.key_id
        self.sync = Sealer(self.keys.k_sync)  # what replicates: entries, events, skeleton seals
        self.rest = Sealer(self.keys.k_rest)  # what stays on this device: snapshot ids, checkpoints
        self.journal_key = bytes.fromhex(keyed_id(self.keys.k_id, "frame-mac", "v1"))
        self._ids = IdKey(self.keys.k_id)
        self._wire_ids: dict[str, bytes] = {}  # keyed ids are HMACs: worth remembering per name
        self._path_hashes: dict[str, bytes] = {}
        self._branch_ids: dict[str, bytes] = {}

    # -- keyed ids -----------------------------------------------------------------------------

    @staticmethod
    def _remember(cache: dict[str, bytes], name: str, found: bytes) -> bytes:
        if len(cache) >= _ID_CACHE:
            cache.clear()
        cache[name] = found
        return found

    # Each is one dict lookup when the id is known (every write asks for two or three).
    def wire_id(self, sid: str) -> bytes:
        found = self._wire_ids.get(sid)
        return found if found is not None else self._remember(self._wire_ids, sid, self._ids.digest("snap", sid))

    def path_hash(self, path: str) -> bytes:
        found = self._path_hashes.get(path)
        return found if found is not None else self._remember(self._path_hashes, path, self._ids.digest("path", path))

    def branch_id(self, name: str) -> bytes:
        found = self._branch_ids.get(name)
        if found is None:
            found = self._remember(self._branch_ids, name, self._ids.digest("branch", name)[: fr.BRANCH_ID_LEN])
        return found

    # -- sealing under k_sync, padded ----------------------------------------------------------

    def seal(self, plaintext: bytes, aad: bytes) -> bytes:
        """Seal under ``k_sync``, padded to its Padmé bucket (docs/design.md, "Padding")."""
        return self.sync.seal(pad(plaintext), aad)

    def unseal(self, sealed: bytes, aad: bytes, flags: int) -> bytes:
        """Open what :meth:`seal` sealed, or what format 2 sealed (LEGACY: no padding)."""
        plaintext = self.sync.open(sealed, aad)
        return plaintext if flags & fr.LEGACY else unpad(plaintext)

    def seal_sid(self, sid: str, wire: bytes) -> bytes:
        return self.rest.seal(sid.encode("ascii"), b"sid:" + wire)

    def open_sid(self, sealed: bytes, wire: bytes) -> str:
        return self.rest.open(sealed, b"sid:" + wire).decode("ascii")

    # -- the AAD of each replicable frame binds its clear fields -------------------------------

    def record_aad(self, frame: fr.RecordFrame) -> bytes:
        if frame.flags & fr.LEGACY:  # as format 2 sealed it: identity, branch and path only
            return record_aad(
                key_id=self.key_id,
                wire_id=frame.wire_id.hex(),
                parent_wire_id=frame.parent_wire_id.hex() if frame.parents else "",
                context=f"{frame.branch_id.hex()}/{frame.path_hash.hex()}",
                version=LEGACY_FORMAT_VERSION,
            )
        return record_fields_aad(
            self.key_id, frame.wire_id, frame.parents, frame.flags, frame.hlc, frame.branch_id, frame.path_hash, frame.after
        )

    def skeleton_aad(self, frame: fr.RecordFrame) -> bytes:
        """The AAD of a record's skeleton seal: what every version of its snapshot shares.

        Two devices that store the same entry on the same parents make two versions of one snapshot
        (docs/design.md, "Versions of one snapshot"), each with its own clock, ``after`` and branch.
        One redaction erases them all with one seal: the server puts it in every version it holds and
        compaction writes it for the version each device holds. So the seal binds the snapshot's
        identity (its wire id, which the sealed snapshot id re-derives, its parents and its path
        hash) with flag REDACTED, not the clear fields of the one version the purging device held.

        A record of journal format 2 (LEGACY) is bound as its format-2 item names it on every device
        (id, parent, branch, path): what a device's migration added to it locally (a raised clock, the
        heads it replaced) is not on the server's copy.
        """
        if frame.flags & fr.LEGACY:
            return record_aad(
                key_id=self.key_id,
                wire_id=frame.wire_id.hex(),
                parent_wire_id=frame.parent_wire_id.hex() if frame.parents else "",
                context=f"{frame.branch_id.hex()}/{frame.path_hash.hex()}/redacted",
            )
        return record_aad(
            key_id=self.key_id,
            wire_id=frame.wire_id.hex(),
            parent_wire_id=",".join(p.hex() for p in frame.parents),
            context=f"skeleton/{fr.REDACTED}/{frame.path_hash.hex()}",
        )

    def _version_skeleton_aad(self, frame: fr.RecordFrame) -> bytes:
        """The AAD skeleton seals had before they were shared by every version: the clear fields of
        the purging device's version with flag REDACTED. Seals made then still open under it."""
        return record_fields_aad(
            self.key_id, frame.wire_id, frame.parents, frame.flags | fr.REDACTED, frame.hlc, frame.branch_id, frame.path_hash, frame.after
        )

    def branch_aad(self, frame: fr.BranchFrame) -> bytes:
        head = "" if frame.head_wire_id == fr.NO_ID else frame.head_wire_id.hex()
        wire = f"branch/{frame.branch_id.hex()}"
        if frame.flags & fr.LEGACY:
            return record_aad(
                key_id=self.key_id, wire_id=wire, parent_wire_id=head, context=frame.reason.name, version=LEGACY_FORMAT_VERSION
            )
        after = ",".join(a.hex() for a in frame.after)
        context = f"{frame.reason.name}/{int(frame.flags)}/{frame.hlc}/{after}"
        return record_aad(key_id=self.key_id, wire_id=wire, parent_wire_id=head, context=context)

    def reinforce_aad(self, frame: fr.ReinforceFrame) -> bytes:
        wire = f"reinforce/{frame.wire_id.hex()}"
        if frame.flags & fr.LEGACY:
            return record_aad(key_id=self.key_id, wire_id=wire, parent_wire_id="", version=LEGACY_FORMAT_VERSION)
        return record_aad(key_id=self.key_id, wire_id=wire, parent_wire_id="", context=f"{int(frame.flags)}/{frame.hlc}")

    def redaction_aad(self, frame: fr.RedactionFrame) -> bytes:
        context = f"{int(frame.flags)}/{frame.hlc}/{frame.erased_digest().hex()}"
        return record_aad(key_id=self.key_id, wire_id="redaction", parent_wire_id="", context=context)

    def open_skeleton(self, frame: fr.RecordFrame, seal: bytes) -> dict[str, Any]:
        """What a skeleton seal holds ({"sid", "op", "redacted"}), checked against the record's wire id."""
        try:
            plaintext = self.sync.open(seal, self.skeleton_aad(frame))
        except IntegrityError:
            if frame.flags & fr.LEGACY:
                raise
            plaintext = self.sync.open(seal, self._version_skeleton_aad(frame))  # a seal made before versions shared one
        sealed = loads(unpad(plaintext))
        if not isinstance(sealed, dict) or sealed.get("redacted") is not True or self.wire_id(str(sealed.get("sid"))) != frame.wire_id:
            raise IntegrityError(
                f"the skeleton of snapshot {frame.wire_id.hex()} does not name its own snapshot",
                advice=RUN_VERIFY,
                cli_advice=RUN_VERIFY_CLI,
            )
        return sealed
