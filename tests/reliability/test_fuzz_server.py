"""Fuzzing every endpoint of the replication server with malformed input, over real HTTP.

What it proves: for any request (garbage bytes, arbitrary JSON, real items with fields dropped,
added, retyped or corrupted, conflicting duplicates, too many items, bodies nested past the JSON
parser's limit, lone surrogates, bad UTF-8, huge numbers, floods of empty objects, pushes past the
held-items quota, odd query strings, wrong methods, bad or missing credentials, raw bytes that are
not HTTP at all) the server answers below 500 within a bounded time, keeps serving, and when it
refuses a request it changes nothing: every row of every table is the same before and after.
Every refusal is an ASCII JSON error that never echoes the request: the fuzzed values carry a
canary (often with a lone surrogate, which a reply could not even encode), and no reply holds it.

How: Hypothesis drives an httpx client (10 s timeout: a hang fails the test) against the real
server (uvicorn + SQLite) on loopback, seeded with real items from a store's outbox so that the
mutations start from what an honest client sends. The other direction too: a device pulling
from a hostile server (garbage, deep nesting, forged or out-of-order records) raises only sovseal's
typed errors, never hangs, and imports nothing that does not verify. The server's state is read from its database
around every request. Why Hypothesis and not schemathesis: schemathesis generates requests from
an OpenAPI schema, and this Starlette app serves none (three hand-written routes); writing one
only for the fuzzer would test the schema, not the server. atheris is not installed and is not
needed for three JSON endpoints. ``SOVSEAL_SOAK=1`` multiplies the examples.
"""

from __future__ import annotations

import base64
import http.server
import json
import os
import socket
import threading
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sovseal import Sovseal
from sovseal.errors import SovsealError
from sovseal.replication.protocol import HEALTH_PATH, PROJECT_HEADER, PULL_PATH, PUSH_PATH
from sovseal.server import Limits, ServerThread
from tests.fakes import fake_embed
from tests.reliability._net import memory_dir, size
from tests.replication.helpers import history

PROJECT = "f" * 64
#: A small held quota, so that pushes whose items would wait past it are refused (429) too.
LIMITS = Limits(max_body=64 * 1024, max_items=16, max_pull=50, max_held_items=6)
CANARY = "\ud800CANARY"
FUZZ = settings(
    max_examples=size(150, 10_000),
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture, HealthCheck.data_too_large],
)
TABLES = ("sovseal_meta", "api_keys", "projects", "items", "branches", "held", "held_waits", "erased")
#: What a 200 to a push says: counts of what it did (dropped: items for erased ids; erased: ids a redaction named).
PUSH_REPLY = {"accepted", "duplicates", "held", "released", "cursor", "dropped", "erased"}
STATUSES: Counter[int] = Counter()


class Target:
    def __init__(self, server: ServerThread, api: str, items: list[dict[str, Any]]) -> None:
        self.server = server
        self.api = api
        self.items = items  # real items, as the worker sends them
        self.client = httpx.Client(base_url=server.url, timeout=10)

    def state(self) -> dict[str, list[tuple[Any, ...]]]:
        """Every row of every table: what 'no state change' is checked against."""
        with self.server.storage.reads.reader() as tx:
            return {t: sorted(tx.execute(f"SELECT * FROM {t}")) for t in TABLES}  # nosec B608 -- fixed table names

    def headers(self, auth: str | None = "valid", project: str = PROJECT) -> dict[str, str]:
        out = {PROJECT_HEADER: project, "Content-Type": "application/json"}
        if auth == "valid":
            out["Authorization"] = f"Bearer {self.api}"
        elif auth is not None:
            out["Authorization"] = auth
        return out


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    with memory_dir(tmp_path_factory.mktemp("fuzz")) as scratch:
        with Sovseal(scratch / "source", key=os.urandom(32), embedder=fake_embed, endpoint="") as mem:
            history(mem)
            items = [item.to_json() for item in mem.export_items()]
        with ServerThread(scratch / "server.sqlite3", limits=LIMITS) as server:
            api = server.storage.create_api_key(PROJECT)
            t = Target(server, api, items)
            half = len(items) // 2  # some accepted state to protect, and room for valid pushes
            t.client.post(PUSH_PATH, content=json.dumps({"records": items[:half], "after": ""}), headers=t.headers()).raise_for_status()
            yield t
            t.client.close()


def check(target: Target, response: httpx.Response, before: dict[str, Any]) -> None:
    STATUSES[response.status_code] += 1
    assert response.status_code < 500, response.text
    if response.status_code >= 400:
        assert target.state() == before, f"a refused request ({response.status_code}) changed the server's state"
        if response.request.method != "HEAD":
            assert response.headers["content-type"] == "application/json" and response.content.isascii(), response.content[:200]
            assert set(response.json()) == {"error", "message", "ids"}
            assert b"CANARY" not in response.content, response.content[:200]
    assert target.client.get(HEALTH_PATH).status_code == 200


# -- strategies --------------------------------------------------------------------------------

canary_text = st.text(max_size=8).map(lambda t: CANARY + t) | st.just(CANARY)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20) | canary_text,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=15,
)
hex_like = st.text("0123456789abcdefABCDEF", max_size=70) | st.sampled_from(["", "0" * 64, "0" * 32, "g" * 64])
FIELDS = ("kind", "id", "parent", "branch", "path_hash", "sealed", "created_at", "reason")


@st.composite
def mutated_item(draw: st.DrawFn, items: list[dict[str, Any]]) -> Any:
    item = dict(draw(st.sampled_from(items)))
    for _ in range(draw(st.integers(0, 3))):
        op = draw(st.sampled_from(["drop", "add", "retype", "hex", "sealed", "time", "kind", "canary"]))
        name = draw(st.sampled_from(FIELDS))
        if op == "drop":
            item.pop(name, None)
        elif op == "add":
            item[draw(st.sampled_from(["path", "embedding", "payload", "x", CANARY]))] = draw(json_values)
        elif op == "canary":
            item[name] = draw(canary_text)
        elif op == "retype":
            item[name] = draw(json_values)
        elif op == "hex":
            item[name] = draw(hex_like)
        elif op == "sealed":
            raw = draw(st.binary(max_size=64))
            item["sealed"] = draw(st.sampled_from([base64.b64encode(raw).decode(), base64.b64encode(raw).decode() + "!", "====", ""]))
        elif op == "time":
            item["created_at"] = draw(st.sampled_from([-1, 1e11, 1e308, True, "now", None, 0.5, 2**70]))
        else:
            item["kind"] = draw(st.sampled_from(["record", "branch", "reinforce", "ack", "", None]))
    return item


def _orphans(count: int) -> list[dict[str, Any]]:
    """Records whose parent never arrives (held), with valid fields: what a quota must stop."""
    return [
        {
            "kind": "record",
            "id": os.urandom(32).hex(),
            "parent": os.urandom(32).hex(),
            "branch": os.urandom(16).hex(),
            "path_hash": os.urandom(32).hex(),
            "sealed": base64.b64encode(os.urandom(40)).decode(),
            "created_at": 1.0,
            "reason": "",
        }
        for _ in range(count)
    ]


@st.composite
def hostile_bytes(draw: st.DrawFn, items: list[dict[str, Any]]) -> bytes:
    """Bodies aimed at the parser: bad UTF-8, lone surrogates, huge numbers, floods of empty objects."""
    item = json.dumps(draw(st.sampled_from(items)))
    field = draw(st.sampled_from(FIELDS))
    shape = draw(st.integers(0, 5))
    if shape == 0:  # raw bytes that are not UTF-8 (or are encoded surrogates) inside a string
        bad = draw(st.sampled_from([b"\xff", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80"]))
        return b'{"records":[' + item.encode().replace(b'"kind":', b'"kind' + bad + b'":', 1) + b'],"after":""}'
    if shape == 1:  # a lone surrogate escape where an id, a kind or a field name goes
        text = item.replace(f'"{field}":', f'"{field}":"\\ud800",' + f'"{field}_":', 1)
        return ('{"records":[' + text + '],"after":"\\udfff"}').encode()
    if shape == 2:  # huge numbers
        number = draw(st.sampled_from(["1e999999", "-1e999999", "9" * 5000, "0." + "1" * 20000, "1" * 10 + "e" + "9" * 30]))
        return ('{"records":[' + item.replace('"created_at":', f'"created_at":{number},"x":', 1) + '],"after":""}').encode()
    if shape == 3:  # a flood of empty objects or lists, up to the body limit
        unit = draw(st.sampled_from([b"{}", b"[]", b"1", b'"ab"', b"{}" * 3]))
        count = draw(st.integers(LIMITS.max_items, LIMITS.max_body // (len(unit) + 1) - 40))
        return b'{"records":[' + b",".join([unit] * count) + b'],"after":""}'
    if shape == 4:  # valid items whose parents never arrive: past the held quota, a 429
        return json.dumps({"records": _orphans(draw(st.integers(1, LIMITS.max_items))), "after": ""}).encode()
    return json.dumps({"records": [json.loads(item)], "after": ""}).encode()[:-3] + b'"\xed\xb0\x80"}'  # a surrogate encoded raw


@st.composite
def push_body(draw: st.DrawFn, items: list[dict[str, Any]]) -> bytes:
    shape = draw(st.integers(0, 8))
    if shape == 8:
        return draw(hostile_bytes(items))
    if shape == 0:
        return draw(st.binary(max_size=512))
    if shape == 1:
        return json.dumps(draw(json_values)).encode()
    if shape == 2:
        depth = draw(st.integers(500, 5000))
        return draw(st.sampled_from([b"[" * depth, b'{"records":' + b"[" * depth, b'{"a":' * depth]))
    if shape == 3:  # a conflicting duplicate: a known id with another body
        item = dict(draw(st.sampled_from(items)))
        item["created_at"] = float(item["created_at"]) + draw(st.floats(0.001, 1000))
        return json.dumps({"records": [item], "after": ""}).encode()
    if shape == 4:  # more items than the server takes in one push
        return json.dumps({"records": items[:1] * (LIMITS.max_items + draw(st.integers(1, 5))), "after": ""}).encode()
    records = draw(st.lists(mutated_item(items), min_size=0, max_size=5))
    body: dict[str, Any] = {"records": records, "after": draw(hex_like | json_values)}
    if draw(st.booleans()):
        body[draw(st.sampled_from(["records", "after", "extra", "project"]))] = draw(json_values)
    text = json.dumps(body)
    if shape == 7:
        text = text[: draw(st.integers(0, len(text)))]  # truncated
    return text.encode()


auths = st.sampled_from(["valid", "valid", "valid", None, "Bearer", "Bearer sov_nope", "Basic abc", "bearer sov_x", "Bearer  sov_x"])
projects = st.sampled_from([PROJECT, PROJECT, "e" * 64, "F" * 64, "", "f" * 63, "f" * 65, "../etc"])


# -- the endpoints -----------------------------------------------------------------------------


@FUZZ
@given(data=st.data())
def test_push_never_fails_with_5xx_and_a_refused_push_changes_nothing(target: Target, data: st.DataObject) -> None:
    body = data.draw(push_body(target.items), label="body")
    headers = target.headers(data.draw(auths, label="auth"), data.draw(projects, label="project"))
    if data.draw(st.booleans(), label="odd content type"):
        headers["Content-Type"] = data.draw(st.sampled_from(["text/plain", "application/x-www-form-urlencoded", ""]))
    before = target.state()
    response = target.client.post(PUSH_PATH, content=body, headers=headers)
    check(target, response, before)
    if response.status_code == 200:
        assert set(response.json()) == PUSH_REPLY


@FUZZ
@given(data=st.data())
def test_bodies_aimed_at_the_parser_and_the_quota_are_refused_cleanly(target: Target, data: st.DataObject) -> None:
    """With valid credentials, so that every body reaches the parser (and valid orphans the held-items quota)."""
    body = data.draw(hostile_bytes(target.items), label="body")
    before = target.state()
    response = target.client.post(PUSH_PATH, content=body, headers=target.headers())
    check(target, response, before)
    if response.status_code == 200:
        assert set(response.json()) == PUSH_REPLY
        assert target.server.storage.counts(PROJECT)["held"] <= LIMITS.max_held_items


@FUZZ
@given(
    params=st.dictionaries(
        st.sampled_from(["cursor", "limit", "x", "cursor[]", ""]),
        st.text(max_size=25) | st.integers(-(2**70), 2**70).map(str) | st.sampled_from(["1e3", "0x10", " 5", "+1", "1_0", "٣", "-0"]),
        max_size=3,
    ),
    auth=auths,
    project=projects,
)
def test_pull_never_fails_with_5xx_and_never_writes(target: Target, params: dict[str, str], auth: str | None, project: str) -> None:
    before = target.state()
    response = target.client.get(PULL_PATH, params=params, headers=target.headers(auth, project))
    check(target, response, before)
    assert target.state() == before  # a pull is read-only whatever it is asked
    if response.status_code == 200:
        page = response.json()
        assert set(page) == {"records", "cursor", "last", "more", "held"}
        assert len(page["records"]) <= LIMITS.max_pull


@FUZZ
@given(
    method=st.sampled_from(["GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS"]),
    path=st.sampled_from([PUSH_PATH, PULL_PATH, HEALTH_PATH, "/", "/v2", "/v2/replicate", PUSH_PATH + "/x", "/%2e%2e/"])
    | st.text(st.characters(min_codepoint=33, max_codepoint=126), max_size=30).map(lambda p: "/" + p.lstrip("/")),
    body=st.binary(max_size=64),
    auth=auths,
)
def test_any_method_on_any_path_never_fails_with_5xx(target: Target, method: str, path: str, body: bytes, auth: str | None) -> None:
    before = target.state()
    try:
        content = body if method not in ("GET", "HEAD") else None
        request = target.client.build_request(method, path, content=content, headers=target.headers(auth))
    except (httpx.InvalidURL, ValueError):
        return  # not a request httpx can even express
    response = target.client.send(request)
    if (method, httpx.URL(path).path) in (("POST", PUSH_PATH), ("GET", PULL_PATH)):
        assert response.status_code < 500  # a real push may succeed (and change state); covered above
        return
    check(target, response, before)
    assert target.state() == before


@settings(FUZZ, max_examples=size(60, 3000))
@given(
    raw=st.binary(min_size=1, max_size=300) | st.builds(lambda a, b: a + b"\r\n\r\n" + b, st.binary(max_size=80), st.binary(max_size=80))
)
def test_raw_bytes_that_are_not_http_leave_the_server_serving_and_unchanged(target: Target, raw: bytes) -> None:
    before = target.state()
    host, port = target.server.sock.getsockname()[:2]
    with socket.create_connection((host, port), timeout=5) as sock:
        try:
            sock.sendall(raw)
            sock.shutdown(socket.SHUT_WR)
            reply = sock.recv(65536)
        except OSError:
            reply = b""  # the server closed on us: allowed, as long as it keeps serving
    if reply.startswith(b"HTTP/1.1 "):
        assert int(reply[9:12]) < 500, reply[:200]
    assert target.client.get(HEALTH_PATH).status_code == 200
    assert target.state() == before


def test_after_the_fuzzing_the_honest_client_still_gets_everything_back(target: Target, tmp_path: Path, figures: dict[str, Any]) -> None:
    """What was stored before the fuzzing is intact, and an honest device still pushes and pulls.

    (The second half of the seeded history is not reused here: the fuzzing may legitimately have
    stored a mutated body under one of its ids first. A mutated body of a format-3 record under an
    id the server already holds is kept beside it as another version, as a second device's would
    be; devices refuse it when they cannot open it. The first stays what it was.)
    """
    half = len(target.items) // 2
    pulled = pull_all(target, target.headers())
    seeded = {i["id"]: i for i in target.items[:half]}
    first: dict[str, dict[str, Any]] = {}
    for record in pulled:  # the fuzzing may have added another version of a record: the first is the seeded one
        if record["id"] in seeded:
            first.setdefault(record["id"], record)
    assert len(first) == len(seeded) and all(r["sealed"] == seeded[i]["sealed"] for i, r in first.items())
    with memory_dir(tmp_path) as scratch, Sovseal(scratch / "honest", key=os.urandom(32), embedder=fake_embed, endpoint="") as mem:
        history(mem, tag=".honest")
        honest = [item.to_json() for item in mem.export_items()]
    project = "d" * 64
    headers = {**target.headers(project=project), "Authorization": f"Bearer {target.server.storage.create_api_key(project)}"}
    response = target.client.post(PUSH_PATH, content=json.dumps({"records": honest, "after": ""}), headers=headers)
    assert response.status_code == 200, response.text
    back = pull_all(target, headers)
    assert [(r["id"], r["sealed"]) for r in back] == [(i["id"], i["sealed"]) for i in honest]
    figures.update(requests=sum(STATUSES.values()), statuses=dict(sorted(STATUSES.items())))


def pull_all(target: Target, headers: dict[str, str]) -> list[dict[str, Any]]:
    pulled: list[dict[str, Any]] = []
    cursor = 0
    while True:
        page = target.client.get(PULL_PATH, params={"cursor": cursor, "limit": 50}, headers=headers).raise_for_status().json()
        pulled += page["records"]
        cursor = page["cursor"]
        if not page["more"]:
            return pulled


# -- the other direction: a device pulling from a hostile or broken server ------------------------


class HostileServer:
    """A real HTTP server on loopback that answers every pull with the page a test sets."""

    def __init__(self) -> None:
        self.page = b"{}"
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # the stdlib's name
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(outer.page)))
                self.end_headers()
                self.wfile.write(outer.page)

            do_POST = do_GET

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()


@pytest.fixture(scope="module")
def hostile(target: Target, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[HostileServer, Sovseal]]:
    server = HostileServer()
    with (
        memory_dir(tmp_path_factory.mktemp("hostile")) as scratch,
        Sovseal(scratch / "device", key=os.urandom(32), embedder=fake_embed, endpoint=server.url, api_key="sov_x") as mem,
    ):
        yield server, mem
    server.httpd.shutdown()


@st.composite
def hostile_page(draw: st.DrawFn, items: list[dict[str, Any]]) -> bytes:
    shape = draw(st.integers(0, 3))
    if shape == 0:
        return draw(st.binary(max_size=200))
    if shape == 1:
        return json.dumps(draw(json_values)).encode()
    if shape == 2:
        return b'{"records":' + b"[" * draw(st.integers(1000, 5000))
    records = [
        {**draw(mutated_item(items)), "seq": draw(st.sampled_from([1, 2, 0, -1, "1", None, True, 2**64]))}
        for _ in range(draw(st.integers(0, 4)))
    ]
    page = {"records": records, "cursor": draw(json_values), "last": draw(json_values), "more": draw(st.booleans()), "held": 0}
    return json.dumps(page).encode()


@settings(FUZZ, max_examples=size(80, 5000))
@given(data=st.data())
def test_a_hostile_server_makes_pull_raise_typed_errors_and_never_hang(
    target: Target, hostile: tuple[HostileServer, Sovseal], data: st.DataObject
) -> None:
    server, mem = hostile
    server.page = data.draw(hostile_page(target.items), label="page")
    before = mem.heads(), mem.status().records
    try:
        mem.pull()
    except SovsealError:
        pass  # ReplicationError, InvalidInputError or IntegrityError: each says what went wrong
    else:
        assert (mem.heads(), mem.status().records) == before  # nothing forged was imported
    assert mem.verify().ok
