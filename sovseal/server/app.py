"""The replication server's HTTP surface: a small Starlette app.

Three endpoints (``/v2/replicate/push``, ``/v2/replicate/pull``, ``/v2/health``). Every error
is JSON ``{"error": code, "message": text, "ids": [...]}`` so a client can tell a batch-wide
problem (auth, size) from item-level ones (``ids`` names them) and quarantine only those.
Status codes carry the retry policy: 4xx means "this request will never succeed as is" and is
never retried blindly by the client; 5xx (here 503 when the database fails) means "try again".
Blocking database work runs in the thread pool so one slow commit does not stall the event loop.
"""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from ..replication.protocol import HEALTH_PATH, PROJECT_HEADER, PULL_PATH, PUSH_PATH
from .storage import ConflictError, Storage
from .validate import ItemError, TooManyItems, parse_push

log = logging.getLogger("sovseal.server")


@dataclass(frozen=True, slots=True)
class Limits:
    """Request limits. A client batch is at most 32 items of at most ~350 KB each, far below these."""

    max_body: int = 16 * 1024 * 1024  # bytes of one push body
    max_items: int = 1024  # items in one push
    max_pull: int = 1000  # items in one pull page


def _error(status: int, code: str, message: str, ids: list[str] | None = None) -> JSONResponse:
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    return JSONResponse({"error": code, "message": message, "ids": ids or []}, status_code=status, headers=headers)


def _is_project(value: str) -> bool:
    return len(value) == 64 and all(c in "0123456789abcdef" for c in value)


#: Largest cursor a database BIGINT holds; anything past it is a malformed request, not a retry.
_MAX_CURSOR = 2**63 - 1


def _count(text: str) -> int | None:
    """A non-negative decimal integer in ASCII digits only (``int()`` would take "+1", " 1", "1_0", "١")."""
    if not (text.isascii() and text.isdigit()) or len(text) > 19:
        return None
    return int(text)


def create_app(storage: Storage, limits: Limits | None = None) -> Starlette:
    """The ASGI app over ``storage`` (migrated here, closed at shutdown)."""
    limits = limits or Limits()
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
        except Exception:  # noqa: BLE001 - the database is down: the client must retry
            log.exception("authorization failed")
            return _error(503, "unavailable", "the server's database is unavailable; retry later")
        if verdict == "unknown":
            return _error(401, "unauthorized", "unknown or revoked API key")
        if verdict == "forbidden":
            return _error(403, "forbidden", "this API key belongs to another project")
        return project

    async def read_body(request: Request) -> bytes | Response:
        """The body, or 413 once it passes the limit (drained first, within reason, so the client reads the 413)."""
        declared = request.headers.get("content-length")
        if declared is not None:
            if _count(declared) is None:
                return _error(400, "malformed", "bad Content-Length")
            if int(declared) > limits.max_body:
                if int(declared) <= 4 * limits.max_body:
                    async for _ in request.stream():
                        pass
                return _error(413, "too_large", f"a push body may be at most {limits.max_body} bytes")
        body = bytearray()
        async for chunk in request.stream():
            body += chunk
            if len(body) > limits.max_body:
                return _error(413, "too_large", f"a push body may be at most {limits.max_body} bytes")
        return bytes(body)

    async def push(request: Request) -> Response:
        project = await authorize(request)
        if isinstance(project, Response):
            return project
        body = await read_body(request)
        if isinstance(body, Response):
            return body
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError, RecursionError):  # RecursionError: "[[[[…" nested past the parser's limit
            return _error(400, "malformed", "the body is not JSON")
        try:
            items, after = parse_push(data, limits.max_items)
        except ItemError as exc:
            return _error(400, "invalid_item", str(exc), [exc.item_id] if exc.item_id else [])
        except TooManyItems as exc:
            return _error(413, "too_large", str(exc))
        except ValueError as exc:
            return _error(400, "malformed", str(exc))
        try:
            outcome = await run_in_threadpool(storage.push, project, items, after)
        except ConflictError as exc:
            return _error(409, "conflict", "a different body is already stored under these ids", exc.ids)
        except Exception:  # noqa: BLE001 - a database failure is transient for the client
            log.exception("push failed")
            return _error(503, "unavailable", "the server's database is unavailable; retry later")
        return JSONResponse(
            {
                "accepted": outcome.accepted,
                "duplicates": outcome.duplicates,
                "held": outcome.held,
                "released": outcome.released,
                "cursor": outcome.cursor,
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
        except Exception:  # noqa: BLE001
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
    )
