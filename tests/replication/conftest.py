"""Fixtures for replication: the real server on loopback over real SQLite and real PostgreSQL.

PostgreSQL comes from Debian's ``postgresql`` package. The session starts its own cluster in a
temporary directory on a free loopback port (as the ``postgres`` user when running as root,
because postgres refuses to run as root) and stops it at the end; each test gets a fresh
database in it. Without the binaries the PostgreSQL tests are skipped on a developer's machine
and *fail* under CI (``CI`` set), so CI cannot pass by silently not testing the backend.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.replication import ReplicationConfig
from sovseal.server import ServerThread
from tests.fakes import fake_embed

#: Short timeouts and backoff so fault tests finish in seconds, same code paths as the defaults.
FAST = ReplicationConfig(
    linger=0.05,
    backoff_base=0.05,
    backoff_max=0.4,
    connect_timeout=1.0,
    request_timeout=5.0,
    poll_interval=0.02,
    drain_on_close=5.0,
)

INSTALL_HINT = "PostgreSQL server binaries not found; install them with: apt-get install -y postgresql"


def _pg_bindir() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    bindir = _pg_bindir()
    if bindir is None:
        if os.environ.get("CI"):
            pytest.fail(INSTALL_HINT)
        pytest.skip(INSTALL_HINT)
    root = os.geteuid() == 0
    prefix = ["runuser", "-u", "postgres", "--"] if root else []
    tmp = Path(tempfile.mkdtemp(prefix="sovseal-pg-"))
    if root:
        user = pwd.getpwnam("postgres")
        os.chown(tmp, user.pw_uid, user.pw_gid)
    data, logfile = tmp / "data", tmp / "server.log"
    subprocess.run(
        [*prefix, str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-E", "UTF8", "--no-sync"],
        check=True,
        capture_output=True,
    )
    for _attempt in range(5):
        port = _free_port()
        options = f"-c listen_addresses=127.0.0.1 -p {port} -c unix_socket_directories={tmp} -c max_connections=300"
        started = subprocess.run(
            [*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-l", str(logfile), "-w", "-t", "60", "-o", options, "start"],
            capture_output=True,
            check=False,
        )
        if started.returncode == 0:
            break
    else:
        pytest.fail(f"PostgreSQL did not start: {logfile.read_text() if logfile.exists() else started.stderr!r}")
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run([*prefix, str(bindir / "pg_ctl"), "-D", str(data), "-m", "immediate", "stop"], capture_output=True, check=False)
        shutil.rmtree(tmp, ignore_errors=True)


def fresh_postgres_database(base_url: str) -> str:
    """A URL whose tables land in a new, empty schema (much faster than CREATE DATABASE per test)."""
    import psycopg

    name = f"sovseal_{os.urandom(6).hex()}"
    with psycopg.connect(f"{base_url}/postgres", autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {name}")
    return f"{base_url}/postgres?options=-csearch_path%3D{name}"


def drop_postgres_database(url: str) -> None:
    import psycopg

    base, name = url.split("/postgres?options=-csearch_path%3D")
    with psycopg.connect(f"{base}/postgres", autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {name} CASCADE")


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A fresh, empty server database on each backend."""
    if request.param == "sqlite":
        yield str(tmp_path / "server.sqlite3")
        return
    url = fresh_postgres_database(request.getfixturevalue("postgres_url"))
    try:
        yield url
    finally:
        drop_postgres_database(url)


@pytest.fixture
def sqlite_database(tmp_path: Path) -> str:
    return str(tmp_path / "server.sqlite3")


@pytest.fixture
def server(sqlite_database: str) -> Iterator[ServerThread]:
    """The real server on SQLite, in a thread, on a loopback port."""
    with ServerThread(sqlite_database) as srv:
        yield srv


def open_mem(path: Path, key: bytes, endpoint: str | None, api_key: str | None, **kwargs: object) -> Sovseal:
    kwargs.setdefault("replication_config", FAST)
    return Sovseal(path, key=key, embedder=fake_embed, endpoint=endpoint, api_key=api_key, **kwargs)  # type: ignore[arg-type]


def wait_for(condition: object, timeout: float = 20.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
