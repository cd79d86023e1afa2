"""Layered detection: patterns → named entities → identity facts → CamelCase.

One Presidio ``AnalyzerEngine`` runs every layer in one pass over the text. It is built once, on
first use, and reused: building it imports Presidio and spaCy (about two seconds), a call on a
short message then takes milliseconds. Overlapping detections are merged into one span covering
all of them, so every character any layer flagged is hidden; the span keeps the label of the longest
detection, and between equally long ones of the most specific layer (identity fact > pattern > named
entity > CamelCase): an e-mail address holding the employer's name stays an EMAIL_ADDRESS.
"""

from __future__ import annotations

import logging
import os
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from ..errors import AnonymizerUnavailableError, InvalidInputError
from . import nlp

__all__ = ["COMMON_CAMEL_CASE", "NER_ENTITIES", "SCORE_THRESHOLD", "Detector", "Span"]

#: The named-entity labels anonymized (Presidio's names for spaCy's PERSON, ORG, GPE/LOC/FAC, NORP).
#: Dates, numbers and products are left alone: they carry the meaning of a message, not who it is about.
NER_ENTITIES = ("PERSON", "ORGANIZATION", "LOCATION", "NRP")
#: spaCy labels dropped before mapping, so Presidio does not warn about them on every call.
_IGNORED_LABELS = (
    "CARDINAL", "ORDINAL", "QUANTITY", "MONEY", "PERCENT", "DATE", "TIME", "EVENT", "WORK_OF_ART", "LAW", "LANGUAGE", "PRODUCT",
)
#: Below this Presidio score a detection is dropped. Checksummed and validated patterns score 1.0,
#: phone numbers 0.4, unvalidated shapes (a bare domain-like word) 0.5 or less, NER 0.85.
SCORE_THRESHOLD = 0.4
_INSTALL = 'the anonymizer needs Microsoft Presidio: pip install "sovseal[anonymize]"'

#: Well-known CamelCase product and technology names: left as written by default, since hiding
#: "JavaScript" or "GitHub" costs the model the meaning of the question and protects no one.
COMMON_CAMEL_CASE = frozenset(
    (
        "AirDrop", "AirPods", "AirPlay", "BlackBerry", "CoffeeScript", "DeepMind", "DeepSeek", "DevOps",
        "DigitalOcean", "FaceTime", "GitHub", "GitLab", "HuggingFace", "JavaScript", "JetBrains", "LangChain",
        "LangGraph", "LinkedIn", "LlamaIndex", "MacBook", "NumPy", "OneDrive", "OneNote", "PayPal", "PlayStation",
        "PowerPoint", "PowerShell", "PyTorch", "SciPy", "SharePoint", "StackOverflow", "TensorFlow", "TypeScript",
        "WhatsApp", "WordPress", "YouTube", "iCloud", "iMessage", "iPad", "iPhone", "iPod",
    )
)
_SURROGATE = re.compile("[\ud800-\udfff]")
_PRIORITY_PATTERN, _PRIORITY_NER, _PRIORITY_CAMEL = 3, 2, 1
_PRIORITY_IDENTITY = 4


@dataclass(frozen=True, slots=True)
class Span:
    """``text[start:end]`` is sensitive; ``label`` names what it is (``PERSON``, ``EMAIL_ADDRESS``, ...)."""

    start: int
    end: int
    label: str


class _QuietBelowWarning(logging.Filter):
    """Presidio's DEBUG lines quote words around each detection (its context enhancer's "Context
    list is: ..."); the anonymizer's promise is that message text never reaches a log."""

    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno >= logging.WARNING


def allowed_terms(allow: Iterable[str] | str) -> list[str]:
    """``allow`` as a list of words: a single str is one word (not its characters); anything else
    must be an iterable of str, or InvalidInputError says what to pass."""
    if isinstance(allow, str):
        return [allow]
    if isinstance(allow, (bytes, bytearray, Mapping)) or not isinstance(allow, Iterable):
        raise InvalidInputError(f"allow must be a list of words (str), got {type(allow).__name__}")
    terms = list(allow)
    wrong = [t for t in terms if not isinstance(t, str)]
    if wrong:
        raise InvalidInputError(f"allow must be a list of words (str); it holds {type(wrong[0]).__name__} {wrong[0]!r}")
    return terms


class Detector:
    """Finds the sensitive spans of a text. Thread-safe; the analyzer is built on first use.

    ``ner_model``: a spaCy package name or a saved pipeline directory (default: ``SOVSEAL_NER_MODEL``,
    else an installed English model, else none; see :mod:`sovseal.anonymize.nlp`). ``allow``: words
    never anonymized (exact match), e.g. product names the CamelCase layer would otherwise take (a
    single str is one word); the well-known ones (``GitHub``, ``JavaScript``, ...: :data:`COMMON_CAMEL_CASE`) always are.
    """

    def __init__(
        self,
        *,
        ner_model: str | os.PathLike[str] | None = None,
        allow: Iterable[str] | str = (),
        camel_case: bool = True,
    ) -> None:
        if ner_model is not None and not isinstance(ner_model, (str, os.PathLike)):
            raise InvalidInputError(
                f"ner_model must be a spaCy package name, a path, 'none' or None; got {type(ner_model).__name__}"
            )
        if not isinstance(camel_case, bool):
            raise InvalidInputError(f"camel_case must be True or False, got {camel_case!r}")
        self._ner_setting = ner_model
        self._allow = sorted(set(allowed_terms(allow)) | (COMMON_CAMEL_CASE if camel_case else set()))
        self._camel_case = camel_case
        self._lock = threading.Lock()
        self._analyzer: Any = None
        self._ner_name: str | None = None
        self._identity_cache: tuple[Any, list[Any]] | None = None

    @property
    def ner_model(self) -> str | None:
        """The NER pipeline in use (package, path or ``blank:en``), None before the first build."""
        return self._ner_name

    def ready(self) -> None:
        """Build the analyzer now (imports Presidio and spaCy, loads the NER model if any)."""
        with self._lock:
            if self._analyzer is None:
                self._analyzer = self._build()

    def _build(self) -> Any:
        try:
            from presidio_analyzer import AnalyzerEngine, RecognizerRegistry
            from presidio_analyzer.nlp_engine import (
                NerModelConfiguration,
                SpacyNlpEngine,
            )
            from presidio_analyzer.predefined_recognizers import SpacyRecognizer

            from . import recognizers
        except ImportError as exc:
            raise AnonymizerUnavailableError(f"{_INSTALL} ({exc})") from exc

        presidio_log = logging.getLogger("presidio-analyzer")
        if not any(isinstance(f, _QuietBelowWarning) for f in presidio_log.filters):
            presidio_log.addFilter(_QuietBelowWarning())
        pipeline = nlp.load(nlp.choose(self._ner_setting))
        config = NerModelConfiguration(
            labels_to_ignore=list(_IGNORED_LABELS),
            low_score_entity_names=[],
            model_to_presidio_entity_mapping={
                **(NerModelConfiguration().model_to_presidio_entity_mapping or {}),
                "FAC": "LOCATION",
            },
        )
        # Loaded here, handed over loaded: Presidio's own load() would download a missing model.
        engine = SpacyNlpEngine(models=[{"lang_code": "en", "model_name": pipeline.name}], ner_model_configuration=config)
        engine.nlp = {"en": pipeline.nlp}  # type: ignore[assignment]  # Presidio types it None until its own load()

        layers = recognizers.pattern_recognizers()
        if pipeline.has_ner:
            layers.append(SpacyRecognizer(supported_language="en", supported_entities=list(NER_ENTITIES)))
        if self._camel_case:
            layers.append(recognizers.camel_case_recognizer())
        registry = RecognizerRegistry(recognizers=layers, supported_languages=["en"])
        analyzer = AnalyzerEngine(registry=registry, nlp_engine=engine, supported_languages=["en"])
        self._ner_name = pipeline.name
        return analyzer

    def _identity_recognizers(self, facts: Mapping[str, Iterable[str]]) -> list[Any]:
        """Compiled once per distinct set of facts (they change only when the store's HEAD does)."""
        from . import recognizers

        key = tuple(sorted((label, tuple(sorted(set(terms)))) for label, terms in facts.items()))
        cached = self._identity_cache
        if cached is None or cached[0] != key:
            cached = (key, recognizers.identity_recognizers(dict(key)))
            self._identity_cache = cached
        return cached[1]

    def find(self, text: str, identity: Mapping[str, Iterable[str]] | None = None) -> list[Span]:
        """The sensitive spans of ``text``, sorted and non-overlapping.

        ``identity`` maps a label to the user's own facts under it (``{"NAME": ["Jane Doe"]}``).
        """
        self.ready()
        limit = self._analyzer.nlp_engine.get_nlp("en").max_length
        if len(text) > limit:
            raise InvalidInputError(f"text is {len(text):,} characters; the anonymizer takes at most {limit:,} per call: split it")
        ad_hoc = self._identity_recognizers(identity) if identity else []
        results = self._analyzer.analyze(
            # spaCy cannot encode lone surrogates (JSON can carry them): analyze a copy with U+FFFD in
            # their place, one code point for one, so every offset still points into ``text``.
            _SURROGATE.sub("\ufffd", text),
            language="en",
            ad_hoc_recognizers=ad_hoc or None,
            allow_list=self._allow or None,
            score_threshold=SCORE_THRESHOLD,
        )
        found = []
        for r in results:
            priority = _priority(r)
            start, end = r.start, r.end
            if priority != _PRIORITY_IDENTITY:
                end = trim_end(text, start, end)
                start = trim_start(text, start, end)
            if end > start:
                found.append((start, end, r.entity_type, priority))
        return merge(found)


_TRAILING = ".,;:!?'\""
_CLOSERS = {")": "(", "]": "[", "}": "{", ">": "<"}


def trim_end(text: str, start: int, end: int) -> int:
    """Drop sentence punctuation a pattern swallowed at the end of a span ("see https://a.b/c." or
    "(https://a.b/c)"): the period or an unbalanced closing bracket belongs to the sentence."""
    while end > start:
        last = text[end - 1]
        if last in _TRAILING or (last in _CLOSERS and text.count(_CLOSERS[last], start, end) < text.count(last, start, end)):
            end -= 1
        else:
            break
    return end


_LEADING = "'\""
_OPENERS = {opener: closer for closer, opener in _CLOSERS.items()}


def trim_start(text: str, start: int, end: int) -> int:
    """Drop a quote or an unbalanced opening bracket a pattern took in at the start of a span
    (Presidio's URL pattern matches ``'https://a.b/c'`` with its quotes): it belongs to the sentence."""
    while start < end:
        first = text[start]
        if first in _LEADING or (first in _OPENERS and text.count(_OPENERS[first], start, end) < text.count(first, start, end)):
            start += 1
        else:
            break
    return start


def _priority(result: Any) -> int:
    name = (result.recognition_metadata or {}).get("recognizer_name", "")
    if name.startswith("IdentityRecognizer:"):
        return _PRIORITY_IDENTITY
    if name == "CamelCaseRecognizer":
        return _PRIORITY_CAMEL
    if name == "SpacyRecognizer":
        return _PRIORITY_NER
    return _PRIORITY_PATTERN


def merge(found: Iterable[tuple[int, int, str, int]]) -> list[Span]:
    """Union overlapping ``(start, end, label, priority)`` detections; touching ones stay apart."""
    spans: list[Span] = []
    group: list[tuple[int, int, str, int]] = []
    group_end = -1
    for item in sorted(found):
        if group and item[0] < group_end:
            group.append(item)
            group_end = max(group_end, item[1])
            continue
        if group:
            spans.append(_resolve(group, group_end))
        group, group_end = [item], item[1]
    if group:
        spans.append(_resolve(group, group_end))
    return spans


def _resolve(group: list[tuple[int, int, str, int]], end: int) -> Span:
    best = max(group, key=lambda d: (d[1] - d[0], d[3], -d[0]))
    return Span(group[0][0], end, best[2])
