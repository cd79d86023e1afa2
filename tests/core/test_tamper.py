"""Tamper evidence: altered or swapped ciphertexts are detected by verify() and by every read."""

from __future__ import annotations

from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.errors import IntegrityError, KeyUnavailableError
from sovseal.storage.frames import RecordFrame
from sovseal.storage.journal import HEADER
from tests.fakes import fake_embed

PATHS = [f"user.fact{i}" for i in range(5)]


def build(store_dir: Path, key: bytes) -> list[tuple[int, int]]:
    """Five records of equal size; returns (frame offset, body length) of each, in order."""
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        for i, path in enumerate(PATHS):
            mem.store(path, f"secret value number {i}")
        nodes = mem._store._lineage.nodes  # white-box: where each record's frame sits
        return [(n.offset, n.size - HEADER.size) for n in nodes]


def entry_span(journal: bytes, offset: int) -> tuple[int, int]:
    """Absolute [start, end) of a record frame's sealed entry (nonce ‖ ciphertext ‖ tag)."""
    body_start = offset + HEADER.size
    length = HEADER.unpack_from(journal, offset)[0]
    frame = RecordFrame.decode(journal[body_start : body_start + length])
    start = body_start + length - len(frame.sealed_entry)
    return start, body_start + length


def check_detected(store_dir: Path, key: bytes, damaged: list[int]) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        report = mem.verify()
        assert not report.ok
        assert len(report.problems) >= len(damaged)
        for i, path in enumerate(PATHS):
            if i in damaged:
                with pytest.raises(IntegrityError):
                    mem.get(path)
            else:
                assert mem.get(path).payload == f"secret value number {i}"


@pytest.mark.parametrize("victim", range(5))
@pytest.mark.parametrize("where", ["nonce", "ciphertext", "tag"])
def test_one_flipped_ciphertext_byte_is_detected(tmp_path: Path, key: bytes, victim: int, where: str) -> None:
    store_dir = tmp_path / "s"
    spans = build(store_dir, key)
    journal_path = store_dir / "journal.log"
    data = bytearray(journal_path.read_bytes())
    start, end = entry_span(bytes(data), spans[victim][0])
    position = {"nonce": start + 3, "ciphertext": start + 20, "tag": end - 1}[where]
    data[position] ^= 0x01
    journal_path.write_bytes(bytes(data))
    check_detected(store_dir, key, [victim])


def test_swapped_ciphertexts_are_detected_even_with_valid_frame_macs(tmp_path: Path, key: bytes) -> None:
    """An attacker who could recompute the frame MAC (they cannot: it is keyed) still fails on
    the AEAD, whose AAD binds each ciphertext to its own snapshot and parent."""
    store_dir = tmp_path / "s"
    spans = build(store_dir, key)
    journal_path = store_dir / "journal.log"
    data = bytearray(journal_path.read_bytes())
    (a0, a1), (b0, b1) = entry_span(bytes(data), spans[1][0]), entry_span(bytes(data), spans[3][0])
    assert a1 - a0 == b1 - b0
    data[a0:a1], data[b0:b1] = data[b0:b1], data[a0:a1]
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        journal = mem._store._journal  # white-box: the frame MAC as this journal computes it
        for offset, length in (spans[1], spans[3]):
            body = bytes(data[offset + HEADER.size : offset + HEADER.size + length])
            seq = HEADER.unpack_from(data, offset)[2]
            data[offset : offset + HEADER.size] = HEADER.pack(length, journal.mac(seq, body), seq)
    journal_path.write_bytes(bytes(data))
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        assert all(n.authentic for n in mem._store._lineage.nodes)  # the forged MACs pass: only the AEAD stands
    check_detected(store_dir, key, [1, 3])


def test_swapped_frames_without_mac_fixup_are_detected(tmp_path: Path, key: bytes) -> None:
    store_dir = tmp_path / "s"
    spans = build(store_dir, key)
    journal_path = store_dir / "journal.log"
    data = bytearray(journal_path.read_bytes())
    (a0, a1), (b0, b1) = entry_span(bytes(data), spans[0][0]), entry_span(bytes(data), spans[2][0])
    data[a0:a1], data[b0:b1] = data[b0:b1], data[a0:a1]
    journal_path.write_bytes(bytes(data))
    check_detected(store_dir, key, [0, 2])


def test_tampering_after_open_is_caught_on_read_and_recall(tmp_path: Path, key: bytes) -> None:
    store_dir = tmp_path / "s"
    spans = build(store_dir, key)
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        assert mem.get(PATHS[2]).payload == "secret value number 2"
        journal_path = store_dir / "journal.log"
        data = bytearray(journal_path.read_bytes())
        start, _ = entry_span(bytes(data), spans[2][0])
        data[start + 15] ^= 0x80
        with open(journal_path, "r+b") as f:  # in place, as a disk error or an attacker would
            f.write(bytes(data))
        with pytest.raises(IntegrityError):
            mem.get(PATHS[2])
        with pytest.raises(IntegrityError):
            mem.recall("secret value number 2", k=5)
        assert not mem.verify().ok
        assert mem.get(PATHS[1]).payload == "secret value number 1"


def test_another_key_is_refused_before_anything_is_read(tmp_path: Path, key: bytes) -> None:
    store_dir = tmp_path / "s"
    build(store_dir, key)
    before = (store_dir / "journal.log").read_bytes()
    with pytest.raises(KeyUnavailableError, match="key id"):
        Sovseal(store_dir, key=bytes(32), embedder=fake_embed)
    (store_dir / "store.json").unlink()  # without the key id check, no frame authenticates either
    with pytest.raises(KeyUnavailableError, match="wrong key"):
        Sovseal(store_dir, key=bytes(32), embedder=fake_embed)
    assert (store_dir / "journal.log").read_bytes() == before
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:  # the right key still opens it
        assert mem.verify().ok and len(mem.state()) == 5
