"""Crash safety and concurrency with real processes: SIGKILL mid-burst, two writers, the lock."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.errors import LockTimeoutError
from tests.fakes import fake_embed

ROOT = Path(__file__).resolve().parents[2]

WRITER = textwrap.dedent(
    """
    import sys
    from sovseal import Sovseal
    from tests.fakes import fake_embed
    path, key, prefix, count = sys.argv[1], bytes.fromhex(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    with Sovseal(path, key=key, embedder=fake_embed) as mem:
        print("ready", flush=True)
        for i in range(count):
            result = mem.store(f"{prefix}.{i}", {"i": i, "text": f"memory {i} of {prefix}"})
            print(result.snapshot_id, f"{prefix}.{i}", flush=True)  # acknowledged only after store returned
    """
)


def spawn(store: Path, key: bytes, prefix: str, count: int) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(store), key.hex(), prefix, str(count)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
        cwd=ROOT,
    )


@pytest.mark.parametrize("kill_after", [1, 37, 150])
def test_sigkill_mid_burst_loses_no_acknowledged_store(store_dir: Path, key: bytes, kill_after: int) -> None:
    child = spawn(store_dir, key, "burst", 100_000)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    acknowledged = [child.stdout.readline().split() for _ in range(kill_after)]
    child.send_signal(signal.SIGKILL)
    child.wait()
    acknowledged += [line.split() for line in child.stdout.read().splitlines()]  # printed before the kill

    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        log_ids = {e.snapshot_id for e in mem.log()}
        for snapshot_id, path in acknowledged:
            assert snapshot_id in log_ids
            assert mem.get(path) is not None
        report = mem.verify()
        assert report.ok, report.problems
        head = mem.snapshot()
        assert head == mem.log()[0].snapshot_id
        assert len(log_ids) >= len(acknowledged)
        mem.store("after.crash", "still writable")  # the store is usable, HEAD consistent
        assert mem.log()[0].parent_id == head


def test_two_processes_storing_at_once_lose_nothing(store_dir: Path, key: bytes) -> None:
    Sovseal(store_dir, key=key, embedder=fake_embed).close()
    children = [spawn(store_dir, key, prefix, 60) for prefix in ("left", "right")]
    outputs = [c.communicate(timeout=120)[0].splitlines()[1:] for c in children]
    assert all(c.returncode == 0 for c in children)
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        log = mem.log()
        assert len(log) == 120  # one chain: every store is an ancestor of HEAD
        assert {e.snapshot_id for e in log} == {line.split()[0] for out in outputs for line in out}
        assert [e.seq for e in log] == list(range(120, 0, -1))
        assert len(mem.state()) == 120
        assert mem.verify().ok


HOLDER = textwrap.dedent(
    """
    import fcntl, sys, time
    with open(sys.argv[1], "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        print("locked", flush=True)
        time.sleep(float(sys.argv[2]))
    """
)


def test_second_writer_waits_then_times_out_while_readers_go_on(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed, lock_timeout=0.3) as mem:
        mem.store("kept", "value")
        holder = subprocess.Popen(
            [sys.executable, "-c", HOLDER, str(store_dir / "LOCK"), "3"], stdout=subprocess.PIPE, text=True
        )
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        started = time.monotonic()
        with pytest.raises(LockTimeoutError, match="lock_timeout"):
            mem.store("blocked", "value")
        assert time.monotonic() - started >= 0.3
        # Readers never take the lock.
        assert mem.get("kept").payload == "value"
        assert mem.state() == {"kept": "value"}
        assert [m.path for m in mem.recall("value", k=3)] == ["kept"]
        holder.wait()
        mem.store("after", "released")
        assert mem.state() == {"kept": "value", "after": "released"}
        assert mem.verify().ok


BATCH_WRITER = textwrap.dedent(
    """
    import sys
    from sovseal import Sovseal
    from tests.fakes import fake_embed
    path, key = sys.argv[1], bytes.fromhex(sys.argv[2])
    with Sovseal(path, key=key, embedder=fake_embed) as mem:
        print("ready", flush=True)
        for b in range(100_000):
            with mem.batch():
                done = [mem.store(f"b{b}.{i}", {"b": b, "i": i}, index=i % 2 == 0) for i in range(5)]
            for i, result in enumerate(done):  # acknowledged only after the batch's fsync
                print(result.snapshot_id, f"b{b}.{i}", flush=True)
    """
)


@pytest.mark.parametrize("kill_after", [3, 120])
def test_sigkill_mid_batches_keeps_every_acknowledged_batch_whole(store_dir: Path, key: bytes, kill_after: int) -> None:
    """A crash inside a batch leaves the batches before it whole, and of the one it cut a prefix at most."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    argv = [sys.executable, "-c", BATCH_WRITER, str(store_dir), key.hex()]
    child = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)
    assert child.stdout is not None
    assert child.stdout.readline().strip() == "ready"
    acknowledged = [child.stdout.readline().split() for _ in range(kill_after)]
    child.send_signal(signal.SIGKILL)
    child.wait()
    acknowledged += [line.split() for line in child.stdout.read().splitlines()]

    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        log = mem.log()
        ids = {e.snapshot_id for e in log}
        assert {sid for sid, _ in acknowledged} <= ids
        state = mem.state()
        for _, path in acknowledged:
            b, i = (int(part) for part in path[1:].split("."))
            assert state[path] == {"b": b, "i": i}
        stored = sorted((int(p[1:].split(".")[0]), int(p.split(".")[1])) for p in state)
        assert stored == [(n // 5, n % 5) for n in range(len(stored))]  # a prefix of the writes, in order
        assert mem.verify().ok
        assert len(mem.recall("b 0", k=1)) == 1  # recall works on what the batches stored
