"""What every framework adapter of sovseal shares, written once and free of any framework import.

The LangChain, LlamaIndex and LangGraph packages each turn their framework's objects into sovseal
records; the rest is the same for all of them and lives here, so a fix lands in every adapter:

- :mod:`.handles`: the ``client=`` or ``path=``/``key=`` rule for the handle an adapter works on,
  closing only what it opened, and the checks on the names adapters build record paths from.
- :mod:`.parts`: values larger than one record, split into part records and joined back, and
  :data:`~.parts.MAX_VALUE_BYTES`, the one size limit of every adapter.
- :mod:`.erasure`: erasing what a delete names (every version, every branch, its parts), with one
  compaction per call.

This package and :mod:`sovseal`, :mod:`sovseal.errors` and :mod:`sovseal.embed` are the whole
surface an adapter may import (tests/core/test_import_cycles.py checks it), so the engine's
layers can change without touching an adapter. The names re-exported below from inside the
engine are the few an adapter needs: the canonical JSON codec, the filter matcher, and the size
and ``k`` limits.

Nothing here imports a framework: sovseal itself never depends on one.
"""

from __future__ import annotations

from sovseal.canonical import canonicalize, loads
from sovseal.embed.fingerprint import qualified_name
from sovseal.recall.filters import matches
from sovseal.sdk.client import MAX_RECALL_K, EmbedFn
from sovseal.storage.entries import MAX_ENTRY_BYTES

from .erasure import Erasure, deletion, erase_flag, erase_records
from .handles import HandleOwner, batch_id, check_key, check_segment, open_handle
from .parts import INDEX_CHARS, MAX_VALUE_BYTES, Parts, as_text, check_size, descriptor, index_text

__all__ = [
    "INDEX_CHARS",
    "MAX_ENTRY_BYTES",
    "MAX_RECALL_K",
    "MAX_VALUE_BYTES",
    "EmbedFn",
    "Erasure",
    "HandleOwner",
    "Parts",
    "as_text",
    "batch_id",
    "canonicalize",
    "check_key",
    "check_segment",
    "check_size",
    "deletion",
    "descriptor",
    "erase_flag",
    "erase_records",
    "index_text",
    "loads",
    "matches",
    "open_handle",
    "qualified_name",
]
