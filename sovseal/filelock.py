"""Cross-process locks: ``flock`` on a file in the store directory. The one place sovseal takes a
file lock (tests/core/test_one_owner.py): the store's writer lock and consolidation's run lock.

Hand-written rather than the ``filelock`` package: that one costs about 0.5 ms per acquire
(measured here, version 4.2), half of sovseal's whole store budget; a held fd with
``fcntl.flock`` costs microseconds. The lock is per open file description, so two handles in
one process exclude each other just as two processes do.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .errors import LockTimeoutError


class WriterLock:
    """An inter-process lock (``flock`` on ``path``), reentrant: a store's batch holds its writer lock
    across writes that take it again, and only the outermost release lets it go. One object is used
    by one thread at a time (a store's under the store's mutex, the others made per use), so the
    depth needs no lock of its own."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path = path
        self.timeout = timeout
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        self._depth = 0

    def acquire(self) -> None:
        """Take the lock, polling with backoff until ``timeout``; then raise LockTimeoutError."""
        if self._depth:
            self._depth += 1
            return
        self._take()
        self._depth = 1

    def try_acquire(self) -> bool:
        """Take the lock if it is free, without waiting; False if another holder has it.

        For a job that must not queue behind another (one consolidation at a time): the caller
        refuses at once with its own advice instead of waiting ``timeout``.
        """
        if self._depth:
            self._depth += 1
            return True
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return False
        self._depth = 1
        return True

    def _take(self) -> None:
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # the usual case: free, no clock read
            return
        except BlockingIOError:
            pass
        deadline = time.monotonic() + self.timeout
        pause = 0.0005
        while True:
            try:
                fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise LockTimeoutError(
                        f"another writer held the lock on {self.path.parent} for more than {self.timeout} s. "
                        "Retry, raise lock_timeout, or stop the other process."
                    ) from None
                time.sleep(pause)
                pause = min(pause * 2, 0.05)

    def release(self) -> None:
        self._depth -= 1
        if self._depth == 0:
            fcntl.flock(self._fd, fcntl.LOCK_UN)

    def close(self) -> None:
        """Close the file, which lets go of the lock if it is held (so does the process dying)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


class Exclusive:
    """``with``: take ``mutex``, then the file ``lock``, then call ``then()``; release in reverse.

    What every write of a store holds (the in-process mutex, the writer lock, catching up with
    other writers first). A class rather than a generator-based context manager: it is entered on
    every append, where a generator's setup and teardown cost more than the two locks. A failure
    while taking it (a lock timeout, ``then()`` raising) leaves nothing held.
    """

    __slots__ = ("_lock", "_mutex", "_then")

    def __init__(self, mutex: Any, lock: WriterLock, then: Callable[[], object]) -> None:
        self._mutex = mutex
        self._lock = lock
        self._then = then

    def __enter__(self) -> None:
        self._mutex.acquire()
        try:
            self._lock.acquire()
            try:
                self._then()
            except BaseException:
                self._lock.release()
                raise
        except BaseException:
            self._mutex.release()
            raise

    def __exit__(self, *exc: object) -> None:
        try:
            self._lock.release()
        finally:
            self._mutex.release()
