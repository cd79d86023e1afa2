"""Replication chaos: thousands of batches through a hostile network and a restarting server.

What it proves: whatever the network does (drops, duplicate deliveries, ambiguous resets after a
commit, reordering, delays, 5xx storms) and however often the server restarts, once the network
heals the server holds exactly the client's items: every sealed byte equal, each item once, in
the client's journal order, nothing held back; and a second device restoring from the server
ends with the same lineage, state and metadata on every branch.

How: a real store (fsynced journal, write-behind worker) writes a seeded random mix of stores,
reinforcements, deletes, forks, checkouts and rollbacks while its worker pushes batches of at
most two items (0.5 s request timeout, so a ``hang`` is an ambiguous outcome, retried) through
:class:`tests.replication.proxy.FaultProxy` (real sockets) to the real server on SQLite, which a
second thread restarts every few hundred pushes. Stores and database live in RAM (``/dev/shm``)
when it exists: they still fsync, which costs nothing there, so the run is paced by the network
path under test rather than by the disk. The proxy picks a
fault per push from a seeded RNG. The check at the end reads the server only through its pull
endpoint, as a device would.

Normal mode: 2,000 operations, ~1,000 distinct batches and >1,000 push attempts, ~6 restarts.
``SOVSEAL_SOAK=1``: 20,000 operations, ~10,000 batches, ~60 restarts, on SQLite and on PostgreSQL.
"""

from __future__ import annotations

import dataclasses
import json
import random
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sovseal import Sovseal
from sovseal.crypto.primitives import project_blind_id
from sovseal.server import ServerThread
from tests.reliability._net import SOAK, RestartableServer, memory_dir, size
from tests.replication.conftest import (
    FAST,
    drop_postgres_database,
    fresh_postgres_database,
    open_mem,
    postgres_url,  # noqa: F401 - the PostgreSQL fixture, for the soak
)
from tests.replication.helpers import server_items, snapshot_of
from tests.replication.proxy import Captured, FaultProxy

SEED = 20261122
OPERATIONS = size(2000, 20_000)
RESTART_EVERY = 200  # push attempts between server restarts

#: Per push: (action, weight). Everything but ``pass`` is a fault; ``early`` reorders batches.
FAULTS = [
    ("pass", 62),
    ("drop", 6),
    ("reset", 6),
    ("dup", 7),
    ("delay:0.02", 5),
    ("early", 6),
    ("status:503", 4),
    ("status:502", 2),
    ("status:500", 2),
    ("hang", 0.3),  # forwarded, never answered: the client times out on an outcome it cannot know
]

#: Fast retries, same code paths as the defaults; batches of at most 2 items, so many batches.
CHAOS = dataclasses.replace(
    FAST, batch_items=2, linger=0.005, backoff_base=0.005, backoff_max=0.04, poll_interval=0.005, request_timeout=0.5
)


def operate(mem: Sovseal, rng: random.Random, count: int) -> dict[str, int]:
    """A seeded random mix of every operation that produces a replicable item."""
    paths = [f"chaos.{i}" for i in range(40)]
    done = {"store": 0, "reinforce": 0, "delete": 0, "fork": 0, "checkout": 0, "rollback": 0}
    for step in range(count):
        roll = rng.random()
        if roll < 0.68:
            mem.store(rng.choice(paths), {"step": step, "w": rng.random()}, type=rng.choice(["episodic", "semantic", "procedural"]))
            done["store"] += 1
        elif roll < 0.76:
            path = rng.choice(paths)
            mem.store(path, f"again {step}")
            mem.store(path, f"again {step}")  # equal to the visible value: a reinforcement
            done["reinforce"] += 1
        elif roll < 0.84:
            visible = sorted(mem.state())
            if visible:
                mem.delete(rng.choice(visible))
                done["delete"] += 1
        elif roll < 0.91:
            recent = mem.log(limit=15)
            if len(recent) > 1:
                mem.rollback(rng.choice(recent[1:]).snapshot_id)
                done["rollback"] += 1
        elif roll < 0.95 and len(mem.branches()) < 5:
            head = mem.snapshot()
            if head is not None:
                mem.fork(head, branch=f"b{step}")
                done["fork"] += 1
        else:
            mem.checkout(rng.choice(mem.branches()))
            done["checkout"] += 1
    return done


@pytest.fixture
def scratch(tmp_path: Path) -> Iterator[Path]:
    with memory_dir(tmp_path) as path:
        yield path


@pytest.fixture(params=["sqlite", "postgresql"] if SOAK else ["sqlite"])
def database(request: pytest.FixtureRequest, scratch: Path) -> Iterator[str]:
    """SQLite in the test command; the soak runs PostgreSQL as well."""
    if request.param == "sqlite":
        yield str(scratch / "server.sqlite3")
        return
    url = fresh_postgres_database(request.getfixturevalue("postgres_url"))
    try:
        yield url
    finally:
        drop_postgres_database(url)


def test_chaos_network_and_restarts_end_with_byte_equal_server_and_restore(
    scratch: Path, database: str, key: bytes, figures: dict[str, Any]
) -> None:
    rng = random.Random(SEED)
    fault_rng = random.Random(SEED + 1)
    actions, weights = zip(*FAULTS, strict=True)
    server = RestartableServer(database)
    api = server.server.storage.create_api_key()
    project = project_blind_id("default", key)
    pushes = 0
    restart_due = threading.Event()

    def plan(index: int, request: Captured) -> str:
        nonlocal pushes
        if request.method != "POST":
            return "pass"
        pushes += 1
        if pushes % RESTART_EVERY == 0:
            restart_due.set()
        return fault_rng.choices(actions, weights)[0]

    stop = threading.Event()

    def restarter() -> None:
        while not stop.is_set():
            if restart_due.wait(0.05):
                restart_due.clear()
                server.restart(down=0.02)

    started = time.perf_counter()
    proxy = FaultProxy(server.url, plan).start()
    worker = threading.Thread(target=restarter, name="restarter", daemon=True)
    worker.start()
    try:
        with open_mem(scratch / "one", key, proxy.url, api, replication_config=CHAOS) as one:
            done = operate(one, rng, OPERATIONS)
            wrote = time.perf_counter() - started
            assert one.replication is not None
            deadline = time.monotonic() + size(60, 600)
            while not (one.replication.flush(1) and proxy.stashed() == 0):
                proxy.deliver_stash()  # a batch answered early still reaches the server
                assert time.monotonic() < deadline, "the outbox did not drain after the faults"
            stop.set()
            worker.join(10)
            proxy.deliver_stash()
            assert one.status().outbox_records == 0
            journal = [item.to_json() for item in one.export_items()]
            expected = snapshot_of(one)
            assert one.verify().ok
        elapsed = time.perf_counter() - started
        # The server equals the client: each item once, byte for byte, in journal order.
        counts = server.server.storage.counts(project)
        assert counts == {"items": len(journal), "distinct": len(journal), "held": 0}, counts
        pulled = server_items(server.url, api, project)
        assert [r.pop("seq") for r in pulled] == list(range(1, len(journal) + 1))
        assert [json.dumps(r, sort_keys=True) for r in pulled] == [json.dumps(j, sort_keys=True) for j in journal]
        # ...and a second device that restores from it reads the same thing on every branch.
        restore_server = ServerThread(server.database)
        server.stop()
        with restore_server, open_mem(scratch / "two", key, restore_server.url, api) as two:
            assert two.pull().waiting == 0
            assert two.verify().ok
            assert snapshot_of(two) == expected
    finally:
        stop.set()
        proxy.stop()
        server.stop()

    seen = [c.action for c in proxy.pushes()]
    distinct_batches = len({c.body for c in proxy.pushes()})
    assert len(seen) >= size(1000, 10_000), "fewer push attempts than the scenario promises"
    for action, _ in FAULTS:
        assert action in seen, f"the run never injected {action}"
    assert server.restarts >= 3
    figures.update(
        backend="postgresql" if database.startswith("postgresql") else "sqlite",
        operations=OPERATIONS,
        items=len(journal),
        push_attempts=len(seen),
        distinct_batches=distinct_batches,
        faults=sum(1 for a in seen if a != "pass"),
        restarts=server.restarts,
        ops=done,
        write_s=round(wrote, 1),
        total_s=round(elapsed, 1),
    )
