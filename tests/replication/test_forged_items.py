"""Items forged under *new* ids by a holder of the project's API key (no master key), of every kind,
whose parents the server holds: the server takes them (it cannot open them), and every device's
pull sets them aside and goes on, so later writes still arrive (issue 36, failure 1).

Failed on 697b1f4: every pull, on every device, old or freshly restored, raised IntegrityError at
the first forgery, for good, and nothing written after it ever arrived. Real server, loopback.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import httpx

from sovseal.replication.protocol import PROJECT_HEADER, PUSH_PATH
from sovseal.server import ServerThread
from sovseal.storage.frames import Flag
from sovseal.storage.wire import WireItem
from tests.replication.conftest import open_mem
from tests.replication.helpers import server_items


def _event(kind: str, parent: str, branch: str, **extra: object) -> WireItem:
    """An event whose id is the sha256 of its (random) sealed bytes, as the server expects."""
    sealed = os.urandom(120)
    return WireItem(kind, hashlib.sha256(sealed).hexdigest(), parent, branch, "", sealed, time.time(), **extra)  # type: ignore[arg-type]


def _forgeries(url: str, api: str, project: str) -> list[WireItem]:
    """One forged item of each kind under a new id, on parents the server holds, and a child of one."""
    held = [i for i in server_items(url, api, project) if i["kind"] == "record"]
    parent, branch, path_hash = held[-1]["id"], held[-1]["branch"], held[-1]["path_hash"]
    now = time.time()

    def record(flags: int, on: str) -> WireItem:
        return WireItem("record", os.urandom(32).hex(), on, branch, path_hash, os.urandom(200), now, flags=flags, parents=(on,))

    forged_record = record(0, parent)
    return [
        forged_record,
        record(int(Flag.REDACTED), parent),  # a skeleton
        record(0, forged_record.id),  # a child of a forgery: the server holds its parent
        _event("reinforce", parent, ""),
        _event("branch", parent, branch, reason="ADVANCE"),
        # The server makes the body of each record a redaction names its skeleton (it cannot check
        # the seal), so a forged redaction naming a genuine record erases that record on the server:
        # a server-side matter this test leaves aside. This one names the forged record.
        _event("redaction", "", "", erased=((forged_record.id, os.urandom(80)),)),
    ]


def _push(url: str, api: str, project: str, items: list[WireItem]) -> None:
    headers = {"Authorization": f"Bearer {api}", PROJECT_HEADER: project}
    answer = httpx.post(url + PUSH_PATH, headers=headers, json={"records": [i.to_json() for i in items], "after": ""})
    assert answer.status_code == 200, answer.text  # the blind server cannot tell a forgery


def test_forged_items_are_set_aside_and_replication_goes_on(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    api = server.storage.create_api_key()
    with open_mem(tmp_path / "a", key, server.url, api) as a, open_mem(tmp_path / "b", key, server.url, api) as b:
        a.store("one", "1")
        a.store("two", "2")
        assert a.replication is not None and a.replication.flush(20)
        b.pull()
        forged = _forgeries(server.url, api, a.replication.project_blind)
        for item in forged:  # one push each: the server takes each on parents it holds
            _push(server.url, api, a.replication.project_blind, [item])
        a.store("three", "3")  # written after the forgeries
        assert a.replication.flush(20)
        events: list[list[str]] = []
        b.on("set-aside", events.append)
        result = b.pull()  # raised IntegrityError at the first forgery, on every pull
        assert result.waiting == 0 and b.state() == {"one": "1", "two": "2", "three": "3"}
        assert sorted(result.set_aside) == sorted(i.id for i in forged) and events == [list(result.set_aside)]
        assert b.status().replication.set_aside == len(forged)  # type: ignore[attr-defined]
        assert b.verify().ok
        ids = {i.id for i in forged}
        with b._store.reading() as lineage:
            held = {n.wire_id.hex() for n in lineage.nodes} | {e.hex() for e in lineage.events}
        assert not ids & held  # nothing forged entered this device
        again = b.pull()  # nothing new: the set-aside items are not fetched or counted again
        assert again.set_aside == () and b.status().replication.set_aside == len(forged)  # type: ignore[attr-defined]
        a.store("four", "4")
        assert a.replication.flush(20)
        b.pull()
        assert b.get("four").payload == "4"  # type: ignore[union-attr]
    with open_mem(tmp_path / "c", key, server.url, api) as c:  # a fresh restore
        result = c.pull()
        assert result.waiting == 0 and c.state() == {"one": "1", "two": "2", "three": "3", "four": "4"}
        assert c.status().replication.set_aside == len(forged) and c.verify().ok  # type: ignore[attr-defined]
    with open_mem(tmp_path / "c", key, server.url, api) as c:  # counted across reopening
        assert c.status().replication.set_aside == len(forged)  # type: ignore[attr-defined]
        late_child = WireItem(  # a forger's child of an item set aside by an earlier pull
            "record",
            os.urandom(32).hex(),
            forged[0].id,
            forged[0].branch,
            forged[0].path_hash,
            os.urandom(200),
            time.time(),
            parents=(forged[0].id,),
        )
        assert c.replication is not None
        _push(server.url, api, c.replication.project_blind, [late_child])
        c.store("five", "5")
        assert c.replication.flush(20)
    with open_mem(tmp_path / "b", key, server.url, api) as b:
        result = b.pull()  # the late child is set aside too, not left waiting for ever
        assert result.waiting == 0 and result.set_aside == (late_child.id,) and b.get("five").payload == "5"  # type: ignore[union-attr]
        assert b.verify().ok
