"""Load: the replication server under sustained pushes and pulls from several concurrent clients.

What it proves: with six pushers (four projects of their own, two sharing one project) and two
pullers hammering the real server at once, every item pushed is stored exactly once (none lost,
none duplicated, retried batches absorbed idempotently), each client's items keep the order it
sent them in, and pulls page through a consistent, growing sequence. It also reports the
figures: throughput and p50/p99 latency of pushes and pulls. Timings are printed, never asserted
(the machine is shared); correctness is asserted.

How: each pusher builds its own chain of items (a branch event, then records each naming the
previous one as parent, ids and sealed bytes random: the server is blind, so synthetic items are
exactly as good as sealed ones here) and POSTs batches of 32 with ``after`` set to its previous
batch's last id; every fifth batch is sent twice, as a client retrying after a lost ack would.
Bounded by count (batches per client), on loopback, SQLite on the real disk with its
``synchronous=FULL`` commits. ``SOVSEAL_SOAK=1`` runs 10x the batches, and PostgreSQL too.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sovseal.replication.protocol import PROJECT_HEADER, PULL_PATH, PUSH_PATH
from sovseal.server import ServerThread
from tests.reliability._net import SOAK, percentile, size
from tests.replication.conftest import drop_postgres_database, fresh_postgres_database, postgres_url  # noqa: F401 - fixture

BATCH = 32
BATCHES = size(40, 400)  # per pusher
PROJECTS = ["1" * 64, "2" * 64, "3" * 64, "4" * 64, "5" * 64, "5" * 64]  # the last two pushers share a project


def chain(count: int) -> list[dict[str, Any]]:
    """A branch event and ``count - 1`` records linked parent to child, as a client's journal would be."""
    branch = os.urandom(16).hex()
    sealed = os.urandom(60)
    items = [_item("branch", hashlib.sha256(sealed).hexdigest(), "", branch, "", sealed, "CREATE")]
    parent = ""
    for _ in range(count - 1):
        wire = os.urandom(32).hex()
        items.append(_item("record", wire, parent, branch, os.urandom(32).hex(), os.urandom(200), ""))
        parent = wire
    return items


def _item(kind: str, item_id: str, parent: str, branch: str, path_hash: str, sealed: bytes, reason: str) -> dict[str, Any]:
    return {
        "kind": kind,
        "id": item_id,
        "parent": parent,
        "branch": branch,
        "path_hash": path_hash,
        "sealed": base64.b64encode(sealed).decode(),
        "created_at": time.time(),
        "reason": reason,
    }


@pytest.fixture(params=["sqlite", "postgresql"] if SOAK else ["sqlite"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield str(tmp_path / "server.sqlite3")
        return
    url = fresh_postgres_database(request.getfixturevalue("postgres_url"))
    try:
        yield url
    finally:
        drop_postgres_database(url)


def test_concurrent_clients_lose_and_duplicate_nothing(database: str, figures: dict[str, Any]) -> None:
    chains = [chain(BATCHES * BATCH) for _ in PROJECTS]
    push_latency: list[float] = []
    pull_latency: list[float] = []
    pages_seen: dict[str, int] = {}
    errors: list[str] = []
    lock = threading.Lock()
    done = threading.Event()

    with ServerThread(database) as server:
        keys = {p: server.storage.create_api_key(p) for p in set(PROJECTS)}

        def pusher(project: str, items: list[dict[str, Any]]) -> None:
            headers = {"Authorization": f"Bearer {keys[project]}", PROJECT_HEADER: project, "Content-Type": "application/json"}
            mine: list[float] = []
            with httpx.Client(base_url=server.url, headers=headers, timeout=30) as client:
                after = ""
                for n in range(BATCHES):
                    batch = items[n * BATCH : (n + 1) * BATCH]
                    body = httpx.Request("POST", "/", json={"records": batch, "after": after}).content
                    for _attempt in range(2 if n % 5 == 4 else 1):  # a retry after a lost ack
                        started = time.perf_counter()
                        response = client.post(PUSH_PATH, content=body)
                        mine.append(time.perf_counter() - started)
                        if response.status_code != 200:
                            with lock:
                                errors.append(f"{project[:4]} batch {n}: {response.status_code} {response.text[:200]}")
                            return
                    after = batch[-1]["id"]
            with lock:
                push_latency.extend(mine)

        def puller(project: str) -> None:
            headers = {"Authorization": f"Bearer {keys[project]}", PROJECT_HEADER: project}
            mine: list[float] = []
            last_seq = 0
            with httpx.Client(base_url=server.url, headers=headers, timeout=30) as client:
                while not done.is_set():
                    started = time.perf_counter()
                    page = client.get(PULL_PATH, params={"cursor": last_seq, "limit": 500}).raise_for_status().json()
                    mine.append(time.perf_counter() - started)
                    seqs = [r["seq"] for r in page["records"]]
                    if seqs != list(range(last_seq + 1, last_seq + 1 + len(seqs))):
                        with lock:
                            errors.append(f"pull of {project[:4]} skipped or repeated a seq after {last_seq}: {seqs[:5]}")
                        return
                    last_seq = seqs[-1] if seqs else last_seq
            with lock:
                pull_latency.extend(mine)
                pages_seen[project] = last_seq

        pushers = [threading.Thread(target=pusher, args=(p, c), name=f"pusher-{i}") for i, (p, c) in enumerate(zip(PROJECTS, chains, strict=True))]
        pullers = [threading.Thread(target=puller, args=(p,), name=f"puller-{p[:1]}") for p in (PROJECTS[0], PROJECTS[-1])]
        started = time.perf_counter()
        for t in pushers + pullers:
            t.start()
        for t in pushers:
            t.join(600)
        elapsed = time.perf_counter() - started
        done.set()
        for t in pullers:
            t.join(60)
        assert not errors, errors[:5]

        # Zero lost, zero duplicated, each client's order kept, for every project.
        lost = duplicated = 0
        for project in sorted(set(PROJECTS)):
            sent = [c for p, c in zip(PROJECTS, chains, strict=True) if p == project]
            page = server.storage.pull(project, 0, 10**9)
            stored = [json.loads(body)["id"] for _, body in page.rows]
            wanted = {item["id"] for c in sent for item in c}
            lost += len(wanted - set(stored))
            duplicated += len(stored) - len(set(stored))
            assert set(stored) == wanted and server.storage.counts(project)["held"] == 0
            position = {item_id: i for i, item_id in enumerate(stored)}
            for c in sent:
                assert [position[item["id"]] for item in c] == sorted(position[item["id"]] for item in c)
        assert lost == duplicated == 0

    items = sum(len(c) for c in chains)
    requests = len(push_latency)
    figures.update(
        backend="postgresql" if database.startswith("postgresql") else "sqlite",
        pushers=len(PROJECTS),
        pullers=len(pullers),
        items=items,
        push_requests=requests,
        seconds=round(elapsed, 2),
        items_per_s=round(items / elapsed),
        pushes_per_s=round(requests / elapsed, 1),
        push_p50_ms=round(percentile(push_latency, 0.50) * 1000, 1),
        push_p99_ms=round(percentile(push_latency, 0.99) * 1000, 1),
        pull_pages=len(pull_latency),
        pull_p99_ms=round(percentile(pull_latency, 0.99) * 1000, 1),
        lost=lost,
        duplicated=duplicated,
    )
    print(f"server load: {figures}")
