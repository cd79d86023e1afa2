"""Token maps live in memory for a bounded time: consumed by deanonymize, dropped after their TTL
(on the next call, and by the background sweeper when no call comes), and an unknown or expired
session id is a typed error."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from sovseal.anonymize import Anonymizer, Detector
from sovseal.errors import InvalidInputError, UnknownSessionError
from tests.anonymize.conftest import FakeClock


def test_deanonymize_consumes_the_session(anonymizer: Anonymizer) -> None:
    safe, session_id = anonymizer.anonymize("mail jane@acme.com")
    assert anonymizer.deanonymize(safe, session_id) == "mail jane@acme.com"
    with pytest.raises(UnknownSessionError, match="anonymize the message again"):
        anonymizer.deanonymize(safe, session_id)
    with pytest.raises(UnknownSessionError):
        anonymizer.anonymize("more", session_id=session_id)
    assert len(anonymizer.sessions) == 0


def test_keep_holds_the_map_for_the_next_turn_and_discard_drops_it(anonymizer: Anonymizer) -> None:
    safe, session_id = anonymizer.anonymize("mail jane@acme.com")
    assert anonymizer.deanonymize(safe, session_id, keep=True) == "mail jane@acme.com"
    assert anonymizer.deanonymize(safe, session_id, keep=True) == "mail jane@acme.com"
    assert anonymizer.discard(session_id) is True and anonymizer.discard(session_id) is False
    with pytest.raises(UnknownSessionError):
        anonymizer.deanonymize(safe, session_id)


def test_a_session_expires_after_its_ttl_unused(anonymizer: Anonymizer, clock: FakeClock) -> None:
    safe, session_id = anonymizer.anonymize("mail jane@acme.com")
    clock.advance(59)
    # Using it restarts the clock (a conversation in progress does not expire mid-turn).
    assert anonymizer.deanonymize(safe, session_id, keep=True) == "mail jane@acme.com"
    clock.advance(59)
    assert anonymizer.anonymize("and bob@example.org", session_id=session_id).session_id == session_id
    clock.advance(60)
    with pytest.raises(UnknownSessionError, match="60 s unused"):
        anonymizer.deanonymize(safe, session_id)
    assert len(anonymizer.sessions) == 0


def test_other_sessions_survive_one_expiring(anonymizer: Anonymizer, clock: FakeClock) -> None:
    _, old = anonymizer.anonymize("jane@acme.com")
    clock.advance(30)
    safe, new = anonymizer.anonymize("bob@example.org")
    clock.advance(31)
    assert len(anonymizer.sessions) == 1
    assert anonymizer.deanonymize(safe, new) == "bob@example.org"
    with pytest.raises(UnknownSessionError):
        anonymizer.deanonymize("x", old)


@pytest.mark.parametrize("session_id", ["", "anon_nope", "not-a-session", 42, None])
def test_unknown_session_ids_are_a_typed_error(anonymizer: Anonymizer, session_id: object) -> None:
    with pytest.raises(UnknownSessionError) as raised:
        anonymizer.deanonymize("<PERSON_1>", session_id)  # type: ignore[arg-type]
    assert isinstance(raised.value, InvalidInputError) and "<PERSON_1>" not in str(raised.value)


def test_the_sweeper_drops_expired_maps_without_another_call(detector: Detector) -> None:
    anonymizer = Anonymizer(detector=detector, ttl=0.05)
    anonymizer.anonymize("jane@acme.com")
    anonymizer.anonymize("bob@example.org")
    store = anonymizer.sessions
    deadline = time.monotonic() + 10
    while store._sessions and time.monotonic() < deadline:  # look without sweeping: only the thread may
        time.sleep(0.02)
    assert store._sessions == {}


def test_live_sessions_are_bounded(detector: Detector, clock: FakeClock) -> None:
    anonymizer = Anonymizer(detector=detector, clock=clock, max_sessions=2)
    _, first = anonymizer.anonymize("a@example.org")
    clock.advance(1)
    _, second = anonymizer.anonymize("b@example.org")
    clock.advance(1)
    anonymizer.anonymize("c@example.org")
    assert len(anonymizer.sessions) == 2
    with pytest.raises(UnknownSessionError):
        anonymizer.deanonymize("x", first)  # the one closest to expiry went first
    assert anonymizer.deanonymize("<EMAIL_ADDRESS_1>", second) == "b@example.org"


def test_constructor_arguments_are_checked_with_typed_errors(detector: Detector) -> None:
    """A wrong type is InvalidInputError naming the argument, not a bare TypeError from deep inside."""
    bad: list[dict[str, object]] = [
        {"ttl": "300"},
        {"ttl": True},
        {"ttl": float("nan")},
        {"ttl": float("inf")},
        {"max_sessions": "10"},
        {"max_sessions": 2.5},
        {"clock": 5},
        {"allow": ["AcmeCloud", 7]},
        {"allow": b"AcmeCloud"},
        {"allow": 5},
        {"camel_case": "no"},
        {"ner_model": 3},
        {"identity_prefix": ""},
        {"detector": "none"},
    ]
    for kwargs in bad:
        name = next(iter(kwargs))
        with pytest.raises(InvalidInputError, match=name):
            Anonymizer(**{"ner_model": "none", **kwargs})  # type: ignore[arg-type]
    assert Anonymizer(detector=detector, ttl=300).sessions.ttl == 300.0


def test_a_single_allowed_word_is_one_word_not_its_characters() -> None:
    text = "We deploy on AcmeCloud"
    assert Anonymizer(ner_model="none").anonymize(text).text == "We deploy on <IDENTIFIER_1>"
    assert Anonymizer(ner_model="none", allow="AcmeCloud").anonymize(text).text == text
    assert Anonymizer(ner_model="none", allow=["AcmeCloud"]).anonymize(text).text == text
    assert Anonymizer(ner_model="none", allow=(w for w in ["AcmeCloud"])).anonymize(text).text == text


def test_bad_arguments(anonymizer: Anonymizer, detector: Detector) -> None:
    with pytest.raises(InvalidInputError):
        anonymizer.anonymize(b"bytes")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError):
        Anonymizer(detector=detector, ttl=0)
    with pytest.raises(InvalidInputError, match="split it"):
        anonymizer.anonymize("x" * 1_000_001)  # past spaCy's max_length
    _, session_id = anonymizer.anonymize("jane@acme.com")
    with pytest.raises(InvalidInputError):
        anonymizer.deanonymize(None, session_id)  # type: ignore[arg-type]
    assert repr(anonymizer.sessions.get(session_id)) == "Session(1 tokens)"  # never the map itself


def test_threads_sharing_one_session_agree_on_tokens(anonymizer: Anonymizer) -> None:
    _, session_id = anonymizer.anonymize("start")
    texts = [f"user{i % 5}@example.org wrote to user{(i + 1) % 5}@example.org" for i in range(40)]
    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(lambda t: anonymizer.anonymize(t, session_id=session_id).text, texts))
    token_of: dict[str, str] = {}
    for text, safe in zip(texts, results, strict=True):
        originals = text.split(" wrote to ")
        tokens = safe.split(" wrote to ")
        for original, token in zip(originals, tokens, strict=True):
            assert token_of.setdefault(original, token) == token  # one entity, one token, whichever thread
    assert len(set(token_of.values())) == 5
    assert [anonymizer.deanonymize(safe, session_id, keep=True) for safe in results] == texts
