"""One rule for where a store lives, used by every entry point (SDK, adapters, CLI, MCP, server).

A path a user writes (``"~/.sovseal"``, ``"$HOME/mem"``, a relative folder) is expanded and
resolved once, here, so the journal, the key file, the locks and the vector index all land under
one directory. Without it LanceDB (which expands ``~`` itself) and the journal (which did not)
split one store in two.
"""

from __future__ import annotations

import os
from pathlib import Path

from . import settings

ENV_HOME = settings.HOME.name


def resolve_path(path: str | os.PathLike[str]) -> Path:
    """``path`` with environment variables and ``~`` expanded, made absolute, symlinks resolved."""
    text = os.path.expandvars(os.fspath(path))
    return Path(text).expanduser().resolve()


def default_home() -> Path:
    """``$SOVSEAL_HOME`` (expanded and resolved), else ``~/.sovseal``."""
    return resolve_path(settings.HOME.get())


def store_dir(path: str | os.PathLike[str] | None) -> Path:
    """The resolved store directory for ``path``, or :func:`default_home` when it is None."""
    return default_home() if path is None else resolve_path(path)


def store_exists(path: str | os.PathLike[str] | None) -> bool:
    """Does ``path`` hold a sovseal store? (Opening a missing one creates it; this does not.)"""
    return (store_dir(path) / "journal.log").is_file()
