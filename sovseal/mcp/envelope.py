"""The result shape of every MCP tool: ``{success, data, timestamp}``, and the same for a failure."""

from __future__ import annotations

import time
from typing import Any

from sovseal.sdk.views import jsonable


def _now_ms() -> int:
    return int(time.time() * 1000)


def envelope(data: Any) -> dict[str, Any]:
    """The result shape of every MCP tool (docs/mcp.md): ``{success, data, timestamp}`` (ms since epoch)."""
    return {"success": True, "data": jsonable(data), "timestamp": _now_ms()}


def error_envelope(exc: BaseException) -> dict[str, Any]:
    """A failure in the same shape: ``{success: false, error: {type, message}, timestamp}``."""
    return {"success": False, "error": {"type": type(exc).__name__, "message": str(exc)}, "timestamp": _now_ms()}
