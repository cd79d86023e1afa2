"""The spaCy pipeline behind the named-entity layer, loaded offline or not at all.

Presidio's default engine asks for ``en_core_web_lg`` and runs ``spacy download`` when it is
missing: a network call sovseal must never make, and one that fails on an offline machine anyway.
So sovseal picks the pipeline itself and hands Presidio an engine that is already loaded:

1. a configured model (``ner_model=`` or ``SOVSEAL_NER_MODEL``): an installed package name or a
   directory written by ``nlp.to_disk()``; one that cannot be loaded is an error, never a silent
   fallback (a user who asked for NER must not get less redaction without being told);
2. otherwise the first English spaCy model package installed in the environment (``pip install``
   of a model wheel is how spaCy ships them; ``en_core_web_lg`` is preferred when several are);
3. otherwise ``spacy.blank("en")``: a tokenizer with no entity recognizer. The pattern, identity
   and CamelCase layers still run; the NER layer finds nothing.

``SOVSEAL_NER_MODEL=none`` forces the blank pipeline even when a model is installed.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import settings
from ..errors import AnonymizerUnavailableError

ENV_MODEL = settings.NER_MODEL.name
#: Installed packages tried in this order when nothing is configured (largest, most accurate first).
PREFERRED = ("en_core_web_lg", "en_core_web_md", "en_core_web_sm", "en_core_web_trf")
BLANK = "blank:en"


@dataclass(frozen=True, slots=True)
class Pipeline:
    """A loaded spaCy ``Language`` and what it is: ``name`` is the package, the path, or ``blank:en``."""

    nlp: Any
    name: str

    @property
    def has_ner(self) -> bool:
        return "ner" in self.nlp.pipe_names or "entity_ruler" in self.nlp.pipe_names


def choose(configured: str | os.PathLike[str] | None) -> str:
    """Which pipeline to load: the configured one, an installed English model, or blank."""
    setting = os.fspath(configured) if configured is not None else settings.NER_MODEL.get() or ""
    if setting.strip().lower() in ("none", "blank", BLANK):
        return BLANK
    if setting.strip():
        return setting.strip()
    import spacy

    installed = [name for name in spacy.util.get_installed_models() if name.startswith("en_")]
    for name in PREFERRED:
        if name in installed:
            return name
    return installed[0] if installed else BLANK


def load(choice: str) -> Pipeline:
    """Load ``choice`` (from :func:`choose`) without touching the network.

    ``spacy.load`` imports an installed package or reads a directory; it never downloads (only
    ``spacy download`` does, and sovseal never calls it).
    """
    import spacy

    if choice == BLANK:
        return Pipeline(spacy.blank("en"), BLANK)
    is_dir = Path(choice).expanduser().is_dir()
    if not is_dir and not spacy.util.is_package(choice):
        raise AnonymizerUnavailableError(
            f"NER model {choice!r} is neither an installed spaCy package nor a model directory",
            advice=(
                f"install its wheel (pip install <model wheel>), point {ENV_MODEL} at a directory saved with "
                f"nlp.to_disk(), or set {ENV_MODEL}=none to run without NER"
            ),
            cli_advice=(
                f"install its wheel (pip install <model wheel>), point {ENV_MODEL} at a directory saved by spaCy, "
                f"or set {ENV_MODEL}=none to run without NER"
            ),
        )
    try:
        nlp = spacy.load(Path(choice).expanduser() if is_dir else choice)
    except Exception as exc:
        raise AnonymizerUnavailableError(
            f"NER model {choice!r} could not be loaded ({type(exc).__name__}: {exc}); "
            f"fix or reinstall it, or set {ENV_MODEL}=none to run without NER"
        ) from exc
    return Pipeline(nlp, choice)
