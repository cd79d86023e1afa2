"""Fixtures for the embedder tests: one cache built per session, and no way out to the network.

Every test runs with ``SOVSEAL_HOME`` in a temporary directory (the user's ``~/.sovseal`` is never
read or written), no ``SOVSEAL_MODEL_DIR``, and ``HF_ENDPOINT`` on a closed loopback port, so even a
download that a test allows fails at once on this machine instead of reaching the internet.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest

from sovseal.embed import Embedder
from sovseal.embed.resolve import BUILT, resolve_model


def _closed_loopback_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])  # closed again on exit: connections are refused


UNREACHABLE = f"http://127.0.0.1:{_closed_loopback_port()}"


@pytest.fixture(autouse=True)
def offline_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("SOVSEAL_HOME", str(home))
    monkeypatch.delenv("SOVSEAL_MODEL_DIR", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", UNREACHABLE)
    return home


@pytest.fixture(scope="session")
def built_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The cache entry built from the installed offline package, once per test session (about 1-2 s)."""
    home = tmp_path_factory.mktemp("built-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SOVSEAL_HOME", str(home))
        mp.delenv("SOVSEAL_MODEL_DIR", raising=False)
        resolve_model(None, allow_download=False)
    yield home / "models" / BUILT


@pytest.fixture(scope="session")
def embedder(built_dir: Path) -> Embedder:
    """One loaded embedder shared by the tests that only use it (a session costs ~0.3 s to create)."""
    e = Embedder(built_dir)
    e.ready()
    return e
