"""``Sovseal.recheck``: a record's bytes re-read and re-authenticated without decrypting it."""

from __future__ import annotations

from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.errors import IntegrityError, InvalidInputError, UnknownSnapshotError


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
