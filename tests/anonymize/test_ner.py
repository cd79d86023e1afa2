"""The named-entity layer with a real spaCy pipeline: a blank English pipeline with an entity ruler,
saved to disk and loaded by path (the way a user points SOVSEAL_NER_MODEL at a model directory).
A configured model that cannot load is an error, never a silent fallback to less redaction."""

from __future__ import annotations

from pathlib import Path

import pytest
import spacy

from sovseal.anonymize import Anonymizer, Detector
from sovseal.anonymize import nlp as nlp_choice
from sovseal.errors import AnonymizerUnavailableError


@pytest.fixture(scope="module")
def ner_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pipeline = spacy.blank("en")
    ruler = pipeline.add_pipe("entity_ruler")
    ruler.add_patterns(
        [
            {"label": "PERSON", "pattern": [{"LOWER": "ada"}, {"LOWER": "lovelace"}]},
            {"label": "PERSON", "pattern": "Grace Hopper"},
            {"label": "ORG", "pattern": "Initech"},
            {"label": "GPE", "pattern": "Reykjavik"},
            {"label": "NORP", "pattern": "Icelandic"},
            {"label": "DATE", "pattern": "Tuesday"},
            {"label": "MONEY", "pattern": [{"LIKE_NUM": True}, {"LOWER": "dollars"}]},
        ]
    )
    path = tmp_path_factory.mktemp("ner") / "en_test_ner"
    pipeline.to_disk(path)
    return path


@pytest.fixture(scope="module")
def ner_detector(ner_dir: Path) -> Detector:
    return Detector(ner_model=ner_dir)


def test_named_entities_from_a_pipeline_loaded_by_path(ner_dir: Path, ner_detector: Detector) -> None:
    anonymizer = Anonymizer(detector=ner_detector)
    text = "Ada Lovelace met Grace Hopper at Initech in Reykjavik on Tuesday; the Icelandic team paid 30 dollars."
    safe, session_id = anonymizer.anonymize(text)
    assert anonymizer.detector.ner_model == str(ner_dir)
    # People, organizations, places and groups are hidden; dates and amounts carry meaning and stay.
    assert safe == (
        "<PERSON_1> met <PERSON_2> at <ORGANIZATION_1> in <LOCATION_1> on Tuesday; the <NRP_1> team paid 30 dollars."
    )
    assert anonymizer.deanonymize(safe, session_id) == text


def test_ner_and_identity_on_the_same_name_give_one_token(ner_detector: Detector) -> None:
    detector = ner_detector
    text = "Grace Hopper (grace@navy.mil) and grace hopper"
    spans = detector.find(text, {"NAME": ["Grace Hopper"]})
    assert [(s.label, text[s.start : s.end]) for s in spans] == [
        ("NAME", "Grace Hopper"),  # NER and identity agree on the span: the identity label names it
        ("EMAIL_ADDRESS", "grace@navy.mil"),
        ("NAME", "grace hopper"),
    ]


def test_without_a_model_the_blank_pipeline_finds_no_names(detector: Detector) -> None:
    assert detector.ner_model == "blank:en"
    assert detector.find("Ada Lovelace met Grace Hopper at Initech") == []


def test_choice_of_pipeline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(nlp_choice.ENV_MODEL, "none")
    assert nlp_choice.choose(None) == nlp_choice.BLANK
    monkeypatch.setenv(nlp_choice.ENV_MODEL, str(tmp_path))
    assert nlp_choice.choose(None) == str(tmp_path)
    assert nlp_choice.choose("en_core_web_sm") == "en_core_web_sm"  # the argument wins over the environment
    monkeypatch.delenv(nlp_choice.ENV_MODEL)
    installed = [m for m in spacy.util.get_installed_models() if m.startswith("en_")]
    assert nlp_choice.choose(None) in (installed or [nlp_choice.BLANK])  # an installed English model, else blank


@pytest.mark.parametrize("model", ["en_core_web_nonexistent", "./no/such/dir"])
def test_a_configured_model_that_is_missing_is_an_error(model: str) -> None:
    with pytest.raises(AnonymizerUnavailableError, match="SOVSEAL_NER_MODEL=none"):
        Detector(ner_model=model).ready()


def test_a_broken_model_directory_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "config.cfg").write_text("this is not a spaCy config")
    with pytest.raises(AnonymizerUnavailableError, match="could not be loaded"):
        Detector(ner_model=tmp_path).ready()
