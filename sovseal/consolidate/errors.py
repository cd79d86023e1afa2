"""The typed errors of consolidation, by their old import path. Both live in :mod:`sovseal.errors`
(the one catalogue of errors, with their exit codes and advice), so the CLI turns them into one
line and an exit code like every other error."""

from __future__ import annotations

from ..errors import ConsolidationError, ModelOutputError

__all__ = ["ConsolidationError", "ModelOutputError"]
