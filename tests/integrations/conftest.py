"""Two devices for the framework adapters (issue #19): two ``Sovseal`` handles with one key, each
with its own store directory, replicating through one real ``sovseal serve`` on loopback.

The server and its SQLite database are tests/replication/conftest.py's fixtures, re-exported here;
the per-framework conftests below this directory keep their own fixtures.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.server import ServerThread
from tests.replication.conftest import open_mem, server, sqlite_database

__all__ = ["Devices", "devices", "server", "sqlite_database"]


@dataclass
class Devices:
    a: Sovseal
    b: Sovseal

    def sync(self) -> None:
        """Both push everything, then both pull: each now holds the other's writes."""
        for mem in (self.a, self.b):
            assert mem.replication is not None and mem.replication.flush(20)
        for mem in (self.a, self.b):
            mem.pull()


@pytest.fixture
def devices(tmp_path: Path, server: ServerThread, monkeypatch: pytest.MonkeyPatch) -> Iterator[Devices]:
    """Two devices (fake embedder, one key, one server), closed at the end."""
    monkeypatch.setenv("SOVSEAL_HOME", str(tmp_path / "home"))
    key = bytes(range(32))
    api = server.storage.create_api_key()
    a = open_mem(tmp_path / "a", key, server.url, api)
    b = open_mem(tmp_path / "b", key, server.url, api)
    try:
        yield Devices(a, b)
    finally:
        a.close()
        b.close()
