"""What one client, tenant or connection may cost the server, in one place.

A hostile or broken client must be able to get itself refused, never to stall or exhaust the
server: so every resource a request can hold has a bound here. Bodies (bytes, items, and the
time to send them), request headers (the time to send them), open connections, and the items a
project may park on the server while they wait for what they depend on (their count and bytes).

Each field's default can be set from the environment (how ``sovseal serve`` is configured in a
container); an argument given explicitly wins over the environment. A value that is not a
number, or is out of range, fails at start-up with :class:`LimitError`, never at the first request.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field, fields

from ..errors import InvalidInputError

#: Environment variables for the fields that have one (the CLI passes ``max_body`` itself).
ENV = {
    "max_held_items": "SOVSEAL_SERVER_MAX_HELD_ITEMS",
    "max_held_bytes": "SOVSEAL_SERVER_MAX_HELD_BYTES",
    "header_timeout": "SOVSEAL_SERVER_HEADER_TIMEOUT",
    "body_timeout": "SOVSEAL_SERVER_BODY_TIMEOUT",
    "max_connections": "SOVSEAL_SERVER_MAX_CONNECTIONS",
}


class LimitError(InvalidInputError):
    """A limit (argument or environment variable) that is not a usable number: ``sovseal serve`` says so and exits."""


def _from_env(name: str, default: float) -> float:
    text = os.environ.get(ENV[name], "").strip()
    if not text:
        return default
    try:
        return type(default)(text)
    except ValueError:
        raise LimitError(f"{ENV[name]}={text!r} is not {'an integer' if isinstance(default, int) else 'a number'}") from None


def _env_int(name: str, default: int) -> int:
    return field(default_factory=lambda: int(_from_env(name, default)))


def _env_float(name: str, default: float) -> float:
    return field(default_factory=lambda: float(_from_env(name, default)))


@dataclass(frozen=True, slots=True)
class Limits:
    """Request, connection and per-project limits.

    An honest client sends batches of at most 32 items and 4 MiB, gives up on a request after
    30 s, and holds nothing on the server unless the network reordered its batches or one of its
    items was refused: the defaults leave it far inside every bound.
    """

    max_body: int = 16 * 1024 * 1024  # bytes of one push body
    max_items: int = 1024  # items in one push
    max_pull: int = 1000  # items in one pull page
    #: Items of one project held back until what they wait for arrives, and their bytes. A push
    #: that would hold more is refused whole with 429 (nothing stored); it succeeds once the
    #: missing items arrive and the held ones are released.
    max_held_items: int = _env_int("max_held_items", 10_000)
    max_held_bytes: int = _env_int("max_held_bytes", 64 * 1024 * 1024)
    #: Seconds a connection gets to send a request's line and headers (from connecting, or from
    #: the end of the previous response on a kept-alive connection), then it is closed.
    header_timeout: float = _env_float("header_timeout", 10.0)
    #: Seconds a push gets to send its whole body (the client itself gives up after 30), then 408.
    body_timeout: float = _env_float("body_timeout", 30.0)
    #: Open connections; more are closed as soon as accepted. Capped at start-up so that they
    #: always leave file descriptors for the database (see ``runner.connection_cap``).
    max_connections: int = _env_int("max_connections", 1000)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            ok = not isinstance(value, bool) and isinstance(value, (int, float)) and math.isfinite(value)
            if f.name.endswith("_timeout"):
                ok, rule = ok and value > 0, "a number of seconds > 0"
            elif f.name.startswith("max_held_"):
                ok, rule = ok and value >= 0 and value == int(value), "an integer >= 0"
            else:
                ok, rule = ok and value >= 1 and value == int(value), "an integer >= 1"
            if not ok:
                where = f" ({ENV[f.name]})" if f.name in ENV else ""
                raise LimitError(f"limit {f.name}{where} must be {rule}, not {value!r}")
