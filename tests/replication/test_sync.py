"""Continuous sync (issue #19): a background pull (``sync_interval=`` / ``SOVSEAL_SYNC_INTERVAL``),
``sovseal sync`` and ``sovseal status`` as a user runs them, ``log --graph`` drawing a merge, and
the MCP server pulling before it answers, all against a real ``sovseal serve`` on loopback."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.crypto.keychain import export_key
from sovseal.server import ServerThread
from tests.replication.conftest import open_mem, wait_for
from tests.replication.test_cli import sovseal


def _two_devices_written_concurrently(tmp_path: Path, key: bytes, server: ServerThread, api: str) -> tuple[Sovseal, Sovseal]:
    a = open_mem(tmp_path / "a", key, server.url, api)
    b = open_mem(tmp_path / "b", key, server.url, api)
    a.store("base", "0")
    assert a.replication is not None and a.replication.flush(20)
    b.pull()
    a.store("user.editor", "vim")
    b.store("user.editor", "emacs")
    return a, b


def test_a_background_pull_brings_other_devices_writes(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    api = server.storage.create_api_key()
    writer = open_mem(tmp_path / "writer", key, server.url, api)
    reader = open_mem(tmp_path / "reader", key, server.url, api, sync_interval=0.2)
    try:
        assert reader.syncing is not None and reader.syncing.interval == 0.2
        writer.store("user.editor", "helix")
        wait_for(lambda: reader.get("user.editor") is not None, what="the background pull")
        assert reader.get("user.editor").payload == "helix"
        assert [m.path for m in reader.recall("editor", k=1)] == ["user.editor"]  # indexed on this device
    finally:
        writer.close()
        reader.close()
    assert not reader.syncing._thread.is_alive()  # close stops it


def test_sync_interval_comes_from_the_environment_and_needs_replication(
    tmp_path: Path, key: bytes, server: ServerThread, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOVSEAL_SYNC_INTERVAL", "30")
    api = server.storage.create_api_key()
    with open_mem(tmp_path / "on", key, server.url, api) as on, open_mem(tmp_path / "off", key, "", None) as off:
        assert on.syncing is not None and on.syncing.interval == 30
        assert off.syncing is None  # no endpoint: nothing to pull from


def test_sovseal_sync_and_status_show_heads_conflicts_and_the_merge(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    api = server.storage.create_api_key()
    a, b = _two_devices_written_concurrently(tmp_path, key, server, api)
    a.close()  # each pushes its write as it closes
    b.close()
    env = {"SOVSEAL_ENDPOINT": server.url, "SOVSEAL_API_KEY": api, "SOVSEAL_KEY": export_key(key)}
    first = sovseal("sync", "--path", str(tmp_path / "b"), env=env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("pushed 0 items, pulled ")
    assert "main: 2 heads" in first.stdout and "conflict on main: user.editor written on 2 devices at once" in first.stdout
    synced = sovseal("sync", "--path", str(tmp_path / "b"), "--json", env=env)
    assert synced.returncode == 0, synced.stderr
    info = json.loads(synced.stdout)
    assert len(info["heads"]["main"]) == 2
    [conflict] = info["conflicts"]
    assert conflict["path"] == "user.editor" and len(conflict["versions"]) == 2
    status = sovseal("status", "--path", str(tmp_path / "b"), env=env)
    assert status.returncode == 0, status.stderr
    assert "main: 2 heads (the next write merges them)" in status.stdout
    assert "user.editor on main (2 versions, showing snap_" in status.stdout
    stored = sovseal("store", "--path", str(tmp_path / "b"), "after", "merge", env=env)
    assert stored.returncode == 0, stored.stderr
    graph = sovseal("log", "--graph", "--path", str(tmp_path / "b"), env=env)
    assert graph.returncode == 0, graph.stderr
    lines = graph.stdout.splitlines()
    assert lines[0].startswith("* ") and "after" in lines[0]
    assert lines[1].rstrip() == "|\\"  # the merge opens a lane for its second parent
    after = sovseal("status", "--path", str(tmp_path / "b"), "--json", env=env)
    assert json.loads(after.stdout)["conflicts"] == [] and len(json.loads(after.stdout)["heads"]["main"]) == 1


def test_sync_without_replication_says_what_to_set(tmp_path: Path, key: bytes) -> None:
    with Sovseal(tmp_path / "s", key=key, endpoint="") as mem:
        mem.store("a", "b")
    done = sovseal("sync", "--path", str(tmp_path / "s"), env={"SOVSEAL_KEY": export_key(key), "SOVSEAL_ENDPOINT": ""})
    assert done.returncode != 0
    assert "set SOVSEAL_ENDPOINT and SOVSEAL_API_KEY" in done.stderr


def test_sync_that_cannot_push_says_why(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    """A wrong API key, or no server at the endpoint: sync says so at the first failure, in the
    server's or the connection's words, and the write stays in the outbox."""
    with Sovseal(tmp_path / "s", key=key, endpoint="") as mem:
        mem.store("a", "b")
    env = {"SOVSEAL_KEY": export_key(key), "SOVSEAL_ENDPOINT": server.url, "SOVSEAL_API_KEY": "sov_not_a_key"}
    refused = sovseal("sync", "--path", str(tmp_path / "s"), env=env)
    assert refused.returncode == 6
    assert "401" in refused.stderr and "check SOVSEAL_API_KEY" in refused.stderr and "within 60 s" not in refused.stderr
    nobody = sovseal("sync", "--path", str(tmp_path / "s"), env={**env, "SOVSEAL_ENDPOINT": "http://127.0.0.1:9"})
    assert nobody.returncode == 6
    assert "127.0.0.1:9 is reachable" in nobody.stderr
    status = sovseal("status", "--path", str(tmp_path / "s"), "--json", env={"SOVSEAL_KEY": export_key(key), "SOVSEAL_ENDPOINT": ""})
    assert json.loads(status.stdout)["outbox_records"] >= 1


def test_the_mcp_server_pulls_before_answering_when_sync_is_on(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    import asyncio

    from sovseal.mcp.server import build_server

    api = server.storage.create_api_key()
    writer = open_mem(tmp_path / "writer", key, server.url, api)
    agent = open_mem(tmp_path / "agent", key, server.url, api, sync_interval=3600)  # the timer never fires here
    try:
        writer.store("user.editor", "helix")
        assert writer.replication is not None and writer.replication.flush(20)
        mcp = build_server(agent)
        result = asyncio.run(mcp.call_tool("get_memory", {"path": "user.editor"}))
        text = json.dumps([c.model_dump() for c in result[0]] if isinstance(result, tuple) else str(result))
        assert "helix" in text
    finally:
        writer.close()
        agent.close()
