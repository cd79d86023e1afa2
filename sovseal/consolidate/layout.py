"""Where consolidation keeps its own records: the reserved paths, and the digests that name them.

A leaf module (no SDK import): :mod:`.graph`, which the SDK imports to answer ``related()``,
needs these and nothing of the passes, so the SDK and consolidation do not import each other.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

#: Paths under this are sovseal's own: a model may never name one.
RESERVED = "_sovseal/"
PREFIX = RESERVED + "consolidation/"
RUNS = PREFIX + "runs/"
STEPS = PREFIX + "steps/"
GRAPH = PREFIX + "graph/"
RETENTION = PREFIX + "retention/"
#: metadata["sovseal_consolidation"] of the memories consolidation writes for recall (digests, facts).
MARK = "sovseal_consolidation"


def digest_of(items: Iterable[str], n: int = 16) -> str:
    return hashlib.sha256("\n".join(items).encode()).hexdigest()[:n]


def is_system(path: str) -> bool:
    return path.startswith(PREFIX)
