"""The pull cursor: where the next pull from one server starts, kept beside the journal.

``replication-cursor.json`` maps "<endpoint> <project id>" to the sequence number *and id* of the
last item this device imported from that server (``{"seq": 42, "id": "…"}``). The id lets the next
pull check that the server still holds that very item at that number: a server restored from an
older backup, or a new database behind the same URL, numbers other items the same way, and a
device trusting the number alone would silently miss them.

Anything unreadable or out of range (such as the 2^70 an older version could save, which every
later pull then sent and the server refused) counts as no cursor. That is always safe: a pull
from zero re-checks the items already here and imports nothing twice, so losing the cursor costs
time, never data. The older format (a bare number per key) is read as a cursor without an id.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..durable import atomic_write
from .protocol import MAX_SEQ

FILE_NAME = "replication-cursor.json"


@dataclass(frozen=True, slots=True)
class Cursor:
    seq: int = 0  # the server's sequence number of the last item imported (0: none yet)
    id: str = ""  # that item's id; "" for seq 0 or a cursor saved by an older version


def _parse(value: Any) -> Cursor:
    if isinstance(value, dict):
        seq, ident = value.get("seq"), value.get("id")
    else:
        seq, ident = value, ""
    if type(seq) is not int or not 0 <= seq <= MAX_SEQ or not isinstance(ident, str) or len(ident) > 128:
        return Cursor()
    return Cursor(seq, ident if seq else "")


class CursorFile:
    """One server's cursor in this store's cursor file (which may hold other servers' too)."""

    def __init__(self, directory: Path, key: str) -> None:
        self.path = directory / FILE_NAME
        self.key = key

    def _all(self) -> dict[str, Any]:
        try:
            data = json.loads(self.path.read_text())
        except (OSError, ValueError, RecursionError):  # unreadable: as if there were no cursor
            return {}
        return data if isinstance(data, dict) else {}

    def load(self) -> Cursor:
        return _parse(self._all().get(self.key))

    def save(self, cursor: Cursor) -> None:
        data = {**self._all(), self.key: {"seq": cursor.seq, "id": cursor.id}}
        atomic_write(self.path, json.dumps(data, indent=1).encode())
