"""A real HTTP proxy on loopback that records every request and injects network faults.

It sits between the replication worker and the real server, speaking HTTP/1.1 over real
sockets, so the client sees genuine connection resets, timeouts and reordered deliveries,
not a mocked transport. A *plan* decides what happens to each request:

- ``pass``: forward and relay the answer;
- ``drop``: close the connection without forwarding (the request is lost);
- ``reset``: forward (the server commits), then close without answering (an ambiguous outcome);
- ``dup``: forward twice (a duplicate delivery), relay the second answer;
- ``delay:<s>``: wait, then forward;
- ``status:<code>``: answer with that status without forwarding (a 5xx storm, a 4xx);
- ``conflict:<id>``: answer the server's 409 for that item id without forwarding;
- ``early``: answer 200 at once and deliver the batch only after the next forwarded push
  (a reordering middlebox: later batches reach the server first);
- ``hang``: forward, then never answer (the client is stuck waiting for its ack).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import httpx


@dataclass
class Captured:
    method: str
    target: str
    headers: list[tuple[str, str]]
    body: bytes
    action: str = "pass"


Plan = Callable[[int, Captured], str]


def always(action: str) -> Plan:
    return lambda index, request: action


@dataclass
class FaultProxy:
    upstream: str
    plan: Plan = field(default_factory=lambda: always("pass"))
    captured: list[Captured] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.AbstractServer | None = None
        self._thread: threading.Thread | None = None
        self._stash: list[Captured] = []
        self._lock = threading.Lock()
        self.url = ""

    # -- lifecycle --------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        ready = threading.Event()

        def main() -> None:
            self._loop = asyncio.new_event_loop()
            self._loop.run_until_complete(self._open())
            ready.set()
            self._loop.run_forever()
            self._loop.close()

        self._thread = threading.Thread(target=main, daemon=True, name="fault-proxy")
        self._thread.start()
        ready.wait(10)
        return self

    async def _open(self) -> None:
        self._client = httpx.AsyncClient(base_url=self.upstream, timeout=30)
        self._stash_lock = asyncio.Lock()  # one flusher at a time: a connection's, or deliver_stash()
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        host, port = self._server.sockets[0].getsockname()[:2]
        self.url = f"http://{host}:{port}"

    def stop(self) -> None:
        if self._loop is None:
            return

        async def close() -> None:
            assert self._server is not None
            self._server.close()
            current = asyncio.current_task()
            tasks = [t for t in asyncio.all_tasks() if t is not current]
            for task in tasks:  # e.g. a connection told to ``hang``
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            await self._client.aclose()

        asyncio.run_coroutine_threadsafe(close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        if self._thread is not None:
            self._thread.join(10)
        self._loop = None

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- what tests read --------------------------------------------------------------------

    def pushes(self) -> list[Captured]:
        with self._lock:
            return [c for c in self.captured if c.method == "POST"]

    def stashed(self) -> int:
        """Batches answered 200 by ``early`` but not yet delivered to the server."""
        return len(self._stash)

    def deliver_stash(self) -> None:
        """Forward any batch still held back by ``early`` (a test's last step); ``stashed()`` says if any is left."""
        assert self._loop is not None
        asyncio.run_coroutine_threadsafe(self._flush_stash(), self._loop).result(30)

    # -- the proxy --------------------------------------------------------------------------

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                request = await self._read(reader)
                if request is None:
                    return
                with self._lock:
                    index = len(self.captured)
                    self.captured.append(request)
                request.action = action = self.plan(index, request)
                if not await self._act(action, request, writer):
                    return
        except (ConnectionError, asyncio.IncompleteReadError, httpx.HTTPError):
            pass  # the client, or the server behind us (down, restarting), went away: the client sees a reset
        finally:
            writer.close()

    async def _read(self, reader: asyncio.StreamReader) -> Captured | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        lines = head.decode("latin-1").split("\r\n")
        method, target, _ = lines[0].split(" ", 2)
        headers = [(k.strip(), v.strip()) for k, v in (line.split(":", 1) for line in lines[1:] if ":" in line)]
        length = int(next((v for k, v in headers if k.lower() == "content-length"), "0"))
        body = await reader.readexactly(length) if length else b""
        return Captured(method, target, headers, body)

    async def _forward(self, request: Captured) -> httpx.Response:
        skip = {"host", "content-length", "connection", "transfer-encoding", "accept-encoding"}
        headers = [(k, v) for k, v in request.headers if k.lower() not in skip]
        return await self._client.request(request.method, request.target, headers=headers, content=request.body)

    async def _flush_stash(self) -> None:
        """Deliver held-back batches in order; one leaves the stash only once the server took it.

        The proxy already answered 200 for them, so losing one here would be a lie the client can
        never detect: a test of *network* faults must not also be a test of a lying middlebox.
        """
        async with self._stash_lock:
            while self._stash:
                try:
                    response = await self._forward(self._stash[0])
                except httpx.HTTPError:
                    return  # the server is down (restarting): try again later, see stashed()
                if response.status_code >= 500:
                    return  # try again after the next forwarded push
                self._stash.pop(0)

    @staticmethod
    async def _answer(writer: asyncio.StreamWriter, status: int, body: bytes) -> None:
        head = f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        writer.write(head.encode() + body)
        await writer.drain()

    async def _act(self, action: str, request: Captured, writer: asyncio.StreamWriter) -> bool:
        """Carry out one action; False closes the client connection."""
        if action == "drop":
            return False
        if action.startswith("status:"):
            await self._answer(writer, int(action.split(":")[1]), b'{"error":"injected","message":"fault proxy"}')
            return True
        if action.startswith("conflict:"):  # the server's own 409 for an id, as a format-2 device can still get it
            message = "1 item(s) conflict with a different body stored under the same id"
            body = {"error": "conflict", "message": message, "ids": [action[9:]]}
            await self._answer(writer, 409, json.dumps(body).encode())
            return True
        if action == "early":
            self._stash.append(request)
            await self._answer(writer, 200, json.dumps({"accepted": 0, "held": []}).encode())
            return True
        if action.startswith("delay:"):
            await asyncio.sleep(float(action.split(":")[1]))
        response = await self._forward(request)
        if request.method == "POST" and action != "reset":
            await self._flush_stash()  # an ``early`` batch arrives after the one sent after it
        if action == "dup":
            response = await self._forward(request)
        if action == "reset":
            return False
        if action == "hang":
            await asyncio.sleep(3600)
            return False
        await self._answer(writer, response.status_code, response.content)
        return True
