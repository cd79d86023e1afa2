"""The replication server's HTTP surface: a small Starlette app.

Three endpoints (``/v2/replicate/push``, ``/v2/replicate/pull``, ``/v2/health``). Every error
is JSON ``{"error": code, "message": text, "ids": [...]}`` so a client can tell a batch-wide
problem (auth, size) from item-level ones (``ids`` names them) and quarantine only those.
Status codes carry the retry policy: 4xx means "this request will never succeed as is" and is
never retried blindly by the client, except 408 (the body came too slowly) and 429 (the project
holds too many items waiting for others: it clears once they arrive); 5xx (here 503 when the
database fails) means "try again". No input gets a 5xx. Blocking work (the database, and parsing
and checking a push body) runs in the thread pool so that it does not stall the event loop.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import cast

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..replication.protocol import HEALTH_PATH, PROJECT_HEADER, PULL_PATH, PUSH_PATH
from .limits import Limits
from .storage import ConflictError, HeldQuota, QuotaExceeded, Storage
from .validate import ItemError, TooManyItems, decode_push

log = logging.getLogger("sovseal.server")

def _error(status: int, code: str, message: str, ids: list[str] | None = None, *, close: bool = False) -> Response:
    """The JSON error reply, ASCII-only (``ensure_ascii``), so no text in it can fail to encode.

    ``close`` ends the connection after the reply: for a request whose body is left unread.
    """
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else {}
    if close:
        headers["Connection"] = "close"
    text = json.dumps({"error": code, "message": message, "ids": ids or []}, ensure_ascii=True, separators=(",", ":"))
    return Response(text, status_code=status, headers=headers, media_type="application/json")


def _is_project(value: str) -> bool:
    return len(value) == 64 and all(c in "0123456789abcdef" for c in value)


#: Largest cursor a database BIGINT holds; anything past it is a malformed request, not a retry.
_MAX_CURSOR = 2**63 - 1


def _count(text: str) -> int | None:
    """A non-negative decimal integer in ASCII digits only (``int()`` would take "+1", " 1", "1_0", "١")."""
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        return None
    return int(text)


class _ClientGone(Exception):
    """The client closed the connection before its body was complete: nobody to answer."""


class _TooLarge(Exception):
    """The body passed ``max_body`` while being read."""


def create_app(storage: Storage, limits: Limits | None = None) -> Starlette:
    """The ASGI app over ``storage`` (migrated here, closed at shutdown)."""
    limits = limits or Limits()
    quota = HeldQuota(limits.max_held_items, limits.max_held_bytes)
    storage.migrate()

    async def authorize(request: Request) -> str | Response:
        """The project this request may touch, or the error response to send."""
        header = request.headers.get("authorization", "")
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return _error(401, "unauthorized", "send 'Authorization: Bearer <api key>'")
        project = request.headers.get(PROJECT_HEADER, "")
        if not _is_project(project):
            return _error(400, "bad_project", f"send the server-blind project id (64 hex) in {PROJECT_HEADER}")
        try:
            verdict = storage.cached_authorization(token.strip(), project) or await run_in_threadpool(
                storage.authorize, token.strip(), project
            )
        except Exception:  # the database is down: the client must retry
            log.exception("authorization failed")
            return _error(503, "unavailable", "the server's database is unavailable; retry later")
        if verdict == "unknown":
            return _error(401, "unauthorized", "unknown or revoked API key")
        if verdict == "forbidden":
            return _error(403, "forbidden", "this API key belongs to another project")
        if verdict == "taken":
            return _error(
                403,
                "forbidden",
                "this project already has an API key, and a key made without --project binds only to a new project: "
                "have the operator create a key for this project (sovseal serve --create-key --project <this project id>)",
            )
        return project

    async def receive_body(request: Request, keep: bool) -> bytes:
        """The body's bytes (or, with ``keep`` False, none: it is drained), within the body deadline.

        Reading stops at ``max_body`` bytes (_TooLarge), so the limit holds while reading, not
        after buffering. Raises TimeoutError past the deadline and _ClientGone when the client
        disconnects.
        """
        chunks: list[bytes] = []
        size = 0
        async with asyncio.timeout(limits.body_timeout):
            while True:
                message = await request.receive()
                if message["type"] == "http.disconnect":
                    raise _ClientGone
                chunk = message.get("body", b"")
                size += len(chunk)
                if keep:
                    if size > limits.max_body:
                        raise _TooLarge
                    chunks.append(chunk)
                if not message.get("more_body", False):
                    return b"".join(chunks)

    async def read_body(request: Request) -> bytes | Response:
        """The body, or the reply to send instead: 413 past the size limit, 408 past the deadline.

        A body declared too large is refused before it is read; one up to 4x the limit is drained
        first (within the deadline) so that the client, still sending, reads the 413 rather than
        a reset connection. A client that goes away mid-body is logged at DEBUG, not as an error:
        it is the client's network, not the server, that failed.
        """
        def too_large() -> Response:
            return _error(413, "too_large", f"a push body may be at most {limits.max_body} bytes", close=True)

        declared = request.headers.get("content-length")
        length = _count(declared) if declared is not None else 0
        if length is None:
            return _error(400, "malformed", "bad Content-Length", close=True)
        if length > 4 * limits.max_body:
            return too_large()
        try:
            body = await receive_body(request, keep=length <= limits.max_body)
        except _TooLarge:
            return too_large()
        except TimeoutError:  # a body known to be too large gets its real answer: 408 would be retried as is
            if length > limits.max_body:
                return too_large()
            return _error(408, "timeout", f"the body must arrive within {limits.body_timeout:g} s", close=True)
        except _ClientGone:
            log.debug("a client disconnected before sending its whole push body")
            return Response(status_code=400)  # never sent: the connection is gone
        return body if length <= limits.max_body else too_large()

    async def push(request: Request) -> Response:
        project = await authorize(request)
        if isinstance(project, Response):
            return project
        body = await read_body(request)
        if isinstance(body, Response):
            return body
        try:  # off the event loop: parsing 16 MiB holds the GIL for tens of milliseconds
            items, after = await run_in_threadpool(decode_push, body, limits.max_items)
        except ItemError as exc:
            return _error(400, "invalid_item", str(exc), [exc.item_id] if exc.item_id else [])
        except TooManyItems as exc:
            return _error(413, "too_large", str(exc))
        except ValueError as exc:
            return _error(400, "malformed", str(exc))
        try:
            outcome = await run_in_threadpool(storage.push, project, items, after, quota)
        except ConflictError as exc:
            return _error(409, "conflict", "a different body is already stored under these ids", exc.ids)
        except QuotaExceeded as exc:  # 429: retried by the client, and it succeeds once the missing items arrive
            return _error(429, "held_quota", str(exc))
        except Exception:  # a database failure is transient for the client
            log.exception("push failed")
            return _error(503, "unavailable", "the server's database is unavailable; retry later")
        return JSONResponse(
            {
                "accepted": outcome.accepted,
                "duplicates": outcome.duplicates,
                "held": outcome.held,
                "released": outcome.released,
                "cursor": outcome.cursor,
                "dropped": outcome.dropped,
                "erased": outcome.erased,
            }
        )

    async def pull(request: Request) -> Response:
        project = await authorize(request)
        if isinstance(project, Response):
            return project
        cursor = _count(request.query_params.get("cursor", "0"))
        limit = _count(request.query_params.get("limit", str(limits.max_pull)))
        if cursor is None or limit is None:
            return _error(400, "malformed", "cursor and limit must be non-negative integers in decimal digits")
        if cursor > _MAX_CURSOR or not 1 <= limit <= limits.max_pull:
            return _error(400, "malformed", f"cursor must be 0..{_MAX_CURSOR} and limit 1..{limits.max_pull}")
        try:
            page = await run_in_threadpool(storage.pull, project, cursor, limit)
        except Exception:
            log.exception("pull failed")
            return _error(503, "unavailable", "the server's database is unavailable; retry later")
        # Stored bodies are canonical JSON objects: splice the seq in rather than re-parse them.
        records = ",".join(f'{{"seq":{seq},{body[1:]}' for seq, body in page.rows)
        end = page.rows[-1][0] if page.rows else max(cursor, 0)
        more = "true" if page.rows and end < page.last_seq else "false"
        text = f'{{"records":[{records}],"cursor":{end},"last":{page.last_seq},"more":{more},"held":{page.held}}}'
        return Response(text, media_type="application/json")

    async def health(request: Request) -> Response:
        try:
            await run_in_threadpool(storage.ping)
        except Exception:  # noqa: BLE001
            return JSONResponse({"status": "unavailable", "backend": storage.backend}, status_code=503)
        return JSONResponse({"status": "ok", "backend": storage.backend})

    async def refused(request: Request, exc: Exception) -> Response:
        """The router's own 404 and 405, in the same JSON shape as every other refusal."""
        http = cast(HTTPException, exc)  # only HTTPException is routed here
        code = {404: "not_found", 405: "method_not_allowed"}.get(http.status_code, "malformed")
        reply = _error(http.status_code, code, "no such endpoint" if http.status_code == 404 else "method not allowed here")
        reply.headers.update(http.headers or {})  # 405's Allow
        return reply

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        storage.close()

    return Starlette(
        routes=[
            Route(PUSH_PATH, push, methods=["POST"]),
            Route(PULL_PATH, pull, methods=["GET"]),
            Route(HEALTH_PATH, health, methods=["GET"]),
        ],
        lifespan=lifespan,
        exception_handlers={HTTPException: refused},
    )
