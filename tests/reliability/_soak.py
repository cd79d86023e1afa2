"""The one switch between the normal suite and the soak: ``SOVSEAL_SOAK=1``."""

from __future__ import annotations

import os

SOAK = os.environ.get("SOVSEAL_SOAK", "").strip() not in ("", "0")


def scale(normal: int, soak: int) -> int:
    """The size of a scenario: ``normal`` in the test command, ``soak`` with SOVSEAL_SOAK=1."""
    return soak if SOAK else normal
