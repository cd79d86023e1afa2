"""Running the server: ``sovseal serve`` in the foreground, or a thread for tests and benchmarks.

:class:`ServerThread` runs the real uvicorn server on loopback inside the calling process. It
can be handed a socket that is bound but not yet listening, so a test can give a client the
address first (connections are refused: the server is "down") and start serving later without
any race for the port. Both run uvicorn with the guarded h11 protocol of
:mod:`sovseal.server.connections` (header deadline, connection cap).
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .. import settings
from ..paths import resolve_path
from .app import create_app
from .db import PostgresDatabase, open_database
from .limits import Limits
from .schema import Role, Roles
from .storage import Storage

if TYPE_CHECKING:  # uvicorn loads only to serve: opening storage or creating an API key needs no web server
    import uvicorn

DEFAULT_DATABASE_ENV = settings.SERVER_DATABASE.name
#: PostgreSQL least privilege: pushes connect with this URL (the writer role), pulls with the next (the reader).
WRITER_URL_ENV = settings.SERVER_WRITER_URL.name
READER_URL_ENV = settings.SERVER_READER_URL.name
#: Connections the kernel queues for accept. asyncio accepts a whole queue in one burst, before
#: the connection cap sees any of them, so it must fit in the descriptors kept in reserve.
BACKLOG = 128
#: File descriptors kept out of reach of client connections: the database (SQLite opens three
#: per thread of the pool of 40, PostgreSQL one socket per thread and role), one accept burst
#: (BACKLOG), the listening socket, logs.
FD_RESERVE = 384

log = logging.getLogger("sovseal.server")


def default_database() -> str:
    """``$SOVSEAL_SERVER_DATABASE``, else ``~/.sovseal-server/replication.sqlite3``."""
    return settings.SERVER_DATABASE.given() or str(resolve_path(settings.SERVER_DATABASE.default))


def _role(url: str, what: str) -> Role:
    """The role (user and, if the URL holds one, password) a postgresql:// URL logs in as."""
    from psycopg.conninfo import conninfo_to_dict

    if not url.startswith(("postgresql://", "postgres://")):
        raise ValueError(f"the {what} URL must be a postgresql:// URL (least-privilege roles exist on PostgreSQL only)")
    info = conninfo_to_dict(url)
    if not info.get("user"):
        raise ValueError(f"the {what} URL must name its role: postgresql://<role>[:password]@host/db")
    password = info.get("password")
    return Role(str(info["user"]), str(password) if password is not None else None)


def open_storage(database: str | Path | None = None, *, writer: str | None = None, reader: str | None = None) -> Storage:
    """Storage over a database URL or SQLite path, schema created or upgraded if needed.

    With ``writer`` and ``reader`` (default: ``$SOVSEAL_SERVER_WRITER_URL`` and
    ``$SOVSEAL_SERVER_READER_URL``) the server runs on PostgreSQL under two roles: pushes and key
    changes connect as the writer, pulls and authorization look-ups as the reader. ``database``
    is then the *owner's* URL, used only to migrate and grant (and to set the roles' passwords when
    their URLs carry one); without it the schema must already be current.
    """
    writer = writer if writer is not None else settings.SERVER_WRITER_URL.get()
    reader = reader if reader is not None else settings.SERVER_READER_URL.get()
    if not writer and not reader:
        storage = Storage(open_database(database or default_database()))
        storage.migrate()
        return storage
    if not (writer and reader):
        raise ValueError(f"least privilege needs both roles: set {WRITER_URL_ENV} and {READER_URL_ENV} (or neither)")
    roles = Roles(reader=_role(reader, "reader"), writer=_role(writer, "writer"))
    owner_url = str(database) if database else settings.SERVER_DATABASE.given()
    if owner_url:
        owner = open_database(owner_url)
        try:
            if not isinstance(owner, PostgresDatabase):
                raise ValueError("with reader/writer roles, --database must be the owner's postgresql:// URL (or unset)")
            Storage(owner).migrate(roles)
        finally:
            owner.close()
    storage = Storage(open_database(writer), reader=open_database(reader), owner=False)
    try:
        storage.migrate()  # a check only: these roles cannot change the schema
    except BaseException:
        storage.close()
        raise
    return storage


def connection_cap(wanted: int) -> int:
    """``wanted``, lowered if needed to leave FD_RESERVE descriptors under the process's open-file limit.

    Past that limit every accept fails and asyncio logs a traceback for each attempt, while the
    database can no longer open a file: the cap keeps client connections from ever getting there.
    """
    try:
        import resource
    except ImportError:  # not a Unix: no descriptor limit to read
        return wanted
    soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY or wanted <= soft - FD_RESERVE:
        return wanted
    cap = max(1, soft - FD_RESERVE)
    log.info("at most %d connections (not %d): the open-file limit is %d and %d are kept for the database", cap, wanted, soft, FD_RESERVE)
    return cap


def _guarded(limits: Limits) -> dict[str, object]:
    """uvicorn options that bound what a connection may cost (see :mod:`sovseal.server.connections`)."""
    from .connections import guarded_protocol

    cap = connection_cap(limits.max_connections)
    return {"http": guarded_protocol(limits.header_timeout, cap), "backlog": BACKLOG, "server_header": False}


def serve(database: str | None, host: str, port: int, limits: Limits | None = None, log_level: str = "info") -> None:
    """Serve until interrupted (what ``sovseal serve`` runs); the role URLs and limits come from the environment."""
    import uvicorn

    limits = limits or Limits()
    app = create_app(open_storage(database), limits)
    uvicorn.run(app, host=host, port=port, log_level=log_level, proxy_headers=False, **_guarded(limits))  # type: ignore[arg-type]


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

    def __init__(
        self,
        database: str | Path | None,
        *,
        limits: Limits | None = None,
        sock: socket.socket | None = None,
        writer: str | None = None,
        reader: str | None = None,
    ) -> None:
        self.limits = limits or Limits()
        self.storage = open_storage(database, writer=writer, reader=reader)
        self.app = create_app(self.storage, self.limits)
        self.sock = sock or reserve_port()
        host, port = self.sock.getsockname()[:2]
        self.url = f"http://{host}:{port}"
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None

    def start(self, timeout: float = 10.0) -> ServerThread:
        import uvicorn

        config = uvicorn.Config(self.app, log_level="warning", lifespan="on", timeout_graceful_shutdown=2, **_guarded(self.limits))  # type: ignore[arg-type]
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
