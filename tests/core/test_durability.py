"""Durability: what store() fsyncs before it returns, and recovery from a torn tail.

The fsync check records every ``os.write`` and ``os.fsync`` the process makes (by file path,
read back from /proc/self/fd), so that a regression that drops or reorders an fsync fails here
instead of passing silently until a power cut.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from sovseal import Sovseal
from sovseal.errors import IntegrityError
from tests.fakes import fake_embed


class Recorder:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[str, str]] = []
        real_write, real_fsync = os.write, os.fsync

        def write(fd: int, data: bytes) -> int:
            self.events.append(("write", self.name(fd)))
            return real_write(fd, data)

        def fsync(fd: int) -> None:
            self.events.append(("fsync", self.name(fd)))
            real_fsync(fd)

        monkeypatch.setattr(os, "write", write)
        monkeypatch.setattr(os, "fsync", fsync)

    @staticmethod
    def name(fd: int) -> str:
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            return f"fd:{fd}"


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="needs /proc to name file descriptors")
def test_store_fsyncs_the_journal_after_its_last_write_before_returning(
    store_dir: Path, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    recorder = Recorder(monkeypatch)
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        journal = str(store_dir / "journal.log")
        created = list(recorder.events)
        # Creating the store made its directory entries durable: the store dir and the journal.
        assert ("fsync", str(store_dir)) in created
        assert ("fsync", str(store_dir.parent)) in created
        assert ("fsync", journal) in created
        for payload in ("one", "two", {"three": 3}):
            recorder.events.clear()
            mem.store("k", payload)
            journal_events = [e for e in recorder.events if e[1] == journal]
            assert journal_events, "store() wrote nothing to the journal"
            assert journal_events[-1] == ("fsync", journal), journal_events
            assert ("write", journal) in journal_events
        recorder.events.clear()
        mem.delete("k")
        mem.rollback(mem.log()[-1].snapshot_id)
        mem.fork(branch="side")
        writes = [i for i, e in enumerate(recorder.events) if e == ("write", journal)]
        fsyncs = [i for i, e in enumerate(recorder.events) if e == ("fsync", journal)]
        assert len(writes) == 3 and all(any(f > w for f in fsyncs) for w in writes)


def test_a_torn_tail_is_cut_and_everything_before_it_kept(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        for i in range(10):
            mem.store(f"p{i}", f"value {i}")
        state, head = mem.state(), mem.snapshot()
    journal = store_dir / "journal.log"
    intact = journal.read_bytes()
    # An append interrupted by a crash: a header promising more bytes than ever reached the disk.
    with open(journal, "ab") as f:
        f.write(intact[-150:-40])
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        assert mem.state() == state and mem.snapshot() == head
        assert any("torn tail" in r for r in mem.status().recovery)
        assert mem.verify().ok
        mem.store("after", "repair")
    assert journal.read_bytes().startswith(intact)


def test_zero_filled_tail_is_treated_as_torn(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        mem.store("a", 1)
    with open(store_dir / "journal.log", "ab") as f:
        f.write(bytes(4096))  # some file systems expose zeros after a crash
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        assert mem.state() == {"a": 1} and mem.verify().ok


def test_damage_in_the_middle_is_never_cut_off(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        for i in range(3):
            mem.store(f"p{i}", f"value {i}")
        second = mem._store._lineage.nodes[1].offset  # white-box: where the second record's frame starts
    journal = store_dir / "journal.log"
    data = bytearray(journal.read_bytes())
    data[second : second + 4] = b"\x00\x0f\xff\xff"  # its length now runs past the end of the file
    journal.write_bytes(bytes(data))
    with pytest.raises(IntegrityError, match="damaged"):
        Sovseal(store_dir, key=key, embedder=fake_embed)
    assert journal.read_bytes() == bytes(data)  # the frames after the damage were not cut off


def test_a_directory_another_process_creates_first_is_taken_as_made(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two processes opening one new store (or its index) both find the directory missing; the
    one that loses the race to mkdir must go on, not fail (it did: FileExistsError in 3 of 30 runs
    of the two-writer crash test)."""
    from sovseal import durable

    real = os.mkdir

    def raced(path: Any, mode: int = 0o777) -> None:
        real(path, mode)  # the other process got there first
        raise FileExistsError(17, "File exists", str(path))

    monkeypatch.setattr(durable.os, "mkdir", raced)
    durable.make_dirs(tmp_path / "a" / "b")
    assert (tmp_path / "a" / "b").is_dir()

    def a_file_instead(path: Any, mode: int = 0o777) -> None:
        Path(path).write_text("not a directory")
        raise FileExistsError(17, "File exists", str(path))

    monkeypatch.setattr(durable.os, "mkdir", a_file_instead)
    with pytest.raises(FileExistsError):
        durable.make_dirs(tmp_path / "c")
