"""Fixtures for the LangGraph integration tests (langgraph-checkpoint-sovseal).

Every test gets an explicit random key and temporary store directories; ``SOVSEAL_HOME`` points
into a session temporary directory, so the user's ``~/.sovseal`` is never touched, and nothing
here reaches the network (the store tests embed with ``tests.fakes.fake_embed``; the saver
embeds nothing). Async tests carry ``pytest.mark.asyncio`` themselves, so they run whether or not
the root pytest config sets ``asyncio_mode = "auto"``.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from langgraph.checkpoint.sovseal import SovsealSaver


@pytest.fixture(scope="session", autouse=True)
def _private_sovseal_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("sovseal-home")
    saved = {name: os.environ.get(name) for name in ("SOVSEAL_HOME", "SOVSEAL_ENDPOINT")}
    os.environ["SOVSEAL_HOME"] = str(home)
    os.environ.pop("SOVSEAL_ENDPOINT", None)  # nothing here replicates
    yield home
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@pytest.fixture
def key() -> bytes:
    return os.urandom(32)


@pytest.fixture
def saver_dir(tmp_path: Path) -> Path:
    return tmp_path / "checkpoints"


@pytest.fixture
def saver(saver_dir: Path, key: bytes) -> Iterator[SovsealSaver]:
    with SovsealSaver.open(saver_dir, key=key) as s:
        yield s
