"""Continuous sync: pull every few seconds in the background (``sync_interval=``).

The write-behind worker already pushes as soon as it can; this thread is the other half, so that
a device sees what other devices wrote without calling ``pull()`` itself. A failed pull is
logged and retried at the next tick: the worker's own backoff and the pull's bounds apply.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from .. import settings

log = logging.getLogger(__name__)

ENV_SYNC_INTERVAL = settings.SYNC_INTERVAL.name


class PeriodicPull:
    """Call ``pull`` every ``interval`` seconds on a daemon thread until :meth:`close`."""

    def __init__(self, pull: Callable[[], object], interval: float) -> None:
        if not interval > 0:
            raise ValueError(f"sync_interval must be a positive number of seconds, got {interval!r}")
        self.interval = interval
        self.last_error: str | None = None
        self._pull = pull
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="sovseal-sync", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self._pull()
                self.last_error = None
            except Exception as exc:  # noqa: BLE001 - the next tick retries; status() shows the error
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("background pull failed, will retry in %s s: %s", self.interval, exc)

    def close(self) -> None:
        self._stop.set()
        if threading.current_thread() is not self._thread:
            self._thread.join()
