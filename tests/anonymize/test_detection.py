"""The pattern and CamelCase layers on real text: what each finds, what it must leave alone (checksums
decide for IBANs and card numbers), punctuation around entities, and overlapping detections."""

from __future__ import annotations

import pytest

from sovseal.anonymize import Detector
from sovseal.anonymize.detect import Span, merge


def found(detector: Detector, text: str, identity: dict[str, list[str]] | None = None) -> list[tuple[str, str]]:
    return [(s.label, text[s.start : s.end]) for s in detector.find(text, identity)]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Write to jane.doe@acme-corp.com today", ("EMAIL_ADDRESS", "jane.doe@acme-corp.com")),
        ("Call me on +44 20 7946 0958 tonight", ("PHONE_NUMBER", "+44 20 7946 0958")),
        ("Office: (415) 555-0132", ("PHONE_NUMBER", "(415) 555-0132")),
        ("Pay to GB82 WEST 1234 5698 7654 32 please", ("IBAN_CODE", "GB82 WEST 1234 5698 7654 32")),
        ("IBAN DE89370400440532013000 for rent", ("IBAN_CODE", "DE89370400440532013000")),
        ("My card is 4111 1111 1111 1111 exp 12/29", ("CREDIT_CARD", "4111 1111 1111 1111")),
        ("Amex 378282246310005 works", ("CREDIT_CARD", "378282246310005")),
        ("ssh into 10.20.30.40 now", ("IP_ADDRESS", "10.20.30.40")),
        ("the v6 address 2001:db8::8a2e:370:7334 is up", ("IP_ADDRESS", "2001:db8::8a2e:370:7334")),
        ("docs at https://intranet.acme-corp.com/wiki/start?x=1 are stale", ("URL", "https://intranet.acme-corp.com/wiki/start?x=1")),
        ("use sk-proj-Abc123Def456Ghi789Jkl012 for the demo", ("SECRET", "sk-proj-Abc123Def456Ghi789Jkl012")),
        ("token ghp_0123456789abcdefghijABCDEFGHIJ012345 leaked", ("SECRET", "ghp_0123456789abcdefghijABCDEFGHIJ012345")),
        ("aws AKIAIOSFODNN7EXAMPLE key", ("SECRET", "AKIAIOSFODNN7EXAMPLE")),
        ('config: api_key = "Zx9Qw8Er7Ty6Ui5Op4"', ("SECRET", "Zx9Qw8Er7Ty6Ui5Op4")),
        ("password: hunter2hunter2", ("SECRET", "hunter2hunter2")),
        ("Authorization: Bearer abcdefghijklmnop1234567890", ("SECRET", "abcdefghijklmnop1234567890")),
        ("The ProjectNightingale launch slipped", ("IDENTIFIER", "ProjectNightingale")),
        ("getUserById throws on null", ("IDENTIFIER", "getUserById")),
    ],
)
def test_each_pattern_is_found_exactly(detector: Detector, text: str, expected: tuple[str, str]) -> None:
    assert found(detector, text) == [expected]


@pytest.mark.parametrize(
    "text",
    [
        "Pay to GB82 WEST 1234 5698 7654 33 please",  # IBAN with a wrong mod-97 checksum
        "My card is 4111 1111 1111 1112 exp 12/29",  # fails the Luhn check
        "version 999.300.1.1 shipped",  # not an IP address
        "Hello NASA, the meeting is at noon in room 4.",  # no CamelCase, no entity
        "labelled but short: password: abc",
    ],
)
def test_shapes_that_fail_their_check_are_left_alone(detector: Detector, text: str) -> None:
    assert found(detector, text) == []


def test_entities_next_to_punctuation_keep_the_punctuation_outside(detector: Detector) -> None:
    text = (
        "(jane@acme.com), «bob@example.org»; see https://acme.com/a/b. Or [https://acme.com/c]! "
        'Card:4111111111111111, "10.0.0.7". Bearer abcdefghijklmnop1234567890.'
    )
    assert found(detector, text) == [
        ("EMAIL_ADDRESS", "jane@acme.com"),
        ("EMAIL_ADDRESS", "bob@example.org"),
        ("URL", "https://acme.com/a/b"),
        ("URL", "https://acme.com/c"),
        ("CREDIT_CARD", "4111111111111111"),
        ("IP_ADDRESS", "10.0.0.7"),
        ("SECRET", "abcdefghijklmnop1234567890"),
    ]


def test_entities_split_by_punctuation_inside_are_found_whole(detector: Detector) -> None:
    """Dashes, dots, apostrophes and line breaks inside an entity do not cut it in two: the whole
    entity is one span, and the sentence punctuation after it stays outside."""
    facts = {"NAME": ["Mary-Jane O'Neil"], "EMPLOYER": ["Acme Corp."], "CITY": ["St. Louis"]}
    text = (
        "Card 4111-1111-1111-1111, phone 415.555.0132 or +1-415-555-0132; IBAN GB82-WEST-1234-5698-7654-32. "
        "MARY-JANE o'neil's badge, from Acme Corp. in St.\nLouis; ip 10.0.0.7:8080."
    )
    assert found(detector, text, facts) == [
        ("CREDIT_CARD", "4111-1111-1111-1111"),
        ("PHONE_NUMBER", "415.555.0132"),
        ("PHONE_NUMBER", "+1-415-555-0132"),
        ("IBAN_CODE", "GB82-WEST-1234-5698-7654-32"),
        ("NAME", "MARY-JANE o'neil"),
        ("EMPLOYER", "Acme Corp."),
        ("CITY", "St.\nLouis"),
        ("IP_ADDRESS", "10.0.0.7"),
    ]


def test_a_url_is_hidden_whole_with_its_parentheses_port_and_path(detector: Detector) -> None:
    """Presidio's URL pattern alone stops at "(", misses a scheme URL on an IP with a port and knows
    only web schemes, which left "(programming_language)", ":8080/admin" or a connection string's
    password in the clear; quotes and brackets around a URL stay outside it."""
    text = (
        "See https://en.wikipedia.org/wiki/Python_(programming_language), (https://acme.com/a?q=(x)). "
        "Admin at http://10.0.0.1:8080/admin#users or 'https://acme.com/y' and [docs](https://acme.com/z). "
        "DATABASE_URL=postgresql://app:S3cretPw@db.internal:5432/app, mongodb+srv://u:p@c0.ab.mongodb.net/x; "
        "s3://acme-private/q3.pdf"
    )
    assert found(detector, text) == [
        ("URL", "https://en.wikipedia.org/wiki/Python_(programming_language)"),
        ("URL", "https://acme.com/a?q=(x)"),
        ("URL", "http://10.0.0.1:8080/admin#users"),
        ("URL", "https://acme.com/y"),
        ("URL", "https://acme.com/z"),
        ("URL", "postgresql://app:S3cretPw@db.internal:5432/app"),  # credentials included
        ("URL", "mongodb+srv://u:p@c0.ab.mongodb.net/x"),
        ("URL", "s3://acme-private/q3.pdf"),
    ]


def test_identity_facts_match_whole_words_in_any_case_and_across_line_breaks(detector: Detector) -> None:
    facts = {"NAME": ["Jane Doe", "Jane"], "EMPLOYER": ["Acme Corp"]}
    text = "JANE DOE works at Acme\nCorp. Jane's badge; Janet and Janeway are other people; acme corporation is not."
    assert found(detector, text, facts) == [
        ("NAME", "JANE DOE"),
        ("EMPLOYER", "Acme\nCorp"),
        ("NAME", "Jane"),
    ]


def test_overlapping_detections_merge_into_one_span_labelled_by_the_longest(detector: Detector) -> None:
    # The identity fact "Acme" lies inside an e-mail and a URL; the URL holds an e-mail address.
    text = "Mail jane@acme.com or open https://acme.com/u/jane@acme.com now; Acme rocks"
    assert found(detector, text, {"EMPLOYER": ["Acme"]}) == [
        ("EMAIL_ADDRESS", "jane@acme.com"),
        ("URL", "https://acme.com/u/jane@acme.com"),
        ("EMPLOYER", "Acme"),
    ]


def test_merge_unions_overlaps_and_keeps_touching_spans_apart() -> None:
    # (start, end, label, priority): an NER name overlapping a CamelCase word, an identity fact
    # inside a URL, and two detections that only touch.
    spans = merge(
        [
            (0, 8, "PERSON", 2),
            (5, 12, "IDENTIFIER", 1),
            (20, 40, "URL", 3),
            (25, 30, "NAME", 4),
            (40, 45, "EMAIL_ADDRESS", 3),
        ]
    )
    assert spans == [Span(0, 12, "PERSON"), Span(20, 40, "URL"), Span(40, 45, "EMAIL_ADDRESS")]
    # Equally long: the more specific layer names it (an identity fact over an NER guess).
    assert merge([(0, 8, "PERSON", 2), (0, 8, "NAME", 4)]) == [Span(0, 8, "NAME")]


def test_allow_list_keeps_words(detector: Detector) -> None:
    text = "JavaScript on GitHub, ProjectNightingale and getUserById"
    # Well-known product names stay by default: hiding them costs the model the question's meaning.
    assert found(detector, text) == [("IDENTIFIER", "ProjectNightingale"), ("IDENTIFIER", "getUserById")]
    assert found(Detector(ner_model="none", allow=["ProjectNightingale"]), text) == [("IDENTIFIER", "getUserById")]
    assert found(Detector(ner_model="none", camel_case=False), text) == []
