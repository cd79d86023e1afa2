"""DamagedRecordError: which record, its path when it can be known, and log(damaged="mark")."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.errors import DamagedRecordError, IntegrityError
from tests.core.test_tamper import entry_span
from tests.fakes import fake_embed


def _build(store_dir: Path, key: bytes) -> list[int]:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        mem.store("a", "first")
        mem.store("c", "old c")
        mem.store("c", "new c")
        with mem._store.reading() as lineage:
            return [node.offset for node in lineage.nodes]


def flip(store_dir: Path, offset: int) -> None:
    """Flip one bit of the sealed entry of the record at ``offset``, in place, as a disk error would."""
    journal = store_dir / "journal.log"
    data = bytearray(journal.read_bytes())
    start, _ = entry_span(bytes(data), offset)
    data[start + 20] ^= 0x01
    journal.write_bytes(bytes(data))


def test_the_error_names_the_record_and_the_path_another_version_gives(tmp_path: Path, key: bytes) -> None:
    offsets = _build(tmp_path / "s", key)
    flip(tmp_path / "s", offsets[1])  # the old version of c
    with Sovseal(tmp_path / "s", key=key, embedder=fake_embed) as mem:
        with pytest.raises(DamagedRecordError) as caught:
            mem.log()
        exc = caught.value
        assert isinstance(exc, IntegrityError) and exc.exit_code == 1
        assert exc.offset == offsets[1] and exc.path == "c" and exc.snapshot_id.startswith("snap_")
        assert "delete('c')" in exc.advice and "`sovseal delete c`" in exc.cli_advice
        assert str(exc) == f"{exc.message}; {exc.advice}"
        again = pickle.loads(pickle.dumps(exc))
        assert str(again) == str(exc) and again.path == "c"
        marked = mem.log(damaged="mark")
        assert [(e.op, e.path) for e in marked] == [("store", "c"), ("damaged", "c"), ("store", "a")]
        assert mem.get("c").payload == "new c"  # type: ignore[union-attr]


def test_without_another_version_the_path_is_unknown_unless_asked_for(tmp_path: Path, key: bytes) -> None:
    offsets = _build(tmp_path / "s", key)
    flip(tmp_path / "s", offsets[0])  # a: its only version
    with Sovseal(tmp_path / "s", key=key, embedder=fake_embed) as mem:
        marked = mem.log(damaged="mark")
        assert (marked[-1].op, marked[-1].path) == ("damaged", "")
        with pytest.raises(DamagedRecordError) as caught:
            mem.get("a")
        assert caught.value.path == "a"  # the caller named it
        with pytest.raises(DamagedRecordError) as caught:
            mem.recall("first", k=3)
        assert caught.value.path is None and "sealed in the damaged bytes" in str(caught.value)
        assert caught.value.message.startswith("a memory visible at this HEAD cannot be opened")
