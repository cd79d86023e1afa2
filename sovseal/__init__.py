"""sovseal: a local-first, encrypted, lineage-tracked memory engine for LLM agents.

The public names are imported on first use (PEP 562), so ``import sovseal.embed`` or the CLI's
``--help`` do not pay for the storage engine, LanceDB and the replication client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .client import AsyncSovseal, Sovseal
    from .models import LogEntry, Memory, Status, StoreResult, VerifyReport

_HOMES = {
    "AsyncSovseal": ".client",
    "Sovseal": ".client",
    "LogEntry": ".models",
    "Memory": ".models",
    "Status": ".models",
    "StoreResult": ".models",
    "VerifyReport": ".models",
}

__all__ = sorted(_HOMES)
__version__ = "0.1.0"


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'sovseal' has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_HOMES])
