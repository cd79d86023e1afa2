"""Items waiting for a parent are held within bounds, and said so (issues #19 and #20).

``import_items`` applies items strictly in order and returns the suffix whose first item's parent
(or branch) is not here yet; a pull keeps that suffix and retries it after every later page. Measured
before: endless pages of well-formed orphans ran on for minutes while memory climbed past 4 GB.
Now a pull holds at most ``max_held_items`` / ``max_held_bytes``, stops when its cursor has not moved
for ``pull_stall_timeout``, and an item whose parent never arrives is reported in the pull's result
and in ``status()``, then imported once the parent comes.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from sovseal.crypto.primitives import project_blind_id
from sovseal.errors import ReplicationError
from sovseal.server import ServerThread
from tests.replication.conftest import FAST
from tests.replication.helpers import server_items
from tests.replication.hostile import EndlessOrphans, Request, Rewrite, Scene, Slow, scene, state


@pytest.fixture
def world(tmp_path: Path, key: bytes, server: ServerThread) -> Iterator[Scene]:
    with scene(tmp_path, key, server) as s:
        yield s


@pytest.mark.parametrize(
    ("orphans", "config", "pages"),
    [
        (EndlessOrphans(), {"pull_page": 100, "max_held_items": 250}, 3),
        (EndlessOrphans(sealed_size=50_000), {"pull_page": 10, "max_held_bytes": 1024 * 1024}, 3),
    ],
    ids=["max_held_items", "max_held_bytes"],
)
def test_endless_orphans_stop_at_the_held_cap(world: Scene, orphans: EndlessOrphans, config: dict[str, Any], pages: int) -> None:
    world.harness.behaviour = orphans
    with world.device(dataclasses.replace(FAST, **config)) as mem:
        before = state(mem)
        started = time.monotonic()
        with pytest.raises(ReplicationError, match="wait for what item") as caught:
            mem.pull()
        assert caught.value.code == "held_limit" and time.monotonic() - started < 5
        assert orphans.pages == pages  # stopped at the page that passed the cap
        world.assert_sane(mem, before)
        assert world.cursor() == {}  # nothing imported, so the cursor never moved
        status = mem.status().replication  # type: ignore[attr-defined]
        assert status.pull_error == str(caught.value)
        world.assert_recovers(mem)


def test_orphans_trickling_in_stop_at_the_stall_timeout(world: Scene) -> None:
    """One orphan per page, 0.2 s apart: under every cap, and never a step forward."""
    world.harness.behaviour = Slow(EndlessOrphans(per_page=1), 0.2)
    config = dataclasses.replace(FAST, pull_stall_timeout=1.5, pull_deadline=10.0)
    with world.device(config) as mem:
        before = state(mem)
        started = time.monotonic()
        with pytest.raises(ReplicationError, match="no progress") as caught:
            mem.pull()
        took = time.monotonic() - started
        assert caught.value.code == "stalled" and caught.value.retryable
        assert 1.4 < took < 3.0, took  # the last request's deadline is what is left of the stall timeout
        world.assert_sane(mem, before)
        world.assert_recovers(mem)


def _first_parent_with_a_child(records: list[dict[str, Any]]) -> int:
    """The position of the first record whose very next item is its child."""
    return next(i for i in range(len(records) - 1) if records[i]["kind"] == "record" and records[i + 1]["parent"] == records[i]["id"])


def _drop_parent(page: dict[str, Any], request: Request) -> dict[str, Any]:
    """The honest page without one record (numbered as if it never existed): its child can only wait."""
    records = page["records"]
    gone = _first_parent_with_a_child(records)
    for record in records[gone + 1 :]:
        record["seq"] -= 1
    return {**page, "records": records[:gone] + records[gone + 1 :], "last": page["last"] - 1, "cursor": page["cursor"] - 1}


def test_an_item_whose_parent_never_arrives_is_held_and_reported(world: Scene) -> None:
    world.harness.behaviour = Rewrite(world.server.url, _drop_parent)
    with world.device(FAST) as mem:
        assert mem.replication is not None and mem.replication.flush(20)  # its own first item is on the server
        honest = server_items(world.server.url, world.api_key, project_blind_id("default", world.key))
        gone = _first_parent_with_a_child(honest)
        result = mem.pull()
        assert result.waiting == len(honest) - 1 - gone  # the child and everything after it, in order
        assert result.cursor == gone  # the item before the missing one: numbered alike on both servers
        assert mem.status().replication.pull_waiting == result.waiting  # type: ignore[attr-defined]
        world.assert_sane(mem)
        again = world.assert_recovers(mem)  # the parent arrives: everything imports
        assert not again.resynced and again.received == len(honest) - gone
        assert mem.status().replication.pull_waiting == 0  # type: ignore[attr-defined]
