"""What one tenant, client or connection may cost the server: refused, never corrupting, stalling or exhausting it.

Over real HTTP and real sockets on loopback: per-project quotas on held items (both backends),
a release that reads only the held items it frees, deadlines on request headers and bodies, the
connection cap, error replies that never echo the input, and a client leaving mid-body that is
no error in the log (``sovseal serve`` in a subprocess, as an operator runs it). Every refused
request is checked to change nothing: every row of every table is read before and after.
"""

from __future__ import annotations

import hashlib
import json
import os
import resource
import select
import socket
import sqlite3
import subprocess
import sys
import threading
import time
import tracemalloc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from sovseal.replication.protocol import (
    HEALTH_PATH,
    PROJECT_HEADER,
    PULL_PATH,
    PUSH_PATH,
)
from sovseal.server import HeldQuota, LimitError, Limits, ServerThread, Storage, open_storage
from sovseal.server.validate import Item, validate_item
from tests.replication.helpers import raw_item

PROJECT = "c" * 64
TABLES = ("sovseal_meta", "api_keys", "projects", "items", "branches", "held", "held_waits")
ROOT = Path(__file__).resolve().parents[2]


# -- items and helpers -------------------------------------------------------------------------


def branch_event(branch: str, parent: str = "") -> dict[str, Any]:
    sealed = os.urandom(60)
    return raw_item("branch", hashlib.sha256(sealed).hexdigest(), parent, branch, "", sealed, "CREATE")


def record(parent: str, branch: str, size: int = 200) -> dict[str, Any]:
    return raw_item("record", os.urandom(32).hex(), parent, branch, os.urandom(32).hex(), os.urandom(size), "")



def items(raw: list[dict[str, Any]]) -> list[Item]:
    return [validate_item(i, r) for i, r in enumerate(raw)]


def held_size(item: dict[str, Any]) -> int:
    """The bytes a held item counts for: its canonical body, as the server stores it."""
    return len(validate_item(0, item).body)


def state(storage: Storage) -> dict[str, list[tuple[Any, ...]]]:
    """Every row of every table: what 'a refused request changes nothing' is checked against."""
    with storage.reads.reader() as tx:
        return {t: sorted(tx.execute(f"SELECT * FROM {t}")) for t in TABLES}  # nosec B608 -- fixed table names


class Client:
    def __init__(self, srv: ServerThread, project: str = PROJECT) -> None:
        self.api = srv.storage.create_api_key(project)
        headers = {"Authorization": f"Bearer {self.api}", PROJECT_HEADER: project, "Content-Type": "application/json"}
        self.http = httpx.Client(base_url=srv.url, headers=headers, timeout=10)

    def push(self, items: list[dict[str, Any]], after: str = "") -> httpx.Response:
        return self.http.post(PUSH_PATH, content=json.dumps({"records": items, "after": after}))

    def ids(self) -> list[str]:
        return [r["id"] for r in self.http.get(PULL_PATH).raise_for_status().json()["records"]]


def address(srv: ServerThread) -> tuple[str, int]:
    host, port = srv.sock.getsockname()[:2]
    return str(host), int(port)


def closed_within(sock: socket.socket, seconds: float, trickle: bytes = b"") -> float | None:
    """Seconds until the server closes ``sock`` (sending ``trickle`` one byte per 0.2 s meanwhile), or None."""
    started = time.monotonic()
    pending = iter(trickle)
    while time.monotonic() - started < seconds:
        readable, _, _ = select.select([sock], [], [], 0.2)
        if readable:
            try:
                if sock.recv(65536) == b"":
                    return time.monotonic() - started
            except ConnectionResetError:
                return time.monotonic() - started
            continue
        byte = next(pending, None)
        if byte is not None:
            try:
                sock.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                return time.monotonic() - started
    return None


# -- quotas on held items ----------------------------------------------------------------------


def test_held_items_past_the_quota_are_refused_whole_and_nothing_is_stored(database: str) -> None:
    branch = os.urandom(16).hex()
    chain = [branch_event(branch)]
    for _ in range(7):
        chain.append(record(chain[-1]["id"] if len(chain) > 1 else "", branch))
    with ServerThread(database, limits=Limits(max_held_items=4)) as srv:
        client = Client(srv)
        early = client.push(chain[2:6], after=chain[1]["id"]).json()  # arrived before chain[:2]: held, 4 = the quota
        assert early["held"] == [i["id"] for i in chain[2:6]]

        other = os.urandom(16).hex()
        event = branch_event(other)
        orphan = record(os.urandom(32).hex(), other)  # its parent never comes
        before = state(srv.storage)
        refused = client.push([event, orphan])  # the event alone could be accepted: the push is refused whole
        assert refused.status_code == 429, refused.text
        assert refused.json()["error"] == "held_quota" and set(refused.json()) == {"error", "message", "ids"}
        assert state(srv.storage) == before

        assert client.push([event]).json()["accepted"] == 1  # a push that holds nothing is never refused
        done = client.push(chain[:2]).json()  # the missing items arrive: everything held is released
        assert (done["accepted"], done["released"]) == (2, 4)
        retried = client.push([orphan], after=event["id"])  # ...and the refused push now fits
        assert retried.status_code == 200 and retried.json()["held"] == [orphan["id"]]
        assert client.ids() == [event["id"], *(i["id"] for i in chain[:6])]
        assert srv.storage.counts(PROJECT) == {"items": 7, "distinct": 7, "held": 1}


def test_the_byte_quota_counts_the_bodies_held(database: str) -> None:
    branch = os.urandom(16).hex()
    orphans = [record(os.urandom(32).hex(), branch, size=3000) for _ in range(3)]
    limit = held_size(orphans[0]) + held_size(orphans[1])
    with ServerThread(database, limits=Limits(max_held_bytes=limit)) as srv:
        client = Client(srv)
        assert client.push(orphans[:1]).json()["held"] == [orphans[0]["id"]]
        assert client.push(orphans[1:2]).json()["held"] == [orphans[1]["id"]]  # exactly at the quota
        before = state(srv.storage)
        refused = client.push(orphans[2:])
        assert refused.status_code == 429 and refused.json()["error"] == "held_quota"
        assert str(limit) in refused.json()["message"]
        assert state(srv.storage) == before
        assert srv.storage.counts(PROJECT)["held"] == 2


# -- the release reads only what it frees --------------------------------------------------------


@pytest.mark.parametrize("last", ["predecessor", "parent"])
def test_an_item_waiting_for_two_missing_items_is_released_by_the_second(database: str, last: str) -> None:
    """One held item can wait on several ids (here its predecessor and its parent): all must arrive."""
    branch = os.urandom(16).hex()
    event = branch_event(branch)
    parent, predecessor = record("", branch), record("", branch)
    waiting = record(parent["id"], branch)
    with ServerThread(database) as srv:
        client = Client(srv)
        assert client.push([event]).json()["accepted"] == 1
        assert client.push([waiting], after=predecessor["id"]).json()["held"] == [waiting["id"]]
        first, second = (parent, predecessor) if last == "predecessor" else (predecessor, parent)
        one = client.push([first], after=event["id"]).json()
        assert (one["accepted"], one["released"]) == (1, 0)  # one of the two is not enough
        two = client.push([second], after=first["id"]).json()
        assert (two["accepted"], two["released"]) == (1, 1)
        assert client.ids() == [event["id"], first["id"], second["id"], waiting["id"]]
        assert srv.storage.counts(PROJECT)["held"] == 0


def test_a_push_reads_none_of_the_held_bodies_it_does_not_release(database: str) -> None:
    """16 MiB of orphans held: an accepted push, and a release of one of them, allocate a fraction of that.

    Before the held items were indexed by what they wait for, every accepted push loaded every
    held body (a tenant's 0.9 GiB of orphans cost 1.3 GB of RSS per push).
    """
    storage = open_storage(database)
    quota = HeldQuota(10_000, 2**40)
    try:
        storage.create_api_key(PROJECT)
        branch = os.urandom(16).hex()
        assert storage.push(PROJECT, items([branch_event(branch)]), "", quota).accepted == 1
        parents = [record("", branch) for _ in range(40)]
        orphans = [record(p["id"], branch, size=300 * 1024) for p in parents]
        for orphan in orphans:
            storage.push(PROJECT, items([orphan]), "", quota)
        assert storage.counts(PROJECT)["held"] == 40

        tracemalloc.start()
        try:
            accepted = storage.push(PROJECT, items([branch_event(os.urandom(16).hex())]), "", quota)
            _, peak_accept = tracemalloc.get_traced_memory()
            tracemalloc.reset_peak()
            released = storage.push(PROJECT, items(parents[:1]), "", quota)
            _, peak_release = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
        assert (accepted.accepted, released.accepted, released.released) == (1, 1, 1)
        assert peak_accept < 1024 * 1024 and peak_release < 1024 * 1024, (peak_accept, peak_release)
        assert storage.counts(PROJECT)["held"] == 39
        assert [json.loads(body)["id"] for _, body in storage.pull(PROJECT, 2, 10).rows] == [parents[0]["id"], orphans[0]["id"]]
    finally:
        storage.close()


def test_a_version_2_database_gets_its_held_items_indexed(tmp_path: Path) -> None:
    """Schema 3 adds held_waits and body sizes; an upgraded database releases what it held before."""
    branch = os.urandom(16).hex()
    event, parent = branch_event(branch), record("", branch)
    child = record(parent["id"], branch)
    body = validate_item(0, child).body
    path = tmp_path / "v2.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.executescript(
            f"""
            CREATE TABLE sovseal_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
            INSERT INTO sovseal_meta VALUES ('schema', '2');
            CREATE TABLE projects (project TEXT PRIMARY KEY, next_seq BIGINT NOT NULL, next_hold BIGINT NOT NULL,
                held_count BIGINT NOT NULL);
            INSERT INTO projects VALUES ('{PROJECT}', 2, 2, 1);
            CREATE TABLE items (project TEXT NOT NULL, seq BIGINT NOT NULL, id TEXT NOT NULL, kind TEXT NOT NULL,
                digest TEXT NOT NULL, body TEXT NOT NULL, received_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (project, seq), UNIQUE (project, id));
            INSERT INTO items VALUES ('{PROJECT}', 1, '{event["id"]}', 'branch', 'd', '{validate_item(0, event).body}', 0);
            CREATE TABLE branches (project TEXT NOT NULL, branch TEXT NOT NULL, PRIMARY KEY (project, branch));
            INSERT INTO branches VALUES ('{PROJECT}', '{branch}');
            CREATE TABLE held (project TEXT NOT NULL, hseq BIGINT NOT NULL, id TEXT NOT NULL, after_id TEXT NOT NULL,
                kind TEXT NOT NULL, parent TEXT NOT NULL, branch TEXT NOT NULL, digest TEXT NOT NULL,
                body TEXT NOT NULL, received_at DOUBLE PRECISION NOT NULL, released INTEGER NOT NULL DEFAULT 0,
                PRIMARY KEY (project, hseq), UNIQUE (project, id));
            CREATE INDEX held_waiting ON held (project, hseq) WHERE released = 0;
            INSERT INTO held VALUES ('{PROJECT}', 1, '{child["id"]}', '{event["id"]}', 'record', '{parent["id"]}', '{branch}',
                '{hashlib.sha256(body.encode()).hexdigest()}', '{body}', 0, 0);
            """
        )
    storage = open_storage(path)
    try:
        with storage.reads.reader() as tx:
            assert tx.execute("SELECT item_id, waits_for FROM held_waits") == [(child["id"], parent["id"])]  # the rest is accepted
            assert tx.execute("SELECT body_bytes FROM held") == [(len(body),)]
        outcome = storage.push(PROJECT, items([parent]), event["id"], HeldQuota(10, 10**6))
        assert (outcome.accepted, outcome.released) == (1, 1)
        assert [json.loads(b)["id"] for _, b in storage.pull(PROJECT, 0, 10).rows] == [event["id"], parent["id"], child["id"]]
    finally:
        storage.close()


# -- replies -----------------------------------------------------------------------------------


def test_error_replies_are_ascii_json_that_never_echo_the_input(server: ServerThread) -> None:
    client = Client(server)
    marker = "\ud800CANARY\u00e9"
    good = record("", os.urandom(16).hex())
    cases = [
        ({**good, "id": marker}, 400),  # a lone surrogate in an id was a 500 with a traceback
        ({**good, "kind": marker * 1000}, 400),
        ({**good, marker: 1}, 400),
        ({k: v for k, v in good.items() if k != "sealed"} | {"sealed": marker}, 400),
    ]
    before = state(server.storage)
    for item, status in cases:
        reply = client.http.post(PUSH_PATH, content=json.dumps({"records": [item], "after": ""}).encode())
        assert reply.status_code == status, reply.text
        assert reply.content.isascii() and "CANARY" not in reply.text and "\\ud800" not in reply.text
        assert set(reply.json()) == {"error", "message", "ids"} and reply.json()["ids"] == ([] if item["id"] == marker else [good["id"]])
    for content in (b'{"records": [], "after": "\xff\xfe"}', b'{"records": [], "' + marker.encode("utf-8", "surrogatepass") + b'": 1}'):
        reply = client.http.post(PUSH_PATH, content=content)
        assert reply.status_code == 400 and reply.content.isascii() and b"CANARY" not in reply.content
    for method, path in (("GET", "/nowhere"), ("DELETE", PUSH_PATH), ("POST", PULL_PATH)):
        reply = client.http.request(method, path)
        assert reply.status_code in (404, 405) and set(reply.json()) == {"error", "message", "ids"}
    assert state(server.storage) == before


def test_a_huge_body_of_empty_objects_is_refused_before_it_is_parsed(server: ServerThread) -> None:
    client = Client(server)
    body = b'{"records":[' + b",".join([b"{}"] * 2_000_000) + b'],"after":""}'  # 6 MB: 2 million dicts if parsed
    before = state(server.storage)
    reply = client.http.post(PUSH_PATH, content=body)
    assert reply.status_code == 413 and reply.json()["error"] == "too_large"
    for shape in (b'{"records":[[' + b"1," * 100_000 + b"1]]}", b'{"records":' + b"[" * 3000):
        assert client.http.post(PUSH_PATH, content=shape).status_code in (400, 413)
    assert state(server.storage) == before


# -- deadlines and the connection cap ------------------------------------------------------------

FAST = Limits(header_timeout=1.0, body_timeout=1.0)


@pytest.fixture
def fast(sqlite_database: str) -> Iterator[ServerThread]:
    with ServerThread(sqlite_database, limits=FAST) as srv:
        yield srv


def test_a_slowloris_sending_headers_is_cut_off_while_others_are_served(fast: ServerThread) -> None:
    client = Client(fast)
    served: list[float] = []

    def normal() -> None:
        while len(served) < 5:
            started = time.monotonic()
            assert client.http.get(PULL_PATH).status_code == 200
            served.append(time.monotonic() - started)
            time.sleep(0.1)

    with socket.create_connection(address(fast)) as slow:
        helper = threading.Thread(target=normal)
        helper.start()
        cut = closed_within(slow, 5.0, trickle=f"POST {PUSH_PATH} HTTP/1.1\r\nHost: x\r\nX-Padding: {'a' * 100}".encode())
        helper.join()
    assert cut is not None and 0.9 <= cut <= 2.5, cut  # 1 s header deadline, however the bytes trickle
    assert max(served) < 1.0, served  # the event loop kept serving meanwhile


def test_an_idle_connection_is_closed_after_the_header_timeout(fast: ServerThread) -> None:
    with socket.create_connection(address(fast)) as idle:
        cut = closed_within(idle, 5.0)
    assert cut is not None and 0.9 <= cut <= 2.5, cut


def test_a_slow_push_body_gets_408_and_changes_nothing(fast: ServerThread) -> None:
    client = Client(fast)
    before = state(fast.storage)
    with socket.create_connection(address(fast)) as slow:
        slow.sendall(
            f"POST {PUSH_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {client.api}\r\n{PROJECT_HEADER}: {PROJECT}\r\n"
            f"Content-Length: 5000\r\n\r\n".encode()
        )
        started = time.monotonic()
        reply = b""
        body = iter(json.dumps({"records": [record("", "0" * 32)], "after": ""}).encode().ljust(5000))
        while not reply.endswith(b"}") and time.monotonic() - started < 5:
            readable, _, _ = select.select([slow], [], [], 0.2)
            if readable:
                chunk = slow.recv(65536)
                if not chunk:
                    break
                reply += chunk
            else:
                slow.sendall(bytes([next(body)]))
        elapsed = time.monotonic() - started
    head, _, text = reply.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 408") and b"connection: close" in head.lower(), reply[:300]
    assert json.loads(text)["error"] == "timeout"
    assert 0.9 <= elapsed <= 2.5, elapsed
    assert state(fast.storage) == before


def test_a_slow_body_declared_too_large_gets_413_not_408(sqlite_database: str) -> None:
    """408 is retried as is by the client; a body that can never fit must be told so (413: quarantined)."""
    with ServerThread(sqlite_database, limits=Limits(max_body=1000, body_timeout=1.0)) as srv:
        client = Client(srv)
        with socket.create_connection(address(srv)) as slow:
            slow.sendall(
                f"POST {PUSH_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {client.api}\r\n{PROJECT_HEADER}: {PROJECT}\r\n"
                f"Content-Length: 3000\r\n\r\n{'x' * 100}".encode()
            )
            slow.settimeout(5)
            reply = b""
            while chunk := slow.recv(65536):  # until the server closes the connection
                reply += chunk
    assert reply.startswith(b"HTTP/1.1 413") and reply.endswith(b"}") and b'"too_large"' in reply, reply[:300]


def test_a_body_the_server_does_not_read_cannot_hold_the_connection(fast: ServerThread) -> None:
    with socket.create_connection(address(fast)) as slow:
        slow.sendall(f"GET {HEALTH_PATH} HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n".encode())
        assert slow.recv(65536).startswith(b"HTTP/1.1 200")  # answered without reading the body...
        cut = closed_within(slow, 5.0, trickle=b"x" * 100)  # ...whose trickle then ends with the next header deadline
    assert cut is not None and cut <= 2.5, cut


def test_at_the_connection_cap_the_longest_waiting_connection_makes_room(sqlite_database: str) -> None:
    with ServerThread(sqlite_database, limits=Limits(max_connections=4, header_timeout=30)) as srv:
        client = Client(srv)
        idle = [socket.create_connection(address(srv)) for _ in range(4)]
        time.sleep(0.2)
        try:
            assert client.http.get(PULL_PATH).status_code == 200  # a fifth connection, served
            assert closed_within(idle[0], 2.0) is not None  # the oldest idle one made room
            assert closed_within(idle[3], 0.5) is None
        finally:
            for sock in idle:
                sock.close()


def test_when_every_connection_is_busy_a_new_one_is_closed(sqlite_database: str) -> None:
    with ServerThread(sqlite_database, limits=Limits(max_connections=2, body_timeout=30)) as srv:
        client = Client(srv)
        busy = [socket.create_connection(address(srv)) for _ in range(2)]
        try:
            for sock in busy:  # each a push whose body is still coming: the app is reading it
                sock.sendall(
                    f"POST {PUSH_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {client.api}\r\n"
                    f"{PROJECT_HEADER}: {PROJECT}\r\nContent-Length: 100\r\n\r\n{{".encode()
                )
            time.sleep(0.3)
            with socket.create_connection(address(srv)) as late:
                late.sendall(f"GET {HEALTH_PATH} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
                assert closed_within(late, 2.0) is not None
        finally:
            for sock in busy:
                sock.close()
        time.sleep(0.2)
        assert httpx.get(srv.url + HEALTH_PATH).status_code == 200  # and once they are gone, served again


def test_limits_come_from_the_environment_and_bad_ones_fail_at_start(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOVSEAL_SERVER_MAX_HELD_ITEMS", "7")
    monkeypatch.setenv("SOVSEAL_SERVER_HEADER_TIMEOUT", "2.5")
    assert (Limits().max_held_items, Limits().header_timeout) == (7, 2.5)
    assert Limits(max_held_items=9).max_held_items == 9  # an explicit value wins over the environment
    for name, value in (
        ("SOVSEAL_SERVER_MAX_HELD_ITEMS", "lots"),
        ("SOVSEAL_SERVER_HEADER_TIMEOUT", "0"),
        ("SOVSEAL_SERVER_BODY_TIMEOUT", "inf"),
    ):
        monkeypatch.setenv(name, value)
        with pytest.raises(LimitError, match=name):
            Limits()
        monkeypatch.delenv(name)
    with pytest.raises(LimitError, match="max_connections"):
        Limits(max_connections=0)


# -- `sovseal serve` as an operator runs it ------------------------------------------------------


class Served:
    """``sovseal serve`` in a subprocess, its log (stderr) in a file, optionally under a low open-file limit."""

    def __init__(self, workdir: Path, env: dict[str, str] | None = None, nofile: int | None = None) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.database = workdir / "server.sqlite3"
        storage = open_storage(self.database)
        try:
            self.api = storage.create_api_key(PROJECT)
        finally:
            storage.close()
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            self.port = int(probe.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = workdir / "server.log"
        self._env = {**os.environ, **(env or {})}
        self._nofile = nofile
        self.proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> Served:
        def limit() -> None:
            if self._nofile:
                resource.setrlimit(resource.RLIMIT_NOFILE, (self._nofile, self._nofile))

        command = [sys.executable, "-m", "sovseal", "serve", "--database", str(self.database), "--port", str(self.port)]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(command, cwd=ROOT, env=self._env, stdout=log, stderr=log, preexec_fn=limit)  # noqa: PLW1509
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(self.url + HEALTH_PATH, timeout=1).raise_for_status()
                return self
            except httpx.HTTPError:
                if time.monotonic() > deadline or self.proc.poll() is not None:
                    raise RuntimeError(f"sovseal serve did not start: {self.log.read_text()}") from None
                time.sleep(0.05)

    def __exit__(self, *exc: object) -> None:
        assert self.proc is not None
        self.proc.terminate()
        self.proc.wait(10)

    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api}", PROJECT_HEADER: PROJECT, "Content-Type": "application/json"}

    def status(self) -> dict[str, int]:
        """The server process's open descriptors, and its resident and peak resident memory in MiB."""
        assert self.proc is not None
        fields = dict(line.split(":", 1) for line in Path(f"/proc/{self.proc.pid}/status").read_text().splitlines())
        return {
            "fds": len(os.listdir(f"/proc/{self.proc.pid}/fd")),
            "rss_mib": int(fields["VmRSS"].split()[0]) // 1024,
            "peak_rss_mib": int(fields["VmHWM"].split()[0]) // 1024,
        }


def test_a_client_leaving_mid_body_is_no_error_in_the_log(tmp_path: Path) -> None:
    with Served(tmp_path, env={"SOVSEAL_SERVER_BODY_TIMEOUT": "5"}) as served:
        for _ in range(3):
            with socket.create_connection(("127.0.0.1", served.port)) as leaving:
                leaving.sendall(
                    f"POST {PUSH_PATH} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer {served.api}\r\n{PROJECT_HEADER}: {PROJECT}\r\n"
                    'Content-Length: 1000\r\n\r\n{"records": ['.encode()
                )
                time.sleep(0.2)
        surrogate = json.dumps({"records": [{"id": "\ud800"}], "after": ""}).encode()
        assert httpx.post(served.url + PUSH_PATH, content=surrogate, headers=served.headers()).status_code == 400
        assert httpx.get(served.url + HEALTH_PATH).status_code == 200
    log = served.log.read_text(errors="replace")
    assert "ERROR" not in log and "Traceback" not in log, log[-2000:]
