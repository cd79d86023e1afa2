"""Shared pieces of the network half of the reliability suite: sizes, a restartable server, figures.

The sizes follow ``SOVSEAL_SOAK=1`` (read here directly, so these files need nothing else to
switch): the normal mode is a regression check that fits the test command, the soak widens the
same scenarios. Everything runs on loopback against the real server.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from sovseal.server import ServerThread

SOAK = os.environ.get("SOVSEAL_SOAK", "").strip() not in ("", "0")


def size(normal: int, soak: int) -> int:
    """``normal`` in the test command, ``soak`` under ``SOVSEAL_SOAK=1``."""
    return soak if SOAK else normal


@contextmanager
def memory_dir(fallback: Path) -> Iterator[Path]:
    """A scratch directory in RAM (``/dev/shm``) when there is one, else ``fallback``.

    For scenarios about the network: the stores and the server database still fsync, but on
    tmpfs an fsync costs nothing, so thousands of batches fit the test command. Durability on a
    real disk is the durability audit's subject, not these scenarios'.
    """
    shm = Path("/dev/shm")
    if not (shm.is_dir() and os.access(shm, os.W_OK)):
        fallback.mkdir(parents=True, exist_ok=True)
        yield fallback
        return
    path = Path(tempfile.mkdtemp(prefix="sovseal-net-", dir=shm))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def percentile(samples: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0..1) by nearest rank: the value that many samples are at or below."""
    ordered = sorted(samples)
    if not ordered:
        return float("nan")
    rank = max(1, min(len(ordered), round(q * len(ordered) + 0.5)))
    return ordered[rank - 1]


class RestartableServer:
    """The real server (uvicorn + SQLite) that can be stopped and started again on the same port.

    A restart is a real shutdown: uvicorn stops, the database connections close, and for the
    ``down`` seconds in between connections to the port are refused. The next start reopens the
    same database file, as a restarted ``sovseal serve`` would.
    """

    def __init__(self, database: str | Path) -> None:
        self.database = str(database)
        self.restarts = 0
        self.server = ServerThread(self.database).start()
        host, port = self.server.sock.getsockname()[:2]
        self.host, self.port = str(host), int(port)
        self.url = self.server.url

    def restart(self, down: float = 0.05) -> None:
        self.server.stop()
        time.sleep(down)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        for _attempt in range(100):  # the port is ours; a closing socket may hold it for a moment
            try:
                sock.bind((self.host, self.port))
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError(f"could not rebind {self.host}:{self.port} for the restart")
        self.server = ServerThread(self.database, sock=sock).start()
        self.restarts += 1

    def stop(self) -> None:
        self.server.stop()
