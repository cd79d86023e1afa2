"""Connections that cannot outstay their welcome: a header deadline and a cap on open connections.

uvicorn's h11 protocol arms no timer until a first response has been sent, so a client that
connects and sends a request's headers slowly (or never) holds a file descriptor for ever; about
a thousand of them exhaust ``ulimit -n 1024``, after which every accept fails and asyncio logs a
traceback per attempt (165 MB of log in 45 s, measured). This subclass adds the two bounds
uvicorn lacks:

- a *header deadline*: from the moment a connection opens, or a response on it ends, the client
  has ``header_timeout`` seconds to complete the next request's line and headers, however it
  trickles them (uvicorn's keep-alive timer is reset by any byte, so it bounds only silence);
  the same deadline ends the unread rest of a body the app answered without reading;
- a *connection cap*: while ``max_connections`` are open, a new connection evicts the one that
  has waited longest for its request headers (a slowloris, or an idle kept-alive connection),
  so a client that sends its request at once is still served; only when every open connection
  is busy with a request is the new one closed. The process never runs out of descriptors for
  its database (the runner also keeps the listen backlog, accepted in one burst, under the reserve).

Bodies are bounded by the app itself (a deadline on reading them, 408), where a reply can say so.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("sovseal.server")

#: At most one warning per this many seconds while connections are being refused at the cap.
_WARN_EVERY = 60.0


class _Crowd:
    """One server's connections waiting for request headers, oldest first, and a count of those cut at the cap."""

    def __init__(self) -> None:
        self.waiting: dict[GuardedH11Protocol, None] = {}  # insertion-ordered: the oldest wait is first
        self.cut = 0
        self._warned_at = -_WARN_EVERY

    def note_cut(self, cap: int) -> None:
        """Count a connection closed at the cap; warn at most once a minute (a flood must not flood the log)."""
        self.cut += 1
        now = time.monotonic()
        if now - self._warned_at >= _WARN_EVERY:
            self._warned_at = now
            log.warning("%d open connections (the cap): closing the longest-waiting ones (%d so far)", cap, self.cut)


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with a header deadline and a connection cap (set by :func:`guarded_protocol`)."""

    header_timeout: float = 10.0
    max_connections: int = 1000
    crowd: _Crowd = _Crowd()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._refused = False
        self._deadline: asyncio.TimerHandle | None = None
        self._waiting_after: object = None  # the request cycle current when the deadline was armed

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        if len(self.connections) >= self.max_connections:
            self.crowd.note_cut(self.max_connections)
            if not self.crowd.waiting:  # every connection is busy with a request: this one waits its turn elsewhere
                self._refused = True
                transport.close()
                return
            next(iter(self.crowd.waiting))._close("evicted at the connection cap")
        super().connection_made(transport)  # type: ignore[arg-type]
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._refused:
            return
        self._disarm()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._refused:
            return
        super().data_received(data)
        if self._deadline is not None and self.cycle is not self._waiting_after:
            self._disarm()  # a new request's headers are complete: the app's body deadline takes over

    def on_response_complete(self) -> None:
        super().on_response_complete()  # may parse a pipelined request at once
        if not self.transport.is_closing() and (self.cycle is None or self.cycle.response_complete):
            self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._waiting_after = self.cycle
        self._deadline = self.loop.call_later(self.header_timeout, self._close, "no complete request headers in time")
        self.crowd.waiting[self] = None

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self.crowd.waiting.pop(self, None)

    def _close(self, why: str) -> None:
        self._disarm()
        if not self.transport.is_closing():
            log.debug("closing a connection: %s", why)
            self.transport.close()


def guarded_protocol(header_timeout: float, max_connections: int) -> type[GuardedH11Protocol]:
    """A protocol class for ``uvicorn.Config(http=...)`` with these bounds (one per server: its own crowd)."""
    return type(
        "GuardedH11Protocol",
        (GuardedH11Protocol,),
        {"header_timeout": header_timeout, "max_connections": max_connections, "crowd": _Crowd()},
    )
