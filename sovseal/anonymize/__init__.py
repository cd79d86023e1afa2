"""Anonymize messages before they reach a model provider, and put the originals back after.

The anonymizer: four detection layers (patterns → named entities → the user's identity
facts stored as sovseal memories → CamelCase identifiers) on Microsoft Presidio, stable placeholder
tokens per session, and token maps held in process memory only, discarded after deanonymization or
a time-to-live. Needs the ``anonymize`` extra (``pip install "sovseal[anonymize]"``); Presidio is
imported on first use. See docs/anonymize.md.
"""

from .anonymizer import (
    Anonymized,
    Anonymizer,
    anonymize,
    deanonymize,
    default_anonymizer,
)
from .detect import Detector
from .identity import IDENTITY_PREFIX
from .tokens import PLACEHOLDER_RE

__all__ = [
    "IDENTITY_PREFIX",
    "PLACEHOLDER_RE",
    "Anonymized",
    "Anonymizer",
    "Detector",
    "anonymize",
    "deanonymize",
    "default_anonymizer",
]
