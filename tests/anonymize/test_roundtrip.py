"""Anonymize then deanonymize gives back the exact text, over a varied corpus and Hypothesis text;
placeholders never collide with text already in the message; one entity, one token per session."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sovseal.anonymize import PLACEHOLDER_RE, Anonymizer, Detector

CORPUS = [
    "Hi, I'm Jane Doe (jane.doe@acme-corp.com); call +44 20 7946 0958 or (415) 555-0132.",
    "Wire 1200 EUR to GB82 WEST 1234 5698 7654 32, not DE89370400440532013000.",
    "Cards: 4111 1111 1111 1111 and 378282246310005; the bad one 4111 1111 1111 1112 stays.",
    "Servers 192.168.1.20, 10.0.0.7 and 2001:db8::8a2e:370:7334 answer on https://intranet.acme-corp.com/wiki/x?y=1.",
    "export OPENAI_API_KEY=sk-proj-Abc123Def456Ghi789Jkl012\napi_key: 'Zx9Qw8Er7Ty6Ui5Op4'\nAKIAIOSFODNN7EXAMPLE",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----\nthat was the key",
    "ProjectNightingale depends on getUserById and AcmeCRM2; JavaScript glue.",
    "Ünïcødé: José Müller <jose@exämple.de> lives in São Paulo 🌞 — tel. +55 11 91234-5678!",
    "A lone surrogate \ud800 and a NUL \x00 next to jane@acme.com\udfff.",
    "Tabs\tand\r\nCRLF lines with jane@acme.com\u00a0and non-breaking spaces.",
    "Already tokens: <PERSON_1> <EMAIL_ADDRESS_1> <URL_2> and mail jane@acme.com, see https://acme.com.",
    "",
    "no entities at all, just a sentence.",
    "jane@acme.com",
    "jane@acme.com jane@acme.com, JANE@ACME.COM; jane@acme.com.",
    "Split by punctuation: 4111-1111-1111-1111, 415.555.0132, GB82-WEST-1234-5698-7654-32, 10.0.0.7:8080.",
    "Links: (https://en.wikipedia.org/wiki/Python_(programming_language)), 'http://10.0.0.1:8080/a', [x](https://a.io/b).",
]


@pytest.mark.parametrize("text", CORPUS)
def test_round_trip_is_exact(anonymizer: Anonymizer, text: str) -> None:
    safe, session_id = anonymizer.anonymize(text)
    assert anonymizer.deanonymize(safe, session_id) == text


def test_what_is_hidden_is_hidden(anonymizer: Anonymizer) -> None:
    safe, _ = anonymizer.anonymize(" ".join(CORPUS[:7]))
    for secret in (
        "jane.doe@acme-corp.com",
        "7946 0958",
        "555-0132",
        "GB82 WEST",
        "4111 1111 1111 1111",
        "378282246310005",
        "192.168.1.20",
        "2001:db8",
        "intranet.acme-corp.com",
        "sk-proj-",
        "Zx9Qw8Er7Ty6Ui5Op4",
        "AKIAIOSFODNN7EXAMPLE",
        "MIIEowIBAAKCAQEA7",
        "ProjectNightingale",
        "getUserById",
    ):
        assert secret not in safe
    assert "4111 1111 1111 1112" in safe and "1200 EUR" in safe  # not sensitive: left as written


def test_same_entity_same_token_and_sessions_are_independent(anonymizer: Anonymizer) -> None:
    text = "jane@acme.com wrote to bob@example.org; cc jane@acme.com. bob@example.org replied."
    safe, first = anonymizer.anonymize(text)
    assert safe == (
        "<EMAIL_ADDRESS_1> wrote to <EMAIL_ADDRESS_2>; cc <EMAIL_ADDRESS_1>. <EMAIL_ADDRESS_2> replied."
    )
    # A second session starts from scratch: its own numbering, its own map.
    other, second = anonymizer.anonymize("bob@example.org only")
    assert other == "<EMAIL_ADDRESS_1> only" and second != first
    assert anonymizer.deanonymize("<EMAIL_ADDRESS_1>", second, keep=True) == "bob@example.org"
    assert anonymizer.deanonymize("<EMAIL_ADDRESS_1>", first, keep=True) == "jane@acme.com"
    # Continuing a session keeps the tokens it issued and numbers new entities after them.
    more, same = anonymizer.anonymize("carol@example.net and jane@acme.com", session_id=first)
    assert same == first and more == "<EMAIL_ADDRESS_3> and <EMAIL_ADDRESS_1>"
    answer = "I wrote to <EMAIL_ADDRESS_1>, <EMAIL_ADDRESS_2> and <EMAIL_ADDRESS_3>."
    assert anonymizer.deanonymize(answer, first) == "I wrote to jane@acme.com, bob@example.org and carol@example.net."


def test_placeholders_already_in_the_text_are_never_issued(anonymizer: Anonymizer) -> None:
    text = "Template says <EMAIL_ADDRESS_1> and <EMAIL_ADDRESS_3>; the real one is jane@acme.com."
    safe, session_id = anonymizer.anonymize(text)
    assert safe == "Template says <EMAIL_ADDRESS_1> and <EMAIL_ADDRESS_3>; the real one is <EMAIL_ADDRESS_2>."
    # A model answer quoting the template literally keeps it; only the issued token is restored.
    answer = "Replace <EMAIL_ADDRESS_1> with <EMAIL_ADDRESS_2>."
    assert anonymizer.deanonymize(answer, session_id, keep=True) == "Replace <EMAIL_ADDRESS_1> with jane@acme.com."
    # A later turn that quotes an issued token literally gets it escaped, and back exactly.
    turn = "Why did you write <EMAIL_ADDRESS_2> instead of bob@example.org?"
    safe_turn, _ = anonymizer.anonymize(turn, session_id=session_id)
    assert safe_turn == "Why did you write <PLACEHOLDER_1> instead of <EMAIL_ADDRESS_4>?"
    assert anonymizer.deanonymize(safe_turn, session_id) == turn


def test_a_text_made_of_placeholders_round_trips(anonymizer: Anonymizer) -> None:
    text = "<PERSON_1><EMAIL_ADDRESS_1>jane@acme.com<EMAIL_ADDRESS_2> <<EMAIL_ADDRESS_3>> <EMAIL_ADDRESS_"
    safe, session_id = anonymizer.anonymize(text)
    issued = set(PLACEHOLDER_RE.findall(safe)) - set(PLACEHOLDER_RE.findall(text))
    assert issued == {"<EMAIL_ADDRESS_4>"}
    assert anonymizer.deanonymize(safe, session_id) == text


# Text built from pieces the anonymizer reacts to, glued by arbitrary characters.
_PIECES = st.sampled_from(
    [
        "jane@acme.com",
        "bob@example.org",
        "+44 20 7946 0958",
        "4111 1111 1111 1111",
        "GB82 WEST 1234 5698 7654 32",
        "10.0.0.7",
        "https://acme.com/x",
        "ProjectNightingale",
        "sk-proj-Abc123Def456Ghi789Jkl012",
        "<EMAIL_ADDRESS_1>",
        "<PLACEHOLDER_1>",
        "<URL_",
        "_2>",
        "<",
        ">",
        ".",
        ", ",
        "(",
        ")",
        "\n",
    ]
)
# Any code point, lone surrogates included (JSON can carry them into an MCP call).
_GLUE = st.text(alphabet=st.characters(exclude_categories=()), max_size=8)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(st.one_of(_PIECES, _GLUE), max_size=12), answer_tokens=st.lists(st.integers(0, 6), max_size=4))
def test_round_trip_over_generated_text(detector: Detector, parts: list[str], answer_tokens: list[int]) -> None:
    anonymizer = Anonymizer(detector=detector)
    text = "".join(parts)
    safe, session_id = anonymizer.anonymize(text)
    issued = sorted(set(PLACEHOLDER_RE.findall(safe)) - set(PLACEHOLDER_RE.findall(text)))
    assert anonymizer.deanonymize(safe, session_id, keep=True) == text
    # A model answer mixes issued tokens into new text: each one is replaced, nothing else changes.
    if issued:
        answer = safe + " | " + " ".join(issued[i % len(issued)] for i in answer_tokens)
        restored = anonymizer.deanonymize(answer, session_id, keep=True)
        assert restored.startswith(text + " | ")
        assert not any(token in restored[len(text) :] for token in issued)
    # The same text again in the same session: the same tokens.
    assert anonymizer.anonymize(text, session_id=session_id).text == safe
