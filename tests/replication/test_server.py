"""The replication server over real HTTP, on SQLite and on PostgreSQL (the same suite on both).

Items are real: produced by a local store's outbox, so the server is tested on exactly what the
worker sends, and restores are checked by replaying the server's pull into a second store.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from sovseal import Sovseal
from sovseal.crypto.primitives import project_blind_id
from sovseal.replication.protocol import HEALTH_PATH, PROJECT_HEADER, PULL_PATH, PUSH_PATH, encode_push
from sovseal.server import Limits, ServerThread
from sovseal.storage.wire import WireItem
from tests.fakes import fake_embed
from tests.replication.helpers import history, server_items, snapshot_of

PROJECT_A = "a" * 64
PROJECT_B = "b" * 64


@pytest.fixture
def srv(database: str) -> Iterator[ServerThread]:
    with ServerThread(database, limits=Limits(max_body=256 * 1024, max_items=64)) as s:
        yield s


def http(srv: ServerThread, api_key: str | None, project: str = PROJECT_A) -> httpx.Client:
    headers = {PROJECT_HEADER: project}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    return httpx.Client(base_url=srv.url, headers=headers, timeout=10)


def source(tmp_path: Path, key: bytes) -> tuple[list[WireItem], dict[str, object]]:
    """A store with a rich history (no endpoint): its outbox items and what a restore must equal."""
    with Sovseal(tmp_path / "source", key=key, embedder=fake_embed, endpoint="") as mem:
        history(mem)
        history(mem, tag=".2")
        return mem._store.outbox(10_000), snapshot_of(mem)


def push(client: httpx.Client, items: list[WireItem], after: str = "") -> httpx.Response:
    return client.post(PUSH_PATH, content=encode_push(items, after), headers={"Content-Type": "application/json"})


def push_in_batches(client: httpx.Client, items: list[WireItem], size: int) -> None:
    after = ""
    for start in range(0, len(items), size):
        batch = items[start : start + size]
        assert push(client, batch, after).status_code == 200
        after = batch[-1].id


def restore(tmp_path: Path, key: bytes, raw: list[dict[str, object]], name: str = "restored") -> dict[str, object]:
    with Sovseal(tmp_path / name, key=key, embedder=fake_embed, endpoint="") as mem:
        assert mem._store.import_items([WireItem.from_json(r) for r in raw]) == []
        assert mem.verify().ok
        return snapshot_of(mem)


def test_health_names_the_backend(srv: ServerThread, database: str) -> None:
    reply = httpx.get(srv.url + HEALTH_PATH).raise_for_status().json()
    assert reply == {"status": "ok", "backend": "postgresql" if database.startswith("postgresql") else "sqlite"}


def test_push_pull_round_trip_is_ordered_and_idempotent(srv: ServerThread, tmp_path: Path, key: bytes) -> None:
    items, expected = source(tmp_path, key)
    api = srv.storage.create_api_key(PROJECT_A)
    with http(srv, api) as client:
        push_in_batches(client, items, 5)
        again = push(client, items[:12]).json()  # a retried batch: nothing new
        assert again["accepted"] == 0 and again["duplicates"] == 12
        doubled = push(client, items[10:14] + items[10:14], items[9].id).json()  # duplicates inside one batch
        assert doubled["accepted"] == 0 and doubled["duplicates"] == 8
    raw = server_items(srv.url, api, PROJECT_A)
    assert [r["id"] for r in raw] == [i.id for i in items]  # acceptance order is journal order
    assert [r["seq"] for r in raw] == list(range(1, len(items) + 1))
    assert srv.storage.counts(PROJECT_A) == {"items": len(items), "distinct": len(items), "held": 0}
    assert restore(tmp_path, key, raw) == expected


def test_pull_pages_with_a_cursor(srv: ServerThread, tmp_path: Path, key: bytes) -> None:
    items, _ = source(tmp_path, key)
    api = srv.storage.create_api_key(PROJECT_A)
    with http(srv, api) as client:
        push_in_batches(client, items, 32)
        seen: list[str] = []
        cursor = 0
        while True:
            page = client.get(PULL_PATH, params={"cursor": cursor, "limit": 7}).json()
            assert len(page["records"]) <= 7 and page["last"] == len(items)
            seen += [r["id"] for r in page["records"]]
            cursor = page["cursor"]
            if not page["more"]:
                break
        assert seen == [i.id for i in items]
        assert client.get(PULL_PATH, params={"cursor": cursor}).json()["records"] == []
        assert client.get(PULL_PATH, params={"cursor": -1}).status_code == 400
        assert client.get(PULL_PATH, params={"cursor": "x"}).status_code == 400


def _legacy(item: WireItem) -> WireItem:
    """The item as a device of journal format 2 sent it (no format-3 fields)."""
    return dataclasses.replace(item, flags=1, after=(), parents=())


def test_a_different_body_under_a_known_id_is_refused_and_nothing_applies(srv: ServerThread, tmp_path: Path, key: bytes) -> None:
    """For what a format-2 device pushes: one id, one body. (Format-3 records: the next test.)"""
    items, _ = source(tmp_path, key)
    items = [_legacy(i) for i in items]
    api = srv.storage.create_api_key(PROJECT_A)
    record = next(i for i in items[:10] if i.kind == "record")
    forged = dataclasses.replace(record, sealed=os.urandom(len(record.sealed)))  # every other field as the store made it
    with http(srv, api) as client:
        push_in_batches(client, items[:10], 10)
        reply = push(client, [*items[10:14], forged], items[9].id)
        assert reply.status_code == 409
        assert reply.json()["error"] == "conflict" and reply.json()["ids"] == [record.id]
        assert srv.storage.counts(PROJECT_A)["items"] == 10  # items[10:14] were not applied either
        other = next(i for i in items[10:] if i.kind == "record")
        twin = dataclasses.replace(other, sealed=os.urandom(40))
        inner = push(client, [other, twin], items[9].id)
        assert inner.status_code == 409 and inner.json()["ids"] == [other.id]  # two bodies for one id in one batch
    assert [r["id"] for r in server_items(srv.url, api, PROJECT_A)] == [i.id for i in items[:10]]


def test_another_version_of_a_format_3_record_is_kept_beside_the_first(srv: ServerThread, tmp_path: Path, key: bytes) -> None:
    """Two devices that store the same entry on the same parents make one snapshot id with other
    bytes (their own clock): both versions are kept and served, and a retry of either is a duplicate."""
    items, _ = source(tmp_path, key)
    api = srv.storage.create_api_key(PROJECT_A)
    record = next(i for i in items[:10] if i.kind == "record")
    other = dataclasses.replace(record, sealed=os.urandom(len(record.sealed)), created_at=record.created_at + 1)
    with http(srv, api) as client:
        push_in_batches(client, items[:10], 10)
        assert push(client, [other], items[9].id).status_code == 200
        again = push(client, [other, record], items[9].id).json()
        assert again["accepted"] == 0 and again["duplicates"] == 2
    served = server_items(srv.url, api, PROJECT_A)
    assert [r["id"] for r in served] == [*(i.id for i in items[:10]), record.id]
    assert WireItem.from_json({k: v for k, v in served[-1].items() if k != "seq"}) == other


def test_items_whose_parent_is_missing_are_held_until_it_arrives(srv: ServerThread, tmp_path: Path, key: bytes) -> None:
    items, expected = source(tmp_path, key)
    api = srv.storage.create_api_key(PROJECT_A)
    with http(srv, api) as client:
        late = push(client, items[6:]).json()  # the first item's parent is in items[:6]
        assert late["accepted"] == 0 and late["held"] == [i.id for i in items[6:]]
        assert client.get(PULL_PATH).json()["records"] == []  # nothing is served before its parent
        assert srv.storage.counts(PROJECT_A)["held"] == len(items) - 6
        early = push(client, items[:6]).json()
        assert early["accepted"] == 6 and early["released"] == len(items) - 6 and early["held"] == []
    raw = server_items(srv.url, api, PROJECT_A)
    assert [r["id"] for r in raw] == [i.id for i in items]
    assert srv.storage.counts(PROJECT_A)["held"] == 0
    assert restore(tmp_path, key, raw) == expected


@pytest.mark.parametrize("order", ["reversed", "shuffled"])
def test_batches_reordered_by_the_network_are_accepted_in_journal_order(
    srv: ServerThread, tmp_path: Path, key: bytes, order: str
) -> None:
    """Rollbacks and branch moves are relative to the records before them: order must survive."""
    items, expected = source(tmp_path, key)
    api = srv.storage.create_api_key(PROJECT_A)
    batches = [(items[s : s + 3], items[s - 1].id if s else "") for s in range(0, len(items), 3)]
    sent = list(reversed(batches)) if order == "reversed" else [batches[i] for i in _permutation(len(batches))]
    with http(srv, api) as client:
        for batch, after in sent:
            assert push(client, batch, after).status_code == 200
    raw = server_items(srv.url, api, PROJECT_A)
    assert [r["id"] for r in raw] == [i.id for i in items]
    assert restore(tmp_path, key, raw) == expected


def _permutation(n: int) -> list[int]:
    order = list(range(n))
    for i in range(n - 1, 0, -1):  # a fixed Fisher-Yates from a fixed seed: reproducible
        j = (i * 7919 + 13) % (i + 1)
        order[i], order[j] = order[j], order[i]
    return order


def test_concurrent_pushers_store_each_item_exactly_once(srv: ServerThread, tmp_path: Path, key: bytes) -> None:
    items, expected = source(tmp_path, key)
    api = srv.storage.create_api_key(PROJECT_A)
    errors: list[BaseException] = []

    def pusher() -> None:
        try:
            with http(srv, api) as client:
                push_in_batches(client, items, 4)
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=pusher) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    raw = server_items(srv.url, api, PROJECT_A)
    assert [r["id"] for r in raw] == [i.id for i in items]
    assert srv.storage.counts(PROJECT_A) == {"items": len(items), "distinct": len(items), "held": 0}
    assert restore(tmp_path, key, raw) == expected


def test_malformed_and_oversized_bodies_get_4xx_and_change_nothing(srv: ServerThread, tmp_path: Path, key: bytes) -> None:
    items, _ = source(tmp_path, key)
    api = srv.storage.create_api_key(PROJECT_A)
    good = items[0].to_json()
    event = next(i for i in items if i.kind == "branch").to_json()

    def body(*records: object, **extra: object) -> bytes:
        return json.dumps({"records": list(records), **extra}).encode()

    cases: list[tuple[bytes, int]] = [
        (b"not json", 400),
        (b"\xff\xfe", 400),
        (b"[]", 400),
        (json.dumps({"records": "x"}).encode(), 400),
        (body(good, extra=1), 400),
        (body(good, after="zz"), 400),
        (body({**good, "path": "user.editor"}), 400),  # an unknown field could leak plaintext: refused
        (body({k: v for k, v in good.items() if k != "sealed"}), 400),
        (body({**good, "id": good["id"].upper()}), 400),
        (body({**good, "kind": "secret"}), 400),
        (body({**good, "sealed": "***"}), 400),
        (body({**good, "sealed": base64.b64encode(b"short").decode()}), 400),
        (body({**good, "created_at": "yesterday"}), 400),
        (body({**event, "id": "0" * 64}), 400),  # an event's id must be the sha256 of its bytes
        (body(*[good] * 65), 413),  # more items than the server takes in one push
        (body({**good, "sealed": base64.b64encode(os.urandom(300 * 1024)).decode()}), 413),  # body over the limit
    ]
    with http(srv, api) as client:
        for content, status in cases:
            reply = client.post(PUSH_PATH, content=content)
            assert reply.status_code == status, (content[:80], reply.text)
            assert set(reply.json()) == {"error", "message", "ids"}
        named = client.post(PUSH_PATH, content=body({**good, "path": "x"})).json()
        assert named["error"] == "invalid_item" and named["ids"] == [good["id"]]
    assert srv.storage.counts(PROJECT_A) == {"items": 0, "distinct": 0, "held": 0}
    with socket_conn(srv) as raw:  # a Content-Length over the limit is refused before the body is read
        raw.sendall(
            f"POST {PUSH_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {api}\r\n{PROJECT_HEADER}: {PROJECT_A}\r\n"
            f"Content-Length: {10**9}\r\n\r\n".encode()
        )
        assert raw.recv(100).startswith(b"HTTP/1.1 413")


def socket_conn(srv: ServerThread):  # type: ignore[no-untyped-def]
    import socket

    host, port = srv.url.rsplit("/", 1)[1].split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def test_api_keys_are_scoped_to_one_project(srv: ServerThread, tmp_path: Path, key: bytes) -> None:
    items, _ = source(tmp_path, key)
    key_a = srv.storage.create_api_key(PROJECT_A, "device of A")
    key_b = srv.storage.create_api_key()  # unbound: it binds to the first project it is used with
    with http(srv, None) as client:
        assert client.post(PUSH_PATH, content=encode_push(items[:1], "")).status_code == 401
    with http(srv, "sov_not_a_key") as client:
        assert client.get(PULL_PATH).status_code == 401
    with http(srv, key_a, project="not-hex") as client:
        assert client.get(PULL_PATH).status_code == 400
    with http(srv, key_a, PROJECT_B) as client:  # A's key cannot write or read B
        assert push(client, items[:3]).status_code == 403
        assert client.get(PULL_PATH).status_code == 403
    with http(srv, key_a) as client:
        assert push(client, items[:3]).status_code == 200
    with http(srv, key_b, PROJECT_B) as client:
        assert client.get(PULL_PATH).json()["records"] == []  # B's first use binds it to B, and B sees nothing of A
    with http(srv, key_b, PROJECT_A) as client:  # ...and from now on it cannot touch A
        assert client.get(PULL_PATH).status_code == 403
        assert push(client, items[3:5], items[2].id).status_code == 403
    assert srv.storage.counts(PROJECT_A)["items"] == 3 and srv.storage.counts(PROJECT_B)["items"] == 0
    assert srv.storage.revoke_api_key(key_a)
    with http(srv, key_a) as client:
        assert client.get(PULL_PATH).status_code == 401


def test_keys_are_stored_hashed_and_no_key_material_is_needed(srv: ServerThread, key: bytes) -> None:
    api = srv.storage.create_api_key(PROJECT_A)
    with srv.storage.db.reader() as tx:
        rows = tx.execute("SELECT key_hash, project FROM api_keys")
    assert rows and all(api not in str(row) for row in rows)
    assert project_blind_id("default", key) != project_blind_id("default", os.urandom(32))  # per key, per project
