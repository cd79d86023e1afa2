"""Disk full and I/O errors: a real tiny file system, and ENOSPC/EIO injected at every step.

Proves that when the disk refuses a write or an fsync, the call fails with a typed
``StorageError`` (errno kept) before anything is half-written: the journal is exactly as it was,
the store reopens and verifies, nothing acknowledged earlier is lost, and the store keeps working
once space is back. Linux's fsync error semantics ("fsyncgate") are why a failed batch fsync must
not leave its frames readable: Linux may report the *next* fsync as a success although the data
was dropped, so a retried import would skip items it wrongly believes stored.
"""

from __future__ import annotations

import errno
import os
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sovseal import Sovseal
from sovseal.errors import StorageError, StoreClosedError
from tests.fakes import fake_embed
from tests.reliability._soak import SOAK


@pytest.fixture
def tiny_fs(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs mounted for this test (root only; the injected tests below run everywhere)."""
    mountpoint = tmp_path / "tiny"
    mountpoint.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m,mode=0700", "tmpfs", str(mountpoint)], capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        pytest.skip(f"mounting a tmpfs was refused ({done.stderr.strip()}); the injected ENOSPC/EIO tests cover the same code")
    try:
        yield mountpoint
    finally:
        if subprocess.run(["umount", str(mountpoint)], capture_output=True, check=False).returncode != 0:
            subprocess.run(["umount", "-l", str(mountpoint)], check=True)


def test_a_full_file_system_fails_the_store_cleanly_and_recovers_when_space_is_back(
    tiny_fs: Path, key: bytes, figures: dict[str, Any]
) -> None:
    """Proves on a real full disk: typed error, journal untouched, reopen verifies, nothing earlier
    lost, and storing works again once space is freed."""
    ballast = tiny_fs / "ballast"
    ballast.write_bytes(os.urandom(160 * 1024))
    store = tiny_fs / "store"
    acked: dict[str, str] = {}
    with Sovseal(store, key=key, embedder=fake_embed) as mem:
        with pytest.raises(StorageError) as refused:
            for i in range(1000):
                before = (store / "journal.log").read_bytes()
                payload = f"{i:04d} " + os.urandom(12 * 1024).hex()
                acked[f"blob.{i}"] = mem.store(f"blob.{i}", payload).snapshot_id
        assert refused.value.errno == errno.ENOSPC
        assert (store / "journal.log").read_bytes() == before, "a failed store left bytes in the journal"
        assert mem.get(f"blob.{len(acked)}") is None
        figures.update(stored_before_full=len(acked), journal_bytes=len(before))
    with Sovseal(store, key=key, embedder=fake_embed) as mem:  # reopen on the still-full disk
        assert mem.verify().ok
        log_ids = {e.snapshot_id for e in mem.log()}
        assert set(acked.values()) <= log_ids and len(mem.state()) == len(acked)
        ballast.unlink()  # space is back
        mem.store("after.space", "works again")
        assert mem.get("after.space").payload == "works again"
        assert mem.verify().ok


class Faults:
    """Fail chosen os-level operations on the journal: ``arm(n)`` fails the n-th one from now."""

    def __init__(
        self, monkeypatch: pytest.MonkeyPatch, kinds: set[str], code: int, short_write: bool = False, fail_after_short: int = 1
    ) -> None:
        """``short_write``: the chosen write writes half its bytes, then ``fail_after_short`` calls fail."""
        self.kinds, self.code, self.short_write, self.fail_after_short = kinds, code, short_write, fail_after_short
        self.countdown = 0
        self.fired = 0
        self.then_fail = 0
        real = {"write": os.write, "fsync": os.fsync, "ftruncate": os.ftruncate}

        def wrap(kind: str) -> Callable[..., Any]:
            def call(fd: int, *args: Any) -> Any:
                if kind in self.kinds and self._journal(fd):
                    if self.then_fail:
                        self.then_fail -= 1
                        raise OSError(self.code, os.strerror(self.code))
                    if self.countdown > 0:
                        self.countdown -= 1
                        if self.countdown == 0:
                            self.fired += 1
                            if kind == "write" and self.short_write:
                                self.then_fail = self.fail_after_short  # write half now, fail what follows
                                return real["write"](fd, bytes(args[0])[: max(1, len(args[0]) // 2)])
                            raise OSError(self.code, os.strerror(self.code))
                return real[kind](fd, *args)

            return call

        for kind in real:
            monkeypatch.setattr(os, kind, wrap(kind))

    @staticmethod
    def _journal(fd: int) -> bool:
        try:
            return os.readlink(f"/proc/self/fd/{fd}").endswith("journal.log")
        except OSError:
            return False

    def arm(self, n: int) -> None:
        self.countdown = n


def workload(mem: Sovseal) -> list[Callable[[], Any]]:
    """Deterministic mixed writes: snapshot ids re-derive, so a fault-free run gives the reference heads."""
    ops: list[Callable[[], Any]] = [lambda i=i: mem.store(f"fact.{i}", {"n": i}) for i in range(6)]
    ops += [
        lambda: mem.delete("fact.2"),
        lambda: mem.store("fact.1", {"n": 1}),  # reinforcement
        lambda: mem.fork(mem.log()[3].snapshot_id, branch="side"),
        lambda: mem.store("side.x", "on the fork"),
        lambda: mem.checkout("main"),
        lambda: mem.rollback(mem.log()[1].snapshot_id),
        lambda: mem.store("fact.9", {"n": 9}),
        lambda: mem._store.ack([i.id for i in mem._store.outbox(3)]),  # replication acks are frames too
    ]
    return ops


def reference_heads(tmp_path: Path, key: bytes) -> dict[str, str | None]:
    with Sovseal(tmp_path / "reference", key=key, embedder=fake_embed) as mem:
        for op in workload(mem):
            op()
        return mem.heads()


#: The short write and the failed fsync are the cases that leave bytes to cut back; the plain
#: write failures run in soak mode.
SWEEPS = [({"write"}, errno.ENOSPC, True, "ENOSPC-short-write"), ({"fsync"}, errno.EIO, False, "EIO-fsync")]
if SOAK:
    SWEEPS += [({"write"}, errno.ENOSPC, False, "ENOSPC-write"), ({"write"}, errno.EIO, False, "EIO-write")]


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="names file descriptors through /proc")
@pytest.mark.parametrize(("kinds", "code", "short_write"), [s[:3] for s in SWEEPS], ids=[s[3] for s in SWEEPS])
def test_every_journal_write_and_fsync_failing_in_turn(
    tmp_path: Path, key: bytes, monkeypatch: pytest.MonkeyPatch, kinds: set[str], code: int, short_write: bool, figures: dict[str, Any]
) -> None:
    """SQLite-style sweep: for N = 1, 2, ... fail the N-th journal write (or fsync) of a mixed workload.
    Each time the call in flight raises StorageError with the errno, leaves the journal byte for byte
    as it was, and a retry then succeeds; the finished store equals a fault-free run's and verifies."""
    want = reference_heads(tmp_path, key)
    faults = Faults(monkeypatch, kinds, code, short_write)
    n, failures = 1, 0
    while True:
        store = tmp_path / f"run{n}"
        with Sovseal(store, key=key, embedder=fake_embed) as mem:
            journal = store / "journal.log"
            faults.arm(n)
            for op in workload(mem):
                before = journal.read_bytes()
                try:
                    op()
                except StorageError as exc:
                    failures += 1
                    assert exc.errno == code
                    assert journal.read_bytes() == before, "a failed call left bytes in the journal"
                    with Sovseal(store, key=key, embedder=fake_embed) as again:  # another handle: verifies
                        assert again.verify().ok
                    op()  # the fault is spent: the same call succeeds now
            fired = faults.fired
        with Sovseal(store, key=key, embedder=fake_embed) as mem:
            assert mem.verify().ok and mem.heads() == want
        if not fired:
            break  # N passed the workload's last journal operation: every position was tried
        faults.fired = 0
        n += 1
    figures.update(positions=n - 1, failures=failures)
    assert failures == n - 1 > 5


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="names file descriptors through /proc")
def test_a_failed_import_fsync_cuts_the_batch_and_a_retry_stores_it(tmp_path: Path, key: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """Proves the fsyncgate rule for the batched import path: a failed batch fsync cuts the batch
    off and closes the handle (it had applied frames that may never reach the disk), so a retry
    imports them again instead of skipping them as already there."""
    with Sovseal(tmp_path / "source", key=key, embedder=fake_embed) as src:
        for i in range(8):
            src.store(f"fact.{i}", i)
        items, heads = src.export_items(), src.heads()
    target = tmp_path / "target"
    Sovseal(target, key=key, embedder=fake_embed).close()
    before = (target / "journal.log").read_bytes()
    faults = Faults(monkeypatch, {"fsync"}, errno.EIO)
    mem = Sovseal(target, key=key, embedder=fake_embed)
    faults.arm(1)
    with pytest.raises(StorageError):
        mem.import_items(items)
    assert (target / "journal.log").read_bytes() == before
    with pytest.raises(StoreClosedError):
        mem.state()
    with Sovseal(target, key=key, embedder=fake_embed) as again:
        assert again.verify().ok and again.state() == {}
        assert again.import_items(items) == []
        assert again.heads() == heads and again.verify().ok


@pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="names file descriptors through /proc")
def test_when_even_the_cut_back_fails_the_next_writer_cuts_the_torn_tail(
    tmp_path: Path, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Proves the last line of defence: a short write followed by EIO on both the write and the
    truncate leaves a partial frame; the next handle recognises it as a torn tail and cuts it."""
    store = tmp_path / "s"
    with Sovseal(store, key=key, embedder=fake_embed) as mem:
        mem.store("kept", 1)
        state = mem.state()
        faults = Faults(monkeypatch, {"write", "ftruncate"}, errno.EIO, short_write=True, fail_after_short=2)
        faults.arm(1)
        with pytest.raises(StorageError):
            mem.store("lost", 2)
        monkeypatch.undo()
    with Sovseal(store, key=key, embedder=fake_embed) as mem:
        assert any("torn tail" in r for r in mem.status().recovery)
        assert mem.state() == state and mem.verify().ok
