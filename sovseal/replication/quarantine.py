"""Items the server refused with a 4xx, remembered across restarts.

A refused item stays in the outbox (the core never drops an unacknowledged item), but sending it
again would only be refused again: a *poison* item retried forever would stall everything behind
it. So its id goes here, the worker skips it, and the user decides (``replication.retry()``).
The file holds ids, kinds, HTTP codes and the server's messages: keyed ids and no plaintext.
It lives beside the journal and is written atomically.
"""

from __future__ import annotations

import json
import threading
from dataclasses import asdict
from datetime import datetime
from pathlib import Path

from ..durable import atomic_write
from .status import Rejected

FILE_NAME = "replication-rejected.json"


class Quarantine:
    def __init__(self, directory: Path) -> None:
        self.path = directory / FILE_NAME
        self._lock = threading.Lock()
        self._items: dict[str, Rejected] = {}
        if self.path.exists():
            try:
                for raw in json.loads(self.path.read_text()):
                    raw["at"] = datetime.fromisoformat(raw["at"])
                    self._items[raw["id"]] = Rejected(**raw)
            except (ValueError, KeyError, TypeError):
                self._items = {}  # an unreadable file only means refused items are tried once more

    def __contains__(self, item_id: object) -> bool:
        return item_id in self._items

    def __len__(self) -> int:
        return len(self._items)

    def ids(self) -> set[str]:
        with self._lock:
            return set(self._items)

    def items(self) -> list[Rejected]:
        with self._lock:
            return list(self._items.values())

    def add(self, rejected: list[Rejected]) -> None:
        with self._lock:
            for r in rejected:
                self._items[r.id] = r
            self._save()

    def remove(self, ids: set[str] | None = None) -> list[str]:
        """Forget ``ids`` (all when None); returns the ids forgotten."""
        with self._lock:
            gone = list(self._items) if ids is None else [i for i in ids if i in self._items]
            for i in gone:
                del self._items[i]
            if gone:
                self._save()
            return gone

    def _save(self) -> None:
        rows = [{**asdict(r), "at": r.at.isoformat()} for r in self._items.values()]
        atomic_write(self.path, json.dumps(rows, indent=1).encode())
