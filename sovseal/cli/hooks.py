"""The seam that runs the command line with another embedder: ``sovseal.cli.EMBEDDER``.

Tests (and a program embedding the CLI) assign ``sovseal.cli.EMBEDDER``; every command asks
:func:`embedder` when it opens a store. The package points :data:`embedder_source` at its own
``EMBEDDER``, read at call time, so one assignment reaches every command without the command
modules importing the package that imports them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sovseal.sdk.client import EmbedFn


def _none() -> EmbedFn | None:
    return None


#: Where :func:`embedder` reads the hook (set by ``sovseal.cli`` when it is imported).
embedder_source: Callable[[], EmbedFn | None] = _none


def embedder() -> EmbedFn | None:
    """The embedder commands open stores with; None: the built-in on-device model."""
    return embedder_source()
