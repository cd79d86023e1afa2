"""The result shape of every MCP tool: ``{success, data, timestamp}``, and the same for a failure."""

from __future__ import annotations

import time
from typing import Any

from sovseal.errors import EXIT_ERROR, SovsealError
from sovseal.sdk.views import jsonable


def _now_ms() -> int:
    return int(time.time() * 1000)


def envelope(data: Any) -> dict[str, Any]:
    """The result shape of every MCP tool (docs/mcp.md): ``{success, data, timestamp}`` (ms since epoch)."""
    return {"success": True, "data": jsonable(data), "timestamp": _now_ms()}


def error_envelope(exc: BaseException) -> dict[str, Any]:
    """A failure in the same shape: ``{success: false, error: {type, message, advice, cli_advice, exit_code}, timestamp}``.

    ``message`` is ``str(exc)`` (what happened, then what to do); ``advice`` and ``cli_advice`` are the
    error's fields from the catalogue (:mod:`sovseal.errors`), so a client reads them rather than
    parsing the message; ``exit_code`` is the one the ``sovseal`` command would exit with.
    """
    error: dict[str, Any] = {"type": type(exc).__name__, "message": str(exc), "advice": "", "cli_advice": "", "exit_code": EXIT_ERROR}
    if isinstance(exc, SovsealError):
        error.update(advice=exc.advice, cli_advice=exc.cli_advice, exit_code=exc.exit_code)
    return {"success": False, "error": error, "timestamp": _now_ms()}
