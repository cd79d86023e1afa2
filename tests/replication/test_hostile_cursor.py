"""The pull cursor trusts nothing the server says (issues #19 and #20).

Measured before: one page numbered 2^70 was saved as the cursor, and every later pull from the
honest server failed with 400 until the cursor file was deleted by hand; a server restored from
an older backup (``last`` below the device's cursor, or its numbers reused) was silently missed.
Now a page whose numbering an honest server could not have sent is refused before anything in it
is imported; the cursor names the item it stopped at, so a server that no longer holds that item
is noticed and the device pulls from zero again, importing only what it lacks.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sovseal.crypto.primitives import project_blind_id
from sovseal.errors import ServerMisbehaviourError
from sovseal.server import ServerThread
from tests.replication.conftest import FAST, open_mem
from tests.replication.helpers import server_items
from tests.replication.hostile import Forward, Replay, Request, Rewrite, Scene, scene, state

Alter = Callable[[dict[str, Any], Request], dict[str, Any]]


@pytest.fixture
def world(tmp_path: Path, key: bytes, server: ServerThread) -> Iterator[Scene]:
    with scene(tmp_path, key, server) as s:
        yield s


def _last_seq(page: dict[str, Any], request: Request) -> dict[str, Any]:
    page["records"][-1]["seq"] = page["last"] = 2**70
    return page


def _past_last(page: dict[str, Any], request: Request) -> dict[str, Any]:
    page["last"] = page["records"][-1]["seq"] - 1
    return page


def _jump(page: dict[str, Any], request: Request) -> dict[str, Any]:
    for record in page["records"]:
        record["seq"] += 2**40
    page["last"] += 2**40
    return page


def _repeat(page: dict[str, Any], request: Request) -> dict[str, Any]:
    page["records"][1]["seq"] = page["records"][0]["seq"]
    return page


def _not_a_number(page: dict[str, Any], request: Request) -> dict[str, Any]:
    page["records"][0]["seq"] = True
    return page


def _more_than_asked(page: dict[str, Any], request: Request) -> dict[str, Any]:
    records = page["records"] * 2
    for seq, record in enumerate(records, start=request.cursor + 1):
        record["seq"] = seq
    page["last"] = request.cursor + len(records)
    return {**page, "records": records[: request.limit + 1]}


@pytest.mark.parametrize(
    ("alter", "code"),
    [
        (_last_seq, "bad_page"),
        (_past_last, "bad_sequence"),
        (_jump, "bad_sequence"),
        (_repeat, "bad_sequence"),
        (_not_a_number, "bad_sequence"),
        (_more_than_asked, "bad_page"),
    ],
    ids=["2^70", "past-last", "jump", "repeat", "true", "more-than-asked"],
)
def test_a_page_an_honest_server_could_not_number_is_refused_whole(world: Scene, alter: Alter, code: str) -> None:
    world.harness.behaviour = Rewrite(world.server.url, alter)
    with world.device(dataclasses.replace(FAST, pull_page=8)) as mem:
        before = state(mem)
        with pytest.raises(ServerMisbehaviourError) as caught:
            mem.pull()
        assert caught.value.code == code, caught.value
        world.assert_sane(mem, before)  # nothing of the page imported, no cursor saved
        assert world.cursor() == {}
        world.assert_recovers(mem)


@pytest.mark.parametrize(
    "saved",
    [2**70, {"seq": 2**70, "id": "ab" * 32}, -5, "12", {"seq": 3}, None],
    ids=["2^70-by-an-older-version", "2^70", "negative", "string", "no-id", "null"],
)
def test_a_poisoned_cursor_file_is_repaired_by_the_next_pull(world: Scene, saved: object) -> None:
    world.directory.mkdir()
    key = f"{world.harness.url} {project_blind_id('default', world.key)}"
    (world.directory / "replication-cursor.json").write_text(json.dumps({key: saved, "http://elsewhere x": 7}))
    with world.device(FAST) as mem:
        result = world.assert_recovers(mem)
        assert result.new_records == 6
    assert json.loads((world.directory / "replication-cursor.json").read_text())["http://elsewhere x"] == 7


def test_a_cursor_saved_by_an_older_version_is_kept_and_gains_an_id(tmp_path: Path, world: Scene) -> None:
    """A bare number (the older format) is trusted as it was, checked by number, then saved with its id."""
    with world.device(FAST) as mem:
        world.assert_recovers(mem)
        path = world.directory / "replication-cursor.json"
        key = f"{world.harness.url} {project_blind_id('default', world.key)}"
        seq = json.loads(path.read_text())[key]["seq"]
        path.write_text(json.dumps({key: seq}))
        with open_mem(tmp_path / "source", world.key, world.server.url, world.api_key) as source:
            source.store("user.later", "new")
            assert source.replication is not None and source.replication.flush(20)
        result = mem.pull()
        assert not result.resynced and result.received == 1 and mem.get("user.later") is not None
        assert world.cursor()["seq"] == world.last() and world.cursor()["id"]


def test_a_cursor_moved_past_the_honest_last_by_a_replaying_server_is_repaired(world: Scene) -> None:
    """A server replays real items under ever new numbers: stopped once it has sent more items already
    here than the store holds; the honest server's `last` is then below the cursor, and the device resyncs."""
    world.harness.behaviour = Replay(world.server.url)
    with world.device(FAST) as mem:
        with pytest.raises(ServerMisbehaviourError, match="already has") as caught:
            mem.pull()
        assert caught.value.code == "duplicates"
        assert mem.verify().ok and world.cursor()["seq"] > world.last()  # valid there, not here
        result = world.assert_recovers(mem)
        assert result.resynced and result.new_items == 0  # everything was already here
        again = mem.pull()
        assert not again.resynced and again.received == 0


def _backup(database: str, to: Path) -> str:
    """A consistent copy of the server's SQLite database, as an operator's backup would be."""
    with sqlite3.connect(database) as source, sqlite3.connect(to) as copy:
        source.backup(copy)
    return str(to)


@pytest.mark.parametrize("written_after_restore", [0, 8], ids=["last-below-cursor", "numbers-reused"])
def test_a_server_restored_from_an_older_backup_is_detected_and_the_device_resyncs(
    tmp_path: Path, key: bytes, sqlite_database: str, server: ServerThread, written_after_restore: int
) -> None:
    with scene(tmp_path, key, server) as world:
        backup = _backup(sqlite_database, tmp_path / "backup.sqlite3")
        with open_mem(tmp_path / "source", key, server.url, world.api_key) as source:  # written after the backup
            for i in range(5):
                source.store(f"later.{i}", i)
            assert source.replication is not None and source.replication.flush(20)
        with world.device(FAST) as mem:
            assert mem.replication is not None and mem.replication.flush(20)
            mem.pull()
            cursor = world.cursor()
            assert cursor["seq"] == world.last()
            with ServerThread(backup) as restored:
                if written_after_restore:  # another device writes to the restored server: numbers reused
                    with open_mem(tmp_path / "writer", key, restored.url, world.api_key) as writer:
                        writer.pull()
                        for i in range(written_after_restore):
                            writer.store(f"after.restore.{i}", i)
                        assert writer.replication is not None and writer.replication.flush(20)
                world.harness.behaviour = Forward(restored.url)
                on_restored = server_items(restored.url, world.api_key, project_blind_id("default", key))
                restored_last = len(on_restored)
                assert (restored_last < cursor["seq"]) == (not written_after_restore)
                records = mem.status().records
                result = mem.pull()
                assert result.resynced and result.waiting == 0 and result.cursor == restored_last
                assert mem.status().records == records + written_after_restore  # only what it lacked
                assert {r["id"] for r in on_restored} <= {i.id for i in mem.export_items()}
                assert all(mem.get(f"after.restore.{i}") is not None for i in range(written_after_restore))
                assert mem.verify().ok
                again = mem.pull()  # the cursor now names an item the restored server holds
                assert not again.resynced and again.received == 0
