"""Devices that write the same branches converge (issue #19), against a real ``sovseal serve``.

A seeded simulation: several devices with one key store, delete, reinforce, fork and roll back,
push and pull in random order, some of them offline for a while or restarted with unsent items in
their outbox (closed without draining: the outbox goes out after the reopen), and, in a test of its
own, a device that is a real process SIGKILLed while it writes and pushes. Once every device has pushed
and pulled everything, every device must hold, branch by branch, the same state, the same heads
and the same ``log()`` (ids, parents, seq, operation, path and time), and no acknowledged write
may be missing from the log of a branch that nobody rolled back. A Hypothesis state machine does
the same with shrinking. ``bench/bench_convergence.py`` runs the long soak.
"""

from __future__ import annotations

import dataclasses
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sovseal import Sovseal
from sovseal.server import ServerThread
from tests.replication.conftest import FAST, open_mem

NO_DRAIN = dataclasses.replace(FAST, drain_on_close=0)  # a close leaves the outbox for the next open

PATHS = ["user.editor", "user.shell", "note.a", "note.b", "note.c"]
VALUES = ["neovim", "helix", "fish", "zsh", "x"]  # few values: devices often store the very same entry


@dataclass
class Device:
    path: Path
    mem: Sovseal
    branch: str = "main"
    online: bool = True


@dataclass
class World:
    """The devices, the server they share, and what was acknowledged to whom."""

    root: Path
    key: bytes
    url: str
    api: str
    devices: list[Device] = field(default_factory=list)
    acked: list[tuple[str, str, str]] = field(default_factory=list)  # (branch, path, snapshot id)
    rolled_back: set[str] = field(default_factory=set)  # branches some device rolled back
    forks: int = 0

    def add(self, n: int) -> None:
        for i in range(n):
            path = self.root / f"device-{len(self.devices) + i}"
            self.devices.append(Device(path, self.open(path)))

    def open(self, path: Path) -> Sovseal:
        return open_mem(path, self.key, self.url, self.api, replication_config=NO_DRAIN)

    def handle(self, d: Device) -> Sovseal:
        return d.mem if d.branch == d.mem.branch else d.mem.view(d.branch)

    # -- operations -------------------------------------------------------------------------

    def store(self, d: Device, rng: random.Random) -> None:
        path, value = rng.choice(PATHS), rng.choice(VALUES)
        result = self.handle(d).store(path, value)
        if not result.reinforced:
            self.acked.append((d.branch, path, result.snapshot_id))

    def delete(self, d: Device, rng: random.Random) -> None:
        path = rng.choice(PATHS)
        result = self.handle(d).delete(path)
        if result is not None:
            self.acked.append((d.branch, path, result.snapshot_id))

    def fork(self, d: Device, rng: random.Random) -> None:
        head = self.handle(d).snapshot()
        name = f"fork-{rng.randrange(2)}"  # two devices often fork the same name
        if name in d.mem.branches():
            d.branch = name
            return
        d.mem.view(d.branch).fork(head, branch=name)
        d.branch = name

    def rollback(self, d: Device, rng: random.Random) -> None:
        log = self.handle(d).log()
        if len(log) > 1:
            self.handle(d).rollback(rng.choice(log[1:]).snapshot_id)
            self.rolled_back.add(d.branch)

    def sync(self, d: Device) -> None:
        if d.online:
            assert d.mem.replication is not None and d.mem.replication.flush(30)
            d.mem.pull()

    def restart(self, d: Device) -> None:
        d.mem.close()
        d.mem = self.open(d.path)

    # -- the end ----------------------------------------------------------------------------

    def settle(self) -> None:
        """Every device online, pushing and pulling until a whole round brings nothing new."""
        for d in self.devices:
            d.online = True
        for _ in range(4):
            for d in self.devices:
                self.sync(d)
        for d in self.devices:
            self.sync(d)

    def observed(self, d: Device) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for branch in sorted(d.mem.branches()):
            view = d.mem.view(branch)
            out[branch] = {
                "state": view.state(),
                "heads": d.mem.status().heads[branch],
                "log": [(e.snapshot_id, e.parent_id, e.seq, e.op, e.path, e.created_at) for e in view.log()],
            }
        return out

    def check(self) -> dict[str, Any]:
        self.settle()
        first, *rest = [self.observed(d) for d in self.devices]
        for n, other in enumerate(rest, 1):
            assert other == first, f"device {n} differs from device 0"
        for branch, path, sid in self.acked:
            if branch in self.rolled_back:
                continue
            log = [e[0] for e in first[branch]["log"]]
            assert sid in log, f"an acknowledged write of {path} on {branch} vanished"
        for seen in first.values():
            latest: dict[str, str] = {}
            for _, _, _, op, path, _ in seen["log"]:
                latest.setdefault(path, op)
            assert set(seen["state"]) == {p for p, op in latest.items() if op == "store"}
        return first

    def close(self) -> None:
        for d in self.devices:
            d.mem.close()


@pytest.fixture
def world(tmp_path: Path, key: bytes, database: str) -> Iterator[World]:
    with ServerThread(database) as server:
        w = World(tmp_path, key, server.url, server.storage.create_api_key())
        try:
            yield w
        finally:
            w.close()


def _simulate(world: World, seed: int, devices: int, steps: int) -> dict[str, Any]:
    rng = random.Random(seed)
    world.add(devices)
    for _ in range(steps):
        d = rng.choice(world.devices)
        roll = rng.random()
        if roll < 0.40:
            world.store(d, rng)
        elif roll < 0.50:
            world.delete(d, rng)
        elif roll < 0.55:
            world.fork(d, rng)
        elif roll < 0.58:
            world.rollback(d, rng)
        elif roll < 0.62:
            d.branch = "main"
        elif roll < 0.85:
            world.sync(d)
        elif roll < 0.93:
            d.online = not d.online  # a partition: it keeps writing, offline
        else:
            world.restart(d)
    return world.check()


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_five_devices_converge_and_lose_no_acknowledged_write(world: World, seed: int) -> None:
    final = _simulate(world, seed, devices=5, steps=120)
    assert final["main"]["log"]  # the simulation did write
    assert sum(len(b["log"]) for b in final.values()) > 20


def test_concurrent_writes_on_one_path_are_resolved_alike_and_listed_as_conflicts(world: World) -> None:
    world.add(2)
    a, b = (d.mem for d in world.devices)
    a.store("base", "0")
    world.sync(world.devices[0])
    world.sync(world.devices[1])
    first = a.store("user.editor", "vim")
    second = b.store("user.editor", "emacs")
    b.delete("base")
    a.store("base", "1")  # a write after the other device's delete, concurrent with it
    conflicts: list[Any] = []
    b.on("conflict", conflicts.append)
    for _ in range(2):
        for d in world.devices:
            world.sync(d)
    assert a.state() == b.state()
    assert a.status().heads["main"] == b.status().heads["main"] and len(a.status().heads["main"]) == 2
    found = {c.path: c for c in a.conflicts()}
    assert set(found) == {"user.editor", "base"}
    editor = found["user.editor"]
    assert {v.snapshot_id for v in editor.versions} == {first.snapshot_id, second.snapshot_id}
    assert a.state()["user.editor"] == next(v.payload for v in editor.versions if v.snapshot_id == editor.chosen)
    assert {c.path for c in conflicts} == {"user.editor", "base"}
    merged = b.store("after", "merge")  # the next local write merges the heads
    assert len(b.log(limit=1)[0].parent_id.split(",")) == 2 and merged.snapshot_id
    for d in [world.devices[1], world.devices[0]]:
        world.sync(d)
    assert a.status().heads["main"] == b.status().heads["main"] == [merged.snapshot_id]
    assert a.conflicts() == b.conflicts() == []
    assert a.state() == b.state()


class Devices(RuleBasedStateMachine):
    """Three devices, random stores, deletes and syncs; every sync checks nothing diverged for good."""

    world: World

    def __init__(self) -> None:
        super().__init__()
        self.world.add(3)

    @rule(d=st.integers(0, 2), path=st.sampled_from(PATHS), value=st.sampled_from(VALUES))
    def store(self, d: int, path: str, value: str) -> None:
        result = self.world.devices[d].mem.store(path, value)
        if not result.reinforced:
            self.world.acked.append(("main", path, result.snapshot_id))

    @rule(d=st.integers(0, 2), path=st.sampled_from(PATHS))
    def delete(self, d: int, path: str) -> None:
        result = self.world.devices[d].mem.delete(path)
        if result is not None:
            self.world.acked.append(("main", path, result.snapshot_id))

    @rule(d=st.integers(0, 2))
    def sync(self, d: int) -> None:
        self.world.sync(self.world.devices[d])

    @precondition(lambda self: len(self.world.acked) > 3)
    @invariant()
    def heads_are_few(self) -> None:
        for d in self.world.devices:
            assert 1 <= len(d.mem.status().heads["main"]) <= 4

    def teardown(self) -> None:
        try:
            self.world.check()
        finally:
            self.world.close()


def test_a_hypothesis_state_machine_of_three_devices_converges(tmp_path: Path, sqlite_database: str) -> None:
    with ServerThread(sqlite_database) as server:
        runs = iter(range(1000))

        class Machine(Devices):
            def __init__(self) -> None:
                # Each example is a project of its own (its own key and API key): examples must not
                # pull the devices of the examples before them.
                self.world = World(tmp_path / f"run-{next(runs)}", os.urandom(32), server.url, server.storage.create_api_key())
                super().__init__()

        run = settings(max_examples=6, stateful_step_count=25, deadline=None, suppress_health_check=list(HealthCheck))(Machine)
        run.TestCase().runTest()


KILLED_WRITER = """
import sys
from sovseal import Sovseal
from tests.fakes import fake_embed
from tests.replication.conftest import FAST
path, key, url, api = sys.argv[1], bytes.fromhex(sys.argv[2]), sys.argv[3], sys.argv[4]
mem = Sovseal(path, key=key, embedder=fake_embed, endpoint=url, api_key=api, replication_config=FAST)
print("ready", flush=True)
for i in range(100_000):
    result = mem.store(f"note.{i % 7}", f"from the killed device, write {i}")
    print(result.snapshot_id, flush=True)  # acknowledged: store() returned
"""


@pytest.mark.parametrize("kill_after", [3, 60])
def test_a_device_sigkilled_while_writing_and_syncing_converges_after_it_restarts(
    tmp_path: Path, key: bytes, server_thread: ServerThread, kill_after: int
) -> None:
    """A real process writes one branch (its worker pushing as it goes) while another device writes
    the same paths; it is SIGKILLed mid-burst, reopened, and after a sync both devices agree and
    hold every write the killed one acknowledged."""
    import os
    import signal
    import subprocess
    import sys

    api = server_thread.storage.create_api_key()
    world = World(tmp_path, key, server_thread.url, api)
    world.add(1)
    other = world.devices[0]
    root = Path(__file__).resolve().parents[2]
    store = tmp_path / "killed"
    child = subprocess.Popen(
        [sys.executable, "-c", KILLED_WRITER, str(store), key.hex(), server_thread.url, api],
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(root)},
        cwd=root,
    )
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        acknowledged = []
        for i in range(kill_after):
            acknowledged.append(child.stdout.readline().strip())
            if i % 10 == 0:
                other.mem.store(f"note.{i % 7}", f"from the other device, write {i}")
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait()
    acknowledged += [line.strip() for line in child.stdout.read().splitlines() if line.strip()]
    try:
        world.devices.append(Device(store, world.open(store)))
        world.acked += [("main", "note", sid) for sid in acknowledged]
        final = world.check()
        assert set(acknowledged) <= {entry[0] for entry in final["main"]["log"]}
    finally:
        world.close()


@pytest.fixture
def server_thread(sqlite_database: str) -> Iterator[ServerThread]:
    with ServerThread(sqlite_database) as srv:
        yield srv
