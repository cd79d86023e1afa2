"""A fake hostile replication server on loopback: one behaviour per way a server can misbehave.

:class:`HostileServer` is a real HTTP/1.1 server (the stdlib's threading server) that writes each
answer exactly as its *behaviour* says: any status, content type and headers, with or without a
Content-Length, a body streamed lazily (so a 1.5 GiB page costs the test nothing), bytes dripped
one at a time, the headers included. The behaviour can be swapped while it runs, so one device,
at one URL and therefore with one saved cursor, first meets a hostile server and then an honest
one (:class:`Forward` to the real server app), exactly as it would if a server were compromised
and then fixed.

Behaviours: :class:`Forward` (honest), :class:`HugePage`, :class:`EndlessOrphans`,
:class:`Rewrite` (the real server's pages, altered: absurd sequence numbers, a dropped parent),
:class:`Replay` (real items served again and again), :class:`Fixed` (garbage, wrong content
type, compressed), and the wrappers :class:`Drip` and :class:`Slow` to combine with any of them.

``python -m tests.replication.hostile measure-pull …`` pulls once in a fresh process and prints
its peak RSS above the baseline (see :func:`measure_pull`), and ``… serve huge-page`` runs a
named behaviour by hand: the memory tests and docs/reliability.md's "A hostile server" use them.
"""

from __future__ import annotations

import abc
import base64
import functools
import http.server
import json
import os
import re
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx

from sovseal import Sovseal
from sovseal.crypto.primitives import project_blind_id
from sovseal.replication import PullResult, ReplicationConfig
from sovseal.server import ServerThread
from tests.replication.conftest import open_mem
from tests.replication.helpers import history, snapshot_of

MiB = 1024 * 1024


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    cursor: int
    limit: int
    headers: dict[str, str]
    body: bytes


@dataclass
class Reply:
    """One answer, written byte for byte as described."""

    status: int = 200
    content_type: str = "application/json"
    body: Iterable[bytes] = ()
    length: int | None = None  # Content-Length to declare; None: none, the body ends when the connection closes
    headers: dict[str, str] = field(default_factory=dict)
    drip: float = 0.0  # seconds between one byte and the next
    drip_headers: bool = False  # drip the status line and headers too, not only the body


class Behaviour(abc.ABC):
    """A server's answers. Pushes are refused with 503 unless a behaviour says otherwise."""

    @abc.abstractmethod
    def pull(self, request: Request) -> Reply:
        """The answer to one pull request."""

    def push(self, request: Request) -> Reply:
        return Reply(503, body=[b'{"error":"unavailable","message":"hostile","ids":[]}'])


def page_json(records: list[bytes], last: int, more: bool, cursor: int) -> list[bytes]:
    """A pull page as an honest server lays it out, from records already encoded."""
    end = cursor + len(records)
    return [b'{"records":[', b",".join(records), f'],"cursor":{end},"last":{last},"more":{str(more).lower()},"held":0}}'.encode()]


@functools.cache
def record_template() -> dict[str, Any]:
    """A real record as the store puts it on the wire, in whatever format this version writes."""
    from tests.fakes import fake_embed

    with tempfile.TemporaryDirectory() as scratch, Sovseal(scratch, key=os.urandom(32), embedder=fake_embed) as mem:
        mem.store("hostile.template", "x")
        return next(item.to_json() for item in mem.export_items() if item.kind == "record")


def _fresh_ids(value: Any) -> Any:
    """``value`` with every hex id in it (a string of 32 or 64 hex digits, alone or in a list) replaced by a random one."""
    if isinstance(value, list):
        return [_fresh_ids(v) for v in value]
    if isinstance(value, str) and len(value) in (32, 64) and all(c in "0123456789abcdef" for c in value):
        return os.urandom(len(value) // 2).hex()
    return value


def orphan(seq: int, sealed_b64: str) -> bytes:
    """A well-formed record whose ids, parents and branch are all new: no device has its parent, so it can only wait."""
    fields = {name: _fresh_ids(value) for name, value in record_template().items()}
    return json.dumps({"seq": seq, **fields, "sealed": sealed_b64}).encode()


class Forward(Behaviour):
    """Honest: every request goes to the real server and its answer comes back unchanged."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream

    def _forward(self, request: Request) -> httpx.Response:
        headers = {k: v for k, v in request.headers.items() if k.lower() in ("authorization", "x-sovseal-project", "content-type")}
        with httpx.Client(base_url=self.upstream, timeout=30) as client:
            return client.request(request.method, request.path, headers=headers, content=request.body or None)

    def _reply(self, response: httpx.Response) -> Reply:
        return Reply(response.status_code, response.headers.get("content-type", ""), [response.content], len(response.content))

    def pull(self, request: Request) -> Reply:
        return self._reply(self._forward(request))

    def push(self, request: Request) -> Reply:
        return self._reply(self._forward(request))


class HugePage(Behaviour):
    """A well-formed page of ``size`` bytes (records of 1 MiB sealed each), whatever limit was asked."""

    def __init__(self, size: int, *, declare_length: bool = False) -> None:
        self.size = size
        self.declare_length = declare_length
        record_template()  # made now, not inside the first answer
        self._sealed = base64.b64encode(b"\0" * (MiB * 3 // 4)).decode()

    def pull(self, request: Request) -> Reply:
        count = max(1, self.size // (len(self._sealed) + 300))
        last = request.cursor + count

        def body() -> Iterator[bytes]:
            yield b'{"records":['
            for i in range(count):
                yield (b"," if i else b"") + orphan(request.cursor + 1 + i, self._sealed)
            yield f'],"cursor":{last},"last":{last},"more":false,"held":0}}'.encode()

        return Reply(body=body(), length=self.size if self.declare_length else None)


class EndlessOrphans(Behaviour):
    """Pages of ``per_page`` (default: as many as asked) well-formed orphans, numbered correctly, for ever."""

    def __init__(self, sealed_size: int = 200, per_page: int | None = None) -> None:
        self._sealed = base64.b64encode(os.urandom(sealed_size)).decode()
        self.per_page = per_page
        record_template()  # made now, not inside the first answer
        self.pages = 0

    def pull(self, request: Request) -> Reply:
        self.pages += 1
        count = min(request.limit, self.per_page or request.limit)
        records = [orphan(request.cursor + 1 + i, self._sealed) for i in range(count)]
        return Reply(body=page_json(records, request.cursor + count + 1_000_000, True, request.cursor))


class Rewrite(Forward):
    """The real server's pull pages, passed through ``alter(page, request)`` (the JSON as a dict)."""

    def __init__(self, upstream: str, alter: Callable[[dict[str, Any], Request], dict[str, Any]]) -> None:
        super().__init__(upstream)
        self.alter = alter

    def pull(self, request: Request) -> Reply:
        response = self._forward(request)
        if response.status_code != 200:
            return self._reply(response)
        body = json.dumps(self.alter(response.json(), request)).encode()
        return Reply(body=[body], length=len(body))


class Replay(Forward):
    """The real server's items, served again and again under ever new sequence numbers."""

    def __init__(self, upstream: str) -> None:
        super().__init__(upstream)
        self._items: list[dict[str, Any]] = []

    def pull(self, request: Request) -> Reply:
        if not self._items:
            page = self._forward(replace(request, cursor=0, limit=1000)).json()
            self._items = [{k: v for k, v in r.items() if k != "seq"} for r in page["records"]]
        count = min(request.limit, 100)
        records = [
            json.dumps({"seq": request.cursor + 1 + i, **self._items[(request.cursor + i) % len(self._items)]}).encode()
            for i in range(count)
        ]
        return Reply(body=page_json(records, request.cursor + count + 1_000_000, True, request.cursor))


class Fixed(Behaviour):
    """The same answer to every pull: garbage, the wrong content type, a compressed body, …"""

    def __init__(self, body: bytes, content_type: str = "application/json", headers: dict[str, str] | None = None) -> None:
        self.reply = Reply(body=[body], content_type=content_type, length=len(body), headers=headers or {})

    def pull(self, request: Request) -> Reply:
        return replace(self.reply)


class Drip(Behaviour):
    """Any behaviour's answer, one byte every ``interval`` seconds (the headers too, with ``headers``)."""

    def __init__(self, inner: Behaviour, interval: float, *, headers: bool = False) -> None:
        self.inner, self.interval, self.headers = inner, interval, headers

    def pull(self, request: Request) -> Reply:
        return replace(self.inner.pull(request), drip=self.interval, drip_headers=self.headers)


class Slow(Behaviour):
    """Any behaviour's answer, after ``delay`` seconds."""

    def __init__(self, inner: Behaviour, delay: float) -> None:
        self.inner, self.delay = inner, delay

    def pull(self, request: Request) -> Reply:
        time.sleep(self.delay)
        return self.inner.pull(request)


class HostileServer:
    """The harness: a loopback HTTP server answering as ``behaviour`` says; counts what it sent."""

    def __init__(self, behaviour: Behaviour) -> None:
        self.behaviour = behaviour
        self.requests: list[Request] = []
        self.sent = 0  # bytes written, headers included
        self._stopping = threading.Event()
        self._lock = threading.Lock()
        harness = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_GET(self) -> None:  # the stdlib's name
                harness._answer(self)

            do_POST = do_GET

            def log_message(self, *args: object) -> None:
                pass

        class Server(http.server.ThreadingHTTPServer):
            daemon_threads = True

            def handle_error(self, request: object, client_address: object) -> None:
                pass  # a client that hung up on a hostile answer is the point, not an error

        self.httpd = Server(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True, name="hostile-server")

    def __enter__(self) -> HostileServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stopping.set()
        self.httpd.shutdown()
        self.httpd.server_close()

    def pulls(self) -> list[Request]:
        with self._lock:
            return [r for r in self.requests if r.method == "GET"]

    def _answer(self, handler: http.server.BaseHTTPRequestHandler) -> None:
        parts = urlsplit(handler.path)
        query = {k: v[0] for k, v in parse_qs(parts.query).items()}
        length = int(handler.headers.get("Content-Length") or 0)
        request = Request(
            handler.command,
            handler.path,
            int(query.get("cursor", "0")),
            int(query.get("limit", "1000")),
            dict(handler.headers.items()),
            handler.rfile.read(length) if length else b"",
        )
        with self._lock:
            self.requests.append(request)
        behaviour = self.behaviour
        reply = behaviour.pull(request) if request.method == "GET" else behaviour.push(request)
        head = [f"HTTP/1.1 {reply.status} Whatever", f"Content-Type: {reply.content_type}"]
        head += [f"{k}: {v}" for k, v in reply.headers.items()]
        head.append(f"Content-Length: {reply.length}" if reply.length is not None else "Connection: close")
        handler.close_connection = reply.length is None
        try:
            self._write(handler, ("\r\n".join(head) + "\r\n\r\n").encode(), reply.drip if reply.drip_headers else 0.0)
            for chunk in reply.body:
                self._write(handler, chunk, reply.drip)
            handler.wfile.flush()
        except OSError:  # the device hung up: exactly what a bounded pull does
            handler.close_connection = True

    def _write(self, handler: http.server.BaseHTTPRequestHandler, data: bytes, drip: float) -> None:
        if not drip:
            handler.wfile.write(data)
            with self._lock:
                self.sent += len(data)
            return
        for i in range(len(data)):
            if self._stopping.wait(drip):
                raise OSError("the harness is stopping")
            handler.wfile.write(data[i : i + 1])
            handler.wfile.flush()
            with self._lock:
                self.sent += 1


# -- the scene the hostile tests share -------------------------------------------------------------


@dataclass
class Scene:
    """A real server holding a source device's history, and the harness at the pulling device's endpoint."""

    server: ServerThread
    harness: HostileServer
    key: bytes
    api_key: str
    directory: Path  # the pulling device's store
    expected: dict[str, Any]  # snapshot_of(source): what an honest pull must end with

    def device(self, config: ReplicationConfig) -> Sovseal:
        return open_mem(self.directory, self.key, self.harness.url, self.api_key, replication_config=config)

    def honest(self) -> None:
        self.harness.behaviour = Forward(self.server.url)

    def last(self) -> int:
        """The real server's newest sequence number for the project."""
        return int(self.server.storage.pull(project_blind_id("default", self.key), 0, 1).last_seq)

    def cursor(self) -> dict[str, Any]:
        """The device's saved cursor for the harness's URL (empty: none)."""
        path = self.directory / "replication-cursor.json"
        saved = json.loads(path.read_text()) if path.exists() else {}
        return next((v for k, v in saved.items() if k.startswith(self.harness.url + " ")), {})

    def assert_sane(self, mem: Sovseal, before: tuple[Any, ...] | None = None) -> None:
        """The store verifies, is unchanged (when ``before`` is given), and its cursor is one the real server has."""
        assert mem.verify().ok
        if before is not None:
            assert state(mem) == before
        cursor = self.cursor()
        assert not cursor or 0 <= cursor["seq"] <= self.last(), cursor

    def assert_recovers(self, mem: Sovseal) -> PullResult:
        """An honest pull at the same URL, without touching any file, ends equal to the source."""
        self.honest()
        # the device's own first item (its main branch's creation) goes up first, or it could land
        # on the server between this pull and the check of `last` below
        assert mem.replication is not None and mem.replication.flush(20)
        result = mem.pull()
        assert result.waiting == 0 and result.cursor == self.last()
        assert snapshot_of(mem) == self.expected and mem.verify().ok
        return result


def state(mem: Sovseal) -> tuple[Any, ...]:
    """What a pull could change: HEADs, record count, and what the server was told nothing about."""
    return mem.heads(), mem.status().records


@contextmanager
def scene(tmp_path: Path, key: bytes, server: ServerThread) -> Iterator[Scene]:
    """The source device writes :func:`history` to the real server; the harness starts honest."""
    api = server.storage.create_api_key(project_blind_id("default", key))
    with open_mem(tmp_path / "source", key, server.url, api) as source:
        history(source)
        assert source.replication is not None and source.replication.flush(20)
        expected = snapshot_of(source)
    with HostileServer(Forward(server.url)) as harness:
        yield Scene(server, harness, key, api, tmp_path / "device", expected)


# -- peak memory of one pull, in a fresh process ------------------------------------------------


def _status_kib(field: str) -> int:
    with open("/proc/self/status") as f:
        return int(re.search(rf"^{field}:\s+(\d+) kB", f.read(), re.M).group(1))  # type: ignore[union-attr]


def measure_pull(store: str, key_hex: str, endpoint: str, api_key: str, config: dict[str, Any]) -> dict[str, Any]:
    """Open the store, pull once, and return the outcome and the pull's peak RSS above the RSS before it.

    Exact, not sampled: just before the pull the kernel's high-water mark (VmHWM) is reset to the
    current RSS (``echo 5 > /proc/self/clear_refs``, Linux 4.0+), so VmHWM afterwards is the peak
    during the pull alone (the process's own start-up peaks, importing and opening, do not count).
    """
    from tests.fakes import fake_embed

    with Sovseal(
        store,
        key=bytes.fromhex(key_hex),
        embedder=fake_embed,
        endpoint=endpoint,
        api_key=api_key,
        replication_config=ReplicationConfig(**config),
    ) as mem:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        baseline = _status_kib("VmRSS") * 1024
        started = time.monotonic()
        outcome: dict[str, Any]
        try:
            result = mem.pull()
            outcome = {"ok": True, "waiting": result.waiting, "received": result.received}
        except Exception as exc:  # noqa: BLE001 - reported to the parent, which asserts on it
            outcome = {"ok": False, "error": type(exc).__name__, "code": getattr(exc, "code", ""), "message": str(exc)[:300]}
        elapsed = time.monotonic() - started
        peak = _status_kib("VmHWM") * 1024
    return {**outcome, "seconds": round(elapsed, 2), "baseline": baseline, "peak_above_baseline": peak - baseline}


#: What ``serve`` can run by hand, by name (the figures in docs/reliability.md, "A hostile server").
BY_NAME: dict[str, Callable[[], Behaviour]] = {
    "huge-page": lambda: HugePage(int(1.5 * 1024 * MiB)),
    "orphans": EndlessOrphans,
    "fat-orphans": lambda: EndlessOrphans(sealed_size=60_000),
    "drip": lambda: Drip(Fixed(b'{"records":[],"cursor":0,"last":0,"more":false,"held":0}'), 3.0),
}

USAGE = f"""usage:
  python -m tests.replication.hostile serve {{{"|".join(BY_NAME)}}}      # prints its URL, serves until killed
  python -m tests.replication.hostile measure-pull STORE KEY_HEX ENDPOINT API_KEY CONFIG_JSON"""

if __name__ == "__main__":
    if sys.argv[1:2] == ["serve"] and len(sys.argv) == 3 and sys.argv[2] in BY_NAME:
        with HostileServer(BY_NAME[sys.argv[2]]()) as harness:
            print(harness.url, flush=True)
            threading.Event().wait()
    elif sys.argv[1:2] == ["measure-pull"] and len(sys.argv) == 7:
        store, key_hex, endpoint, api_key, config = sys.argv[2:]
        print(json.dumps(measure_pull(store, key_hex, endpoint, api_key, json.loads(config))))
    else:
        sys.exit(USAGE)
