"""close() waits at most drain_on_close (and half a second) for a server that accepts and never answers.

The worker's push to a hung server (SIGSTOPped, or dripping) used to hold close() for
request_timeout + 5 s after the drain; now the push in flight is cancelled. What was not sent is
durable in the outbox and goes up on the next open.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sovseal.crypto.primitives import project_blind_id
from sovseal.server import ServerThread
from tests.replication.conftest import FAST, open_mem

#: A per-read timeout far above the drain, as the default (30 s) is: close must not wait on it.
CONFIG = dataclasses.replace(FAST, request_timeout=30.0, drain_on_close=2.0)


class HungServer:
    """Accepts connections, reads what comes, never answers."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        self.connections: list[socket.socket] = []
        self.received = 0
        self._thread = threading.Thread(target=self._accept, daemon=True, name="hung-server")

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.connections.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError):  # the connection closed under the reader
            while data := conn.recv(65536):
                self.received += len(data)

    def __enter__(self) -> HungServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.sock.close()
        for conn in self.connections:
            conn.close()


@pytest.fixture
def hung() -> Iterator[HungServer]:
    with HungServer() as h:
        yield h


def test_close_returns_within_the_drain_and_the_write_stays_in_the_outbox(
    tmp_path: Path, key: bytes, server: ServerThread, hung: HungServer
) -> None:
    api = server.storage.create_api_key(project_blind_id("default", key))
    mem = open_mem(tmp_path / "device", key, hung.url, api, replication_config=CONFIG)
    mem.store("user.editor", "vim")
    deadline = time.monotonic() + 5
    while not hung.received and time.monotonic() < deadline:  # the push is under way
        time.sleep(0.02)
    assert hung.received
    started = time.monotonic()
    mem.close()
    took = time.monotonic() - started
    assert took < CONFIG.drain_on_close + 2.0, took
    assert not any(t.name == "sovseal-replication" and t.is_alive() for t in threading.enumerate())

    # the write is still in the outbox after reopening, and goes up to an honest server
    with open_mem(tmp_path / "device", key, "", None) as offline:
        assert offline.status().outbox_records >= 1
    with open_mem(tmp_path / "device", key, server.url, api) as mem:
        assert mem.replication is not None and mem.replication.flush(20)
        assert mem.status().outbox_records == 0
    with open_mem(tmp_path / "other", key, server.url, api) as other:
        other.pull()
        assert other.get("user.editor").payload == "vim"  # type: ignore[union-attr]


def test_close_with_no_drain_does_not_wait_for_the_push_either(
    tmp_path: Path, key: bytes, server: ServerThread, hung: HungServer
) -> None:
    """drain_on_close=0: no drain, and the push in flight is cut after the grace, not after request_timeout."""
    api = server.storage.create_api_key(project_blind_id("default", key))
    mem = open_mem(tmp_path / "device", key, hung.url, api, replication_config=dataclasses.replace(CONFIG, drain_on_close=0.0))
    mem.store("user.editor", "vim")
    deadline = time.monotonic() + 5
    while not hung.received and time.monotonic() < deadline:
        time.sleep(0.02)
    started = time.monotonic()
    mem.close()
    assert time.monotonic() - started < 2.0
