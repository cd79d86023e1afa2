"""A pull's requests are bounded in bytes and in time, whatever the server sends (issue #20).

Each test points a device at the hostile harness (tests/replication/hostile.py), lets it pull,
and checks three things: the pull stops with a typed error saying what happened (soon, and
without reading what it must not), the store is unchanged and its cursor sane, and a pull from
the honest server at the same URL afterwards restores everything, with no file deleted by hand.
The memory tests pull in a fresh process at the default caps and measure its peak RSS.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sovseal.errors import ReplicationError, ServerMisbehaviourError
from sovseal.replication import ReplicationConfig
from sovseal.server import ServerThread
from tests.replication.conftest import FAST, open_mem
from tests.replication.hostile import (
    Behaviour,
    Drip,
    EndlessOrphans,
    Fixed,
    Forward,
    HugePage,
    MiB,
    Scene,
    scene,
    state,
)

REPO = Path(__file__).resolve().parents[2]
#: The issue's bound: peak RSS during any pull at most this far above the process's baseline.
RSS_BOUND = 256 * 1024 * 1024


@pytest.fixture
def world(tmp_path: Path, key: bytes, server: ServerThread) -> Iterator[Scene]:
    with scene(tmp_path, key, server) as s:
        yield s


def test_a_page_declared_too_large_is_refused_before_a_byte_of_it_is_read(world: Scene) -> None:
    world.harness.behaviour = HugePage(int(1.5 * 1024 * MiB), declare_length=True)
    with world.device(FAST) as mem:
        before = state(mem)
        started = time.monotonic()
        with pytest.raises(ServerMisbehaviourError, match="max_page_bytes") as caught:
            mem.pull()
        assert caught.value.code == "too_large" and time.monotonic() - started < 10
        # asked again with 500, 250, … 1 item, each refused on its Content-Length alone
        assert [r.limit for r in world.harness.pulls()] == [1000, 500, 250, 125, 62, 31, 15, 7, 3, 1]
        world.assert_sane(mem, before)
        assert mem.status().replication.pull_error == str(caught.value)  # type: ignore[attr-defined]
        world.assert_recovers(mem)
        assert mem.status().replication.pull_error is None  # type: ignore[attr-defined]


def test_a_streamed_page_is_cut_at_max_page_bytes(world: Scene) -> None:
    config = dataclasses.replace(FAST, max_page_bytes=256 * 1024)
    world.harness.behaviour = HugePage(64 * MiB)  # no Content-Length: only counting bytes can stop it
    with world.device(config) as mem:
        before = state(mem)
        with pytest.raises(ServerMisbehaviourError, match="max_page_bytes"):
            mem.pull()
        pulls = len(world.harness.pulls())
        assert pulls == 10  # 1000 items halved down to 1
        # each response was read to just past the cap; what the server managed to push into the
        # socket buffers beyond that was never read
        assert world.harness.sent < pulls * 4 * MiB
        world.assert_sane(mem, before)
        world.assert_recovers(mem)


def test_an_honest_page_over_the_cap_is_fetched_in_smaller_pages(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    """The cap never refuses an honest server: a page too large is asked for with fewer items."""
    api = server.storage.create_api_key()
    with open_mem(tmp_path / "source", key, server.url, api) as source:
        for i in range(24):
            source.store(f"notes.big{i}", {"text": f"{i:04d}" * 5000})  # ~20 KB each, ~27 KB on the wire
        assert source.replication is not None and source.replication.flush(20)
    config = dataclasses.replace(FAST, max_page_bytes=128 * 1024, pull_page=1000)
    with open_mem(tmp_path / "device", key, server.url, api, replication_config=config) as device:
        result = device.pull()
        assert result.new_records == 24 and result.waiting == 0
        assert device.get("notes.big23") is not None and device.verify().ok


@pytest.mark.parametrize("in_headers", [False, True], ids=["body", "headers"])
def test_a_drip_fed_answer_is_cut_at_the_whole_request_deadline(world: Scene, in_headers: bool) -> None:
    """One byte every 0.2 s: never idle long enough for the per-read timeout (5 s), yet cut at 1.5 s."""
    world.harness.behaviour = Drip(Forward(world.server.url), 0.2, headers=in_headers)
    config = dataclasses.replace(FAST, request_timeout=5.0, pull_deadline=1.5)
    with world.device(config) as mem:
        before = state(mem)
        started = time.monotonic()
        with pytest.raises(ReplicationError, match="pull_deadline") as caught:
            mem.pull()
        took = time.monotonic() - started
        assert caught.value.code == "deadline" and caught.value.retryable
        assert 1.4 < took < 4.0, took
        world.assert_sane(mem, before)
        world.assert_recovers(mem)


VALID_EMPTY = b'{"records":[],"cursor":0,"last":0,"more":false,"held":0}'


@pytest.mark.parametrize(
    ("behaviour", "code"),
    [
        (Fixed(b"\x00\xff garbage \x01"), "not_json"),
        (Fixed(b'{"records":[{"seq":1,'), "not_json"),
        (Fixed(b'{"records":' + b"[" * 100_000), "not_json"),
        (Fixed(b'{"records":[],"more":false}'), "bad_page"),
        (Fixed(b'{"records":[],"cursor":0,"last":0,"more":true,"held":0}'), "bad_page"),
        (Fixed(b'{"records":[],"cursor":0,"last":1e400,"more":false,"held":0}'), "bad_page"),
        (Fixed(VALID_EMPTY, content_type="text/html; charset=utf-8"), "content_type"),
        (Fixed(VALID_EMPTY, content_type="text/plain"), "content_type"),
        (Fixed(gzip.compress(VALID_EMPTY), headers={"Content-Encoding": "gzip"}), "content_encoding"),
        (Fixed(b'{"records":[{"seq":1,"kind":"record"}],"cursor":1,"last":1,"more":false,"held":0}'), "bad_item"),
    ],
    ids=["binary", "truncated", "nested", "no-last", "more-without-records", "float-last", "html", "text", "gzip", "bad-item"],
)
def test_garbage_and_the_wrong_content_type_are_refused(world: Scene, behaviour: Behaviour, code: str) -> None:
    world.harness.behaviour = behaviour
    with world.device(FAST) as mem:
        before = state(mem)
        with pytest.raises(ServerMisbehaviourError) as caught:
            mem.pull()
        assert caught.value.code == code, caught.value
        world.assert_sane(mem, before)
        world.assert_recovers(mem)


@pytest.mark.parametrize(
    "behaviour",
    [
        Drip(HugePage(1024 * MiB), 0.001),  # a huge page, slowly: the deadline comes first
        Drip(EndlessOrphans(), 0.001),  # orphans, slowly
        Fixed(b"<html>" + b"x" * (64 * MiB), content_type="text/html"),  # huge and the wrong type: not read
    ],
    ids=["huge-dripped", "orphans-dripped", "huge-html"],
)
def test_combined_misbehaviour_is_bounded_too(world: Scene, behaviour: Behaviour) -> None:
    world.harness.behaviour = behaviour
    config = dataclasses.replace(FAST, pull_deadline=1.0)
    with world.device(config) as mem:
        before = state(mem)
        started = time.monotonic()
        with pytest.raises(ReplicationError):
            mem.pull()
        assert time.monotonic() - started < 5
        assert world.harness.sent < 8 * MiB
        world.assert_sane(mem, before)
        world.assert_recovers(mem)


# -- memory, in a fresh process at the default caps -----------------------------------------------


def measure(world: Scene, config: dict[str, object] | None = None) -> dict[str, object]:
    """Pull once in a fresh process (tests/replication/hostile.py's measure-pull); its report."""
    world.directory.mkdir(exist_ok=True)
    command = [sys.executable, "-m", "tests.replication.hostile", "measure-pull"]
    command += [str(world.directory), world.key.hex(), world.harness.url, world.api_key, json.dumps(config or {})]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.strip().splitlines()[-1])
    print(f"\npull from a hostile server: {report}")
    return report  # type: ignore[no-any-return]


def test_peak_rss_of_a_pull_offered_a_1_5_gib_page_at_the_default_caps(world: Scene) -> None:
    """Before: the whole page was read, then parsed (7.4 GB of RSS). Now: at most max_page_bytes per answer."""
    world.harness.behaviour = HugePage(int(1.5 * 1024 * MiB))
    report = measure(world)
    assert not report["ok"] and report["code"] == "too_large"
    assert report["peak_above_baseline"] <= RSS_BOUND  # type: ignore[operator]
    with world.device(ReplicationConfig()) as mem:
        world.assert_sane(mem)
        world.assert_recovers(mem)


def test_peak_rss_of_a_pull_offered_endless_fat_orphans_at_the_default_caps(world: Scene) -> None:
    """60 KB orphans, page after page, for ever: held up to max_held_bytes (64 MiB), then refused."""
    world.harness.behaviour = EndlessOrphans(sealed_size=60_000)
    report = measure(world)
    assert not report["ok"] and report["code"] == "held_limit"
    assert report["peak_above_baseline"] <= RSS_BOUND  # type: ignore[operator]
    with world.device(ReplicationConfig()) as mem:
        world.assert_sane(mem)
        world.assert_recovers(mem)
