"""sovseal: a local-first, encrypted, lineage-tracked memory engine for LLM agents.

The public names are imported on first use (PEP 562), so ``import sovseal.embed`` or the CLI's
``--help`` do not pay for the storage engine, LanceDB and the replication client.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names re-exported, for type checkers (`X as X`: an explicit re-export)
    from .models import LogEntry as LogEntry
    from .models import Memory as Memory
    from .models import Status as Status
    from .models import StoreResult as StoreResult
    from .models import VerifyReport as VerifyReport
    from .sdk.client import AsyncSovseal as AsyncSovseal
    from .sdk.client import Sovseal as Sovseal
    from .sdk.keyrotation import rotate_key as rotate_key
    from .sdk.maintenance import rebuild_index as rebuild_index

_HOMES = {
    "AsyncSovseal": ".sdk.client",
    "Sovseal": ".sdk.client",
    "LogEntry": ".models",
    "Memory": ".models",
    "Status": ".models",
    "StoreResult": ".models",
    "VerifyReport": ".models",
    "rebuild_index": ".sdk.maintenance",
    "rotate_key": ".sdk.keyrotation",
}

#: The keys of _HOMES.
__all__ = ["AsyncSovseal", "LogEntry", "Memory", "Sovseal", "Status", "StoreResult", "VerifyReport", "rebuild_index", "rotate_key"]
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
