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
from dataclasses import dataclass, field, fields
from typing import Any

from .. import settings
from ..errors import InvalidInputError
from ..errors import LimitError as LimitError  # in the catalogue (sovseal.errors); still importable from here

#: Environment variables for the fields that have one (the CLI passes ``max_body`` itself).
_SETTINGS: dict[str, settings.Setting[Any]] = {
    "max_held_items": settings.SERVER_MAX_HELD_ITEMS,
    "max_held_bytes": settings.SERVER_MAX_HELD_BYTES,
    "header_timeout": settings.SERVER_HEADER_TIMEOUT,
    "body_timeout": settings.SERVER_BODY_TIMEOUT,
    "max_connections": settings.SERVER_MAX_CONNECTIONS,
}
ENV = {name: setting.name for name, setting in _SETTINGS.items()}


def _from_env(name: str) -> Any:
    """The field's setting (its default when unset); a bad value is a LimitError, raised at start-up."""
    try:
        return _SETTINGS[name].get()
    except InvalidInputError as exc:
        raise LimitError(str(exc)) from None


def _env_int(name: str) -> int:
    return field(default_factory=lambda: int(_from_env(name)))


def _env_float(name: str) -> float:
    return field(default_factory=lambda: float(_from_env(name)))


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
    max_held_items: int = _env_int("max_held_items")  # default 10,000: settings.SERVER_MAX_HELD_ITEMS
    max_held_bytes: int = _env_int("max_held_bytes")  # default 64 MiB
    #: Seconds a connection gets to send a request's line and headers (from connecting, or from
    #: the end of the previous response on a kept-alive connection), then it is closed.
    header_timeout: float = _env_float("header_timeout")  # default 10 s
    #: Seconds a push gets to send its whole body (the client itself gives up after 30), then 408.
    body_timeout: float = _env_float("body_timeout")  # default 30 s
    #: Open connections; more are closed as soon as accepted. Capped at start-up so that they
    #: always leave file descriptors for the database (see ``runner.connection_cap``).
    max_connections: int = _env_int("max_connections")  # default 1000

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
