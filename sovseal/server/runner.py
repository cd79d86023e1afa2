"""Running the server: ``sovseal serve`` in the foreground, or a thread for tests and benchmarks.

:class:`ServerThread` runs the real uvicorn server on loopback inside the calling process. It
can be handed a socket that is bound but not yet listening, so a test can give a client the
address first (connections are refused: the server is "down") and start serving later without
any race for the port.
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import uvicorn

from .app import Limits, create_app
from .db import open_database
from .storage import Storage

DEFAULT_DATABASE_ENV = "SOVSEAL_SERVER_DATABASE"


def default_database() -> str:
    """``$SOVSEAL_SERVER_DATABASE``, else ``~/.sovseal-server/replication.sqlite3``."""
    return os.environ.get(DEFAULT_DATABASE_ENV) or str(Path.home() / ".sovseal-server" / "replication.sqlite3")


def open_storage(database: str | Path | None = None) -> Storage:
    """Storage over a database URL or SQLite path, schema created if missing."""
    storage = Storage(open_database(database or default_database()))
    storage.migrate()
    return storage


def serve(database: str | None, host: str, port: int, limits: Limits | None = None, log_level: str = "info") -> None:
    """Serve until interrupted (what ``sovseal serve`` runs)."""
    app = create_app(open_storage(database), limits)
    uvicorn.run(app, host=host, port=port, log_level=log_level, server_header=False, proxy_headers=False)


def reserve_port(host: str = "127.0.0.1") -> socket.socket:
    """A socket bound to a free loopback port and not listening: connections to it are refused until served."""
    # proto=IPPROTO_TCP matters: asyncio sets TCP_NODELAY only on sockets that say they are TCP, and
    # without it Nagle + delayed ACKs add ~40 ms to every response.
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    return sock


class ServerThread:
    """The real server (uvicorn + the app) in a background thread, on a loopback socket."""

    def __init__(self, database: str | Path, *, limits: Limits | None = None, sock: socket.socket | None = None) -> None:
        self.storage = open_storage(database)
        self.app = create_app(self.storage, limits)
        self.sock = sock or reserve_port()
        host, port = self.sock.getsockname()[:2]
        self.url = f"http://{host}:{port}"
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 10.0) -> ServerThread:
        config = uvicorn.Config(self.app, log_level="warning", lifespan="on", server_header=False, timeout_graceful_shutdown=2)
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self.sock]}, daemon=True, name="sovseal-server")
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("the replication server did not start")
            time.sleep(0.01)
        return self

    def stop(self) -> None:
        if self._server is not None and self._thread is not None:
            self._server.should_exit = True
            self._thread.join(timeout=10)
        self._server = self._thread = None
        self.sock.close()

    def __enter__(self) -> ServerThread:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
