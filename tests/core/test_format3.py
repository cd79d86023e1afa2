"""Journal format 3: migration from format 2, authenticated clocks, padding, and a journal that
goes away or is replaced under an open handle (docs/design.md, "Journal format 3").

The format-2 stores under ``tests/core/data/format2`` were written by the previous release (see
the README there); what that release read from them is in ``expected.json``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import struct
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.crypto.primitives import padme
from sovseal.errors import IntegrityError, StorageError
from sovseal.storage import frames as fr
from sovseal.storage.journal import FORMAT, JOURNAL_HEADER
from sovseal.storage.store import LocalStore
from tests.fakes import fake_embed

DATA = Path(__file__).parent / "data" / "format2"
KEY = bytes(range(32))
EXPECTED = json.loads((DATA / "expected.json").read_text())


def _copy(name: str, tmp_path: Path) -> Path:
    target = tmp_path / name
    shutil.copytree(DATA / name, target)
    return target


def _format(path: Path) -> int:
    return int(JOURNAL_HEADER.unpack_from((path / "journal.log").read_bytes())[1])


def _observed(mem: Sovseal) -> dict[str, object]:
    out = {}
    for branch in mem.branches():
        view = mem.view(branch)
        state = view.state()
        out[branch] = {
            "state": state,
            "log": [[e.snapshot_id, e.parent_id, e.seq, e.op, e.path] for e in view.log()],
            "reinforced": {p: view.get(p).reinforce_count for p in state},
        }
    return out


def _without_seq(observed: dict[str, object]) -> dict[str, object]:
    return {b: {**v, "log": [[sid, parent, op, path] for sid, parent, _, op, path in v["log"]]} for b, v in observed.items()}  # type: ignore[attr-defined]


def test_a_format_2_store_is_migrated_on_open_and_reads_as_the_old_release_read_it(tmp_path: Path) -> None:
    """Everything reads as before but ``seq``: format 2 counted a branch's appends (so a record
    written after a rollback to #3 was #6, and a fork's first record #1); now it is the depth in
    the history, 1 + its parents' largest, which every device computes alike."""
    store = _copy("plain", tmp_path)
    before = (store / "journal.log").read_bytes()
    assert _format(store) == 2
    with Sovseal(store, key=KEY, embedder=fake_embed) as mem:
        assert _format(store) == FORMAT
        assert any("migrated the journal from format 2" in r for r in mem.status().recovery)
        observed = _observed(mem)
        assert _without_seq(observed) == _without_seq(EXPECTED["plain"])
        assert [e[2] for e in observed["main"]["log"]] == [4, 3, 2, 1]
        assert [e[2] for e in observed["try"]["log"]] == [2, 1]
        assert mem.verify().ok
        assert [m.path for m in mem.recall("linux", k=1)] == ["user.os"]
        mem.store("user.new", "after the migration")
        mem.rollback(EXPECTED["plain"]["main"]["log"][1][0])
    with Sovseal(store, key=KEY, embedder=fake_embed) as again:  # reopened: format 3 read as is, nothing repeated
        assert not any("migrated" in r for r in again.status().recovery)
        assert again.state() == {"user.editor": "helix", "user.shell": {"name": "fish"}}
        assert again.verify().ok
    migrated = (store / "journal.log").read_bytes()
    for frame in Journal_frames(before, 2):  # every sealed byte string is kept as it was
        sealed = frame.sealed_entry if isinstance(frame, fr.RecordFrame) else getattr(frame, "sealed_event", b"")
        assert sealed in migrated


def Journal_frames(data: bytes, fmt: int) -> list[fr.Frame]:  # reads like the class it wraps
    """Decode the bodies of a journal's bytes without any key (MACs are not checked here)."""
    out, offset = [], JOURNAL_HEADER.size
    while offset < len(data):
        length = struct.unpack_from(">I", data, offset)[0]
        body = data[offset + 28 : offset + 28 + length]
        out.append(fr.decode_v2(body) if fmt == 2 else fr.decode(body))
        offset += 28 + length
    return out


def test_a_time_a_server_poisoned_in_format_2_is_repaired_by_the_migration(tmp_path: Path) -> None:
    """Format 2 imported a record whose time a server rewrote to NaN; log, get and recall then
    crashed for good. The migration gives it a time after its predecessors and reads recover."""
    store = _copy("poisoned", tmp_path)
    with Sovseal(store, key=KEY, embedder=fake_embed) as mem:
        assert _without_seq(_observed(mem)) == _without_seq(EXPECTED["plain"])  # the same items, so the same lineage
        times = [e.created_at for e in mem.log()]
        assert all(t.year >= 2026 for t in times)
        assert mem.verify().ok
        assert mem.recall("fish", k=1)
    frames = Journal_frames((store / "journal.log").read_bytes(), FORMAT)
    assert fr.UNKNOWN_HLC not in [f.hlc for f in frames if not isinstance(f, fr.AckFrame)]
    clock = {f.wire_id: f.hlc for f in frames if isinstance(f, fr.RecordFrame)}
    assert all(f.hlc > clock[p] for f in frames if isinstance(f, fr.RecordFrame) for p in f.parents)


def test_a_crash_during_migration_leaves_the_format_2_journal_whole(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = _copy("plain", tmp_path)
    before = (store / "journal.log").read_bytes()
    (store / "journal.migrating").write_bytes(b"left by a crash before the rename")

    def crash(*_: object) -> None:
        raise OSError(5, "simulated crash before the rename")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError, match="simulated crash"):
        Sovseal(store, key=KEY, embedder=fake_embed)
    assert (store / "journal.log").read_bytes() == before
    monkeypatch.undo()
    with Sovseal(store, key=KEY, embedder=fake_embed) as mem:
        assert _without_seq(_observed(mem)) == _without_seq(EXPECTED["plain"])
    assert _format(store) == FORMAT and not (store / "journal.migrating").exists()


def test_new_frames_carry_their_clock_and_the_heads_they_replace(mem: Sovseal) -> None:
    first = mem.store("a", "x").snapshot_id
    mem.store("b", "y")
    mem.rollback(first)
    mem.store("c", "z")
    frames = [mem._store.decode(f.body) for f in mem._store._journal.scan(0).frames]
    moving = [f for f in frames if isinstance(f, (fr.RecordFrame, fr.BranchFrame))]
    clocks = [f.hlc for f in moving]
    assert clocks == sorted(clocks) and len(set(clocks)) == len(clocks)
    create, rec_a, rec_b, rollback, rec_c = moving
    assert rec_a.flags & fr.Flag.EXPLICIT_AFTER and rec_a.after == (create.event_id,)  # the first record replaces the branch's creation
    assert not rec_b.flags & fr.Flag.EXPLICIT_AFTER and rec_b.replaces == rec_b.parents == (rec_a.wire_id,)
    assert rollback.after == (rec_b.wire_id,)
    assert rec_c.parents == (rec_a.wire_id,) and rec_c.after == (rollback.event_id,)


def test_sealed_entries_are_padded_to_their_padme_bucket(mem: Sovseal) -> None:
    from sovseal.storage.entries import make_entry

    for size in (1, 50, 700, 5000):
        mem.store(f"p{size}", "x" * size)
    frames = [mem._store.decode(f.body) for f in mem._store._journal.scan(0).frames]
    for frame in (f for f in frames if isinstance(f, fr.RecordFrame)):
        opened = mem._store.open(mem._store._lineage.by_wire[frame.wire_id])
        plain = len(opened.entry.canonical())
        assert len(frame.sealed_entry) - 28 == padme(plain + 1) > plain
    assert make_entry  # the canonical form measured is the one that is sealed


def _items(tmp_path: Path, key: bytes) -> list:
    with Sovseal(tmp_path / "source", key=key, embedder=fake_embed) as mem:
        mem.store("user.editor", "neovim")
        mem.store("user.shell", "fish")
        return mem._store.export_all()


@pytest.mark.parametrize("when", [float("nan"), 1e300, -1e12, 1.0])
def test_a_server_that_rewrites_a_format_3_time_gets_the_item_refused(tmp_path: Path, key: bytes, when: float) -> None:
    items = _items(tmp_path, key)
    record = next(n for n, i in enumerate(items) if i.kind == "record")
    forged = [*items[:record], dataclasses.replace(items[record], created_at=when), *items[record + 1 :]]
    with Sovseal(tmp_path / "device", key=key, embedder=fake_embed) as mem:
        with pytest.raises(IntegrityError):
            mem._store.import_items(forged)
        assert mem.state() == {}  # nothing of it was stored
        assert mem._store.import_items(items) == []  # the honest items still go in
        assert mem.state() == {"user.editor": "neovim", "user.shell": "fish"}


def test_a_server_that_moves_a_format_3_time_by_a_microsecond_gets_the_item_refused(tmp_path: Path, key: bytes) -> None:
    items = _items(tmp_path, key)
    record = next(n for n, i in enumerate(items) if i.kind == "record")
    nudged = dataclasses.replace(items[record], created_at=items[record].created_at + 1e-6)
    with Sovseal(tmp_path / "device", key=key, embedder=fake_embed) as mem, pytest.raises(IntegrityError):
        mem._store.import_items([*items[:record], nudged])


@pytest.mark.parametrize("when", [float("nan"), float("inf"), 1e300, -1e12, 0.0, 4e9])
def test_an_implausible_time_on_a_format_2_item_is_refused_never_stored(tmp_path: Path, when: float) -> None:
    """Format-2 items (what an older device pushed) have no authenticated time: it is range-checked."""
    legacy = Sovseal(_copy("plain", tmp_path), key=KEY, embedder=fake_embed)
    with legacy:
        items = [i for i in legacy._store.export_all() if i.flags & fr.Flag.LEGACY]
    assert items
    record = next(n for n, i in enumerate(items) if i.kind == "record")
    forged = [*items[:record], dataclasses.replace(items[record], created_at=when)]
    with Sovseal(tmp_path / "device", key=KEY, embedder=fake_embed) as mem:
        with pytest.raises(IntegrityError, match="not a plausible unix time"):
            mem._store.import_items(forged)
        assert mem._store.import_items(items) == []
        assert mem.view("main").state() == EXPECTED["plain"]["main"]["state"]
        assert all(e.created_at.year >= 2026 for e in mem.log())


def test_a_store_whose_directory_is_deleted_refuses_to_acknowledge_writes(tmp_path: Path, key: bytes) -> None:
    with Sovseal(tmp_path / "s", key=key, embedder=fake_embed) as mem:
        mem.store("a", "kept")
        shutil.rmtree(tmp_path / "s")
        with pytest.raises(StorageError, match="deleted or"):
            mem.store("b", "would be lost")
        with pytest.raises(StorageError, match="deleted or moved"):
            mem.get("a")


def test_a_journal_replaced_by_another_process_is_reopened(tmp_path: Path, key: bytes) -> None:
    """What a migration or compaction in another process does: a new file renamed over the journal."""
    with Sovseal(tmp_path / "s", key=key, embedder=fake_embed) as mem:
        mem.store("a", "one")
        journal = tmp_path / "s" / "journal.log"
        shutil.copy(journal, tmp_path / "copy")
        os.replace(tmp_path / "copy", journal)
        assert mem.get("a").payload == "one"
        mem.store("b", "two")
    with Sovseal(tmp_path / "s", key=key, embedder=fake_embed) as again:
        assert again.state() == {"a": "one", "b": "two"}


def test_a_damaged_format_2_journal_is_not_migrated_and_refuses_writes(tmp_path: Path) -> None:
    store = _copy("plain", tmp_path)
    data = bytearray((store / "journal.log").read_bytes())
    data[-5] ^= 1  # inside the last frame's sealed bytes: damage, never cut
    (store / "journal.log").write_bytes(bytes(data))
    with Sovseal(store, key=KEY, embedder=fake_embed) as mem:
        assert _format(store) == 2
        assert not mem.verify().ok
        with pytest.raises(StorageError, match="format 2"):
            mem.store("x", "y")
    assert LocalStore  # the store opened it; nothing was rewritten
    assert (store / "journal.log").read_bytes() == bytes(data)
