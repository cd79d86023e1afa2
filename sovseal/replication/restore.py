"""Pull: bring a project's items from the server into this store, in the server's acceptance order.

The server accepts items only after what they depend on and in each sender's journal order, so
its order can be replayed as is by :meth:`LocalStore.import_items`, which opens every record,
re-derives its snapshot id and refuses anything forged before writing it. Items already here
are skipped, so a pull can be repeated or interrupted at any point.

A pull trusts nothing the server says and is bounded whatever it sends (docs/reliability.md,
"A hostile server"):

- each request by ``pull_deadline`` and ``max_page_bytes`` (:mod:`.fetch`; a page too large is
  asked for again with half as many items, down to one), each page by the protocol's rules
  (:mod:`.page`);
- items waiting for a parent (``import_items`` returns the suffix that must wait) are kept in
  memory only up to ``max_held_items`` and ``max_held_bytes``; each later page retries them;
- the cursor must move within ``pull_stall_timeout``;
- an honest server sends each item once, so more items already here than this store holds (records,
  events and the other versions of a record) is a server replaying them for ever.

An item that does not authenticate (bytes a server altered, or an item forged by a holder of the
project's API key) is set aside, as is an item that depends on one set aside: never applied,
logged once, its id kept in ``replication-set-aside.json`` (:class:`SetAsideFile`, counted by
``status()``), and the pull goes on past it, so one forgery cannot stop every later pull.

The cursor (:mod:`.cursor`) only moves past items imported, set aside or found already here, never past
one still waiting: the next pull fetches those again, so the server is where they are held. It
starts one item early, to check the server still has the item it names; when it does not (a
server restored from an older backup, its ``last`` below the cursor or its numbers reused), the
device pulls from zero again, which imports only what it lacks.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sovseal.storage.frames import REDACTED
from sovseal.storage.store import LocalStore
from sovseal.storage.wire import WireItem

from ..durable import atomic_write
from ..errors import ReplicationError, ServerMisbehaviourError
from .config import ReplicationConfig
from .cursor import Cursor, CursorFile
from .fetch import PageTooLargeError, PullSession
from .http import Transport
from .page import Page, parse_page

log = logging.getLogger("sovseal.replication")
#: What a held item costs in memory beyond its sealed bytes (four hex ids as str, the object).
_HELD_OVERHEAD = 1024


@dataclass(frozen=True, slots=True)
class PullResult:
    received: int  # items the server sent
    new_records: int  # snapshots this store did not have before
    new_items: int  # records, branch moves and reinforcements applied here
    waiting: int  # items that could not be applied: what they depend on is not on the server
    cursor: int  # the server sequence number this store has now imported up to
    resynced: bool = False  # the server no longer held the item at the cursor: pulled again from zero
    set_aside: tuple[str, ...] = ()  # ids set aside by this pull: they did not authenticate, or depend on one that did not


class SetAsideFile:
    """The ids of pulled items set aside in this store, kept beside the journal.

    Kept so that an item which depends on one set aside by an earlier pull (a forger's next item)
    is set aside too, instead of waiting for ever, and so that ``status()`` can count them. An
    unreadable file counts as empty: the worst that costs is a forger's later child waiting.
    """

    FILE_NAME = "replication-set-aside.json"

    def __init__(self, directory: Path) -> None:
        self.path = directory / self.FILE_NAME

    def load(self) -> set[str]:
        try:
            data: Any = json.loads(self.path.read_text())
        except (OSError, ValueError, RecursionError):
            return set()
        ids = data.get("ids") if isinstance(data, dict) else None
        return {i for i in ids if isinstance(i, str)} if isinstance(ids, list) else set()

    def save(self, ids: set[str]) -> None:
        atomic_write(self.path, json.dumps({"ids": sorted(ids)}, indent=1).encode())


def _applied(store: LocalStore) -> tuple[int, int]:
    with store.reading() as lineage:
        return len(lineage.nodes), len(lineage.nodes) + len(lineage.events)


def _held(store: LocalStore, set_aside: set[str]) -> int:
    """The items a server can hold of this store: records, events, the other versions of a record,
    and the items set aside here.

    Two devices that write the same entry on the same parents make one snapshot with two versions
    (each its own clock), which the server keeps as two items; importing the second adds a version,
    not a record, yet it is no duplicate.
    """
    with store.reading() as lineage:
        return len(lineage.nodes) + len(lineage.events) + sum(len(v) for v in lineage.versions.values()) + len(set_aside)


def _skeletons_of_held(store: LocalStore, batch: list[tuple[int, WireItem]]) -> list[int]:
    """Positions in ``batch`` of skeletons (erased records) of a snapshot this store holds.

    The server keeps a skeleton for every version of an erased snapshot, where this store keeps
    one (a purge compacts the others away), and sends the skeletons before the redaction: these
    add nothing here, yet an honest server sends them. They are counted apart from other duplicates.
    """
    with store.reading() as lineage:
        return [
            i
            for i, (_, item) in enumerate(batch)
            if item.kind == "record" and item.flags & REDACTED and bytes.fromhex(item.id) in lineage.by_wire
        ]


class _Pull:
    """The state of one pull: cursor, held items, counters and clocks."""

    def __init__(
        self,
        store: LocalStore,
        session: PullSession,
        config: ReplicationConfig,
        cursors: CursorFile,
        progress: Callable[[int, int], None] | None,
    ) -> None:
        self.store = store
        self.session = session
        self.config = config
        self.cursors = cursors
        self.progress = progress
        self.endpoint = session.endpoint
        self.saved = cursors.load()
        self.limit = config.pull_page
        self.held: list[tuple[int, WireItem]] = []
        self.received = 0
        self.duplicates = 0  # items sent that were already here
        self.skeletons = 0  # ... of them, skeletons of a snapshot held here (one per version on the server)
        self.resynced = False
        self.last = 0  # the highest `last` the server has reported during this pull
        self.moved_at = time.monotonic()  # when the cursor last moved
        self.aside_file = SetAsideFile(store.directory)
        self.aside = self.aside_file.load()
        self.aside_before = set(self.aside)

    def run(self) -> None:
        start = after = max(self.saved.seq - 1, 0)  # one item early: does the server still hold it?
        checking = self.saved.seq > 0
        while True:
            page = self._page(after)
            items = page.items
            if checking:
                checking = False
                # page.py made items[0] the item numbered saved.seq; an older cursor has no id to compare
                if not items or (self.saved.id and items[0][1].id != self.saved.id):
                    self._resync(page)
                    start = after = 0
                    continue
                if not self.saved.id:  # from now on, checked by id
                    self.saved = Cursor(self.saved.seq, items[0][1].id)
                    self.cursors.save(self.saved)
                items = items[1:]  # already here: it is what the cursor names
            self.received += len(items)
            self._import(items)
            if self.progress is not None and page.items:
                done = page.items[-1][0] - start
                self.progress(done, max(page.last - start, done))
            if not page.items or not page.more:
                return
            after = page.items[-1][0]

    def _page(self, after: int) -> Page:
        """The next page, halving the items asked for while pages pass ``max_page_bytes``."""
        while True:
            left = self.config.pull_stall_timeout - (time.monotonic() - self.moved_at)
            if left <= 0:
                raise self._stalled()
            try:
                body = self.session.page(after, self.limit, min(self.config.pull_deadline, left))
            except PageTooLargeError:
                if self.limit == 1:
                    raise
                self.limit //= 2
                continue
            except ReplicationError as exc:
                if exc.code == "deadline" and left < self.config.pull_deadline:  # cut short by the stall timeout
                    raise self._stalled() from None
                raise
            page = parse_page(body, after, self.limit, self.endpoint)
            if 2 * len(body) <= self.session.max_bytes:  # twice as many items would likely still fit
                self.limit = min(self.config.pull_page, self.limit * 2)
            if page.last < self.last:
                raise ReplicationError(
                    f"{self.endpoint}'s newest sequence number went back from {self.last} to {page.last} during the pull: "
                    "its database was replaced or restored meanwhile. Pull again: the next pull checks the cursor and "
                    "starts over from zero if it must",
                    code="history_changed",
                    retryable=True,
                )
            self.last = page.last
            return page

    def _stalled(self) -> ReplicationError:
        return ReplicationError(
            f"the pull from {self.endpoint} made no progress for {self.config.pull_stall_timeout:g} s (pull_stall_timeout): "
            f"nothing that came could be imported ({len(self.held)} item(s) wait for a parent). Everything imported so far "
            f"is kept and the cursor is at {self.saved.seq}; pull again later",
            code="stalled",
            retryable=True,
        )

    def _resync(self, page: Page) -> None:
        log.warning(
            "%s no longer holds item %s at sequence number %d (its last is %d): restored from an older backup, or a "
            "different database; pulling again from zero (items already here are skipped)",
            self.endpoint,
            self.saved.id or "(unknown)",
            self.saved.seq,
            page.last,
        )
        self.resynced = True
        self.saved = Cursor()
        self.cursors.save(self.saved)
        self.last = 0

    def _import(self, items: list[tuple[int, WireItem]]) -> None:
        """Import held items then ``items``; move the cursor over what was imported; hold the rest."""
        batch = self.held + items
        before = _held(self.store, self.aside)
        skeletons = _skeletons_of_held(self.store, batch)
        known = set(self.aside)
        left = self.store.import_items([item for _, item in batch], self.aside)
        if self.aside != known:
            self.aside_file.save(self.aside)
        present = _held(self.store, self.aside)
        done = len(batch) - len(left)
        if done:
            seq, item = batch[done - 1]
            self.saved = Cursor(seq, item.id)
            self.cursors.save(self.saved)
            self.moved_at = time.monotonic()
        self.held = batch[done:]
        skeletons_known = sum(1 for i in skeletons if i < done)
        self.skeletons += skeletons_known
        self.duplicates += done - (present - before) - skeletons_known
        if self.duplicates > present or self.skeletons > present:
            sent = max(self.duplicates, self.skeletons)
            raise ServerMisbehaviourError(
                f"{self.endpoint} sent {sent} items this store already has, more than the {present} it holds: "
                "an honest server sends each item once. The pull stopped; nothing was lost",
                code="duplicates",
            )
        held_bytes = sum(len(item.sealed) + _HELD_OVERHEAD for _, item in self.held)
        if len(self.held) > self.config.max_held_items or held_bytes > self.config.max_held_bytes:
            first = self.held[0][1]
            raise ReplicationError(
                f"{len(self.held)} items ({held_bytes} bytes) pulled from {self.endpoint} wait for what item {first.id} "
                f"depends on (its parent {first.parent or '-'} or branch), which the server has not sent",
                advice=(
                    f"a pull holds at most max_held_items={self.config.max_held_items} and max_held_bytes="
                    f"{self.config.max_held_bytes}. Everything before them is imported and the cursor is at "
                    f"{self.saved.seq}. An honest server never sends an item before what it depends on: check the server"
                ),
                cli_advice=(
                    f"a pull holds at most {self.config.max_held_items} such items and {self.config.max_held_bytes} bytes. "
                    f"Everything before them is imported and the cursor is at {self.saved.seq}. An honest server never "
                    "sends an item before what it depends on: check the server"
                ),
                code="held_limit",
                ids=[first.id],
            )


def pull_into(
    store: LocalStore, transport: Transport, config: ReplicationConfig, progress: Callable[[int, int], None] | None = None
) -> PullResult:
    """Pull every accepted item after the saved cursor and import it; ``progress(done, total)`` per page."""
    cursors = CursorFile(store.directory, f"{transport.target.endpoint} {transport.project_blind}")
    records_before, items_before = _applied(store)
    with PullSession(transport) as session:
        pull = _Pull(store, session, config, cursors, progress)
        pull.run()
    records_after, items_after = _applied(store)
    if pull.held:
        log.warning(
            "%d item(s) pulled from %s wait for item %s, which the server has not sent; the next pull fetches them again",
            len(pull.held),
            transport.target.endpoint,
            pull.held[0][1].parent,
        )
    return PullResult(
        pull.received,
        records_after - records_before,
        items_after - items_before,
        len(pull.held),
        pull.saved.seq,
        pull.resynced,
        tuple(sorted(pull.aside - pull.aside_before)),
    )
