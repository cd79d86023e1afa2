"""``sovseal serve`` pointed at a PostgreSQL that is not there says so in one line, without a
traceback and without the URL's password (before: a psycopg OperationalError traceback)."""

from __future__ import annotations

import socket

from tests.replication.test_cli import sovseal


def test_serve_with_an_unreachable_database_prints_one_line_without_the_password() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # closed again: nothing listens there
    url = f"postgresql://owner:s3cret-pw@127.0.0.1:{port}/sovseal"
    done = sovseal("serve", "--database", url, "--port", "0", env={"SOVSEAL_SERVER_DATABASE": ""})
    assert done.returncode != 0
    assert "Traceback" not in done.stderr
    assert f"owner@127.0.0.1:{port}/sovseal" in done.stderr and "Start it" in done.stderr
    assert "s3cret-pw" not in done.stderr + done.stdout
