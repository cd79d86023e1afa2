"""Group commit: saver writes queued behind a write in progress share its successor's fsync, each is
durable when its call returns, and one write's failure is its own."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.sovseal import SovsealSaver
from langgraph.checkpoint.sovseal._group import GroupCommit

from .checkpoints import put
from .graphs import loop_graph

WAIT = 10.0


def _until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + WAIT
    while not condition():
        assert time.monotonic() < deadline, "the writers did not queue up"
        time.sleep(0.005)


def test_writes_queued_behind_a_slow_fsync_share_the_next_one(saver_dir: Path, key: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    with SovsealSaver.open(saver_dir, key=key) as saver:
        config = put(saver, "t", n=1)
        saver.put_writes(config, [("ch", "warm")], "warm")  # the writes branch exists: what follows is writes alone
        real_fsync = os.fsync
        synced: list[int] = []
        in_fsync, release = threading.Event(), threading.Event()

        def held(fd: int) -> None:  # the first fsync waits until the others have queued behind it
            synced.append(fd)
            if len(synced) == 1:
                in_fsync.set()
                release.wait(WAIT)
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", held)
        errors: list[BaseException] = []

        def write(task: str) -> None:
            try:
                saver.put_writes(config, [("ch", f"from {task}")], task)
            except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
                errors.append(exc)

        first = threading.Thread(target=write, args=("task-0",))
        first.start()
        assert in_fsync.wait(WAIT)
        queued = [threading.Thread(target=write, args=(f"task-{i}",)) for i in range(1, 7)]
        for thread in queued:
            thread.start()
        _until(lambda: len(saver._group._queue) == 6)
        release.set()
        for thread in [first, *queued]:
            thread.join(WAIT)
        monkeypatch.undo()
        assert errors == []
        assert len(synced) == 2, f"7 writes: the first's fsync and one for the 6 queued behind it, got {len(synced)}"
    with SovsealSaver.open(saver_dir, key=key) as again:
        found = again.get_tuple({"configurable": {"thread_id": "t"}})
        assert found is not None
        assert sorted(v for _, _, v in found.pending_writes) == sorted(["warm"] + [f"from task-{i}" for i in range(7)])


class _Batch:
    """Stands in for ``Sovseal.batch`` (the saver test above uses the real one): counts batches and
    raises ``fail`` when one ends or ``refuse`` when one starts."""

    def __init__(self, fail: BaseException | None = None, refuse: BaseException | None = None) -> None:
        self.count = 0
        self.fail, self.refuse = fail, refuse

    @contextmanager
    def __call__(self) -> Iterator[None]:
        if self.refuse is not None:
            raise self.refuse
        self.count += 1
        yield
        if self.fail is not None:
            raise self.fail


def _run(group: GroupCommit, later: list[Callable[[], object]]) -> list[object]:
    """A first write holds the lock until ``later`` have queued; every write's value or exception, in order."""
    started, gate = threading.Event(), threading.Event()

    def first() -> object:
        started.set()
        gate.wait(WAIT)
        return "first"

    works = [first, *later]
    outcomes: list[object] = [None] * len(works)

    def call(i: int) -> None:
        try:
            outcomes[i] = group.run(works[i])
        except BaseException as exc:  # noqa: BLE001 - compared by the tests
            outcomes[i] = exc

    threads = [threading.Thread(target=call, args=(i,)) for i in range(len(works))]
    threads[0].start()
    assert started.wait(WAIT)
    for thread in threads[1:]:
        thread.start()
    _until(lambda: len(group._queue) == len(later))
    gate.set()
    for thread in threads:
        thread.join(WAIT)
    return outcomes


def test_the_leader_makes_the_writes_queued_meanwhile_in_its_batch_and_a_failing_one_fails_alone() -> None:
    batch = _Batch()
    boom = ValueError("this write is refused")

    def refused() -> object:
        raise boom

    outcomes = _run(GroupCommit(threading.RLock(), batch), [lambda: 1, refused, lambda: 3])
    assert outcomes == ["first", 1, boom, 3]
    assert batch.count == 1


def test_when_the_batch_fsync_fails_every_write_in_it_fails() -> None:
    lost = OSError("the fsync failed")
    outcomes = _run(GroupCommit(threading.RLock(), _Batch(fail=lost)), [lambda: 1, lambda: 2])
    assert outcomes == [lost, lost, lost]


def test_a_batch_that_cannot_start_fails_the_write_that_tried_and_the_rest_try_again() -> None:
    batch = _Batch(refuse=RuntimeError("closed"))
    group = GroupCommit(threading.RLock(), batch)
    with pytest.raises(RuntimeError, match="closed"):
        group.run(lambda: 1)
    assert not group._queue  # nothing left behind for a later leader
    batch.refuse = None
    assert group.run(lambda: 2) == 2


def test_concurrent_conversations_on_one_saver_match_the_in_memory_saver(saver_dir: Path, key: bytes) -> None:
    """A server's worth of users: eight threads, each running its own conversation through one saver at
    once, so writes of different threads share groups. Every thread's state and whole history after a
    restart are what LangGraph's InMemorySaver holds for the same runs."""
    from langgraph.checkpoint.memory import InMemorySaver

    def graph(checkpointer: object) -> Any:
        return loop_graph(12).compile(checkpointer=checkpointer)  # type: ignore[arg-type]

    def converse(app: Any, user: int) -> None:
        for turn in range(3):
            app.invoke({"count": 0, "log": [f"user {user} turn {turn}"]}, {"configurable": {"thread_id": f"user-{user}"}})

    def run_all(app: Any) -> None:
        threads = [threading.Thread(target=converse, args=(app, user)) for user in range(8)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)

    reference = graph(InMemorySaver())
    run_all(reference)
    with SovsealSaver.open(saver_dir, key=key) as saver:
        run_all(graph(saver))
    with SovsealSaver.open(saver_dir, key=key) as again:
        app = graph(again)
        for user in range(8):
            config = {"configurable": {"thread_id": f"user-{user}"}}
            assert app.get_state(config).values == reference.get_state(config).values
            ours = [(s.values, s.next, s.metadata.get("step")) for s in app.get_state_history(config)]  # type: ignore[union-attr]
            theirs = [(s.values, s.next, s.metadata.get("step")) for s in reference.get_state_history(config)]  # type: ignore[union-attr]
            assert ours == theirs and len(ours) > 30
