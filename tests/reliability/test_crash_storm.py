"""Crash storms: four processes storing into one store, SIGKILLed at random moments, round after round.

Proves that the flock-serialised journal keeps every acknowledged operation through kill -9 at
any point (during open, mid-append, mid-fsync, mid-LanceDB write, while holding the lock), that
the store verifies after every round, that no snapshot is duplicated or orphaned, and that the
replication outbox holds a job for every replicable frame (the outbox *is* the journal's
unacknowledged frames, so a record without its job would be a lost replication).

Acks follow the RocksDB "expected state" idea: a writer appends a
line to its ack file only after ``store``/``delete`` returned; the test trusts those lines only.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from sovseal import Sovseal
from tests.fakes import fake_embed
from tests.reliability._soak import scale

ROOT = Path(__file__).resolve().parents[2]
WRITERS = 4


class ForkServer:
    """The _storm_worker process: forks writers that inherit its already-imported modules."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.reliability._storm_worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"

    def spawn(self, store: Path, key: bytes, prefix: str, acks: Path) -> int:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write(f"{store} {key.hex()} {prefix} {acks}\n")
        self.proc.stdin.flush()
        return int(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def kill_and_wait(pid: int) -> bool:
    """SIGKILL ``pid`` (if it still runs) and wait until it is gone; True if it was killed."""
    try:
        os.kill(pid, signal.SIGKILL)
        killed = True
    except ProcessLookupError:
        return False  # it finished its operations before its moment came
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return killed
        time.sleep(0.005)
    raise AssertionError(f"writer {pid} survived SIGKILL for 30 s")


def read_acks(path: Path) -> list[tuple[str, str, str]]:
    if not path.exists():
        return []
    return [tuple(line.split()) for line in path.read_text().splitlines()]  # type: ignore[misc]


def check_round(store: Path, key: bytes, acks: list[tuple[str, str, str]], figures: dict[str, Any]) -> None:
    """Everything the scenario promises, checked on a fresh handle after the writers died."""
    with Sovseal(store, key=key, embedder=fake_embed) as mem:
        report = mem.verify()
        assert report.ok, report.problems
        status = mem.status()
        assert not status.damage
        figures["torn_tails_cut"] = figures.get("torn_tails_cut", 0) + sum("torn tail" in r for r in status.recovery)
        log = mem.log()
        ids = {e.snapshot_id for e in log}
        # No orphan: every record ever appended is on main's chain (one branch, one chain).
        assert len(log) == status.records == len(ids)
        # No duplicate: each path was stored at most once and deleted at most once.
        per_op = Counter((e.op, e.path) for e in log)
        assert max(per_op.values(), default=1) == 1, [k for k, v in per_op.items() if v > 1]
        # Every acknowledged operation is there.
        missing = [a for a in acks if a[1] not in ids]
        assert not missing, missing[:5]
        # State is the fold of the chain, and agrees with the acknowledgements.
        folded: dict[str, Any] = {}
        for e in reversed(log):
            if e.op == "store":
                folded[e.path] = True
            else:
                folded.pop(e.path, None)
        state = mem.state()
        assert set(state) == set(folded)
        deleted = {e.path for e in log if e.op == "delete"}
        for kind, _, path in acks:
            if kind == "delete":
                assert path not in state
            elif path not in deleted:
                assert state[path]["w"] == path.rsplit(".", 1)[0]
        # The outbox: one pending job per replicable frame (nothing was replicated, so all of them).
        outbox = mem._store.outbox(10**9)  # white-box: the store's outbox API
        exported = mem.export_items()
        assert [i.id for i in outbox] == [i.id for i in exported]
        pending = {i.id for i in outbox}
        with mem._store.reading() as lineage:
            assert all(node.wire_id.hex() in pending for node in lineage.nodes)
        assert status.outbox_records == len(outbox)
        figures["records"] = status.records


def test_crash_storm_keeps_every_acknowledged_operation(tmp_path: Path, key: bytes, figures: dict[str, Any]) -> None:
    """4 writers × N rounds, each writer SIGKILLed at a random moment: nothing acknowledged is lost,
    verify() passes, no duplicate or orphan snapshot, the outbox is complete, the lock is free."""
    rounds = scale(10, 200)
    seed = int.from_bytes(os.urandom(4), "big")
    rng = random.Random(seed)
    figures.update(seed=seed, rounds=rounds, kills=0, finished=0, acked=0)
    store = tmp_path / "store"
    server = ForkServer()
    acked: list[tuple[str, str, str]] = []
    started = time.monotonic()
    try:
        for round_no in range(rounds):
            moments = sorted((rng.uniform(0.02, 0.9), w) for w in range(WRITERS))
            t0 = time.monotonic()
            pids = [(server.spawn(store, key, f"r{round_no}w{w}", tmp_path / f"acks{round_no}.{w}"), w) for w in range(WRITERS)]
            for moment, w in moments:
                time.sleep(max(0.0, t0 + moment - time.monotonic()))
                killed = kill_and_wait(pids[w][0])
                figures["kills" if killed else "finished"] += 1
            for w in range(WRITERS):
                acked += read_acks(tmp_path / f"acks{round_no}.{w}")
            check_round(store, key, acked, figures)
    finally:
        server.close()
    figures["acked"] = len(acked)
    figures["seconds"] = round(time.monotonic() - started, 1)
    with Sovseal(store, key=key, embedder=fake_embed, lock_timeout=2.0) as mem:
        head = mem.snapshot()
        mem.store("after.storm", "still writable")  # no stale lock, HEAD consistent
        assert mem.log()[0].parent_id == head
    assert figures["kills"] > 0 and acked, "the storm must kill writers that had acknowledged work"
