"""Two SQL backends behind one tiny interface: embedded SQLite and PostgreSQL.

The replication server's storage logic (:mod:`sovseal.server.storage`) is written once against
:class:`Database`; only connection handling, placeholders and the per-project write lock differ.
SQLite needs no setup (one file, WAL, ``synchronous=FULL`` so a 2xx is never sent for a commit a
power cut could undo, ``secure_delete`` so what a redaction replaced does not linger in freed
space, see :meth:`Database.scrub`); PostgreSQL is for deployments that outgrow one machine and is chosen by
giving a ``postgresql://`` URL. Each thread gets its own connection, because the ASGI app runs
blocking database calls in a thread pool.
"""

from __future__ import annotations

import logging
import os
import sqlite3
import threading
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from ..errors import DatabaseUnavailableError
from ..paths import resolve_path

Row = tuple[Any, ...]
log = logging.getLogger("sovseal.server")


class Tx(ABC):
    """One open transaction (or an autocommit connection for single reads)."""

    @abstractmethod
    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]: ...

    @abstractmethod
    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None: ...

    @contextmanager
    def pipeline(self) -> Iterator[None]:
        """Statements inside need no results: PostgreSQL sends them in one round trip."""
        yield


class Database(ABC):
    backend: str

    def __init__(self) -> None:
        self._local = threading.local()
        self._all: list[Any] = []
        self._guard = threading.Lock()

    @abstractmethod
    def _connect(self) -> Any: ...

    def _conn(self) -> Any:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._connect()
            self._local.conn = conn
            with self._guard:
                self._all.append(conn)
        return conn

    @abstractmethod
    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        """A write transaction: committed on normal exit, rolled back on an exception."""

    @abstractmethod
    @contextmanager
    def reader(self) -> Iterator[Tx]:
        """A connection for reads that need no transaction."""

    def scrub(self) -> bool:
        """Best effort, after a redaction committed: make the bytes it replaced leave the database's files.

        Returns True when nothing more can be done now; False asks to be called again later.
        """
        return True

    def close(self) -> None:
        with self._guard:
            conns, self._all = self._all, []
        for conn in conns:
            try:
                conn.close()
            except Exception:  # closing is best effort at shutdown
                log.debug("closing a database connection failed", exc_info=True)
        self._local = threading.local()


class _SqliteTx(Tx):
    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        return self._conn.execute(sql, tuple(params)).fetchall()

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            self._conn.executemany(sql, [tuple(r) for r in rows])


class SqliteDatabase(Database):
    backend = "sqlite"

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        if not path.parent.exists():
            path.parent.mkdir(parents=True, mode=0o700)  # hashed keys and ciphertext: keep them private
        if not path.exists():
            os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o600))

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30.0)
        conn.execute("PRAGMA journal_mode=WAL")
        conn.execute("PRAGMA synchronous=FULL")  # the commit is on disk before the 2xx goes out
        conn.execute("PRAGMA busy_timeout=30000")
        # Freed space (an UPDATE's old cell, an overflow page put on the freelist) is overwritten
        # with zeros: a redacted body leaves no copy in the file (docs/replication.md, "What is
        # left of a replaced body").
        conn.execute("PRAGMA secure_delete=ON")
        return conn

    def scrub(self) -> bool:
        """Checkpoint the WAL into the file and truncate it: older WAL frames still hold pages from
        before the redaction, and a checkpoint that only resets the WAL would leave them in it.

        A reader that holds an older snapshot makes the checkpoint stop short (SQLite says busy):
        then False, and the server tries again after a later write.
        """
        conn = self._conn()
        conn.execute("PRAGMA busy_timeout=1000")  # a push waits for this: not the 30 s a transaction may wait
        try:
            busy, _log, _done = conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        finally:
            conn.execute("PRAGMA busy_timeout=30000")
        return not busy

    def vacuum(self) -> None:
        """Rewrite the whole file (once, when a database made before ``secure_delete`` is upgraded:
        pages freed back then were not zeroed), then truncate the WAL."""
        self._conn().execute("VACUUM")
        self.scrub()

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        conn = self._conn()
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield _SqliteTx(conn)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")

    @contextmanager
    def reader(self) -> Iterator[Tx]:
        yield _SqliteTx(self._conn())


class _PgTx(Tx):
    def __init__(self, conn: Any) -> None:
        self._conn = conn

    def execute(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        cur = self._conn.execute(sql.replace("?", "%s"), tuple(params))
        return cur.fetchall() if cur.description is not None else []

    def executemany(self, sql: str, rows: Sequence[Sequence[Any]]) -> None:
        if rows:
            with self._conn.cursor() as cur:
                cur.executemany(sql.replace("?", "%s"), [tuple(r) for r in rows])

    @contextmanager
    def pipeline(self) -> Iterator[None]:
        with self._conn.pipeline():
            yield


def _where(url: str) -> str:
    """``role@host:port/dbname`` of a postgresql:// URL: everything a user needs, and no password."""
    from psycopg.conninfo import conninfo_to_dict

    try:
        info = conninfo_to_dict(url)
    except Exception:  # noqa: BLE001 - a URL psycopg cannot parse is still worth naming without its secret
        return "(an unparsable URL)"
    return f"{info.get('user', '?')}@{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '?')}"


class PostgresDatabase(Database):
    backend = "postgresql"

    def __init__(self, url: str) -> None:
        super().__init__()
        import psycopg  # imported here: SQLite-only deployments never load the driver

        self._psycopg = psycopg
        self.url = url
        self._vacuum_thread: threading.Thread | None = None
        self._vacuum_again = False
        self._may_vacuum: bool | None = None  # does this role own the tables (None: not asked yet)

    def scrub(self) -> bool:
        """``VACUUM items, held`` in the background, when this role owns them (else autovacuum's job).

        An UPDATE leaves the old row version (a dead tuple, the replaced body with it) in the table
        until VACUUM removes it. Plain VACUUM takes no lock that stops pushes or pulls; it frees the
        space for reuse, but bytes can stay in a page's free space until overwritten, and in WAL
        segments and backups: only ``VACUUM FULL`` (the owner's, locking the table) rewrites the
        files (docs/replication.md, "What is left of a replaced body"). Redactions that arrive
        while one runs share the next.
        """
        with self._guard:
            self._vacuum_again = True
            if self._vacuum_thread is None:
                self._vacuum_thread = threading.Thread(target=self._vacuum_loop, name="sovseal-vacuum", daemon=True)
                self._vacuum_thread.start()
        return True

    def _vacuum_loop(self) -> None:
        while True:
            with self._guard:
                if not self._vacuum_again:
                    self._vacuum_thread = None
                    return
                self._vacuum_again = False
            try:
                self.vacuum()
            except Exception:  # best effort: the redaction is committed, autovacuum comes anyway
                log.warning("VACUUM after a redaction failed; autovacuum will remove the old row versions", exc_info=True)

    def vacuum(self) -> bool:
        """``VACUUM items, held`` now, on a connection of its own; False when this role does not own them."""
        if self._may_vacuum is False:
            return False
        with self._psycopg.connect(self.url, autocommit=True) as conn:
            if self._may_vacuum is None:
                row = conn.execute(
                    "SELECT bool_and(pg_has_role(current_user, relowner, 'USAGE')) FROM pg_class "
                    "WHERE oid IN ('items'::regclass, 'held'::regclass)"
                ).fetchone()
                self._may_vacuum = bool(row and row[0])
                if not self._may_vacuum:
                    log.info(
                        "this role does not own the tables, so it cannot VACUUM after a redaction: autovacuum removes the "
                        "replaced bodies' old row versions; run VACUUM FULL items, held as the owner to rewrite the files"
                    )
                    return False
            conn.execute("VACUUM items, held")
        return True

    def close(self) -> None:
        with self._guard:
            thread = self._vacuum_thread
        if thread is not None:
            thread.join(timeout=30)  # a VACUUM in progress: let it finish rather than leave it to the process's end
        super().close()

    def _connect(self) -> Any:
        try:
            return self._psycopg.connect(self.url, autocommit=True)
        except self._psycopg.OperationalError as exc:
            raise DatabaseUnavailableError(
                f"cannot connect to the PostgreSQL database {_where(self.url)}: {' '.join(str(exc).split())[:300]}. "
                "Start it, or fix --database / SOVSEAL_SERVER_DATABASE, then start the server again"
            ) from None

    def _live(self) -> Any:
        """This thread's connection, replaced if the server closed it (restart, idle timeout)."""
        conn = self._conn()
        if conn.closed or conn.broken:
            self._local.conn = None
            conn = self._conn()
        return conn

    @contextmanager
    def transaction(self) -> Iterator[Tx]:
        conn = self._live()
        with conn.transaction():
            yield _PgTx(conn)

    @contextmanager
    def reader(self) -> Iterator[Tx]:
        yield _PgTx(self._live())

    def encrypt_password(self, role: str, password: str) -> str:
        """The SCRAM verifier of ``password``, computed by libpq here, so the clear text is never sent or logged."""
        conn = self._live()
        return bytes(conn.pgconn.encrypt_password(password.encode(), role.encode(), b"scram-sha-256")).decode("ascii")


def open_database(url: str | Path) -> Database:
    """``postgresql://…`` (or ``postgres://``) opens PostgreSQL; ``sqlite:///path`` or a plain path opens SQLite."""
    text = str(url)
    if text.startswith(("postgresql://", "postgres://")):
        return PostgresDatabase(text)
    if text.startswith("sqlite:///"):
        return SqliteDatabase(resolve_path(text[len("sqlite:///") :]))  # sqlite:////abs/path or sqlite:///relative
    if "://" in text:
        raise ValueError(f"unsupported database URL {text!r}: use postgresql://… or sqlite:///path or a file path")
    return SqliteDatabase(resolve_path(text))
