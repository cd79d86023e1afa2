"""``Sovseal.batch()``: writes that share one fsync, seen by nobody (other threads, other processes,
the indexes) before it, and all cut off together if it fails."""

from __future__ import annotations

import asyncio
import errno
import os
import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from sovseal import AsyncSovseal, Sovseal
from sovseal.errors import StorageError, StoreClosedError
from tests.fakes import fake_embed


def test_writes_in_a_batch_share_one_fsync_and_are_all_there_after_reopening(
    store_dir: Path, key: bytes, monkeypatch: pytest.MonkeyPatch, count_fsyncs: Callable[[], list[int]]
) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        mem.store("warm", "up")  # the journal, branch and directory exist: what follows is the batch alone
        other = mem.view()
        synced = count_fsyncs()
        with mem.batch():
            first = mem.store("a", "alpha")
            with other.batch():  # a batch inside a batch joins it
                other.store("b", {"n": 2}, index=False)
                other.store_many([{"path": "c", "payload": "charlie"}, {"path": "d", "payload": "delta"}])
            mem.delete("warm")
            assert synced == []  # nothing is durable yet
        monkeypatch.undo()
        assert len(synced) == 1
        assert mem.get("a").snapshot_id == first.snapshot_id  # type: ignore[union-attr]
    with Sovseal(store_dir, key=key, embedder=fake_embed) as again:
        assert again.state() == {"a": "alpha", "b": {"n": 2}, "c": "charlie", "d": "delta"}
        assert again.verify().ok


def test_recall_finds_what_a_batch_stored_once_it_ends(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        mem.store("warm", "the weather report")
        mem.recall("weather", k=1)  # the recall engine is running: it takes each write as it is made durable
        with mem.batch():
            mem.store("fruit", "bananas are yellow and ripe")
            mem.store_many([{"path": "sky", "payload": "the sky is blue"}])
        assert {m.path for m in mem.recall("bananas yellow", k=3)} >= {"fruit"}
        assert "sky" in {m.path for m in mem.recall("sky blue", k=3)}


def test_another_thread_sees_a_batch_only_once_it_is_durable(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        mem.store("warm", "up")
        inside, release = threading.Event(), threading.Event()
        seen: list[object] = []

        def writer() -> None:
            with mem.batch():
                mem.store("a", "alpha", index=False)
                inside.set()
                release.wait(10)

        def reader() -> None:
            found = mem.view().get("a")
            seen.append(None if found is None else found.payload)

        w = threading.Thread(target=writer)
        w.start()
        assert inside.wait(10)
        r = threading.Thread(target=reader)
        r.start()
        r.join(0.3)
        assert r.is_alive() and seen == []  # the reader waits for the batch's fsync
        release.set()
        w.join(10)
        r.join(10)
        assert seen == ["alpha"]


def test_another_process_cannot_write_during_a_batch(store_dir: Path, key: bytes) -> None:
    """The writer lock is held from the batch's start to its fsync, across the writes that take it again."""
    script = (
        "import sys\n"
        "from sovseal import Sovseal\n"
        "from sovseal.errors import LockTimeoutError\n"
        "from tests.fakes import fake_embed\n"
        "try:\n"
        "    with Sovseal(sys.argv[1], key=bytes.fromhex(sys.argv[2]), embedder=fake_embed, lock_timeout=0.2) as m:\n"
        "        m.store('other', 'process', index=False)\n"
        "except LockTimeoutError:\n"
        "    print('locked out')\n"
        "else:\n"
        "    print('wrote')\n"
    )
    root = Path(__file__).resolve().parents[2]

    def other_process() -> str:
        done = subprocess.run(
            [sys.executable, "-c", script, str(store_dir), key.hex()], cwd=root, capture_output=True, text=True, timeout=120, check=True
        )
        return done.stdout.strip()

    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        mem.store("warm", "up")
        with mem.batch():
            mem.store("a", "alpha", index=False)
            mem.store("b", "bravo", index=False)  # took the writer lock again, and let go of it once
            assert other_process() == "locked out"
        assert other_process() == "wrote"
        assert mem.state() == {"warm": "up", "a": "alpha", "b": "bravo", "other": "process"}


def test_a_failed_batch_fsync_cuts_off_every_write_in_it_and_closes_the_handle(
    store_dir: Path, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        mem.store("kept", "before")
        mem.recall("before", k=1)

        def failing(fd: int) -> None:
            raise OSError(errno.EIO, "injected I/O error")

        with pytest.raises(StorageError), mem.batch():
            mem.store("lost", "one")
            mem.store_many([{"path": "lost2", "payload": "two"}])
            monkeypatch.setattr(os, "fsync", failing)
        monkeypatch.undo()
        with pytest.raises(StoreClosedError):
            mem.store("after", "closed")
    with Sovseal(store_dir, key=key, embedder=fake_embed) as again:
        assert again.state() == {"kept": "before"}
        assert [m.path for m in again.recall("one two", k=5)] == ["kept"]
        assert again.verify().ok


def test_writes_made_before_a_batch_raised_are_kept_and_recalled(store_dir: Path, key: bytes) -> None:
    """The block's own exception is the caller's: what was written before it is made durable and indexed, as
    separate writes would have been."""
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        mem.recall("anything", k=1)
        with pytest.raises(KeyError), mem.batch():
            mem.store("fruit", "bananas are yellow and ripe")
            raise KeyError("the caller's own failure")
        assert mem.get("fruit").payload == "bananas are yellow and ripe"  # type: ignore[union-attr]
        assert [m.path for m in mem.recall("bananas yellow", k=1)] == ["fruit"]
    with Sovseal(store_dir, key=key, embedder=fake_embed) as again:
        assert again.state() == {"fruit": "bananas are yellow and ripe"}


def test_an_async_batch_runs_its_calls_in_one_thread_with_one_fsync(
    store_dir: Path, key: bytes, monkeypatch: pytest.MonkeyPatch, count_fsyncs: Callable[[], list[int]]
) -> None:
    async def main() -> tuple[dict[str, object], list[str]]:
        async with AsyncSovseal(store_dir, key=key, embedder=fake_embed) as mem:
            await mem.store("warm", "up")
            order: list[str] = []
            go = asyncio.Event()

            async def outside() -> None:  # a task started before the batch: it waits for the batch's fsync
                await go.wait()
                await mem.view().store("outside", "later", index=False)
                order.append("outside")

            task = asyncio.create_task(outside())
            synced = count_fsyncs()
            async with mem.batch():
                await mem.store("a", "alpha")
                go.set()
                async with mem.view().batch():  # joins the batch
                    await mem.view().store_many([{"path": "b", "payload": "bravo"}, {"path": "c", "payload": "charlie"}])
                await asyncio.sleep(0.2)
                order.append("batch")
                assert synced == []
            await task
            monkeypatch.undo()
            assert len(synced) == 2  # the batch's, then the other task's own
            return await mem.state(), order

    state, order = asyncio.run(main())
    assert state == {"warm": "up", "a": "alpha", "b": "bravo", "c": "charlie", "outside": "later"}
    assert order == ["batch", "outside"]
