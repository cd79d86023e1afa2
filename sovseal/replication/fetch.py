"""The HTTP of one pull: every request bounded in bytes and in time, whatever the server sends.

httpx's timeouts are per read, so a server that sends one byte every few seconds keeps a request
alive for ever, and a plain ``get`` reads the whole body into memory before anyone looks at it
(one 1.5 GiB page cost 7.4 GB of RSS). So a pull runs its requests on an event loop in a helper
thread (anyio's blocking portal, one per pull, which works from any calling thread, including one
that already runs an event loop as Jupyter's does), where a cancel scope puts one deadline on the
whole request: connecting, the headers and every byte of the body. The body is read raw (never
decompressed: a small gzip body can expand a thousandfold) into a buffer that may not pass
``max_page_bytes``, and only an ``application/json`` answer is read at all. Pushes are bounded
the same way (:class:`.http.Transport`).
"""

from __future__ import annotations

import logging
from contextlib import ExitStack
from types import TracebackType

import anyio
import httpx
from anyio.from_thread import BlockingPortal, start_blocking_portal

from ..errors import PageTooLargeError as PageTooLargeError  # in the catalogue (sovseal.errors); still importable from here
from ..errors import ReplicationError, ServerMisbehaviourError
from .config import log_bodies
from .http import ANSWER_BYTES, Transport, decide, read_raw
from .protocol import PULL_PATH

log = logging.getLogger("sovseal.replication")


class PullSession:
    """One pull's connection to the server: use as a context manager, then :meth:`page` per page."""

    def __init__(self, transport: Transport) -> None:
        self.endpoint = transport.target.endpoint
        self.max_bytes = transport.config.max_page_bytes
        self._headers = {**transport.headers, "Accept-Encoding": "identity"}
        self._timeout = httpx.Timeout(transport.config.request_timeout, connect=transport.config.connect_timeout)
        self._stack = ExitStack()
        self._portal: BlockingPortal | None = None
        self._client: httpx.AsyncClient | None = None

    def __enter__(self) -> PullSession:
        with ExitStack() as stack:
            self._portal = stack.enter_context(start_blocking_portal())
            client = httpx.AsyncClient(
                base_url=self.endpoint, headers=self._headers, timeout=self._timeout, follow_redirects=False, trust_env=False
            )
            self._client = stack.enter_context(self._portal.wrap_async_context_manager(client))
            self._stack = stack.pop_all()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self._stack.__exit__(kind, exc, tb)
        self._portal = self._client = None

    def page(self, cursor: int, limit: int, deadline: float) -> bytes:
        """The raw body of one pull page, read within ``deadline`` seconds and ``max_page_bytes``.

        Raises :class:`ReplicationError` (retryable) for a network failure, a missed deadline or a
        5xx; :class:`ServerMisbehaviourError` for an answer no sovseal server sends.
        """
        if self._portal is None:
            raise RuntimeError("PullSession.page() outside its with block")
        if log_bodies():
            log.info("GET %s%s?cursor=%d&limit=%d (no body)", self.endpoint, PULL_PATH, cursor, limit)
        return self._portal.call(self._get, cursor, limit, deadline)

    async def _get(self, cursor: int, limit: int, deadline: float) -> bytes:
        assert self._client is not None  # nosec B101 -- narrows the type; page() checked it
        try:
            with anyio.fail_after(deadline):
                async with self._client.stream("GET", PULL_PATH, params={"cursor": cursor, "limit": limit}) as response:
                    return await self._read(response, limit)
        except TimeoutError:
            raise ReplicationError(
                f"a pull request to {self.endpoint} did not finish within {deadline:.1f} s (connecting, headers and body "
                "together): the network or the server is too slow, or the server is stalling on purpose. Pull again later; "
                "on a slow link, raise ReplicationConfig.pull_deadline",
                code="deadline",
                retryable=True,
            ) from None
        except httpx.HTTPError as exc:
            raise ReplicationError(
                f"could not reach {self.endpoint} to pull ({type(exc).__name__}: {exc}); check the endpoint and retry",
                code="network",
                retryable=True,
            ) from None

    async def _read(self, response: httpx.Response, limit: int) -> bytes:
        if not 200 <= response.status_code < 300:
            outcome = decide(response.status_code, response.reason_phrase, await read_raw(response, ANSWER_BYTES) or b"")
            raise ReplicationError(
                f"pull from {self.endpoint} failed with HTTP {outcome.status} ({outcome.code}): {outcome.message}",
                status=outcome.status,
                code=outcome.code,
                retryable=outcome.verdict == "retry",
            )
        media = response.headers.get("content-type", "").split(";")[0].strip().lower()
        if media != "application/json":
            raise ServerMisbehaviourError(
                f"{self.endpoint} answered a pull with content type {media[:60]!r}, not application/json: is the endpoint "
                "a sovseal replication server, or a login page or proxy in front of one?",
                status=response.status_code,
                code="content_type",
            )
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise ServerMisbehaviourError(
                f"{self.endpoint} answered a pull compressed ({encoding[:40]}) although the device asked for identity; "
                "a sovseal server never compresses (turn compression off in a proxy in front of it)",
                status=response.status_code,
                code="content_encoding",
            )
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_bytes:
            raise self._too_large(limit)
        body = await read_raw(response, self.max_bytes)
        if body is None:
            raise self._too_large(limit)
        return body

    def _too_large(self, limit: int) -> PageTooLargeError:
        return PageTooLargeError(
            f"{self.endpoint} answered a pull of {limit} item(s) with more than max_page_bytes={self.max_bytes} bytes; "
            "a sovseal server's item is at most 400 KiB sealed (about 550 KB on the wire).",
            advice="If this server's items are larger, raise ReplicationConfig.max_page_bytes",
            cli_advice=f"check that {self.endpoint} is a sovseal replication server and not a proxy in front of one",
            code="too_large",
        )
