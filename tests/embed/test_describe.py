"""How an EmbedderMismatchError names the two models: every compared key that can differ is in the
description, so the same model file with another tokenizer is not described like the original."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.embed import Embedder
from sovseal.embed.fingerprint import describe
from sovseal.embed.model_dir import MODEL, TOKENIZER, sha256, write_model_dir
from sovseal.errors import EmbedderMismatchError

BASE = {
    "embedder": "sovseal.embed.embedder.Embedder",
    "model": "all-MiniLM-L6-v2",
    "origin": "/models/a",
    "model_sha256": "a" * 64,
    "tokenizer_sha256": "b" * 64,
    "dim": 384,
    "pooling": "mean",
    "normalize": "l2",
    "max_tokens": 256,
}


def test_describe_names_the_tokenizer_digest_and_every_other_compared_key() -> None:
    text = describe(BASE)
    assert text.startswith("all-MiniLM-L6-v2 from /models/a (sha256 aaaaaaaaaaaa, 384-d) [")
    assert "tokenizer sha256 bbbbbbbbbbbb" in text and "pooling mean" in text and "normalize l2" in text and "max_tokens 256" in text
    for key, value in [("tokenizer_sha256", "c" * 64), ("pooling", "cls"), ("normalize", "none"), ("max_tokens", 512), ("extra", True)]:
        assert describe({**BASE, key: value}) != text, key
    assert describe({**BASE, "origin": "/models/b"}) != text  # informational, but still shown
    assert "embedder" not in text  # informational keys are not listed among the compared ones


def test_a_changed_tokenizer_with_the_same_model_file_is_described_apart(
    built_dir: Path, embedder: Embedder, tmp_path: Path, key: bytes
) -> None:
    store = tmp_path / "store"
    with Sovseal(store, key=key, embedder=embedder) as mem:
        mem.store("user.city", "The user lives in Berlin.")
    tokenizer = json.dumps(json.loads((built_dir / TOKENIZER).read_bytes()), indent=1).encode()  # same vocabulary, other bytes
    variant = tmp_path / "variant"
    write_model_dir(variant, {MODEL: (built_dir / MODEL).read_bytes(), TOKENIZER: tokenizer}, origin="a tokenizer variant")
    with Sovseal(store, key=key, embedder=Embedder(variant)) as mem, pytest.raises(EmbedderMismatchError) as caught:
        mem.recall("where does the user live?")
    message = str(caught.value)
    assert f"tokenizer sha256 {embedder.tokenizer_sha256[:12]}" in message
    assert f"tokenizer sha256 {sha256(tokenizer)[:12]}" in message
    assert sha256(tokenizer) != embedder.tokenizer_sha256
