"""``python -m sovseal`` is the ``sovseal`` command."""

from .cli import run

run()
