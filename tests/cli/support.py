"""Helpers shared by the CLI and MCP tests: the real model built once, and a clean environment."""

from __future__ import annotations

import functools
import os
from pathlib import Path

#: Variables that would leak the developer's own store, key or branch into a test.
_SCRUB = ("SOVSEAL_HOME", "SOVSEAL_KEY", "SOVSEAL_KEY_FILE", "SOVSEAL_BRANCH", "SOVSEAL_KEY_FALLBACK")


_model_base: list[Path] = []


def set_model_base(base: Path) -> None:
    """Where :func:`model_dir` may build the model (the session's pytest temp dir, cleaned by pytest)."""
    _model_base[:] = [base]


@functools.cache
def model_dir() -> Path:
    """A directory holding the on-device model, built once per test process.

    ``SOVSEAL_MODEL_DIR`` wins when set; otherwise the model is built from the offline package into
    ``<pytest temp>/sovseal-model/models`` (a couple of seconds, once), never into the user's home.
    """
    given = os.environ.get("SOVSEAL_MODEL_DIR")
    if given:
        return Path(given)
    from sovseal.embed.resolve import BUILT, resolve_model

    assert _model_base, "call set_model_base() from a session fixture first"
    root = _model_base[0] / "sovseal-model"
    saved = os.environ.get("SOVSEAL_HOME")
    os.environ["SOVSEAL_HOME"] = str(root)
    try:
        resolve_model(None, allow_download=False)
    finally:
        if saved is None:
            os.environ.pop("SOVSEAL_HOME", None)
        else:
            os.environ["SOVSEAL_HOME"] = saved
    return root / "models" / BUILT


@functools.cache
def real_embedder():  # sovseal.embed.Embedder, imported lazily
    """One loaded real embedder shared by the in-process tests that want the real model."""
    from sovseal.embed import Embedder

    embedder = Embedder(model_dir())
    embedder.ready()
    return embedder


def clean_env(home: Path, **extra: str) -> dict[str, str]:
    """The environment a user's shell would have for a store at ``home`` on a headless machine."""
    env = {k: v for k, v in os.environ.items() if k not in _SCRUB}
    env.update(
        SOVSEAL_HOME=str(home),
        SOVSEAL_KEY_FALLBACK="file",
        SOVSEAL_MODEL_DIR=str(model_dir()),
        LANCEDB_LOG="error",
        PYTHONUNBUFFERED="1",
    )
    env.update(extra)
    return env
