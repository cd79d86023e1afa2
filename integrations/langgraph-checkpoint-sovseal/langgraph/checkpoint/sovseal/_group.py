"""Group commit: saver writes that queue up behind one another share one fsync.

LangGraph saves in the background: while ``put`` of one step waits on the disk, ``put_writes`` of
the next task arrives and queues on the saver's lock. Each used to pay an fsync of its own. Now
the thread that takes the lock (the leader) makes every write queued by then, and any that arrive
while it works, inside one ``Sovseal.batch()``, whose single fsync makes them all durable at once;
each caller returns only after that fsync, so every write is still durable before its call returns.
The lock is held until then, so no reader sees a write before it is durable.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Generic, TypeVar

_T = TypeVar("_T")

#: Writes one leader makes before its fsync: bounds how long the first of them waits.
MAX_GROUP = 32


class _Write(Generic[_T]):
    """One queued write: its work, then its outcome."""

    __slots__ = ("done", "error", "value", "work")

    def __init__(self, work: Callable[[], _T]) -> None:
        self.work = work
        self.done = False
        self.value: _T | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.value = self.work()
        except BaseException as exc:  # noqa: BLE001 - its caller re-raises it; the group's other writes go on
            self.error = exc

    def outcome(self) -> _T:
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]


class GroupCommit:
    """Run writes under ``lock``, several per ``batch()`` (one fsync) when they queue up."""

    def __init__(self, lock: threading.RLock, batch: Callable[[], AbstractContextManager[None]]) -> None:
        self._lock = lock
        self._batch = batch
        self._queue: deque[_Write[object]] = deque()

    def run(self, work: Callable[[], _T]) -> _T:
        """``work()`` under the lock, durable when this returns; its value, or its exception."""
        write: _Write[_T] = _Write(work)
        self._queue.append(write)  # type: ignore[arg-type]
        with self._lock:
            while not write.done:  # a leader may have taken it meanwhile; else lead a group
                self._lead(write)
        return write.outcome()

    def _lead(self, own: _Write[_T]) -> None:
        group: list[_Write[object]] = []
        try:
            with self._batch():
                for write in self._drain():
                    group.append(write)
                    write.run()
        except BaseException as exc:  # noqa: BLE001 - re-raised by each caller: none of the group is durable
            for write in group:
                write.error = exc
            if not own.done and own not in group:
                own.error, own.done = exc, True  # type: ignore[assignment]
                self._queue.remove(own)  # type: ignore[arg-type]
        finally:
            for write in group:
                write.done = True

    def _drain(self) -> Iterator[_Write[object]]:
        """The queued writes, oldest first, including ones queued while earlier ones run (at most MAX_GROUP)."""
        for _ in range(MAX_GROUP):
            try:
                yield self._queue.popleft()
            except IndexError:
                return
