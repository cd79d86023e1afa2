"""``delete_branch`` through a real ``sovseal serve`` on loopback: the delete event is replicated
(the server accepts reason DELETE), a second device restores a store without the deleted branch,
and a write the second device made to the branch concurrently brings it back on both."""

from __future__ import annotations

from pathlib import Path

from sovseal.server import ServerThread
from tests.replication.conftest import open_mem


def test_a_deleted_branch_replicates_and_a_concurrent_write_brings_it_back(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    api = server.storage.create_api_key()
    a = open_mem(tmp_path / "a", key, server.url, api)
    b = open_mem(tmp_path / "b", key, server.url, api)
    try:
        a.store("m", "main")
        a.create_branch("thread-1", a.snapshot())
        a.create_branch("thread-2", a.snapshot())
        assert a.replication is not None and a.replication.flush(20)
        b.pull()
        assert b.branches() == ["main", "thread-1", "thread-2"]
        a.delete_branch("thread-1")
        a.delete_branch("thread-2")
        b.view("thread-2").store("late", "b wrote this before it heard of the delete")
        assert a.replication.flush(20) and b.replication is not None and b.replication.flush(20)
        a.pull()
        b.pull()
        for device in (a, b):
            assert device.branches() == ["main", "thread-2"]
            assert device.state(branch="thread-2") == {"m": "main", "late": "b wrote this before it heard of the delete"}
    finally:
        a.close()
        b.close()
    fresh = open_mem(tmp_path / "c", key, server.url, api)
    try:
        fresh.pull()
        assert fresh.branches() == ["main", "thread-2"]
        assert fresh.verify().ok
    finally:
        fresh.close()
