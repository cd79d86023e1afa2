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

Hostile load, on ``sovseal serve`` in a subprocess (so that its memory and descriptors are its
own): a 16 MiB body of empty objects, a project holding tens of MiB of orphans while accepted
pushes go on, and hundreds of half-open connections under a low open-file limit. Each reports
what it cost (peak RSS, push latency, descriptors) and asserts only bounds that the unguarded
server broke by far (docs/reliability-network.md has the before and after).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sovseal.replication.protocol import PROJECT_HEADER, PULL_PATH, PUSH_PATH
from sovseal.server import ServerThread
from tests.reliability._net import SOAK, memory_dir, percentile, size
from tests.replication.conftest import (  # noqa: F401 - fixture
    drop_postgres_database,
    fresh_postgres_database,
    postgres_url,
)
from tests.replication.helpers import raw_item
from tests.replication.test_server_limits import Served

BATCH = 32
BATCHES = size(40, 400)  # per pusher
PROJECTS = ["1" * 64, "2" * 64, "3" * 64, "4" * 64, "5" * 64, "5" * 64]  # the last two pushers share a project


def chain(count: int) -> list[dict[str, Any]]:
    """A branch event and ``count - 1`` records linked parent to child, as a client's journal would be."""
    branch = os.urandom(16).hex()
    sealed = os.urandom(60)
    items = [raw_item("branch", hashlib.sha256(sealed).hexdigest(), "", branch, "", sealed, "CREATE")]
    parent = ""
    for _ in range(count - 1):
        wire = os.urandom(32).hex()
        items.append(raw_item("record", wire, parent, branch, os.urandom(32).hex(), os.urandom(200), ""))
        parent = wire
    return items



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

        pushers = [
            threading.Thread(target=pusher, args=(p, c), name=f"pusher-{i}") for i, (p, c) in enumerate(zip(PROJECTS, chains, strict=True))
        ]
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


# -- hostile load ------------------------------------------------------------------------------


def _pusher(served: Served) -> httpx.Client:
    return httpx.Client(base_url=served.url, headers=served.headers(), timeout=120)


def test_a_huge_body_of_empty_objects_costs_little_memory_and_stalls_nobody(tmp_path: Path, figures: dict[str, Any]) -> None:
    """16 MiB of ``{},{},…``: before, 5.6 million dicts (+432 MiB peak RSS) parsed on the event loop (a 1.2 s stall)."""
    body = b'{"records":[' + b",".join([b"{}"] * (16 * 1024 * 1024 // 3 - 10)) + b'],"after":""}'
    stalls: list[float] = []
    with memory_dir(tmp_path) as scratch, Served(scratch / "server") as served:
        done = threading.Event()

        def probe() -> None:
            with httpx.Client(base_url=served.url, timeout=30) as client:
                while not done.is_set():
                    started = time.perf_counter()
                    client.get("/v2/health").raise_for_status()
                    stalls.append(time.perf_counter() - started)
                    time.sleep(0.01)

        prober = threading.Thread(target=probe)
        before = served.status()
        prober.start()
        with _pusher(served) as client:
            response = client.post(PUSH_PATH, content=body)
        done.set()
        prober.join()
        after = served.status()
    assert response.status_code == 413 and response.json()["error"] == "too_large"
    growth = after["peak_rss_mib"] - before["peak_rss_mib"]
    assert growth < 128, growth  # the body itself, a copy, and the interpreter's slack
    figures.update(
        body_mib=round(len(body) / 2**20, 1),
        status=response.status_code,
        peak_rss_growth_mib=growth,
        health_probe_max_ms=round(max(stalls) * 1000, 1),
    )


def test_held_orphans_cost_an_accepted_push_nothing(tmp_path: Path, figures: dict[str, Any]) -> None:
    """A project parks orphans (records whose parent never comes); later accepted pushes must not read them.

    Before, every accepted push loaded every held body: 208-652 ms and +300 MiB of RSS with 317 MiB held.
    """
    orphans, sealed = size(160, 640), 380 * 1024
    env = {"SOVSEAL_SERVER_MAX_HELD_BYTES": str(2**40), "SOVSEAL_SERVER_MAX_HELD_ITEMS": str(orphans)}
    with memory_dir(tmp_path) as scratch, Served(scratch / "server", env=env) as served, _pusher(served) as client:
        parked = 0
        while parked < orphans:
            batch = [
                raw_item(
                    "record", os.urandom(32).hex(), os.urandom(32).hex(), os.urandom(16).hex(), os.urandom(32).hex(), os.urandom(sealed), ""
                )
                for _ in range(min(16, orphans - parked))
            ]
            reply = client.post(PUSH_PATH, content=json.dumps({"records": batch, "after": ""})).raise_for_status().json()
            assert len(reply["held"]) == len(batch)
            parked += len(batch)
        before = served.status()
        latency: list[float] = []
        for _ in range(10):
            pushed = chain(4)  # a fresh branch and three records: accepted at once
            started = time.perf_counter()
            reply = client.post(PUSH_PATH, content=json.dumps({"records": pushed, "after": ""})).raise_for_status().json()
            latency.append(time.perf_counter() - started)
            assert reply["accepted"] == 4
        after = served.status()
        held = client.get(PULL_PATH, params={"limit": 1}).raise_for_status().json()["held"]
    assert held == orphans
    growth = after["peak_rss_mib"] - before["peak_rss_mib"]
    assert growth < 32, growth  # the held bodies are never loaded (they were: +300 MiB)
    figures.update(
        orphans=orphans,
        held_mib=round(orphans * sealed * 4 / 3 / 2**20),
        accepted_push_p50_ms=round(percentile(latency, 0.5) * 1000, 1),
        accepted_push_max_ms=round(max(latency) * 1000, 1),
        peak_rss_growth_mib=growth,
    )


def test_half_open_connections_never_exhaust_descriptors(tmp_path: Path, figures: dict[str, Any]) -> None:
    """Requests whose headers never end, more of them than the open-file limit allows.

    Before: 1,100 of them at ``ulimit -n 1024`` took every descriptor, health went unanswered,
    nothing was ever cut, and asyncio logged a traceback per failed accept (165 MB in 45 s).
    """
    nofile, count, deadline = size(512, 1024), size(600, 1100), 2.0
    env = {"SOVSEAL_SERVER_HEADER_TIMEOUT": str(deadline)}
    peak = 0
    with memory_dir(tmp_path) as scratch:
        with Served(scratch / "server", env=env, nofile=nofile) as served:
            stop = threading.Event()

            def sample() -> None:
                nonlocal peak
                while not stop.is_set():
                    peak = max(peak, served.status()["fds"])
                    time.sleep(0.01)

            sampler = threading.Thread(target=sample)
            sampler.start()
            started = time.monotonic()
            half_open = []
            for _ in range(count):
                sock = socket.create_connection(("127.0.0.1", served.port), timeout=5)
                sock.sendall(f"POST {PUSH_PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n".encode())
                half_open.append(sock)
            opened = time.monotonic() - started
            health_started = time.perf_counter()
            health = httpx.get(served.url + "/v2/health", timeout=10).status_code  # served meanwhile: it evicts a half-open one
            health_ms = (time.perf_counter() - health_started) * 1000
            time.sleep(deadline + 1.0)
            cut = sum(1 for sock in half_open if _closed(sock))
            stop.set()
            sampler.join()
            after = served.status()
            for sock in half_open:
                sock.close()
        log = served.log.read_text(errors="replace")
    assert health == 200 and peak < nofile and cut == count, (health, peak, cut)
    assert "Too many open files" not in log and "Traceback" not in log, log[-2000:]
    figures.update(
        open_file_limit=nofile,
        half_open=count,
        opened_in_s=round(opened, 2),
        peak_fds=peak,
        fds_after=after["fds"],
        health_during=health,
        health_ms=round(health_ms, 1),
        cut=cut,
        log_bytes=len(log.encode()),
    )


def _closed(sock: socket.socket) -> bool:
    """Has the server closed this connection (EOF or reset)?"""
    sock.setblocking(False)
    try:
        return sock.recv(1) == b""
    except BlockingIOError:
        return False
    except OSError:
        return True
