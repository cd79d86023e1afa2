"""Integrity: every returned record is opened and re-derived; a tampered one never comes back as data."""

from __future__ import annotations

from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.errors import IntegrityError
from sovseal.recall import RecallParams
from tests.core.test_tamper import entry_span
from tests.fakes import fake_embed

TEXTS = {
    "notes.garden": "planted tomatoes and basil in the raised garden bed",
    "notes.car": "the car needs new winter tyres before december",
    "notes.taxes": "file the tax return before the end of april",
    "notes.piano": "piano lesson moved to thursday evening",
}


def build(store_dir: Path, key: bytes) -> dict[str, int]:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        for path, text in TEXTS.items():
            mem.store(path, text)
        return {path: mem._store._lineage.nodes[i].offset for i, path in enumerate(TEXTS)}


def flip(store_dir: Path, offset: int) -> None:
    journal = store_dir / "journal.log"
    data = bytearray(journal.read_bytes())
    start, _ = entry_span(bytes(data), offset)
    data[start + 20] ^= 0x01
    with open(journal, "r+b") as f:  # in place, as a disk error or an attacker would
        f.write(bytes(data))


def test_a_record_tampered_after_open_raises_when_it_reaches_the_top_k(tmp_path: Path, key: bytes) -> None:
    store_dir = tmp_path / "s"
    offsets = build(store_dir, key)
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        mem.recall_params = RecallParams(fusion="keyword", neighbor_weights=())
        assert mem.recall("tax return april", k=1)[0].path == "notes.taxes"  # the catalog is loaded
        flip(store_dir, offsets["notes.taxes"])
        with pytest.raises(IntegrityError):
            mem.recall("tax return april", k=1)
        mem.recall_params = RecallParams()
        with pytest.raises(IntegrityError):
            mem.recall("winter tyres", k=4)  # the top 4 of four records includes it
        # A query whose top k does not include it is answered: it was never going to be returned.
        assert [m.path for m in mem.recall("winter tyres car", k=1)] == ["notes.car"]


def test_a_record_tampered_before_open_makes_every_recall_on_that_head_fail(tmp_path: Path, key: bytes) -> None:
    """A visible record that cannot be opened cannot be ranked: recall refuses rather than silently skip it."""
    store_dir = tmp_path / "s"
    offsets = build(store_dir, key)
    flip(store_dir, offsets["notes.piano"])
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        with pytest.raises(IntegrityError, match="cannot be opened"):
            mem.recall("winter tyres", k=1)
        assert not mem.verify().ok
        # Deleting the damaged path takes it out of HEAD: recall works again, history is kept.
        mem.delete("notes.piano")
        assert [m.path for m in mem.recall("winter tyres car", k=1)] == ["notes.car"]


def test_every_result_is_opened_at_recall_time(mem: Sovseal) -> None:
    for path, text in TEXTS.items():
        mem.store(path, text)
    opened: list[int] = []
    real_open = mem._store.open

    def spy(idx: int):  # type: ignore[no-untyped-def]
        opened.append(idx)
        return real_open(idx)

    mem._recall_engine().wait_ready()
    mem._store.open = spy  # type: ignore[method-assign]
    found = mem.recall("garden tomatoes", k=3)
    assert len(found) == 3 and len(opened) == 3
    assert [mem._store.sid_of(i) for i in opened] == [m.snapshot_id for m in found]
