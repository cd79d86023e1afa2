"""The journal's MACs, head tags and append guard, checked against their definitions.

The journal keeps its HMACs prepared (key and prefix absorbed once, then copied per frame); these
tests pin that the bytes are still exactly the ones the format defines (docs/design.md), so a
journal written by an earlier build opens, and one written now opens in an earlier build.
"""

from __future__ import annotations

import dataclasses
import hashlib
import hmac
import os
import struct
from pathlib import Path

import pytest

from sovseal.crypto.primitives import IdKey, keyed_id
from sovseal.errors import StorageError
from sovseal.storage import frames as fr
from sovseal.storage.journal import HEADER, JOURNAL_HEADER, Journal

KEY = bytes(range(32))


def frame_key(journal: Path) -> bytes:
    """The frame key as the format defines it: HMAC(journal key, prefix || journal id)."""
    journal_id = JOURNAL_HEADER.unpack_from(journal.read_bytes())[2]
    return hmac.digest(KEY, b"sovseal/v2/frame-key\x00" + journal_id, "sha256")


def test_frame_macs_and_head_tags_are_the_defined_hmacs(tmp_path: Path) -> None:
    path = tmp_path / "journal.log"
    journal = Journal(path, KEY)
    bodies = [b"first body", os.urandom(3000), b""]
    journal.append(bodies[:2])
    key = frame_key(path)
    data = path.read_bytes()
    offset = JOURNAL_HEADER.size
    for seq, body in enumerate(bodies[:2]):
        length, mac, stored_seq = HEADER.unpack_from(data, offset)
        assert (length, stored_seq) == (len(body), seq)
        assert mac == hmac.digest(key, b"sovseal/v2/frame\x00" + struct.pack(">Q", seq) + body, "sha256")[:16]
        offset += HEADER.size + length
    for seq in (0, 7, 2**40):
        for body in bodies:
            assert journal.mac(seq, body) == Journal._mac(key, seq, body)
            expected_tag = hmac.digest(key, b"sovseal/v2/record-head\x00" + struct.pack(">Q", seq) + body, "sha256")[:16]
            assert journal.tag(seq, body) == expected_tag
    journal.close()


def test_a_record_is_tagged_for_the_place_it_takes(tmp_path: Path) -> None:
    frame = fr.RecordFrame(
        fr.Op.STORE, 1_500_000, os.urandom(32), (os.urandom(32),), os.urandom(16), os.urandom(32), b"sid", b"entry",
        fr.Flag.EXPLICIT_AFTER, (os.urandom(32),),
    )
    journal = Journal(tmp_path / "journal.log", KEY)
    journal.append([b"x"])
    body = frame.encode_tagged(lambda head: journal.tag(1, head))
    decoded = fr.RecordFrame.decode(body)
    assert decoded.head_tag == journal.tag(1, frame.head())
    assert decoded == dataclasses.replace(frame, head_tag=decoded.head_tag)
    with pytest.raises(ValueError):
        frame.encode_tagged(lambda head: b"short")
    journal.close()


def test_an_append_where_the_journal_does_not_end_writes_nothing(tmp_path: Path) -> None:
    """A writer numbers its frames for the end it caught up to; if the file is longer (another
    writer got in: the file lock is not effective), the append is refused before any byte is written."""
    path = tmp_path / "journal.log"
    journal = Journal(path, KEY)
    journal.append([b"one"])
    end = journal.size()
    other = Journal(path, KEY)
    other.scan(0)
    other.append([b"someone else"])
    before = path.read_bytes()
    with pytest.raises(StorageError, match="grew while this process held the writer lock"):
        journal.append([b"two"], expect=end)
    assert path.read_bytes() == before
    journal.close()
    other.close()


def test_prepared_keyed_ids_are_the_keyed_ids() -> None:
    ids = IdKey(KEY)
    for label, value in [("path", "notes/today"), ("snap", "snap_" + "0" * 64), ("branch", "main"), ("path", "ü/€/𝄞")]:
        assert ids.digest(label, value) == bytes.fromhex(keyed_id(KEY, label, value))
        assert ids.digest(label, value) == hmac.new(KEY, f"{label}:{value}".encode(), hashlib.sha256).digest()
