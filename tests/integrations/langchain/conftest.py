"""Fixtures for the LangChain integration tests.

Every test gets an explicit random key and a temporary store directory. Every test runs
with ``SOVSEAL_HOME`` in a session temporary directory (the on-device model is built there from the
installed offline package once, about 2 s, and the user's ``~/.sovseal`` is never touched), with the
Hugging Face hub offline and without ``SOVSEAL_ENDPOINT``, so nothing here can reach the network. The
variables are set per test, so nothing leaks into the rest of the repository's suite.

The async standard tests are bare ``async def``: the test classes carry ``pytest.mark.asyncio``
themselves (see ``ASYNC`` in test_standard.py), so they run whether or not the root pytest config
sets ``asyncio_mode = "auto"``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from langchain_sovseal import SovsealEmbeddings


@pytest.fixture(scope="session")
def sovseal_home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One SOVSEAL_HOME for the session: the model cache is built there once."""
    return tmp_path_factory.mktemp("sovseal-home")


def _offline(mp: pytest.MonkeyPatch, home: Path) -> None:
    mp.setenv("SOVSEAL_HOME", str(home))
    mp.setenv("HF_HUB_OFFLINE", "1")
    mp.delenv("SOVSEAL_MODEL_DIR", raising=False)
    mp.delenv("SOVSEAL_ENDPOINT", raising=False)  # no test here replicates


@pytest.fixture(autouse=True)
def _offline_sovseal_home(sovseal_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Per test (so nothing leaks to the rest of the repository's suite)."""
    _offline(monkeypatch, sovseal_home)


@pytest.fixture
def key() -> bytes:
    return os.urandom(32)


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture(scope="session")
def real_embeddings(sovseal_home: Path) -> SovsealEmbeddings:
    """sovseal's on-device model, loaded once for the session."""
    with pytest.MonkeyPatch.context() as mp:
        _offline(mp, sovseal_home)
        embeddings = SovsealEmbeddings()
        embeddings.ready()
    return embeddings
