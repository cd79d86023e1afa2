"""What every framework adapter of sovseal shares, written once and free of any framework import.

The LangChain, LlamaIndex and LangGraph packages each turn their framework's objects into sovseal
records; the rest is the same for all of them and lives here, so a fix lands in every adapter:

- :mod:`.handles`: the ``client=`` or ``path=``/``key=`` rule for the handle an adapter works on,
  closing only what it opened, and the checks on the names adapters build record paths from.
- :mod:`.parts`: values larger than one record, split into part records and joined back, and
  :data:`~.parts.MAX_VALUE_BYTES`, the one size limit of every adapter.
- :mod:`.erasure`: erasing what a delete names (every version, every branch, its parts), with one
  compaction per call.

Nothing here imports a framework: sovseal itself never depends on one.
"""

from __future__ import annotations

from .erasure import Erasure, deletion, erase_flag, erase_records
from .handles import HandleOwner, batch_id, check_key, check_segment, open_handle
from .parts import MAX_VALUE_BYTES, Parts, as_text, check_size, descriptor, index_text

__all__ = [
    "MAX_VALUE_BYTES",
    "Erasure",
    "HandleOwner",
    "Parts",
    "as_text",
    "batch_id",
    "check_key",
    "check_segment",
    "check_size",
    "deletion",
    "descriptor",
    "erase_flag",
    "erase_records",
    "index_text",
    "open_handle",
]
