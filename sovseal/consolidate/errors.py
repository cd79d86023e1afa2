"""The typed errors of consolidation. Both are :class:`~sovseal.errors.SovsealError`, so the CLI
turns them into one line and an exit code like every other error."""

from __future__ import annotations

from ..errors import SovsealError


class ConsolidationError(SovsealError):
    """A consolidation run cannot go on (an unknown run, a pass that needs a model, ...)."""


class ModelOutputError(ConsolidationError):
    """The chat model's answer was not the JSON a pass asked for, or named things that do not exist.

    Nothing was written for that batch; the batches finished before it are kept, and running
    ``consolidate`` again resumes the run from this batch (with the same model or another one).
    """

    def __init__(self, message: str, *, pass_name: str, batch: str, raw: str) -> None:
        super().__init__(message)
        self.pass_name = pass_name
        self.batch = batch
        self.raw = raw
