"""Crypto wrappers: Wycheproof AES-256-GCM and HKDF-SHA256 vectors, sealing, AAD binding, counters, ids.

Wycheproof data is in ``tests/vectors/wycheproof`` (Apache-2.0, source in its README).
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import struct
import threading
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF

from sovseal.crypto.primitives import (
    DEFAULT_SEAL_LIMIT,
    FORMAT_VERSION,
    Sealer,
    Subkeys,
    aead_decrypt,
    aead_encrypt,
    derive_subkeys,
    hkdf_sha256,
    keyed_id,
    project_blind_id,
    record_aad,
)
from sovseal.errors import IntegrityError, InvalidInputError, KeyExhaustedError

WYCHEPROOF = Path(__file__).resolve().parents[1] / "vectors" / "wycheproof"


def _load(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((WYCHEPROOF / name).read_text(encoding="utf-8"))
    return data


def _gcm_cases(*, supported: bool) -> list[dict[str, Any]]:
    """AES-256-GCM cases with a 128-bit tag, split by whether the IV is the 96 bits sovseal supports."""
    if not WYCHEPROOF.is_dir():
        return []
    cases = []
    for group in _load("aes_gcm_test.json")["testGroups"]:
        if group["keySize"] == 256 and group["tagSize"] == 128 and (group["ivSize"] == 96) == supported:
            cases.extend(group["tests"])
    return cases


GCM_CASES = _gcm_cases(supported=True)
GCM_OTHER_IV = _gcm_cases(supported=False)
HKDF_CASES = (
    [t for g in _load("hkdf_sha256_test.json")["testGroups"] for t in g["tests"]] if WYCHEPROOF.is_dir() else []
)


def test_vector_counts() -> None:
    """Guards the filters: an empty parametrization must fail, not pass vacuously."""
    assert WYCHEPROOF.is_dir(), f"missing {WYCHEPROOF}"
    assert len(GCM_CASES) == 66
    assert sum(t["result"] == "valid" for t in GCM_CASES) == 39
    assert sum(t["result"] == "invalid" for t in GCM_CASES) == 27
    assert len(HKDF_CASES) == 86
    assert GCM_OTHER_IV


@pytest.mark.parametrize("case", GCM_CASES, ids=lambda t: f"tc{t['tcId']}")
def test_wycheproof_aes_gcm(case: dict[str, Any]) -> None:
    key, iv, aad, msg = (bytes.fromhex(case[k]) for k in ("key", "iv", "aad", "msg"))
    sealed = bytes.fromhex(case["ct"] + case["tag"])
    if case["result"] == "valid":
        assert aead_encrypt(key, iv, msg, aad) == sealed
        assert aead_decrypt(key, iv, sealed, aad) == msg
    elif case["result"] == "invalid":
        with pytest.raises(IntegrityError):
            aead_decrypt(key, iv, sealed, aad)
    else:  # "acceptable": either refuse, or decrypt to exactly the message
        try:
            assert aead_decrypt(key, iv, sealed, aad) == msg
        except IntegrityError:
            pass


@pytest.mark.parametrize("case", GCM_OTHER_IV[:12], ids=lambda t: f"tc{t['tcId']}")
def test_other_iv_sizes_are_refused(case: dict[str, Any]) -> None:
    """sovseal supports only 96-bit nonces; other sizes are a typed error, never a silent success."""
    key, iv = bytes.fromhex(case["key"]), bytes.fromhex(case["iv"])
    with pytest.raises(InvalidInputError, match="nonce"):
        aead_encrypt(key, iv, b"m", b"")
    with pytest.raises(InvalidInputError, match="nonce"):
        aead_decrypt(key, iv, bytes(32), b"")


@pytest.mark.parametrize("case", HKDF_CASES, ids=lambda t: f"tc{t['tcId']}")
def test_wycheproof_hkdf_sha256(case: dict[str, Any]) -> None:
    ikm, salt, info = (bytes.fromhex(case[k]) for k in ("ikm", "salt", "info"))
    if case["result"] == "valid":
        assert hkdf_sha256(ikm, salt=salt, info=info, length=case["size"]) == bytes.fromhex(case["okm"])
    else:
        with pytest.raises(InvalidInputError, match="length"):
            hkdf_sha256(ikm, salt=salt, info=info, length=case["size"])


def test_hkdf_none_salt_equals_empty_salt_and_bad_lengths() -> None:
    """RFC 5869: an absent salt is HashLen zero bytes, which HMAC treats like the empty salt."""
    ikm = bytes(range(22))
    assert hkdf_sha256(ikm, salt=None, info=b"x", length=42) == hkdf_sha256(ikm, salt=b"", info=b"x", length=42)
    for bad in (0, -1, 8161, True):
        with pytest.raises(InvalidInputError):
            hkdf_sha256(ikm, salt=None, info=b"", length=bad)


MASTER = bytes(range(32))


def test_derive_subkeys_labels_and_key_id() -> None:
    """Pins the derivation to the documented labels: changing them would orphan every existing store."""
    sub = derive_subkeys(MASTER)
    for attr, label in (
        ("k_sync", b"sovseal/v1/k_sync"),
        ("k_rest", b"sovseal/v1/k_rest"),
        ("k_id", b"sovseal/v1/k_id"),
    ):
        expected = HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=label).derive(MASTER)
        assert getattr(sub, attr) == expected
    assert sub.key_id == hmac.new(MASTER, b"sovseal/v1/key-id", hashlib.sha256).hexdigest()[:16]
    assert len({sub.k_sync, sub.k_rest, sub.k_id, MASTER}) == 4
    assert derive_subkeys(MASTER) == sub
    assert derive_subkeys(bytes(32)).key_id != sub.key_id


def test_subkeys_repr_hides_key_material() -> None:
    sub = derive_subkeys(MASTER)
    text = repr(sub)
    assert sub.key_id in text
    for secret in (sub.k_sync, sub.k_rest, sub.k_id):
        assert secret.hex() not in text and repr(secret) not in text
    with pytest.raises(AttributeError):
        sub.key_id = "x"  # type: ignore[misc]
    assert isinstance(sub, Subkeys)


@pytest.mark.parametrize("bad", [b"", bytes(31), bytes(33), "0" * 32])
def test_master_must_be_32_bytes(bad: Any) -> None:
    with pytest.raises(InvalidInputError):
        derive_subkeys(bad)
    with pytest.raises(InvalidInputError):
        Sealer(bad)


def _aad(wire: str = "w1", parent: str = "w0") -> bytes:
    return record_aad(key_id="0123456789abcdef", wire_id=wire, parent_wire_id=parent)


def test_seal_open_round_trip_and_layout() -> None:
    key = os.urandom(32)
    sealer = Sealer(key)
    sealed = sealer.seal(b"hello", _aad())
    assert len(sealed) == 12 + 5 + 16
    assert sealer.open(sealed, _aad()) == b"hello"
    assert sealer.used == 1
    # Layout is nonce || ciphertext || tag: the explicit-nonce wrappers agree byte for byte.
    nonce, body = sealed[:12], sealed[12:]
    assert aead_decrypt(key, nonce, body, _aad()) == b"hello"
    assert aead_encrypt(key, nonce, b"hello", _aad()) == body


def test_nonces_are_fresh() -> None:
    sealer = Sealer(os.urandom(32))
    nonces = {sealer.seal(b"same", _aad())[:12] for _ in range(200)}
    assert len(nonces) == 200
    assert sealer.used == 200


def test_empty_plaintext_and_aad() -> None:
    sealer = Sealer(os.urandom(32))
    assert sealer.open(sealer.seal(b"", b""), b"") == b""


def test_aad_binding_swapped_records_fail() -> None:
    sealer = Sealer(os.urandom(32))
    a = sealer.seal(b"record A", _aad("wa", "w0"))
    b = sealer.seal(b"record B", _aad("wb", "wa"))
    with pytest.raises(IntegrityError):
        sealer.open(a, _aad("wb", "wa"))  # A's ciphertext moved to B's slot
    with pytest.raises(IntegrityError):
        sealer.open(b, _aad("wa", "w0"))
    with pytest.raises(IntegrityError):
        sealer.open(a, _aad("wa", "other-parent"))
    with pytest.raises(IntegrityError):
        sealer.open(a, record_aad(key_id="fedcba9876543210", wire_id="wa", parent_wire_id="w0"))


def test_every_flipped_byte_fails() -> None:
    """Flipping any bit of nonce, ciphertext or tag is detected; no partial plaintext escapes."""
    sealer = Sealer(os.urandom(32))
    sealed = sealer.seal(b"sixteen byte msg", _aad())
    for index in range(len(sealed)):
        tampered = bytearray(sealed)
        tampered[index] ^= 0x01
        with pytest.raises(IntegrityError):
            sealer.open(bytes(tampered), _aad())


def test_truncated_and_wrong_key_fail() -> None:
    sealer = Sealer(os.urandom(32))
    sealed = sealer.seal(b"payload", _aad())
    for cut in (0, 1, 12, 27, len(sealed) - 1):
        with pytest.raises(IntegrityError):
            sealer.open(sealed[:cut], _aad())
    with pytest.raises(IntegrityError):
        sealer.open(sealed + b"\x00", _aad())
    with pytest.raises(IntegrityError, match="sovseal verify"):
        Sealer(os.urandom(32)).open(sealed, _aad())
    with pytest.raises(IntegrityError):
        aead_decrypt(os.urandom(32), bytes(12), b"short", b"")


def test_counter_refuses_at_limit() -> None:
    sealer = Sealer(os.urandom(32), used=2, limit=3)
    sealed = sealer.seal(b"last one", _aad())
    assert sealer.used == 3
    with pytest.raises(KeyExhaustedError, match="rotate") as info:
        sealer.seal(b"one too many", _aad())
    assert "new store" in str(info.value)
    assert sealer.used == 3  # a refused seal consumes no nonce
    assert sealer.open(sealed, _aad()) == b"last one"  # reading still works after exhaustion
    with pytest.raises(KeyExhaustedError):
        Sealer(os.urandom(32), used=10, limit=10).seal(b"x", b"")


def test_default_limit_is_half_the_nist_bound() -> None:
    sealer = Sealer(os.urandom(32))
    assert sealer.limit == DEFAULT_SEAL_LIMIT == 2**31
    with pytest.raises(KeyExhaustedError):
        Sealer(os.urandom(32), used=2**31).seal(b"x", b"")
    with pytest.raises(InvalidInputError):
        Sealer(os.urandom(32), used=-1)


def test_counter_is_exact_under_threads() -> None:
    sealer = Sealer(os.urandom(32), limit=500)
    outcomes: list[bool] = []
    lock = threading.Lock()

    def worker() -> None:
        for _ in range(100):
            try:
                sealer.seal(b"x", b"")
                ok = True
            except KeyExhaustedError:
                ok = False
            with lock:
                outcomes.append(ok)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert outcomes.count(True) == 500
    assert sealer.used == 500


def test_record_aad_encoding_is_pinned_and_injective() -> None:
    aad = record_aad(key_id="k", wire_id="ab", parent_wire_id="")
    assert (
        aad
        == b"sovseal-aad"
        + struct.pack(">H", FORMAT_VERSION)
        + b"\x00\x00\x00\x01k"
        + b"\x00\x00\x00\x02ab"
        + b"\x00\x00\x00\x00"
    )
    variants = {
        record_aad(key_id="k", wire_id="ab", parent_wire_id="c"),
        record_aad(key_id="k", wire_id="a", parent_wire_id="bc"),
        record_aad(key_id="ka", wire_id="b", parent_wire_id="c"),
        record_aad(key_id="k", wire_id="", parent_wire_id="abc"),
        record_aad(key_id="", wire_id="kab", parent_wire_id="c"),
    }
    assert len(variants) == 5
    with pytest.raises(InvalidInputError):
        record_aad(key_id="k", wire_id=b"ab", parent_wire_id="")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        record_aad(key_id="k", wire_id="\ud800", parent_wire_id="")


def test_keyed_ids_differ_per_label_value_and_key() -> None:
    k1, k2 = derive_subkeys(MASTER).k_id, derive_subkeys(bytes(32)).k_id
    path_id = keyed_id(k1, "path", "notes/today")
    assert path_id == hmac.new(k1, b"path:notes/today", hashlib.sha256).hexdigest()
    assert len(path_id) == 64
    assert keyed_id(k1, "path", "notes/today") == path_id  # deterministic
    assert keyed_id(k1, "snap", "notes/today") != path_id  # per label
    assert keyed_id(k2, "path", "notes/today") != path_id  # per key
    assert keyed_id(k1, "path", "notes/other") != path_id  # per value
    assert path_id != hashlib.sha256(b"notes/today").hexdigest()  # not the guessable unkeyed hash


@pytest.mark.parametrize("label", ["", "pa:th", 3])
def test_keyed_id_rejects_ambiguous_labels(label: Any) -> None:
    with pytest.raises(InvalidInputError):
        keyed_id(bytes(32), label, "v")


def test_project_blind_id() -> None:
    expected = hashlib.sha256(b"proj-1:" + MASTER).hexdigest()
    assert project_blind_id("proj-1", MASTER) == expected
    assert project_blind_id("proj-1", bytes(32)) != expected
    assert project_blind_id("proj-2", MASTER) != expected
    with pytest.raises(InvalidInputError):
        project_blind_id("proj-1", b"short")
