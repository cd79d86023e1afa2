"""The Presidio recognizers of the pattern, identity and CamelCase layers.

Imported only once Presidio is known to be installed (see :mod:`sovseal.anonymize.detect`).
Presidio's own recognizers cover e-mail, phone (libphonenumber), IBAN (mod-97 checksum), card
numbers (Luhn checksum), IPv4/IPv6 (checked with :mod:`ipaddress`), URLs and crypto wallets; sovseal
adds what Presidio lacks: API keys and secrets, the user's identity facts, CamelCase identifiers.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Iterable, Mapping

import tldextract
from presidio_analyzer import EntityRecognizer, Pattern, PatternRecognizer
from presidio_analyzer.predefined_recognizers import (
    CreditCardRecognizer,
    CryptoRecognizer,
    EmailRecognizer,
    IbanRecognizer,
    IpRecognizer,
    PhoneRecognizer,
    UrlRecognizer,
)

#: Case-sensitive matching (Presidio's default adds IGNORECASE, which would make ``AKIA[A-Z0-9]``
#: and the CamelCase shape match any word).
_CASED = re.DOTALL | re.MULTILINE

#: A suffix-list extractor that never fetches: the list bundled with tldextract, no cache on disk.
#: (``tldextract.extract``, which Presidio's e-mail check calls, downloads the public suffix list on
#: first use and writes it under ~/.cache.)
_OFFLINE_TLD = tldextract.TLDExtract(cache_dir=None, suffix_list_urls=(), fallback_to_snapshot=True)


class OfflineEmailRecognizer(EmailRecognizer):
    """Presidio's e-mail recognizer with its domain check run on the bundled suffix list."""

    def validate_result(self, pattern_text: str) -> bool:
        return _OFFLINE_TLD(pattern_text).fqdn != ""


#: Secrets with a recognizable shape (vendor prefixes), then secrets recognizable by their label.
SECRET_PATTERNS = (
    Pattern("private key block", r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.+?-----END [A-Z0-9 ]*PRIVATE KEY-----", 1.0),
    Pattern("OpenAI/Anthropic key", r"\bsk-(?:ant-|proj-)?[A-Za-z0-9_\-]{20,}", 0.95),
    Pattern("GitHub token", r"\b(?:gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,})", 0.95),
    Pattern("AWS access key id", r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b", 0.95),
    Pattern("Slack token", r"\bxox[abposr]-[A-Za-z0-9\-]{10,}", 0.95),
    Pattern("Stripe key", r"\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{16,}", 0.95),
    Pattern("Google API key", r"\bAIza[0-9A-Za-z_\-]{35}", 0.95),
    Pattern("JWT", r"\beyJ[A-Za-z0-9_\-]{8,}\.eyJ[A-Za-z0-9_\-]{8,}\.[A-Za-z0-9_\-]{8,}", 0.95),
    # The value after "Bearer " or after a key/secret/token/password label (the label itself stays).
    Pattern("bearer token", r"(?<=\b[Bb]earer\s+)[A-Za-z0-9._~+/\-]{16,}=*", 0.9),
    Pattern(
        "labelled secret",
        r"(?<=\b(?i:api[_\-]?key|secret(?:[_\-]?key)?|access[_\-]?token|auth[_\-]?token|token|password|passwd|pwd)"
        r"[\"']?\s*[:=]\s*[\"']?)[^\s\"',;]{8,}",
        0.9,
    ),
)

#: Two or more humps with lower-case letters: ``ProjectNightingale``, ``getUserById``, ``AcmeCRM2``;
#: not ``Hello``, ``NASA`` or ``GB82``.
CAMEL_PATTERN = Pattern("CamelCase identifier", r"(?<!\w)[A-Z]?[a-z][a-z0-9]*(?:[A-Z][a-z][a-z0-9]*)+[A-Z0-9]*(?!\w)", 0.45)


#: A URL that names its scheme (any scheme: ``https``, ``postgresql``, ``mongodb+srv``, ``s3``) runs
#: to the next space or quote. Presidio's URL pattern stops at a parenthesis or a port and knows only
#: web schemes, which left ``(programming_language)`` of a Wikipedia link, ``:8080/path`` of
#: ``http://10.0.0.1:8080/path``, and the user and password of ``postgresql://app:pw@db/app`` in the
#: clear. The detector's ``trim_end`` gives sentence punctuation and an unbalanced closing bracket
#: back to the text.
SCHEME_URL_PATTERN = Pattern("URL with a scheme", r"(?<![\w+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,19}://[^\s<>\"'`]+", 0.5)


def pattern_recognizers() -> list[EntityRecognizer]:
    """The pattern layer: Presidio's predefined recognizers plus sovseal's URL and secrets recognizers."""
    return [
        OfflineEmailRecognizer(),
        PhoneRecognizer(),
        IbanRecognizer(),
        CreditCardRecognizer(),
        IpRecognizer(),
        UrlRecognizer(),
        PatternRecognizer("URL", name="SchemeUrlRecognizer", patterns=[SCHEME_URL_PATTERN], global_regex_flags=_CASED),
        CryptoRecognizer(),
        PatternRecognizer("SECRET", name="SecretRecognizer", patterns=list(SECRET_PATTERNS), global_regex_flags=_CASED),
    ]


def camel_case_recognizer() -> PatternRecognizer:
    """The CamelCase layer: internal project and code names a provider should not learn."""
    return PatternRecognizer("IDENTIFIER", name="CamelCaseRecognizer", patterns=[CAMEL_PATTERN], global_regex_flags=_CASED)


#: Unicode character-name prefixes of the scripts written without spaces between words: Han,
#: Hiragana, Katakana (and the marks they share), Thai, Lao, Khmer, Myanmar, Tibetan, Javanese,
#: Balinese. Hangul is not here: Korean is written with spaces.
_UNSPACED_SCRIPTS = (
    "CJK UNIFIED IDEOGRAPH",
    "CJK COMPATIBILITY IDEOGRAPH",
    "IDEOGRAPHIC",
    "HIRAGANA",
    "KATAKANA",
    "HALFWIDTH KATAKANA",
    "THAI",
    "LAO",
    "KHMER",
    "MYANMAR",
    "TIBETAN",
    "JAVANESE",
    "BALINESE",
)


def _unspaced(char: str) -> bool:
    """Whether ``char`` belongs to a script written without spaces, where a word runs into the next."""
    return unicodedata.name(char, "").startswith(_UNSPACED_SCRIPTS)


def _fact_pattern(term: str) -> str:
    """The regex of one identity fact: whole-word on each side, unless that side's character is from a
    script written without spaces (there a name runs straight into the next word: "王小明先生")."""
    words = term.split()
    body = r"\s+".join(re.escape(word) for word in words)
    before = "" if _unspaced(words[0][0]) else r"(?<!\w)"
    after = "" if _unspaced(words[-1][-1]) else r"(?!\w)"
    return f"{before}{body}{after}"


def identity_recognizers(facts: Mapping[str, Iterable[str]]) -> list[PatternRecognizer]:
    """The identity layer: one recognizer per label, matching each fact as a whole word.

    Case is ignored, and any run of whitespace matches the fact's spaces, so "Jane Doe" is found in
    "JANE DOE" and across a line break ("Jane\\nDoe"). Longer facts are tried first, so "Jane Doe"
    wins over "Jane" where both match. A fact that begins or ends in a script written without spaces
    (Chinese, Japanese, Thai, ...) needs no word boundary on that side: "王小明" is found in
    "我叫王小明，住在北京。", while "Ann" is still not found in "Annual".
    """
    recognizers = []
    for label, terms in facts.items():
        ordered = sorted(set(terms), key=len, reverse=True)
        if not ordered:
            continue
        alternatives = "|".join(_fact_pattern(term) for term in ordered if term.split())
        if not alternatives:
            continue
        regex = rf"(?:{alternatives})"
        recognizers.append(
            PatternRecognizer(
                label,
                name=f"IdentityRecognizer:{label}",
                patterns=[Pattern("identity fact", regex, 1.0)],
                global_regex_flags=re.DOTALL | re.MULTILINE | re.IGNORECASE,
            )
        )
    return recognizers
