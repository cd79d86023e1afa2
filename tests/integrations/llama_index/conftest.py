"""Fixtures for the LlamaIndex integration suite (integrations/llama-index-sovseal).

Every test gets a fresh store directory and an explicit random key. The real on-device embedder
is loaded once per session and shared (as ``SovsealEmbedding``) by every store and index; where an
LLM would answer, the tests use LlamaIndex's ``MockLLM``.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

try:
    INSTALLED = importlib.util.find_spec("llama_index.vector_stores.sovseal") is not None
except ModuleNotFoundError:  # llama_index itself is missing
    INSTALLED = False

#: Each test module skips itself (visibly, with this reason) when the package is not installed.
SKIP_REASON = "llama-index-sovseal is not installed: pip install -e integrations/llama-index-sovseal"

if INSTALLED:
    from llama_index.embeddings.sovseal import SovsealEmbedding
    from llama_index.vector_stores.sovseal import SovsealVectorStore


@pytest.fixture(scope="session")
def embed_model() -> SovsealEmbedding:
    model = SovsealEmbedding()
    model.ready()
    return model


@pytest.fixture
def key() -> bytes:
    return os.urandom(32)


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def vector_store(store_dir: Path, key: bytes, embed_model: SovsealEmbedding) -> Iterator[SovsealVectorStore]:
    store = SovsealVectorStore(path=store_dir, key=key, embedder=embed_model)
    yield store
    store.close()
