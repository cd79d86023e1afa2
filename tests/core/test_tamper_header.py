"""The journal header: each journal's random id, which keys its frame MACs, and what a damaged,
torn or old-format header does (refused with a typed error and left as it was, or cut only when it
is the torn first append of a new store)."""

from __future__ import annotations

import hmac
import json
import struct
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.crypto.primitives import derive_subkeys, keyed_id
from sovseal.errors import IntegrityError, JournalFormatError, KeyUnavailableError
from sovseal.storage.journal import HEADER, JOURNAL_HEADER
from tests.fakes import fake_embed


def build(store_dir: Path, key: bytes) -> list[bytes]:
    """A small store; returns the bodies of its frames."""
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        mem.store("user.a", "first")
        mem.store("user.b", "second")
        journal = (store_dir / "journal.log").read_bytes()
        return [journal[f.offset + HEADER.size : f.offset + HEADER.size + len(f.body)] for f in mem._store._journal.scan(0).frames]


def test_two_stores_with_one_key_have_their_own_journal_ids_and_frame_macs(tmp_path: Path, key: bytes) -> None:
    build(tmp_path / "a", key)
    build(tmp_path / "b", key)
    a, b = (Sovseal(tmp_path / name, key=key, embedder=fake_embed) for name in ("a", "b"))
    with a, b:
        header_a = (tmp_path / "a" / "journal.log").read_bytes()[: JOURNAL_HEADER.size]
        header_b = (tmp_path / "b" / "journal.log").read_bytes()[: JOURNAL_HEADER.size]
        assert header_a[:12] == header_b[:12]  # magic and format
        assert header_a[12:28] != header_b[12:28]  # the random journal ids
        body = b"the same frame body"
        assert a._store._journal.mac(0, body) != b._store._journal.mac(0, body)  # white-box: MACs keyed per journal


def test_a_format_1_journal_is_refused_with_a_typed_error_and_left_unchanged(tmp_path: Path, key: bytes) -> None:
    """A journal written before the header existed (frames MACed under the store key alone) is named
    as such, with what to do, and not a byte of it or of store.json changes."""
    store_dir = tmp_path / "old"
    bodies = build(store_dir, key)
    v1_key = bytes.fromhex(keyed_id(derive_subkeys(key).k_id, "frame-mac", "v1"))
    old = b"".join(
        struct.pack(">I16s", len(body), hmac.digest(v1_key, b"sovseal/v1/frame\x00" + body, "sha256")[:16]) + body for body in bodies
    )
    (store_dir / "journal.log").write_bytes(old)
    meta = (store_dir / "store.json").read_bytes()
    with pytest.raises(JournalFormatError, match=r"format 1.*sovseal export"):
        Sovseal(store_dir, key=key, embedder=fake_embed)
    assert (store_dir / "journal.log").read_bytes() == old
    assert (store_dir / "store.json").read_bytes() == meta


@pytest.mark.parametrize("cut", [1, JOURNAL_HEADER.size - 1, JOURNAL_HEADER.size, JOURNAL_HEADER.size + 30, -200])
def test_a_torn_first_append_is_cut_and_the_store_starts_again(tmp_path: Path, key: bytes, cut: int) -> None:
    """A new store's header goes to disk in one write with main's creation; a crash inside that
    write leaves a prefix (or, negative ``cut`` here, the new size with zeros), which acknowledged
    nothing: it is cut and the store is created again."""
    store_dir = tmp_path / "s"
    with Sovseal(store_dir, key=key, embedder=fake_embed):
        pass
    journal = store_dir / "journal.log"
    journal.write_bytes(journal.read_bytes()[:cut] if cut > 0 else bytes(-cut))
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        # Cut right after the header, nothing is torn: the header stays and main is created after it.
        assert any("torn tail" in r for r in mem.status().recovery) == (cut != JOURNAL_HEADER.size)
        mem.store("user.a", "after the crash")
        assert mem.verify().ok and mem.branches() == ["main"]


def test_a_damaged_header_is_refused_and_never_cut(tmp_path: Path, key: bytes) -> None:
    """A flipped bit in the header: with store.json vouching for the key, or with frames that still
    authenticate under the journal id (the flip was in the MAC), it is damage (IntegrityError);
    without either it may be the wrong key (KeyUnavailableError). The journal is never changed."""
    store_dir = tmp_path / "s"
    build(store_dir, key)
    journal = store_dir / "journal.log"
    intact = journal.read_bytes()
    for position, meta_kept, expected in [  # store.json is removed from the first case without it on
        (20, True, IntegrityError),  # in the journal id, store.json still names the key
        (range(JOURNAL_HEADER.size), True, IntegrityError),  # zeroed, frames after it: never taken for a torn write
        (20, False, KeyUnavailableError),  # in the journal id, no store.json: nothing authenticates
        (JOURNAL_HEADER.size - 3, False, IntegrityError),  # in the header's MAC: the frames prove the key
        (2, False, IntegrityError),  # in the magic: likewise
    ]:
        if not meta_kept:
            (store_dir / "store.json").unlink(missing_ok=True)
        data = bytearray(intact)
        for at in position if isinstance(position, range) else [position]:
            data[at] = 0 if isinstance(position, range) else data[at] ^ 0x10
        journal.write_bytes(bytes(data))
        with pytest.raises(expected) as raised:
            Sovseal(store_dir, key=key, embedder=fake_embed)
        assert "header" in str(raised.value)
        assert journal.read_bytes() == bytes(data)
    journal.write_bytes(intact)
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        assert mem.verify().ok and mem.get("user.b").payload == "second"
        assert json.loads((store_dir / "store.json").read_text())["key_id"] == mem.status().key_id
