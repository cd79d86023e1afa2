"""Sealing, key derivation and keyed identifiers (docs/design.md, "Keys and crypto"), on top of ``cryptography``.

Why each piece exists:

- :func:`derive_subkeys` splits the master key with HKDF-SHA256 and distinct ``info`` labels, so a
  key used to seal records (``k_sync``), to seal local-only data (``k_rest``) and to name things
  (``k_id``) can never be confused with one another (RFC 5869 section 3.2).
- :class:`Sealer` is AES-256-GCM with a fresh random 96-bit nonce per call and a use counter: with
  random nonces NIST SP 800-38D section 8.3 allows at most 2**32 encryptions per key, so the counter
  refuses at ``limit`` (2**31 by default, half the bound) instead of ever getting close. The caller
  persists ``used`` under its writer lock. :meth:`Sealer.open` never returns unauthenticated bytes.
- :func:`record_aad` binds a ciphertext to its identity, so ciphertexts cannot be swapped between
  records: every field is length-prefixed, so no two different identities share an encoding.
- :func:`keyed_id` replaces unkeyed hashes on the wire: ``sha256(path)`` lets a server confirm
  guesses about plaintext, an HMAC under ``k_id`` does not.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import os
import struct
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from sovseal.errors import IntegrityError, InvalidInputError, KeyExhaustedError

__all__ = [
    "DEFAULT_SEAL_LIMIT",
    "FORMAT_VERSION",
    "KEY_SIZE",
    "NONCE_SIZE",
    "TAG_SIZE",
    "IdKey",
    "PreparedMac",
    "Sealer",
    "Subkeys",
    "aead_decrypt",
    "aead_encrypt",
    "derive_subkeys",
    "hkdf_sha256",
    "keyed_id",
    "pad",
    "padme",
    "prepared_hmac",
    "project_blind_id",
    "record_aad",
    "record_fields_aad",
    "unpad",
]

#: The AAD layout version of what this code seals (journal format 3: clear fields authenticated,
#: plaintext padded). Version 1 is what journal format 2 sealed; it is only ever opened.
FORMAT_VERSION = 2
LEGACY_FORMAT_VERSION = 1
KEY_SIZE = 32  # AES-256 and the master key
NONCE_SIZE = 12  # 96-bit GCM nonce
TAG_SIZE = 16  # 128-bit GCM tag
#: Default seal limit per key: half of the 2**32 random-nonce bound of NIST SP 800-38D.
DEFAULT_SEAL_LIMIT = 2**31
_HKDF_MAX_LENGTH = 255 * 32  # RFC 5869: L <= 255 * HashLen

_INFO_SYNC = b"sovseal/v1/k_sync"
_INFO_REST = b"sovseal/v1/k_rest"
_INFO_ID = b"sovseal/v1/k_id"
_KEY_ID_LABEL = b"sovseal/v1/key-id"

_INTEGRITY_HINT = (
    "sovseal will not return it; restore the store from a replica or backup, "
    "or run `sovseal verify` to list every damaged record"
)


def _require_key(key: object, what: str) -> bytes:
    """Check that ``key`` is exactly 32 bytes: a short key is a caller bug, not a weaker mode."""
    if not isinstance(key, (bytes, bytearray, memoryview)):
        raise InvalidInputError(f"{what} must be bytes, not {type(key).__name__}")
    key = bytes(key)
    if len(key) != KEY_SIZE:
        raise InvalidInputError(
            f"{what} must be exactly {KEY_SIZE} bytes, got {len(key)}",
            advice="generate one with os.urandom(32) or import an exported key with sovseal.crypto.keychain.import_key",
            cli_advice="pass --key-file FILE or SOVSEAL_KEY with a key that `sovseal key export` printed",
        )
    return key


def hkdf_sha256(ikm: bytes, *, salt: bytes | None, info: bytes, length: int) -> bytes:
    """RFC 5869 HKDF with SHA-256; ``length`` must be 1..8160 bytes (else InvalidInputError).

    The single entry point for key derivation, so the Wycheproof vectors test exactly what
    sovseal runs.
    """
    if not isinstance(length, int) or isinstance(length, bool) or not 1 <= length <= _HKDF_MAX_LENGTH:
        raise InvalidInputError(
            f"HKDF-SHA256 output length must be between 1 and {_HKDF_MAX_LENGTH} bytes "
            f"(255 x 32, RFC 5869), got {length!r}; derive fewer bytes"
        )
    return HKDF(algorithm=hashes.SHA256(), length=length, salt=salt, info=info).derive(ikm)


@dataclass(frozen=True)
class Subkeys:
    """Purpose-bound keys derived from one master key; ``key_id`` names the master without revealing it.

    Key fields are left out of ``repr`` so a logged Subkeys never prints key material.
    """

    k_sync: bytes = field(repr=False)
    k_rest: bytes = field(repr=False)
    k_id: bytes = field(repr=False)
    key_id: str


def derive_subkeys(master: bytes) -> Subkeys:
    """Derive ``k_sync``, ``k_rest`` and ``k_id`` from a 32-byte master key with distinct HKDF labels."""
    master = _require_key(master, "the master key")
    return Subkeys(
        k_sync=hkdf_sha256(master, salt=None, info=_INFO_SYNC, length=KEY_SIZE),
        k_rest=hkdf_sha256(master, salt=None, info=_INFO_REST, length=KEY_SIZE),
        k_id=hkdf_sha256(master, salt=None, info=_INFO_ID, length=KEY_SIZE),
        key_id=hmac.digest(master, _KEY_ID_LABEL, "sha256").hex()[:16],
    )


def aead_encrypt(key: bytes, nonce: bytes, plaintext: bytes, aad: bytes) -> bytes:
    """AES-256-GCM with an explicit 96-bit nonce; returns ciphertext || 16-byte tag.

    Only for known-answer tests and callers that manage nonces themselves: a repeated (key, nonce)
    pair breaks GCM, so sovseal itself seals through :class:`Sealer`, which draws random nonces.
    """
    return AESGCM(_require_key(key, "the AES-256-GCM key")).encrypt(_require_nonce(nonce), plaintext, aad)


def aead_decrypt(key: bytes, nonce: bytes, ciphertext_and_tag: bytes, aad: bytes) -> bytes:
    """Open AES-256-GCM ciphertext || tag; raises IntegrityError unless the tag authenticates."""
    aead = AESGCM(_require_key(key, "the AES-256-GCM key"))
    return _open(aead, _require_nonce(nonce), ciphertext_and_tag, aad)


def _require_nonce(nonce: object) -> bytes:
    """sovseal supports only 96-bit nonces (GCM's native size; other sizes are hashed into one)."""
    if not isinstance(nonce, (bytes, bytearray, memoryview)) or len(nonce) != NONCE_SIZE:
        size = len(nonce) if isinstance(nonce, (bytes, bytearray, memoryview)) else type(nonce).__name__
        raise InvalidInputError(f"the AES-GCM nonce must be {NONCE_SIZE} bytes, got {size}")
    return bytes(nonce)


def _open(aead: AESGCM, nonce: bytes, ciphertext_and_tag: bytes, aad: bytes) -> bytes:
    """Decrypt and authenticate; every failure becomes IntegrityError and no plaintext escapes."""
    if len(ciphertext_and_tag) < TAG_SIZE:
        raise IntegrityError(f"sealed data is shorter than its {TAG_SIZE}-byte tag; {_INTEGRITY_HINT}")
    try:
        return aead.decrypt(nonce, ciphertext_and_tag, aad)
    except InvalidTag:
        raise IntegrityError(
            "sealed data failed authentication (wrong key, tampered bytes, or ciphertext moved to "
            f"another record); {_INTEGRITY_HINT}"
        ) from None


class Sealer:
    """AES-256-GCM sealing with random nonces and a per-key use counter.

    ``used`` is how many nonces this key has already consumed (persisted by the caller, shared by
    every process using the key); :meth:`seal` refuses once ``used >= limit`` so the random-nonce
    collision bound is never approached. Counting is thread-safe.
    """

    def __init__(self, key: bytes, *, used: int = 0, limit: int = DEFAULT_SEAL_LIMIT) -> None:
        self._aead = AESGCM(_require_key(key, "the sealing key"))
        if used < 0 or limit < 1:
            raise InvalidInputError(f"Sealer needs used >= 0 and limit >= 1, got used={used}, limit={limit}")
        self._used = used
        self._limit = limit
        self._lock = threading.Lock()

    def observe(self, used: int) -> None:
        """Raise the count to ``used`` when other processes sealed with this key (never lower it)."""
        if used <= self._used:  # the usual case, after this process's own seals: nothing to raise
            return
        with self._lock:
            self._used = max(self._used, used)

    @property
    def used(self) -> int:
        """Number of encryptions made with this key so far (persist it; pass it back as ``used=``)."""
        return self._used

    @property
    def limit(self) -> int:
        """Encryptions allowed with this key before :meth:`seal` refuses."""
        return self._limit

    def seal(self, plaintext: bytes, aad: bytes) -> bytes:
        """Encrypt and authenticate: returns nonce(12) || ciphertext || tag(16).

        Raises KeyExhaustedError when the key has reached its limit.
        """
        with self._lock:
            if self._used >= self._limit:
                raise KeyExhaustedError(
                    f"this key has sealed {self._used} records, its safety limit of {self._limit} for random 96-bit nonces",
                    advice=(
                        "reads and verify still work, but to store more, rotate the key: "
                        "create a new store (it gets a new key) and store the memories again through the SDK "
                        "(e.g. each branch's state()); `sovseal import` cannot move them, since it refuses a "
                        "backup sealed under another key (docs/operations.md, Key rotation)"
                    ),
                    cli_advice=(
                        "reads and verify still work; to store more, re-seal the store under a new key with "
                        "`sovseal key rotate` (docs/operations.md, Key rotation)"
                    ),
                )
            self._used += 1  # counted before use: a nonce drawn is a nonce spent
        nonce = os.urandom(NONCE_SIZE)
        return nonce + self._aead.encrypt(nonce, plaintext, aad)

    def open(self, sealed: bytes, aad: bytes) -> bytes:
        """Authenticate and decrypt the output of :meth:`seal`; raises IntegrityError on any failure."""
        if len(sealed) < NONCE_SIZE + TAG_SIZE:
            raise IntegrityError(
                f"sealed record is {len(sealed)} bytes, shorter than nonce + tag "
                f"({NONCE_SIZE + TAG_SIZE}); it is truncated. {_INTEGRITY_HINT}"
            )
        sealed = bytes(sealed)
        return _open(self._aead, sealed[:NONCE_SIZE], sealed[NONCE_SIZE:], aad)


def _field(value: str, name: str) -> bytes:
    """Encode one AAD field as a 4-byte big-endian length followed by its UTF-8 bytes."""
    if not isinstance(value, str):
        raise InvalidInputError(f"record_aad: {name} must be str, not {type(value).__name__}")
    try:
        data = value.encode()
    except UnicodeEncodeError:
        raise InvalidInputError(f"record_aad: {name} is not valid Unicode (lone surrogate)") from None
    return struct.pack(">I", len(data)) + data


def padme(length: int) -> int:
    """The Padmé bucket for ``length`` bytes (Nikitin et al., PETS 2019).

    It keeps the top ``floor(log2(E)) + 1`` bits of the length, ``E = floor(log2(length))``, and
    rounds up the rest: at most 12 % overhead, and a padded length leaks ``O(log log n)`` bits of
    the real one instead of all of them.
    """
    if length < 2:
        return length
    e = length.bit_length() - 1
    s = e.bit_length()
    mask = (1 << (e - s)) - 1
    return (length + mask) & ~mask


def pad(data: bytes) -> bytes:
    """``data ‖ 0x80 ‖ zeros`` up to the Padmé length of ``len(data) + 1`` (ISO/IEC 7816-4 style)."""
    return b"".join((data, b"\x80", bytes(padme(len(data) + 1) - len(data) - 1)))  # one copy of data


def unpad(data: bytes) -> bytes:
    """The inverse of :func:`pad`; IntegrityError for anything :func:`pad` could not have made."""
    body = data.rstrip(b"\x00")
    if not body.endswith(b"\x80") or len(data) != padme(len(body)):
        raise IntegrityError(f"a sealed plaintext is not padded as sovseal pads; it was not written by sovseal. {_INTEGRITY_HINT}")
    return body[:-1]


def record_aad(
    *, key_id: str, wire_id: str, parent_wire_id: str, context: str = "", version: int = FORMAT_VERSION
) -> bytes:
    """Additional data binding a sealed record to its identity.

    Layout: ``b"sovseal-aad"`` || u16 version || (u32 length || UTF-8) for key_id, wire_id and
    parent_wire_id in that order (parent empty for genesis), then ``context`` the same way when it
    is not empty (the clear fields stored beside a record: its operation, branch and keyed path;
    from version 2 also its flags, clock and the heads it replaces). Length prefixes make the
    encoding injective, so no other identity authenticates the same ciphertext, and the version
    keeps a ciphertext of one layout from opening under the other.
    """
    prefix = _aad_prefix(key_id, version) if type(key_id) is str and type(version) is int else None
    if prefix is None:
        prefix = b"sovseal-aad" + struct.pack(">H", version) + _field(key_id, "key_id")
    aad = prefix + _field(wire_id, "wire_id") + _field(parent_wire_id, "parent_wire_id")
    return aad + _field(context, "context") if context else aad


def record_fields_aad(
    key_id: str,
    wire_id: bytes,
    parents: tuple[bytes, ...],
    flags: int,
    hlc: int,
    branch_id: bytes,
    path_hash: bytes,
    after: tuple[bytes, ...],
) -> bytes:
    """The AAD (version 2) of a journal-format-3 record, from its clear fields (ids as bytes).

    :func:`record_aad` with the record's wire id, its parents joined by ``,`` and the context
    ``flags/hlc/branch id/path hash/after`` (ids in hex, ``after`` joined by ``,``): what every
    device computes for that record, so a server that rewrites any of those fields makes it fail.
    """
    return record_aad(
        key_id=key_id,
        wire_id=wire_id.hex(),
        parent_wire_id=parents[0].hex() if len(parents) == 1 else ",".join([p.hex() for p in parents]),
        context=f"{int(flags)}/{hlc}/{branch_id.hex()}/{path_hash.hex()}/" + (",".join([a.hex() for a in after]) if after else ""),
    )


@functools.lru_cache(maxsize=16)
def _aad_prefix(key_id: str, version: int) -> bytes:
    """The part of an AAD every record of one key shares (a store seals under one key id)."""
    return b"sovseal-aad" + struct.pack(">H", version) + _field(key_id, "key_id")


def keyed_id(k_id: bytes, label: str, value: str) -> str:
    """Hex HMAC-SHA256(k_id, label + ":" + value): a stable identifier a server cannot test guesses against.

    ``label`` separates namespaces (``"path"``, ``"snap"``, ...) and must not contain ``":"``, so the
    message ``label:value`` splits one way only.
    """
    return hmac.digest(_require_key(k_id, "k_id"), _keyed_message(label, value), "sha256").hex()


def _keyed_message(label: str, value: str) -> bytes:
    """The message ``label:value`` a keyed id is the HMAC of (InvalidInputError for anything ambiguous)."""
    if not isinstance(label, str) or not label or ":" in label:
        raise InvalidInputError(f"keyed_id label must be a non-empty str without ':', got {label!r}")
    if not isinstance(value, str):
        raise InvalidInputError(f"keyed_id value must be str, not {type(value).__name__}")
    try:
        return f"{label}:{value}".encode()
    except UnicodeEncodeError:
        raise InvalidInputError("keyed_id value is not valid Unicode (lone surrogate)") from None


class PreparedMac(Protocol):
    """What :func:`prepared_hmac` returns (OpenSSL's HMAC or :class:`hmac.HMAC`), as it is used."""

    def copy(self) -> PreparedMac: ...
    def update(self, data: bytes, /) -> None: ...
    def digest(self) -> bytes: ...


_c_hmac_new: Callable[..., PreparedMac] | None
try:  # the C HMAC that hmac.HMAC wraps: copy, update and digest without a Python layer each
    from _hashlib import hmac_new as _c_hmac_new
except ImportError:  # pragma: no cover - a Python built without OpenSSL's hashlib
    _c_hmac_new = None


def prepared_hmac(key: bytes, prefix: bytes = b"") -> PreparedMac:
    """HMAC-SHA256 under ``key`` with ``prefix`` already absorbed, to be ``copy()``-ed per message.

    Preparing the key costs two compressions; a copy of the prepared state costs none. The object
    has ``copy``, ``update`` and ``digest`` as :class:`hmac.HMAC` has, and gives the same bytes; it
    is OpenSSL's own HMAC when the interpreter has it (a third of the cost of the wrapper's calls).
    Never update the prepared object itself: only its copies.
    """
    if _c_hmac_new is not None:
        try:
            return _c_hmac_new(key, prefix, digestmod="sha256")
        except (TypeError, ValueError):  # pragma: no cover - an OpenSSL that refuses it (FIPS rules)
            pass
    return hmac.new(key, prefix, hashlib.sha256)


class IdKey:
    """:func:`keyed_id` under one ``k_id``, as raw bytes, with the HMAC key prepared once.

    The store names every record, snapshot and branch it writes with a keyed id. HMAC hashes its
    key into two padded blocks before it hashes the message; copying that prepared state instead
    of redoing it (and skipping the hex round trip) halves the cost of an id. The bytes are the
    same as ``bytes.fromhex(keyed_id(k_id, label, value))``. The prepared state is never updated,
    only copied, so one IdKey serves every thread.
    """

    def __init__(self, k_id: bytes) -> None:
        self._prepared = prepared_hmac(_require_key(k_id, "k_id"))

    def digest(self, label: str, value: str) -> bytes:
        mac = self._prepared.copy()
        mac.update(_keyed_message(label, value))
        return mac.digest()


def project_blind_id(project_id: str, master: bytes) -> str:
    """Server-blind project id, hex sha256(project_id || ":" || master).

    The server sees a stable id per (project, key) pair but cannot link it to ``project_id`` without
    the key.
    """
    if not isinstance(project_id, str) or not project_id:
        raise InvalidInputError("project_id must be a non-empty str")
    master = _require_key(master, "the master key")
    return hashlib.sha256(project_id.encode("utf-8") + b":" + master).hexdigest()
