"""Versions of one snapshot are no replay: two devices that write the same entries pull without a misbehaviour error.

Two devices that store the same entry on the same parents make one snapshot id with two versions
(each its own clock); the real server keeps both and sends both. A pull counts items already here
against what the store holds, to stop a server that replays items for ever
(test_hostile_cursor.py's replaying server is still stopped); the versions, and the skeletons a
purge leaves of each version, are items the store holds, not repeats.
"""

from __future__ import annotations

from pathlib import Path

from sovseal import Sovseal
from sovseal.crypto.primitives import project_blind_id
from sovseal.server import ServerThread
from tests.replication.conftest import open_mem

DEFAULTS = [("defaults.lang", "en"), ("defaults.tz", "UTC"), ("defaults.units", "metric")]


def devices(tmp_path: Path, key: bytes, server: ServerThread) -> tuple[Sovseal, Sovseal, str]:
    api = server.storage.create_api_key(project_blind_id("default", key))
    return open_mem(tmp_path / "a", key, server.url, api), open_mem(tmp_path / "b", key, server.url, api), api


def flushed(*mems: Sovseal) -> None:
    for mem in mems:
        assert mem.replication is not None and mem.replication.flush(20)


def test_two_devices_seeding_the_same_memories_pull_each_others_versions(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    a, b, _ = devices(tmp_path, key, server)
    with a, b:
        for mem in (a, b):
            for path, value in DEFAULTS:
                mem.store(path, value)
        flushed(a, b)
        for mem in (a, b):
            result = mem.pull()  # raised ServerMisbehaviourError ("duplicates") on the first pull
            assert result.waiting == 0 and result.received > 0
            assert mem.state() == dict(DEFAULTS)
        assert a.heads() == b.heads()
        assert a.pull().received == 0 and b.pull().received == 0
        assert a.verify().ok and b.verify().ok


def _two_versions(a: Sovseal, b: Sovseal, value: str) -> None:
    """``same`` = ``value`` written on both devices on one parent: one snapshot id, two versions on the
    server; both devices then pull each other's."""
    a.store("base", "0")
    flushed(a)
    b.pull()
    a.store("same", value)
    b.store("same", value)
    flushed(a, b)
    a.pull()
    b.pull()


def test_a_pull_from_zero_of_a_store_holding_two_versions(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    a, b, api = devices(tmp_path, key, server)
    with a, b:
        _two_versions(a, b, "identical")
    (tmp_path / "a" / "replication-cursor.json").unlink()  # lost, or the server restored: from zero
    with open_mem(tmp_path / "a", key, server.url, api) as a:
        result = a.pull()
        assert result.new_items == 0 and result.waiting == 0 and result.received > 0
        assert a.state() == {"base": "0", "same": "identical"}


def test_a_pull_from_zero_after_a_purge_of_a_snapshot_with_two_versions(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    """The server keeps a skeleton of each version; the store, after its purge, one: still no replay."""
    a, b, api = devices(tmp_path, key, server)
    with a, b:
        _two_versions(a, b, "secret")
        a.purge("same", reason="test")
        flushed(a)
        b.pull()
        flushed(b)
        a.pull()
    for name in ("a", "b"):
        (tmp_path / name / "replication-cursor.json").unlink()
        with open_mem(tmp_path / name, key, server.url, api) as mem:
            result = mem.pull()
            assert result.new_items == 0 and result.waiting == 0 and result.received > 0
            assert mem.get("same") is None and mem.get("base") is not None
            assert mem.verify().ok
