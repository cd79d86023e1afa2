"""sovseal: a local-first, encrypted, lineage-tracked memory engine for LLM agents."""

from .client import AsyncSovseal, Sovseal
from .models import LogEntry, Memory, Status, StoreResult, VerifyReport

__all__ = ["AsyncSovseal", "LogEntry", "Memory", "Sovseal", "Status", "StoreResult", "VerifyReport"]
__version__ = "0.1.0"
