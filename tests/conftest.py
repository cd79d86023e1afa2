"""Shared fixtures: a fresh key and store per test, with the fake embedder of tests/fakes.py."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from sovseal import Sovseal
from tests.fakes import fake_embed


@pytest.fixture
def key() -> bytes:
    return os.urandom(32)


@pytest.fixture
def store_dir(tmp_path: Path) -> Path:
    return tmp_path / "store"


@pytest.fixture
def mem(store_dir: Path, key: bytes) -> Iterator[Sovseal]:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as m:
        yield m


@pytest.fixture
def count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> Callable[[], list[int]]:
    """Call it to start counting fsyncs: each one's file descriptor is appended to the list it
    returns, and the real fsync still runs (``monkeypatch.undo()`` stops the counting)."""

    def start() -> list[int]:
        synced: list[int] = []
        real_fsync = os.fsync

        def traced(fd: int) -> None:
            synced.append(fd)
            real_fsync(fd)

        monkeypatch.setattr(os, "fsync", traced)
        return synced

    return start
