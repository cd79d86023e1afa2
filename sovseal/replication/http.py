"""The client side of the wire: the pushing httpx client, and the rule that turns an answer into a decision.

Pulls run in their own bounded session (:mod:`.fetch`) with the same headers and the same rule.

The decision table is the whole retry policy (docs/replication.md, "The worker"):

- 2xx: the server has the batch durably: acknowledge it locally.
- 408, 425, 429 and 5xx, and any network error (refused, reset, timeout): *ambiguous or
  transient*. The batch may or may not have landed, so it is resent unchanged later; the
  server deduplicates byte-identical items, so resending is always safe (an ambiguous outcome
  is never taken for a success).
- any other 4xx: this request will never succeed as is. It is surfaced, never retried blindly.

Headers carry the bearer key and the server-blind project id; nothing else about the user.

A push answer is bounded as a pull page is (docs/reliability-network.md, "A hostile server's
answers to pushes"): httpx's timeouts are per read and its ``post`` reads the whole body and
decompresses it, so a server could stall the worker for ever (one byte every few seconds) or
exhaust memory (a 600 KB gzip answer inflated to 600 MB). So a push runs on an event loop in a
helper thread (anyio's blocking portal, one per transport, started by the first push), with one
deadline (``pull_deadline``) on the whole request; the device asks for ``identity`` and refuses
any other encoding; the body is read raw into at most :data:`ANSWER_BYTES`; a 2xx answer counts
as an acknowledgement only as ``application/json``. Each of these is a *retry* (the batch may
have landed; resending is safe), reported with its own code. :meth:`Transport.close` cancels a
push in flight, so closing never waits for a hung server.
"""

from __future__ import annotations

import json
import logging
import threading
from contextlib import ExitStack, suppress
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio
import httpx
from anyio.from_thread import BlockingPortal, start_blocking_portal

from .config import ReplicationConfig, Target, log_bodies
from .protocol import PROJECT_HEADER, PUSH_PATH

log = logging.getLogger("sovseal.replication")
_TRANSIENT_4XX = frozenset({408, 425, 429})
#: The most of an answer read when it is not a pull page: a push's acknowledgement or any error
#: (a sovseal server's are a few hundred bytes; enough of a proxy's error page for its message).
ANSWER_BYTES = 64 * 1024
#: Codes of a push answer no sovseal server sends (see :meth:`Transport.push`).
MISBEHAVIOUR_CODES = frozenset({"too_large", "content_encoding", "content_type"})


@dataclass(frozen=True, slots=True)
class Outcome:
    verdict: Literal["ok", "retry", "rejected"]
    status: int | None
    code: str = ""
    message: str = ""
    ids: list[str] = field(default_factory=list)  # items the server named (item-level rejections)
    body: dict[str, Any] = field(default_factory=dict)


async def read_raw(response: httpx.Response, cap: int) -> bytes | None:
    """The body as sent (no decompression), or None as soon as it passes ``cap`` bytes.

    None rather than an exception from here: a traceback would keep this frame, and the
    chunks with it, alive until the cycle collector ran (RSS rose ~16 MiB per refused page).
    """
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_raw():
        chunks.append(chunk)
        size += len(chunk)
        if size > cap:
            return None
    return b"".join(chunks)


def _decode(content: bytes) -> dict[str, Any]:
    try:
        data = json.loads(content)
    except (ValueError, RecursionError):  # RecursionError: nesting past the JSON parser's limit
        return {}
    return data if isinstance(data, dict) else {}


def decide(status: int, reason: str, content: bytes) -> Outcome:
    """Turn one answer (status, reason phrase, body) into ok / retry / rejected."""
    data = _decode(content)
    code = str(data.get("error", ""))
    message = str(data.get("message", "")) or reason
    ids = [str(i) for i in data.get("ids", []) if isinstance(i, str)] if isinstance(data.get("ids"), list) else []
    if 200 <= status < 300:
        return Outcome("ok", status, body=data)
    if status >= 500 or status in _TRANSIENT_4XX:
        return Outcome("retry", status, code, message)
    return Outcome("rejected", status, code or f"http_{status}", message, ids)


class Transport:
    """HTTP to one replication server for one project."""

    def __init__(self, target: Target, project_blind: str, config: ReplicationConfig) -> None:
        self.target = target
        self.project_blind = project_blind
        self.config = config
        self.headers = {
            "Authorization": f"Bearer {target.api_key}",
            PROJECT_HEADER: project_blind,
            "User-Agent": "sovseal-replication/1",
        }
        self._timeout = httpx.Timeout(config.request_timeout, connect=config.connect_timeout)
        self._lock = threading.Lock()  # guards the portal's start and stop against close() from another thread
        self._stack = ExitStack()
        self._portal: BlockingPortal | None = None
        self._client: httpx.AsyncClient | None = None
        self._scope: anyio.CancelScope | None = None  # the push in flight, touched only on the portal's thread
        self._closed = False

    def push(self, body: bytes) -> Outcome:
        """POST one batch body exactly as given; bounded in time and bytes whatever the server does."""
        if log_bodies():
            log.info("POST %s%s body (%d bytes): %s", self.target.endpoint, PUSH_PATH, len(body), body.decode("ascii"))
        with self._lock:
            if self._closed:
                return _CLOSED
            portal = self._start()
        try:
            return portal.call(self._post, body, self.config.pull_deadline)
        except RuntimeError:  # the portal stopped meanwhile: close() won the race
            if self._closed:
                return _CLOSED
            raise

    def _start(self) -> BlockingPortal:
        if self._portal is None:
            with ExitStack() as stack:
                portal = stack.enter_context(start_blocking_portal(name="sovseal-replication-http"))
                client = httpx.AsyncClient(
                    base_url=self.target.endpoint,
                    headers={**self.headers, "Accept-Encoding": "identity"},
                    timeout=self._timeout,
                    follow_redirects=False,
                    trust_env=False,
                )
                self._client = stack.enter_context(portal.wrap_async_context_manager(client))
                self._stack = stack.pop_all()
            self._portal = portal
        return self._portal

    async def _post(self, body: bytes, deadline: float) -> Outcome:
        assert self._client is not None  # nosec B101 -- _start() made it before this task was started
        with anyio.CancelScope() as scope:
            if self._closed:
                scope.cancel()
            self._scope = scope
            try:
                with anyio.fail_after(deadline):
                    async with self._client.stream(
                        "POST", PUSH_PATH, content=body, headers={"Content-Type": "application/json"}
                    ) as response:
                        return await self._answer(response)
            except TimeoutError:
                return Outcome(
                    "retry",
                    None,
                    "deadline",
                    f"the push did not finish within {deadline:g} s (connecting, sending, headers and answer together: "
                    "ReplicationConfig.pull_deadline); the server or the network is too slow, or the server is stalling",
                )
            except httpx.HTTPError as exc:
                return Outcome("retry", None, "network", f"{type(exc).__name__}: {exc}")
            finally:
                self._scope = None
        return _CLOSED  # cancelled by close()

    async def _answer(self, response: httpx.Response) -> Outcome:
        """The decision on one answer, refusing what no sovseal server sends (each a retry: the batch may have landed)."""
        status = response.status_code
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            return Outcome(
                "retry",
                status,
                "content_encoding",
                f"the server answered a push compressed ({encoding[:40]}) although the device asked for identity; a "
                "sovseal server never compresses (turn compression off in a proxy in front of it). The answer was not read",
            )
        media = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if 200 <= status < 300 and media != "application/json":
            return Outcome(
                "retry",
                status,
                "content_type",
                f"the server acknowledged a push with content type {media[:60]!r}, not application/json: is the endpoint a "
                "sovseal replication server, or a login page or proxy in front of one? Not taken as an acknowledgement",
            )
        declared = response.headers.get("content-length", "")
        content = None if declared.isdigit() and int(declared) > ANSWER_BYTES else await read_raw(response, ANSWER_BYTES)
        if content is None:
            return Outcome(
                "retry",
                status,
                "too_large",
                f"the server's answer to a push (HTTP {status}) passed {ANSWER_BYTES} bytes; a sovseal server's is a few "
                "hundred. The rest was not read",
            )
        return decide(status, response.reason_phrase, content)

    def close(self) -> None:
        """Cancel a push in flight (it returns a retry: its batch stays in the outbox) and stop the helper thread."""
        with self._lock:
            self._closed = True
            portal, stack = self._portal, self._stack
            self._portal = None
            self._stack = ExitStack()
        if portal is None:
            return
        with suppress(RuntimeError):  # the portal already stopped
            portal.call(self._cancel)
        stack.close()

    def _cancel(self) -> None:
        if self._scope is not None:
            self._scope.cancel()


_CLOSED = Outcome("retry", None, "closed", "the handle was closed during the push; its batch stays in the outbox for the next open")
