"""Consolidation: Sci's nightly passes on sovseal's records (docs/consolidation.md).

    from sovseal.consolidate import consolidate, rollback_run
    report = consolidate(mem, chat_model)      # promotion, graph, digest, decay; audited
    rollback_run(mem, report.run)              # undo it as a unit (appended, never rewritten)

The core knows no framework: ``chat_model`` is anything with ``invoke(prompt)`` (every LangChain
chat model) or a callable ``prompt -> str``.
"""

from .decay import retention
from .errors import ConsolidationError, ModelOutputError
from .graph import Related, related
from .model import ChatModel
from .run import NEEDS_MODEL, PASSES, RollbackReport, RunRecord, RunReport, UnknownRunError, consolidate, get_run, rollback_run, runs

__all__ = [
    "NEEDS_MODEL",
    "PASSES",
    "ChatModel",
    "ConsolidationError",
    "ModelOutputError",
    "Related",
    "RollbackReport",
    "RunRecord",
    "RunReport",
    "UnknownRunError",
    "consolidate",
    "get_run",
    "related",
    "retention",
    "rollback_run",
    "runs",
]
