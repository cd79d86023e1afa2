"""Token maps in process memory, each discarded after use or after its time-to-live.

A token map is the only thing that links a placeholder back to the user's data, so it never
leaves this process: no file, no log line, no network call, no ``repr`` that shows it. A session
lives until ``deanonymize`` consumes it or until ``ttl`` seconds pass without use; a background
thread (running only while sessions exist) drops expired ones even if no further call arrives.
"Discarded" means every reference is dropped; Python cannot scrub freed string memory.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from ..errors import InvalidInputError, UnknownSessionError

#: Fifteen minutes: long enough for a slow model round trip, short enough not to hoard maps.
DEFAULT_TTL = 900.0
#: More live sessions than this and the ones closest to expiry go first (memory stays bounded).
DEFAULT_MAX_SESSIONS = 4096

Clock = Callable[[], float]


@dataclass(eq=False)
class Session:
    """One conversation's token map. ``forward``: original text → token; ``backward``: the reverse;
    ``reserved``: placeholder-shaped strings seen in this session's input, never issued as tokens."""

    expires_at: float
    forward: dict[str, str] = field(default_factory=dict)
    backward: dict[str, str] = field(default_factory=dict)
    counters: dict[str, int] = field(default_factory=dict)
    reserved: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def __repr__(self) -> str:  # the maps hold the user's data: never print them
        return f"Session({len(self.backward)} tokens)"


_UNKNOWN = (
    "unknown or expired anonymization session (maps are discarded after deanonymize or {ttl:g} s unused); "
    "anonymize the message again to get a new session id"
)


class SessionStore:
    """Live sessions by id. ``clock`` (monotonic seconds) can be replaced in tests."""

    def __init__(
        self,
        *,
        ttl: float = DEFAULT_TTL,
        clock: Clock = time.monotonic,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
    ) -> None:
        if isinstance(ttl, bool) or not isinstance(ttl, (int, float)) or not 0 < ttl < float("inf"):
            raise InvalidInputError(f"ttl must be a positive number of seconds (an int or a float), got {ttl!r}")
        if isinstance(max_sessions, bool) or not isinstance(max_sessions, int) or max_sessions < 1:
            raise InvalidInputError(f"max_sessions must be an integer of at least 1, got {max_sessions!r}")
        if not callable(clock):
            raise InvalidInputError(f"clock must be a callable returning monotonic seconds, got {type(clock).__name__}")
        self.ttl = float(ttl)
        self._clock = clock
        self._max = max_sessions
        self._sessions: dict[str, Session] = {}
        self._cond = threading.Condition()
        self._sweeper: threading.Thread | None = None

    def __len__(self) -> int:
        with self._cond:
            self._sweep()
            return len(self._sessions)

    def open(self) -> tuple[str, Session]:
        """A new empty session and its id (unguessable: 128 random bits)."""
        session_id = "anon_" + secrets.token_urlsafe(16)
        with self._cond:
            self._sweep()
            while len(self._sessions) >= self._max:
                del self._sessions[min(self._sessions, key=lambda sid: self._sessions[sid].expires_at)]
            session = Session(expires_at=self._clock() + self.ttl)
            self._sessions[session_id] = session
            self._start_sweeper()
            self._cond.notify_all()
        return session_id, session

    def get(self, session_id: object) -> Session:
        """The live session ``session_id``, its time-to-live restarted; UnknownSessionError otherwise."""
        with self._cond:
            self._sweep()
            session = self._sessions.get(session_id) if isinstance(session_id, str) else None
            if session is None:
                raise UnknownSessionError(_UNKNOWN.format(ttl=self.ttl))
            session.expires_at = self._clock() + self.ttl
            return session

    def discard(self, session_id: str) -> bool:
        """Drop a session's map now; False if it was already gone."""
        with self._cond:
            gone = self._sessions.pop(session_id, None) is not None
            self._cond.notify_all()
            return gone

    def _sweep(self) -> None:
        now = self._clock()
        for sid in [sid for sid, s in self._sessions.items() if s.expires_at <= now]:
            del self._sessions[sid]

    def _start_sweeper(self) -> None:
        if self._sweeper is None or not self._sweeper.is_alive():
            self._sweeper = threading.Thread(target=self._sweep_until_empty, name="sovseal-anonymize-ttl", daemon=True)
            self._sweeper.start()

    def _sweep_until_empty(self) -> None:
        """Sleep until the earliest expiry, drop what expired, repeat; exit when no session is left."""
        with self._cond:
            while self._sessions:
                self._sweep()
                if not self._sessions:
                    break
                wait = min(s.expires_at for s in self._sessions.values()) - self._clock()
                self._cond.wait(timeout=min(max(wait, 0.01), self.ttl))
            self._sweeper = None
