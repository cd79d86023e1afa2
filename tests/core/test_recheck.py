"""``Sovseal.recheck``: a record's bytes re-read and re-authenticated without decrypting it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.errors import IntegrityError, InvalidInputError, UnknownSnapshotError
from tests.fakes import fake_embed


def test_recheck_passes_for_intact_records_and_catches_bytes_altered_while_open(mem: Sovseal, store_dir: Path) -> None:
    journal = store_dir / "journal.log"
    first = mem.store("a", "first memory").snapshot_id
    start = journal.stat().st_size
    second = mem.store("b", "second memory").snapshot_id
    mem.recheck(first)
    mem.recheck(second)

    data = bytearray(journal.read_bytes())
    data[start + 40] ^= 0x01  # inside the second record's frame
    journal.write_bytes(bytes(data))

    mem.recheck(first)  # untouched
    with pytest.raises(IntegrityError, match="changed on disk"):
        mem.recheck(second)
    with pytest.raises(IntegrityError):
        mem.get("b")  # a full open fails the same way


def test_recheck_of_an_unknown_or_malformed_id_is_a_typed_error(mem: Sovseal) -> None:
    mem.store("a", "x")
    with pytest.raises(UnknownSnapshotError):
        mem.recheck("snap_" + "0" * 64)
    with pytest.raises(InvalidInputError):
        mem.recheck("not a snapshot id")


def test_recheck_of_several_ids_and_of_a_journal_cut_short(mem: Sovseal, store_dir: Path) -> None:
    journal = store_dir / "journal.log"
    ids = [mem.store(f"p{i}", f"memory {i}").snapshot_id for i in range(3)]
    mem.recheck(*ids)  # one call, one hold of the lock
    mem.recheck()  # nothing to check is not an error
    size = journal.stat().st_size
    with journal.open("r+b") as f:
        f.truncate(size - 5)  # the last record's frame is no longer there whole
    mem.recheck(ids[0], ids[1])
    with pytest.raises(IntegrityError, match="changed on disk"):
        mem.recheck(ids[0], ids[2])


def test_recheck_finds_a_record_another_handle_wrote(mem: Sovseal, store_dir: Path, key: bytes) -> None:
    mem.store("a", "x")
    with Sovseal(store_dir, key=key, embedder=fake_embed) as other:
        written = other.store("b", "from the other handle").snapshot_id
    mem.recheck(written)
