"""A record pushed under an existing id with bytes that do not open (anyone holding the project's API
key can push one, and the blind server cannot tell it from a second version of that snapshot): every
device sets it aside and keeps pulling, instead of stopping there for good. Real server, loopback."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

import httpx

from sovseal.replication.protocol import PROJECT_HEADER, PULL_PATH, PUSH_PATH
from sovseal.server import ServerThread
from tests.replication.conftest import open_mem


def _push_forged_versions(url: str, api: str, project: str) -> int:
    """Every record on the server pushed again under its own id, with its parents or its sealed bytes forged."""
    headers = {"Authorization": f"Bearer {api}", PROJECT_HEADER: project}
    records = [r for r in httpx.get(url + PULL_PATH, headers=headers).json()["records"] if r["kind"] == "record"]
    forged: list[dict[str, Any]] = []
    for record in records:
        junk = {k: v for k, v in record.items() if k != "seq"}
        junk["sealed"] = base64.b64encode(os.urandom(len(base64.b64decode(record["sealed"])))).decode()
        forged.append(junk)
    answer = httpx.post(url + PUSH_PATH, headers=headers, json={"records": forged, "after": ""})
    assert answer.status_code == 200, answer.text  # the server takes them as versions: it cannot open them
    return len(forged)


def test_forged_versions_are_set_aside_and_replication_goes_on(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    api = server.storage.create_api_key()
    with open_mem(tmp_path / "a", key, server.url, api) as a, open_mem(tmp_path / "b", key, server.url, api) as b:
        a.store("one", "1")
        a.store("two", "2")
        assert a.replication is not None and a.replication.flush(20)
        b.pull()
        forged = _push_forged_versions(server.url, api, a.replication.project_blind)
        a.store("three", "3")  # written after the forgery
        assert a.replication.flush(20)
        result = b.pull()  # a device holding the snapshots: sets the forgeries aside
        assert result.waiting == 0 and b.get("three").payload == "3"  # type: ignore[union-attr]
        assert b._store.versions_set_aside == forged
        assert b.verify().ok
    with open_mem(tmp_path / "c", key, server.url, api) as c:  # a device restoring: the genuine came first
        c.pull()
        assert c.state() == {"one": "1", "two": "2", "three": "3"}
        assert c._store.versions_set_aside == forged and c.verify().ok
