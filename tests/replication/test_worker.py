"""The write-behind worker against the real server, through a real faulty network hop.

Every test runs the server (uvicorn + SQLite) on loopback; most put :class:`FaultProxy` between
it and the client to capture what goes over the wire and to inject drops, resets, duplicates,
delays, reordering and error storms. The end state is always checked the same way: the server
holds every item exactly once, the outbox is empty, and a second device restores an equal store.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
import threading
import time
from pathlib import Path

import pytest

from sovseal.crypto.primitives import project_blind_id
from sovseal.errors import BackpressureTimeoutError, InvalidInputError, ReplicationError
from sovseal.replication import ReplicationConfig
from sovseal.server import ServerThread, reserve_port
from sovseal.storage.wire import WireItem
from tests.replication.conftest import FAST, open_mem, wait_for
from tests.replication.helpers import history, server_items, snapshot_of
from tests.replication.proxy import Captured, FaultProxy


def blind(key: bytes, project: str = "default") -> str:
    return project_blind_id(project, key)


def assert_exactly_once(server: ServerThread, key: bytes, expected_ids: list[str]) -> list[dict[str, object]]:
    counts = server.storage.counts(blind(key))
    assert counts["items"] == counts["distinct"] == len(expected_ids), counts
    assert counts["held"] == 0
    api = server.storage.create_api_key(blind(key))
    raw = server_items(server.url, api, blind(key))
    assert [r["id"] for r in raw] == expected_ids  # exactly once each, in journal order
    return raw


def restored(tmp_path: Path, key: bytes, server: ServerThread, name: str = "second") -> dict[str, object]:
    api = server.storage.create_api_key(blind(key))
    with open_mem(tmp_path / name, key, server.url, api) as two:
        result = two.pull()
        assert result.waiting == 0
        assert two.verify().ok
        return snapshot_of(two)


# -- the happy path, blindness, logging ----------------------------------------------------------


def test_replicates_in_the_background_and_a_second_device_restores_everything(tmp_path: Path, key: bytes, database: str) -> None:
    with ServerThread(database) as server:
        api = server.storage.create_api_key()
        events: list[list[str]] = []
        with open_mem(tmp_path / "one", key, server.url, api) as one:
            one.on("replicated", events.append)
            history(one)
            history(one, tag=".2")
            assert one.replication is not None and one.replication.flush(20)
            ids = [i for batch in events for i in batch]
            status = one.status()
            assert status.outbox_records == 0 and status.replication.state == "idle"  # type: ignore[attr-defined]
            assert status.replication.replicated == len(ids) and status.replication.last_error is None  # type: ignore[attr-defined]
            expected = snapshot_of(one)
        raw = assert_exactly_once(server, key, ids)
        assert {r["kind"] for r in raw} == {"record", "branch", "reinforce"}
        with open_mem(tmp_path / "two", key, server.url, api) as two:
            seen: list[tuple[int, int]] = []
            result = two.pull(progress=lambda done, total: seen.append((done, total)))
            assert result.new_items == len(ids) and result.waiting == 0 and seen[-1][0] == seen[-1][1]
            assert snapshot_of(two) == expected and two.verify().ok
            two.checkout("main")
            index = two._shared.index
            assert index is not None and not index.missing(set(two._store._lineage.view(two._store.branch("main")).values()))
            assert [m.path for m in two.recall("editor", k=5)]  # the index is warm after pull
            with open_mem(tmp_path / "one", key, server.url, api) as one_again:  # incremental: only new items
                one_again.store("user.later", "added after the restore")
                assert one_again.replication is not None and one_again.replication.flush(20)
            # two pushes one item of its own (replicated == 1) in the background: let it land first, or
            # the last pull below receives it back when the push comes after this one (seen in CI)
            assert two.replication is not None and two.replication.flush(20)
            again = two.pull()
            assert again.new_records == 1 and two.get("user.later") is not None
            assert two.pull().received == 0  # the cursor remembers where it stopped


def test_the_server_sees_no_path_plaintext_unkeyed_hash_or_snapshot_id(
    tmp_path: Path, key: bytes, server: ServerThread, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    canary_path = "canary.path.5f2b7e0c9a"
    canary_text = "canary payload 8d1e4a7b63 the user's secret plan"
    api = server.storage.create_api_key()
    monkeypatch.setenv("SOVSEAL_LOG_REPLICATION_BODIES", "1")
    caplog.set_level(logging.INFO, logger="sovseal.replication")
    with FaultProxy(server.url) as proxy:
        with open_mem(tmp_path / "one", key, proxy.url, api) as one:
            sids = [one.store(canary_path, canary_text, metadata={"note": canary_text}).snapshot_id]
            sids.append(one.store(canary_path + ".2", {"text": canary_text}).snapshot_id)
            one.store(canary_path, canary_text)  # a reinforcement
            sids.append(one.delete(canary_path + ".2").snapshot_id)  # type: ignore[union-attr]
            one.fork(sids[0], branch="canary-branch")
            one.rollback(sids[0])
            assert one.replication is not None and one.replication.flush(20)
        wire = b"\n".join(
            f"{c.method} {c.target}".encode() + b"".join(f"{k}: {v}".encode() for k, v in c.headers) + c.body for c in proxy.captured
        )
        bodies = [c.body for c in proxy.pushes()]
    assert bodies
    secrets: list[str] = [canary_path, canary_path + ".2", canary_text, "8d1e4a7b63", "5f2b7e0c9a", "canary-branch", *sids]
    secrets += [s.removeprefix("snap_") for s in sids]
    for text in [canary_path, canary_text, "canary-branch", json.dumps(canary_text), json.dumps({"text": canary_text})]:
        secrets += [hashlib.sha256(text.encode()).hexdigest(), base64.b64encode(text.encode()).decode(), text.encode().hex()]
        secrets.append(hashlib.sha256(("path:" + text).encode()).hexdigest())
    for secret in secrets:
        assert secret.encode() not in wire, secret
        assert secret.encode("utf-16-le") not in wire
    for body in bodies:  # and nothing beyond the documented fields
        for item in json.loads(body)["records"]:
            fields = {
                "kind",
                "id",
                "parent",
                "branch",
                "path_hash",
                "sealed",
                "created_at",
                "reason",
                "format",
                "flags",
                "after",
                "parents",
            }
            assert set(item) == fields and item["format"] == 3
    logged = [r.getMessage() for r in caplog.records if r.getMessage().startswith("POST")]
    assert [m.split(": ", 1)[1].encode() for m in logged] == bodies  # SOVSEAL_LOG_REPLICATION_BODIES logs exactly what was sent


def test_the_same_entry_on_two_devices_is_one_snapshot_in_two_versions(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    """The same entry on the same parent makes the same snapshot id with other sealed bytes (a fresh
    nonce, its own clock): the server keeps both, and both devices end with one snapshot whose time
    is the earlier one."""
    api = server.storage.create_api_key()
    with open_mem(tmp_path / "one", key, server.url, api) as one, open_mem(tmp_path / "two", key, server.url, api) as two:
        errors: list[ReplicationError] = []
        for m in (one, two):
            m.on("replication-error", errors.append)
        first = one.store("user.editor", "vim")
        second = two.store("user.editor", "vim")
        assert first.snapshot_id == second.snapshot_id
        for m in (one, two):
            assert m.replication is not None and m.replication.flush(20)
        for m in (one, two, one):
            m.pull()
        assert errors == [] and one.replication.rejected() == []  # type: ignore[union-attr]
        assert one.log() == two.log() and len(one.log()) == 1
        assert one.status().heads == two.status().heads


def test_batches_hold_at_most_32_items(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    api = server.storage.create_api_key()
    with FaultProxy(server.url) as proxy:
        with open_mem(tmp_path / "one", key, "", None) as offline:
            for i in range(100):
                offline.store(f"bulk.{i}", f"memory {i}")
        with open_mem(tmp_path / "one", key, proxy.url, api, replication_config=ReplicationConfig()) as one:
            assert one.replication is not None and one.replication.flush(20)
        sizes = [len(json.loads(c.body)["records"]) for c in proxy.pushes()]
    assert sum(sizes) == 101 and max(sizes) == 32 and sizes[:3] == [32, 32, 32]


# -- faults ----------------------------------------------------------------------------------------


def test_server_down_at_first_then_everything_flushes(tmp_path: Path, key: bytes, sqlite_database: str) -> None:
    sock = reserve_port()  # bound, not listening: connections are refused
    host, port = sock.getsockname()[:2]
    errors: list[ReplicationError] = []
    from sovseal.server import open_storage

    storage = open_storage(sqlite_database)
    api = storage.create_api_key()
    storage.close()
    with open_mem(tmp_path / "one", key, f"http://{host}:{port}", api) as one:
        wait_for(lambda: one.status().replication.last_error, what="a first failure")  # type: ignore[attr-defined]
        one.on("replication-error", errors.append)  # registered late: the held event still arrives
        for i in range(40):
            one.store(f"offline.{i}", f"written while the server is down {i}")  # local writes go on
        wait_for(lambda: errors, what="the replication-error event")
        wait_for(lambda: one.status().replication.state == "backoff", what="backoff")  # type: ignore[attr-defined]
        status = one.status()
        assert status.outbox_records == 41 and status.replication.last_error  # type: ignore[attr-defined]
        assert errors[0].retryable and errors[0].status is None and errors[0].code == "network"
        with ServerThread(sqlite_database, sock=sock) as server:
            assert one.replication is not None and one.replication.flush(20)
            assert one.status().outbox_records == 0
            expected = snapshot_of(one)
            assert server.storage.counts(blind(key)) == {"items": 41, "distinct": 41, "held": 0}
            assert restored(tmp_path, key, server) == expected


def test_a_5xx_storm_backs_off_then_recovers(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    api = server.storage.create_api_key()
    storm_until = time.monotonic() + 1.5

    def plan(index: int, request: Captured) -> str:
        return "status:503" if request.method == "POST" and time.monotonic() < storm_until else "pass"

    with FaultProxy(server.url, plan) as proxy:
        with open_mem(tmp_path / "one", key, proxy.url, api) as one:
            history(one)
            wait_for(lambda: one.status().replication.state == "backoff", what="backoff")  # type: ignore[attr-defined]
            assert one.replication is not None and one.replication.flush(20)
            expected = snapshot_of(one)
        failed = [c for c in proxy.pushes() if c.action == "status:503"]
        ok = [c for c in proxy.pushes() if c.action == "pass"]
    assert 2 <= len(failed) <= 20 and ok  # retried with growing delays, not hammered
    sent: dict[str, str] = {}
    for push in failed + ok:  # a retry resends byte-identical items (never re-encrypted)
        for item in json.loads(push.body)["records"]:
            assert sent.setdefault(item["id"], json.dumps(item)) == json.dumps(item)
    first = json.loads(failed[0].body)["records"]
    assert json.loads(ok[0].body)["records"][: len(first)] == first
    assert restored(tmp_path, key, server) == expected


def test_a_lossy_duplicating_reordering_network_still_yields_each_item_once(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    api = server.storage.create_api_key()
    faults = ["drop", "reset", "dup", "delay:0.3", "early", "pass", "reset", "early", "dup", "status:502", "drop", "early"]

    def plan(index: int, request: Captured) -> str:
        if request.method != "POST":
            return "pass"
        pushes = sum(1 for c in proxy.captured[: index + 1] if c.method == "POST")
        return faults[pushes - 1] if pushes <= len(faults) else "pass"

    proxy = FaultProxy(server.url, plan)
    small = dataclasses.replace(FAST, batch_items=4)
    with proxy:
        with open_mem(tmp_path / "one", key, proxy.url, api, replication_config=small) as one:
            events: list[list[str]] = []
            one.on("replicated", events.append)
            for tag in ("", ".2", ".3", ".4"):
                history(one, tag=tag)
            assert one.replication is not None and one.replication.flush(30)
            proxy.deliver_stash()
            expected = snapshot_of(one)
            journal = [i.id for i in _journal_items(tmp_path / "one", key)]
        assert {c.action for c in proxy.pushes()} >= {"drop", "reset", "dup", "early", "status:502"}
    assert_exactly_once(server, key, journal)
    assert restored(tmp_path, key, server) == expected


def _journal_items(path: Path, key: bytes) -> list[WireItem]:
    """Every replicable item of a store in journal order (a fresh copy with all acks ignored)."""
    from sovseal.storage import frames as fr
    from sovseal.storage.store import LocalStore

    store = LocalStore(path, key)
    try:
        out = []
        for frame in store._journal.scan(0).frames:
            decoded = fr.decode(frame.body)
            if not isinstance(decoded, fr.AckFrame):
                out.append(store.wire_item(decoded))
        return out
    finally:
        store.close()


def test_a_401_is_surfaced_and_local_writes_are_unaffected(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    errors: list[ReplicationError] = []
    with FaultProxy(server.url) as proxy, open_mem(tmp_path / "one", key, proxy.url, "sov_wrong_key") as one:
        one.on("replication-error", errors.append)
        one.store("user.editor", "vim")
        wait_for(lambda: errors, what="the replication-error event")
        assert errors[0].status == 401 and not errors[0].retryable and errors[0].ids
        assert one.status().replication.state == "paused"  # type: ignore[attr-defined]
        for i in range(5):
            one.store(f"user.more.{i}", i)  # still works, still local
        assert one.get("user.more.4").payload == 4  # type: ignore[union-attr]
        time.sleep(0.5)
        assert len(proxy.pushes()) == 1  # paused: not retried by itself
        assert one.status().outbox_records == 7
        assert one.replication is not None and not one.replication.flush(1)
        one.replication.retry()  # the user's retry: one more attempt, refused again
        wait_for(lambda: len(errors) == 2, what="the second event")
        assert len(proxy.pushes()) == 2
    api = server.storage.create_api_key()
    with open_mem(tmp_path / "one", key, server.url, api) as one:  # reopened with a good key: all of it flows
        assert one.replication is not None and one.replication.flush(20)
    assert server.storage.counts(blind(key))["items"] == 7


def test_an_item_refused_with_409_is_kept_for_the_user_and_never_retried_forever(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    """A 409 (one id, two bodies) can no longer happen to a format-3 record (a second version is
    kept: test_the_same_entry_on_two_devices_is_one_snapshot_in_two_versions), but a format-2 item
    can still get one: the proxy answers it as the server does, for one record's id."""
    api = server.storage.create_api_key()
    target: list[str] = []

    def plan(_: int, request: object) -> str:
        body = getattr(request, "body", b"")
        return f"conflict:{target[0]}" if target and f'"id":"{target[0]}"'.encode() in body else "pass"

    errors: list[ReplicationError] = []
    with FaultProxy(server.url, plan) as proxy:
        with open_mem(tmp_path / "one", key, proxy.url, api) as one:
            one.on("replication-error", errors.append)
            from sovseal.storage.entries import make_entry, snapshot_id

            expected = snapshot_id(make_entry("store", "user.editor", "vim").canonical(), "")  # the first record: no parent
            target.append(one._store.wire_id(expected).hex())  # refused from its first push on
            sid = one.store("user.editor", "vim").snapshot_id
            assert sid == expected
            twin = [i for i in one._store.outbox(10) if i.kind == "record"]
            assert twin[0].id == target[0]
            one.store("user.shell", "fish")
            wait_for(lambda: errors, what="the 409 event")
            assert one.replication is not None and one.replication.flush(10)  # everything else still flows
            assert errors[0].status == 409 and errors[0].ids == [twin[0].id]
            rejected = one.replication.rejected()
            assert [r.id for r in rejected] == [twin[0].id] and rejected[0].code == "conflict"
            assert one.status().outbox_records == 1 and one.status().replication.rejected == 1  # type: ignore[attr-defined]
            pushes = len(proxy.pushes())
            time.sleep(0.5)
            assert len(proxy.pushes()) == pushes  # not retried by itself
            assert one.replication.retry() == 1
            wait_for(lambda: len(errors) == 2, what="the refused retry")
            assert len(proxy.pushes()) == pushes + 1
            assert one.get("user.editor").snapshot_id == sid  # type: ignore[union-attr]
        with open_mem(tmp_path / "one", key, proxy.url, api) as again:  # remembered across a restart
            assert again.replication is not None and [r.id for r in again.replication.rejected()] == [twin[0].id]
            time.sleep(0.3)
            assert len(proxy.pushes()) == pushes + 1


def test_a_poison_item_the_server_does_not_name_is_isolated_by_bisection(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    api = server.storage.create_api_key()
    poison: list[str] = []

    def plan(index: int, request: Captured) -> str:
        if request.method == "POST" and poison and f'"id":"{poison[0]}"'.encode() in request.body:
            return "status:422"  # refuses any batch that holds it, without saying which item
        return "pass"

    with open_mem(tmp_path / "one", key, "", None) as offline:
        for i in range(40):
            offline.store(f"item.{i}", i)
        poison.append(offline._store.outbox(100)[23].id)
    errors: list[ReplicationError] = []
    with FaultProxy(server.url, plan) as proxy:
        with open_mem(tmp_path / "one", key, proxy.url, api, replication_config=dataclasses.replace(FAST, batch_items=32)) as one:
            one.on("replication-error", errors.append)
            assert one.replication is not None
            wait_for(one.replication.rejected, what="the quarantined item")
            one.replication.flush(10)
            assert [r.id for r in one.replication.rejected()] == poison
            assert one.status().outbox_records == 1
        refused = [c for c in proxy.pushes() if c.action == "status:422"]
    assert len(refused) <= 10  # bisection, not one request per item
    assert [e.ids for e in errors] == [poison]
    counts = server.storage.counts(blind(key))
    assert counts["items"] + counts["held"] == 40  # every other item reached the server


# -- backpressure ----------------------------------------------------------------------------------


def test_backpressure_blocks_store_until_the_outbox_drains_and_times_out(tmp_path: Path, key: bytes, sqlite_database: str) -> None:
    sock = reserve_port()
    host, port = sock.getsockname()[:2]
    from sovseal.server import open_storage

    storage = open_storage(sqlite_database)
    api = storage.create_api_key()
    storage.close()
    with open_mem(tmp_path / "one", key, f"http://{host}:{port}", api, max_outbox_bytes=4096, backpressure_timeout=0.5) as one:
        i = 0
        while one.status().outbox_bytes <= 4096:
            one.store(f"fill.{i}", "x" * 200)
            i += 1
        records = one.status().records
        t = time.perf_counter()
        with pytest.raises(BackpressureTimeoutError, match="max_outbox_bytes"):
            one.store("one.too.many", "blocked")
        assert time.perf_counter() - t >= 0.45  # it waited for the timeout before giving up
        with pytest.raises(BackpressureTimeoutError):
            one.delete("fill.0")
        assert one.status().records == records and one.get("one.too.many") is None  # nothing was written
        assert one.replication is not None
        one.replication.backpressure_timeout = None  # now block without a limit
        done = threading.Event()
        blocked = threading.Thread(target=lambda: (one.store("waits.for.room", "ok"), done.set()))
        blocked.start()
        time.sleep(0.5)
        assert not done.is_set()  # still blocked: the server is down
        with ServerThread(sqlite_database, sock=sock):
            assert done.wait(20)  # unblocked once the outbox drained
            blocked.join()
            assert one.get("waits.for.room") is not None
            assert one.replication.flush(20)


# -- configuration -----------------------------------------------------------------------------------


def test_endpoint_configuration_is_checked(tmp_path: Path, key: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(InvalidInputError, match="API key"):
        open_mem(tmp_path / "a", key, "http://127.0.0.1:9", None)
    with pytest.raises(InvalidInputError, match="https"):
        open_mem(tmp_path / "a", key, "http://sync.example.com", "sov_x")
    with pytest.raises(InvalidInputError, match="max_outbox_bytes"):
        open_mem(tmp_path / "a", key, "https://sync.example.com", "sov_x", max_outbox_bytes=0)
    monkeypatch.setenv("SOVSEAL_ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("SOVSEAL_API_KEY", "sov_from_env")
    monkeypatch.setenv("SOVSEAL_PROJECT", "team-a")
    with open_mem(tmp_path / "a", key, None, None) as mem:
        assert mem.replication is not None and mem.replication.target.project == "team-a"
        assert mem.status().replication.project == blind(key, "team-a")  # type: ignore[attr-defined]
    with open_mem(tmp_path / "a", key, "", None) as mem:  # endpoint="" turns it off
        assert mem.replication is None and mem.status().replication is None  # type: ignore[attr-defined]
        with pytest.raises(InvalidInputError, match="endpoint"):
            mem.pull()


def test_async_api_pulls_too(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    import asyncio

    from sovseal import AsyncSovseal
    from tests.fakes import fake_embed

    api = server.storage.create_api_key()
    with open_mem(tmp_path / "one", key, server.url, api) as one:
        history(one)
        assert one.replication is not None and one.replication.flush(20)
        expected = snapshot_of(one)

    async def restore() -> dict[str, object]:
        options: dict[str, object] = {"endpoint": server.url, "api_key": api, "replication_config": FAST}
        async with AsyncSovseal(tmp_path / "two", key=key, embedder=fake_embed, **options) as two:
            assert two.replication is not None
            result = await two.pull()
            assert result.waiting == 0 and result.new_records == 6
            return snapshot_of(two._sync)

    assert asyncio.run(restore()) == expected
