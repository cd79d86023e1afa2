"""The anonymizer: the ``message_anonymize`` / ``message_deanonymize`` flow as a Python API.

An agent anonymizes the user's message, sends the result to a model provider, and deanonymizes the
answer with the session id it got::

    from sovseal.anonymize import anonymize, deanonymize

    safe, session_id = anonymize("Mail jane.doe@acme.com about ProjectNightingale", memory=mem)
    # safe == "Mail <EMAIL_ADDRESS_1> about <IDENTIFIER_1>"
    answer = call_the_model(safe)
    print(deanonymize(answer, session_id))   # tokens back to the originals; the map is discarded
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, NamedTuple

from ..errors import InvalidInputError
from . import tokens
from .detect import Detector
from .identity import IDENTITY_PREFIX, IdentityFacts
from .sessions import DEFAULT_MAX_SESSIONS, DEFAULT_TTL, Clock, SessionStore

if TYPE_CHECKING:
    from sovseal.sdk.client import Sovseal

__all__ = ["Anonymized", "Anonymizer", "anonymize", "deanonymize", "default_anonymizer"]


class Anonymized(NamedTuple):
    """What :meth:`Anonymizer.anonymize` returns; unpacks as ``(text, session_id)``."""

    text: str
    session_id: str


class Anonymizer:
    """Layered detection, stable placeholders, token maps in memory only.

    Build one and reuse it: its Presidio analyzer is built on first use (or by :meth:`ready`) and
    shared by every call; it is thread-safe. ``ttl``: seconds a session's map survives unused.
    ``ner_model``, ``allow``, ``camel_case``: see :class:`~sovseal.anonymize.detect.Detector`.
    ``identity_prefix``: where the user's identity facts live in the store (``identity.``).
    ``clock``: monotonic seconds, replaceable in tests. ``detector``: share one already built
    :class:`~sovseal.anonymize.detect.Detector` between anonymizers (then ``ner_model``, ``allow``
    and ``camel_case`` are the detector's).
    """

    def __init__(
        self,
        *,
        ttl: float = DEFAULT_TTL,
        ner_model: str | os.PathLike[str] | None = None,
        allow: Iterable[str] | str = (),
        camel_case: bool = True,
        identity_prefix: str = IDENTITY_PREFIX,
        max_sessions: int = DEFAULT_MAX_SESSIONS,
        clock: Clock | None = None,
        detector: Detector | None = None,
    ) -> None:
        if detector is not None and not isinstance(detector, Detector):
            raise InvalidInputError(f"detector must be a sovseal.anonymize.Detector, got {type(detector).__name__}")
        if not isinstance(identity_prefix, str) or not identity_prefix:
            raise InvalidInputError(f"identity_prefix must be a non-empty str, e.g. 'identity.'; got {identity_prefix!r}")
        self.detector = detector or Detector(ner_model=ner_model, allow=allow, camel_case=camel_case)
        store_args = {"clock": clock} if clock is not None else {}
        self.sessions = SessionStore(ttl=ttl, max_sessions=max_sessions, **store_args)
        self._identity = IdentityFacts(identity_prefix)

    def ready(self) -> None:
        """Build the analyzer now instead of on the first call (about two seconds, once)."""
        self.detector.ready()

    def anonymize(self, text: str, *, memory: Sovseal | None = None, session_id: str | None = None) -> Anonymized:
        """Replace what identifies someone in ``text`` with placeholder tokens.

        ``memory``: a store whose ``identity.*`` memories are the user's own facts to hide too.
        ``session_id``: continue a session (a conversation), so an entity seen before keeps its
        token; by default a new session starts. Raises UnknownSessionError for a session that
        expired or was consumed, AnonymizerUnavailableError when Presidio is not installed.
        """
        if not isinstance(text, str):
            raise InvalidInputError(f"text must be a string, got {type(text).__name__}")
        session = self.sessions.get(session_id) if session_id is not None else None
        facts = self._identity.of(memory) if memory is not None else None
        spans = self.detector.find(text, facts)
        if session is None or session_id is None:  # none asked for (get() raised for one that is gone): a new one
            session_id, session = self.sessions.open()
        with session.lock:
            return Anonymized(tokens.substitute(text, spans, session), session_id)

    def deanonymize(self, text: str, session_id: str, *, keep: bool = False) -> str:
        """Put the originals back in place of the tokens ``session_id`` issued, then discard its map.

        ``keep=True`` keeps the map for the next turn of a conversation (its time-to-live restarts).
        Text that is not a token is returned unchanged. Raises UnknownSessionError for an unknown,
        expired or already consumed session.
        """
        if not isinstance(text, str):
            raise InvalidInputError(f"text must be a string, got {type(text).__name__}")
        session = self.sessions.get(session_id)
        with session.lock:
            restored = tokens.restore(text, session)
        if not keep:
            self.sessions.discard(session_id)
        return restored

    def discard(self, session_id: str) -> bool:
        """Drop a session's map now (False if it was already gone)."""
        return self.sessions.discard(session_id)


_default: Anonymizer | None = None
_default_lock = threading.Lock()


def default_anonymizer() -> Anonymizer:
    """The process-wide anonymizer behind :func:`anonymize` and :func:`deanonymize`."""
    global _default  # noqa: PLW0603 - built once, on first use, under the lock
    with _default_lock:
        if _default is None:
            _default = Anonymizer()
        return _default


def anonymize(text: str, *, memory: Sovseal | None = None, session_id: str | None = None) -> Anonymized:
    """:meth:`Anonymizer.anonymize` on the process-wide anonymizer; returns ``(text, session_id)``."""
    return default_anonymizer().anonymize(text, memory=memory, session_id=session_id)


def deanonymize(text: str, session_id: str, *, keep: bool = False) -> str:
    """:meth:`Anonymizer.deanonymize` on the process-wide anonymizer."""
    return default_anonymizer().deanonymize(text, session_id, keep=keep)
