"""Pull: bring a project's items from the server into this store, in the server's acceptance order.

The server accepts items only after what they depend on and in each sender's journal order, so
its order can be replayed as is by :meth:`LocalStore.import_items`, which opens every record,
re-derives its snapshot id and refuses anything forged before writing it. Items already here
are skipped, so a pull can be repeated or interrupted at any point.

A cursor per (endpoint, project) is kept beside the journal so the next pull starts where this
one stopped; it only moves past items that were imported, never past one still waiting for a
parent. It is a plain sequence number: losing it only means pulling from the start again.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from ..durable import atomic_write
from ..store import LocalStore
from ..wire import WireItem

if TYPE_CHECKING:
    from .http import Transport

CURSOR_FILE = "replication-cursor.json"


@dataclass(frozen=True, slots=True)
class PullResult:
    received: int  # items the server sent
    new_records: int  # snapshots this store did not have before
    new_items: int  # records, branch moves and reinforcements applied here
    waiting: int  # items that could not be applied: what they depend on is not on the server
    cursor: int  # the server sequence number this store has now imported up to


def _load(path: Path) -> dict[str, int]:
    try:
        data = json.loads(path.read_text())
        return {str(k): int(v) for k, v in data.items()} if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _applied(store: LocalStore) -> tuple[int, int]:
    with store.reading() as lineage:
        return len(lineage.nodes), len(lineage.nodes) + len(lineage.events)


def pull_into(store: LocalStore, transport: Transport, page_size: int, progress: Callable[[int, int], None] | None = None) -> PullResult:
    """Pull every accepted item after the saved cursor and import it; ``progress(done, total)`` per page."""
    path = store.directory / CURSOR_FILE
    key = f"{transport.target.endpoint} {transport.project_blind}"
    cursors = _load(path)
    start = cursor = saved = cursors.get(key, 0)
    records_before, items_before = _applied(store)
    received = 0
    waiting: list[tuple[int, WireItem]] = []
    while True:
        data = transport.pull(cursor, page_size)
        page = [(int(raw["seq"]), WireItem.from_json(raw)) for raw in data["records"]]
        received += len(page)
        batch = waiting + page
        left = store.import_items([item for _, item in batch])
        waiting = batch[len(batch) - len(left) :]
        if page:
            cursor = page[-1][0]
        safe = waiting[0][0] - 1 if waiting else cursor
        if safe != saved:
            cursors = {**_load(path), key: safe}
            atomic_write(path, json.dumps(cursors, indent=1).encode())
            saved = safe
        if progress is not None:
            last = data.get("last")
            last = last if isinstance(last, int) and not isinstance(last, bool) else cursor
            progress(cursor - start, max(last - start, cursor - start))
        if not page or not data.get("more"):
            break
    records_after, items_after = _applied(store)
    return PullResult(received, records_after - records_before, items_after - items_before, len(waiting), saved)
