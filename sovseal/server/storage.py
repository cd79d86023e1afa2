"""What the replication server stores and in which order it accepts items.

The server is blind: it keeps opaque items per project and reasons only about their clear ids.
Three rules make a pull replayable on a second device (``LocalStore.import_items`` applies items
strictly in the order given):

- *Acceptance order is the pull order.* Each project has a counter; an accepted item gets the
  next ``seq`` and pulls return items by ``seq``.
- *Nothing is accepted before what it depends on.* A record needs its parent record and a
  branch event for its branch; a branch event its HEAD record; a reinforcement its target. An
  item that arrives early is *held* (durably, so it is still acknowledged) and released, in
  arrival order, as soon as what it waits for is accepted. Each held item is indexed by what it
  waits for (``held_waits``), so a release reads only the held items it may free, and a project
  may hold at most a quota of items and bytes (a push past it is refused whole).
- *Nothing overtakes its predecessor.* Each item also waits for the item sent just before it
  (the previous one in its batch, or the batch's ``after``), so batches that the network
  reorders are still accepted in the sender's journal order: branch moves are relative to the
  records before them, and only that order restores an equal lineage.

Duplicates (same id, same canonical body) are accepted idempotently; a different body under a
known id is a conflict and the whole push is refused, so a push either applies entirely or not
at all.

A *redaction* (docs/design.md, "Redaction skeletons") is stored like any item and applied as soon
as it is received, in the same transaction: every stored record it names (and the other versions
stored beside it, ``<id>.<digest16>``), accepted or held, gets its skeleton as body (the same item
with flag REDACTED and the skeleton seal as ``sealed``), keeping its id and seq. The named ids are
remembered (``erased``), with their seals: a record pushed later under one of them is stored as its
skeleton if the server has nothing under that id (its children must not wait forever), is a
duplicate if that skeleton is what is stored, and is otherwise acknowledged and dropped. So a
device that has not pulled the redaction yet still drains its outbox, and no content of an erased
record is ever stored again.

API keys are random tokens stored only as sha256 (they have 256 bits of entropy, so a slow
password hash would add nothing), each scoped to one project. A key made without a project binds on
first use, and only to a project no other key is bound to (a new one): a project that already has a
key is joined only with a key made for it (``sovseal serve --create-key --project <id>``).
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import logging
import os
import time
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Literal, TypeVar

from sovseal.storage.frames import REDACTED

from ..replication.protocol import API_KEY_PREFIX
from . import schema
from .db import Database, Tx
from .validate import Item, body_digest, canonical

T = TypeVar("T")
_CHUNK = 400  # ids per IN (...) list: far below SQLite's host-parameter limit

AuthResult = Literal["ok", "unknown", "forbidden", "taken"]
log = logging.getLogger("sovseal.server")


class ConflictError(Exception):
    """Items whose id is known with a different body; the push was not applied."""

    def __init__(self, ids: list[str]) -> None:
        super().__init__(f"{len(ids)} item(s) conflict with a different body stored under the same id")
        self.ids = ids


class QuotaExceeded(Exception):
    """The push would leave its project holding more than its quota; nothing of it was applied."""


@dataclass(frozen=True, slots=True)
class HeldQuota:
    """How much one project may hold back at once: items waiting for what they depend on, and their bytes.

    Held items are the one thing a tenant can park on the server without it ever entering the
    pull order (orphans whose parent never comes), so they are what needs a bound per project.
    """

    items: int
    bytes: int


@dataclass(frozen=True, slots=True)
class PushOutcome:
    accepted: int  # new items accepted into the pull order by this push
    duplicates: int  # items the server already had (accepted or held)
    held: list[str]  # items of this push that wait for a parent or predecessor
    released: int  # previously held items this push made acceptable
    cursor: int  # the project's last seq after this push
    dropped: int = 0  # items for erased records whose skeleton is already stored: acknowledged, not stored
    erased: int = 0  # records this push's redactions erased (stored rows whose body became a skeleton)


@dataclass(frozen=True, slots=True)
class PullPage:
    rows: list[tuple[int, str]]  # (seq, canonical item JSON)
    last_seq: int  # the project's newest seq (for progress)
    held: int


@dataclass(slots=True)
class _Pending:
    """A new item of this push, not accepted yet."""

    id: str
    after: str
    kind: str
    parent: str
    branch: str
    digest: str
    body: str
    more_parents: tuple[str, ...] = ()  # a merge's parents after the first: it waits for each
    erased: tuple[tuple[str, str], ...] = ()  # a redaction's (wire id, skeleton seal) pairs


@dataclass(slots=True)
class _Waiter:
    """A held item that something just accepted may have made ready, and everything it waits for."""

    hseq: int
    id: str
    kind: str
    branch: str
    size: int
    waits: list[tuple[str, bool]]  # (id or branch it waits for, accepted before this transaction)


def hash_api_key(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def _chunks(values: Sequence[T]) -> Iterable[Sequence[T]]:
    for start in range(0, len(values), _CHUNK):
        yield values[start : start + _CHUNK]


def skeleton_body(body: str, seal: str) -> str:
    """The canonical body of a record's skeleton: the same item, ``sealed`` = the skeleton seal (base64)
    and flag REDACTED, exactly what a device pushes for that skeleton (``WireItem.to_json``).

    A format-2 item has no ``flags``: it says ``"redacted": true`` instead (see ``WireItem.to_json``).
    """
    item = json.loads(body)
    item["sealed"] = seal
    if "flags" in item:
        item["flags"] = int(item["flags"]) | REDACTED
    else:
        item["redacted"] = True
    return canonical(item)


class Storage:
    """The server's state in one :class:`Database`."""

    def __init__(self, db: Database, *, reader: Database | None = None, owner: bool = True, auth_ttl: float = 5.0) -> None:
        """``db`` takes every write; ``reader`` (default: ``db``) every read that needs no transaction.

        On PostgreSQL with least privilege, ``db`` connects as the writer role, ``reader`` as the
        reader role and ``owner`` is False: such a server never migrates, it checks the schema.
        """
        self.db = db
        self.reads = reader or db
        self.owner = owner
        self.auth_ttl = auth_ttl
        self._auth_cache: dict[str, tuple[str, float]] = {}  # key hash -> (project, valid until)
        #: A redaction committed but its bytes may still be in the database's files: scrub after the next write.
        self._scrub_pending = False

    @property
    def backend(self) -> str:
        return self.db.backend

    def migrate(self, roles: schema.Roles | None = None) -> None:
        """Create or upgrade the schema and grant the roles (owner); else check it is current."""
        if self.owner:
            schema.migrate(self.db, roles)
        else:
            schema.check(self.reads)
        if self.backend == "sqlite":
            self._scrub()  # a redaction committed just before a crash or stop: finish what it left in the WAL

    def close(self) -> None:
        self.db.close()
        if self.reads is not self.db:
            self.reads.close()

    # -- API keys --------------------------------------------------------------------------

    def create_api_key(self, project: str | None = None, label: str = "") -> str:
        """Make a key (returned once, stored hashed). Without ``project`` it binds to the first project it is used with."""
        key = API_KEY_PREFIX + base64.urlsafe_b64encode(os.urandom(32)).rstrip(b"=").decode("ascii")
        with self.db.transaction() as tx:
            tx.execute(
                "INSERT INTO api_keys (key_hash, project, label, created_at, revoked) VALUES (?, ?, ?, ?, 0)",
                (hash_api_key(key), project, label, time.time()),
            )
        return key

    def revoke_api_key(self, key: str) -> bool:
        self._auth_cache.pop(hash_api_key(key), None)
        with self.db.transaction() as tx:
            found = tx.execute("SELECT revoked FROM api_keys WHERE key_hash = ?", (hash_api_key(key),))
            tx.execute("UPDATE api_keys SET revoked = 1 WHERE key_hash = ?", (hash_api_key(key),))
        return bool(found)

    def cached_authorization(self, key: str, project: str) -> AuthResult | None:
        """The verdict for a key seen valid in the last ``auth_ttl`` seconds, without the database (None: ask it)."""
        hit = self._auth_cache.get(hash_api_key(key))
        if hit is None or hit[1] < time.monotonic():
            return None
        return "ok" if hit[0] == project else "forbidden"

    def authorize(self, key: str, project: str) -> AuthResult:
        """Is ``key`` valid for ``project``? An unbound key is bound to it now, atomically.

        An unbound key binds only to a project that no other key (revoked ones included) is bound
        to: "taken" otherwise, and the key stays unbound. Else whoever got a fresh key could join
        any project whose blind id they know, read it and push into it; a project that already has
        a key takes more only as keys made for it (``create_api_key(project)``).

        Valid keys are remembered for ``auth_ttl`` seconds (a revocation in another server process
        takes effect within that time; in this one at once), so a busy client costs no extra query.
        """
        key_hash = hash_api_key(key)
        with self.reads.reader() as tx:
            rows = tx.execute("SELECT project, revoked FROM api_keys WHERE key_hash = ?", (key_hash,))
        if not rows or rows[0][1]:
            return "unknown"
        bound = rows[0][0]
        if bound is None:
            with self.db.transaction() as tx:
                # The project's row is the lock two first uses of a new project queue on (SQLite's
                # BEGIN IMMEDIATE serializes anyway; on PostgreSQL the next statement then sees the
                # other binding), so two unbound keys cannot both take the same project.
                tx.execute(
                    "INSERT INTO projects (project, next_seq, next_hold, held_count) VALUES (?, 1, 1, 0) "
                    "ON CONFLICT (project) DO UPDATE SET project = excluded.project",
                    (project,),
                )
                tx.execute(
                    "UPDATE api_keys SET project = ? WHERE key_hash = ? AND project IS NULL "
                    "AND NOT EXISTS (SELECT 1 FROM api_keys k WHERE k.project = ?)",
                    (project, key_hash, project),
                )
                bound = tx.execute("SELECT project FROM api_keys WHERE key_hash = ?", (key_hash,))[0][0]
            if bound is None:
                return "taken"  # not cached: the key may still bind to a new project
        self._auth_cache[key_hash] = (str(bound), time.monotonic() + self.auth_ttl)
        return "ok" if bound == project else "forbidden"

    # -- push ------------------------------------------------------------------------------

    # Round trips matter (each is a network hop to PostgreSQL), so a push costs a fixed handful of
    # statements whatever its size: one upsert that locks the project's row and returns its
    # counters, one lookup of every id the batch mentions, one of branches, multi-row inserts,
    # and one update.

    def _counters(self, tx: Tx, project: str) -> tuple[int, int, int, bool]:
        """Lock the project's row (serializing pushes to it) and return next_seq, next_hold, held_count,
        and whether the project has erased records (else a push need not look for them)."""
        row = tx.execute(
            "INSERT INTO projects (project, next_seq, next_hold, held_count) VALUES (?, 1, 1, 0) "
            "ON CONFLICT (project) DO UPDATE SET project = excluded.project RETURNING next_seq, next_hold, held_count, "
            "EXISTS (SELECT 1 FROM erased e WHERE e.project = projects.project)",
            (project,),
        )[0]
        return int(row[0]), int(row[1]), int(row[2]), bool(row[3])

    def _lookup(
        self, tx: Tx, project: str, ids: Collection[str], held_ids: Collection[str] = (), branches: Collection[str] = ()
    ) -> tuple[dict[str, str], dict[str, str], set[str]]:
        """In one query (per 400 values): digests of ``ids`` among accepted items and of ``held_ids``
        among held ones, and which of ``branches`` have an accepted branch event."""
        accepted: dict[str, str] = {}
        held: dict[str, str] = {}
        known_branches: set[str] = set()
        wanted = [(i, 1) for i in sorted(ids)] + [(i, 0) for i in sorted(held_ids)] + [(b, 2) for b in sorted(branches)]
        sources = {
            1: "SELECT id, digest, 1 FROM items WHERE project = ? AND id IN ({})",
            0: "SELECT id, digest, 0 FROM held WHERE project = ? AND released = 0 AND id IN ({})",
            2: "SELECT branch, '', 2 FROM branches WHERE project = ? AND branch IN ({})",
        }
        for chunk in _chunks(wanted):
            parts: list[str] = []
            params: list[str] = []
            for source, template in sources.items():
                values = [v for v, s in chunk if s == source]
                if values:
                    parts.append(template.format(",".join("?" * len(values))))
                    params += [project, *values]
            for value, digest, source in tx.execute(" UNION ALL ".join(parts), params):
                if int(source) == 2:
                    known_branches.add(str(value))
                else:
                    (accepted if int(source) else held)[str(value)] = str(digest)
        return accepted, held, known_branches

    @staticmethod
    def _insert(tx: Tx, head: str, rows: Sequence[tuple[object, ...]], tail: str = "") -> None:
        """Multi-row INSERT: one statement (one round trip) per 100 rows."""
        for start in range(0, len(rows), 100):
            chunk = rows[start : start + 100]
            group = "(" + ",".join("?" * len(chunk[0])) + ")"
            tx.execute(f"{head} VALUES {','.join([group] * len(chunk))}{tail}", [v for row in chunk for v in row])

    def _as_versions(
        self, tx: Tx, project: str, items: Sequence[Item], accepted: dict[str, str], held: dict[str, str]
    ) -> list[Item]:
        """Items that are another version of a known format-3 record, stored beside it.

        Two devices that write the same entry on the same parents make the same snapshot id with
        other bytes (their own clock). Both versions are kept: the later one under the id
        ``<id>.<digest[:16]>``, waiting for the first, and pulled like any item; devices merge them.
        ``accepted`` and ``held`` gain the digests of versions already stored, so a retry is a duplicate.
        """
        first: dict[str, str] = {}
        out: list[Item] = []
        for it in items:
            digest = accepted.get(it.id) or held.get(it.id) or first.setdefault(it.id, it.digest)
            if it.versioned and digest != it.digest:
                it = dataclasses.replace(it, id=f"{it.id}.{it.digest[:16]}", parent=it.id, versioned=False)
            out.append(it)
        renamed = {it.id for it in out} - {it.id for it in items}
        if renamed:
            more_accepted, more_held, _ = self._lookup(tx, project, renamed, renamed)
            accepted.update(more_accepted)
            held.update(more_held)
        return out

    def push(self, project: str, items: Sequence[Item], after: str, quota: HeldQuota) -> PushOutcome:
        """Apply one validated batch atomically.

        Raises ConflictError or QuotaExceeded, and then nothing of the batch is applied.
        """
        with self.db.transaction() as tx:
            next_seq, next_hold, held_count, any_erased = self._counters(tx, project)
            items, dropped = self._erased_records(tx, project, items) if any_erased else (list(items), 0)
            ids = {it.id for it in items}
            refs = ({p for it in items for p in (it.parent, *it.parents)} | {after}) - {""}
            branches = {it.branch for it in items if it.kind == "record"}
            known, held, known_branches = self._lookup(tx, project, ids | refs, ids, branches)
            accepted = {i: d for i, d in known.items() if i in ids}
            items = self._as_versions(tx, project, items, accepted, held)
            conflicts: list[str] = []
            first: dict[str, str] = {}
            for it in items:
                digest = accepted.get(it.id) or held.get(it.id) or first.setdefault(it.id, it.digest)
                if digest != it.digest and it.id not in conflicts:
                    conflicts.append(it.id)
            if conflicts:
                raise ConflictError(conflicts)

            pending: list[_Pending] = []
            seen: set[str] = set()
            pred = after
            for it in items:  # each new item waits for the one sent just before it
                if it.id not in accepted and it.id not in held and it.id not in seen:
                    pending.append(
                        _Pending(it.id, pred, it.kind, it.parent, it.branch, it.digest, it.body, it.parents[1:], it.erased)
                    )
                    seen.add(it.id)
                pred = it.id

            acceptor = _Acceptor(project, next_seq, set(known), known_branches)
            # One pass suffices: an item that is not ready holds back every later one (its successors).
            waiting = [p for p in pending if not acceptor.try_accept(p)]
            if waiting:
                self._hold(tx, acceptor, waiting, next_hold)
            direct = len(acceptor.inserts)
            released = self._release(tx, acceptor) if direct and held_count else {}
            still_held = [p.id for p in waiting if p.id not in released]
            held_count += len(waiting) - len(released)
            if still_held:
                self._check_quota(tx, project, held_count, sum(released.values()), quota)
            with tx.pipeline():
                if acceptor.inserts:
                    self._insert(tx, "INSERT INTO items (project, seq, id, kind, digest, body, received_at)", acceptor.inserts)
                self._move(tx, acceptor)
                if acceptor.new_branches:
                    self._insert(
                        tx,
                        "INSERT INTO branches (project, branch)",
                        [(project, b) for b in sorted(acceptor.new_branches)],
                        " ON CONFLICT (project, branch) DO NOTHING",
                    )
                tx.execute(
                    "UPDATE projects SET next_seq = ?, next_hold = ?, held_count = ? WHERE project = ?",
                    (acceptor.next_seq, next_hold + len(waiting), held_count, project),
                )
            # Last, so that it also reaches what this very push stored (accepted, held or released).
            erased = self._redact(tx, project, [p for p in pending if p.kind == "redaction"], acceptor.now)
        if erased is not None:
            self._scrub_pending = True
        if self._scrub_pending:
            self._scrub()
        duplicates = len(items) - len(pending) - dropped
        return PushOutcome(direct, duplicates, still_held, len(released), acceptor.next_seq - 1, dropped, erased or 0)

    # -- redactions ----------------------------------------------------------------------------

    def _erased_records(self, tx: Tx, project: str, items: Sequence[Item]) -> tuple[list[Item], int]:
        """The batch with each record for an erased id turned into its skeleton, and how many are dropped.

        A dropped record stays in the batch as a duplicate of the skeleton stored under its id (so
        that what follows it still waits for that id, which exists) and is counted apart.
        """
        records = sorted({it.id for it in items if it.kind == "record"})
        seals: dict[str, str] = {}
        for chunk in _chunks(records):
            sql = f"SELECT id, seal FROM erased WHERE project = ? AND id IN ({','.join('?' * len(chunk))})"  # nosec B608 -- only '?' placeholders are interpolated
            seals.update((str(i), str(seal)) for i, seal in tx.execute(sql, (project, *chunk)))
        if not seals:
            return list(items), 0
        accepted, held, _ = self._lookup(tx, project, seals, seals)
        stored = held | accepted
        out: list[Item] = []
        dropped = 0
        for it in items:
            if it.kind == "record" and it.id in seals:
                body = skeleton_body(it.body, seals[it.id])
                it = dataclasses.replace(it, body=body, digest=body_digest(body), versioned=False)
                # The first skeleton seen for an id the server has nothing under is stored; any other is dropped.
                digest = stored.setdefault(it.id, it.digest)
                if digest != it.digest:
                    it = dataclasses.replace(it, digest=digest, body="")
                    dropped += 1
            out.append(it)
        return out, dropped

    def _redact(self, tx: Tx, project: str, redactions: Sequence[_Pending], now: float) -> int | None:
        """Apply the new redactions of a push: remember what they erase and replace the stored bodies.

        Each id is erased once, by the first redaction naming it (a second redaction of the same
        record, from another device, changes nothing: either skeleton authenticates). Returns how
        many stored rows became skeletons, or None when there was no new redaction.
        """
        if not redactions:
            return None
        seals: dict[str, tuple[str, str]] = {}  # wire id -> (seal, redaction id), first naming wins
        for r in redactions:
            for wire, seal in r.erased:
                seals.setdefault(wire, (seal, r.id))
        wanted = sorted(seals)
        for chunk in _chunks(wanted):
            sql = f"SELECT id FROM erased WHERE project = ? AND id IN ({','.join('?' * len(chunk))})"  # nosec B608 -- only '?' placeholders are interpolated
            for (known,) in tx.execute(sql, (project, *chunk)):
                del seals[str(known)]
        if not seals:
            return 0
        fresh = sorted(seals)
        self._insert(
            tx,
            "INSERT INTO erased (project, id, seal, redaction, erased_at)",
            [(project, wire, seals[wire][0], seals[wire][1], now) for wire in fresh],
        )
        rows: list[tuple[str, int, str, str]] = []  # (table, seq or hseq, id, body)
        for chunk in _chunks(fresh):
            marks = ",".join("?" * len(chunk))
            for table, column in (("items", "seq"), ("held", "hseq")):
                live = " AND body <> ''" if table == "held" else ""  # a released held row keeps no body
                sql = (
                    f"SELECT {column}, id, body FROM {table} WHERE project = ? AND kind = 'record'{live} AND id IN ({marks}) "  # nosec B608 -- fixed names and '?' placeholders only
                    f"UNION ALL SELECT {column}, id, body FROM {table} WHERE project = ? AND kind = 'record'{live} "
                    f"AND {schema.VERSION_ROW} AND substr(id, 1, 64) IN ({marks})"
                )
                rows += [(table, int(k), str(i), str(b)) for k, i, b in tx.execute(sql, (project, *chunk, project, *chunk))]
        updates: dict[str, list[tuple[object, ...]]] = {"items": [], "held": []}
        for table, key, row_id, body in rows:
            skeleton = skeleton_body(body, seals[row_id[:64]][0])
            digest = body_digest(skeleton)
            updates[table].append((skeleton, digest, project, key) if table == "items" else (skeleton, digest, len(skeleton), project, key))
        with tx.pipeline():
            tx.executemany("UPDATE items SET body = ?, digest = ? WHERE project = ? AND seq = ?", updates["items"])
            tx.executemany("UPDATE held SET body = ?, digest = ?, body_bytes = ? WHERE project = ? AND hseq = ?", updates["held"])
        log.info("a redaction erased %d record(s) of a project: %d stored row(s) now hold skeletons", len(fresh), len(rows))
        return len(rows)

    def _scrub(self) -> None:
        """Best effort: push the bytes a redaction replaced out of the database's files (see Database.scrub)."""
        try:
            self._scrub_pending = not self.db.scrub()
        except Exception:  # the redaction is committed; this only tidies, and is tried again
            log.warning("scrubbing after a redaction failed; it is tried again after the next write", exc_info=True)
            self._scrub_pending = True

    def _hold(self, tx: Tx, acceptor: _Acceptor, waiting: Sequence[_Pending], next_hold: int) -> None:
        """Store items that cannot be accepted yet, each indexed by every dependency it still misses."""
        project = acceptor.project
        self._insert(
            tx,
            "INSERT INTO held (project, hseq, id, after_id, kind, parent, branch, digest, body, body_bytes, received_at)",
            [
                (project, next_hold + i, p.id, p.after, p.kind, p.parent, p.branch, p.digest, p.body, len(p.body), acceptor.now)
                for i, p in enumerate(waiting)
            ],
        )
        waits = [(project, p.id, missing) for p in waiting for missing in acceptor.missing(p)]
        self._insert(tx, "INSERT INTO held_waits (project, item_id, waits_for)", waits)

    def _release(self, tx: Tx, acceptor: _Acceptor) -> dict[str, int]:
        """Accept the held items that this push made ready, then those they made ready, in arrival order.

        Only the waiters of what was just accepted are read (and not their bodies, which are
        copied in SQL), so a project's other held items cost nothing here however many there are.
        Returns the released ids and their body sizes.
        """
        released: dict[str, int] = {}
        done = 0
        while done < len(acceptor.fresh):
            frontier, done = acceptor.fresh[done:], len(acceptor.fresh)
            for w in self._waiters(tx, acceptor.project, frontier):
                if w.id not in acceptor.known and all(met or acceptor.has(dep) for dep, met in w.waits):
                    acceptor.release(w.id, w.kind, w.branch)
                    released[w.id] = w.size
        return released

    def _waiters(self, tx: Tx, project: str, accepted: Sequence[str]) -> list[_Waiter]:
        """The unreleased held items waiting for any of ``accepted``, with all they wait for, by arrival."""
        found: dict[str, _Waiter] = {}
        for chunk in _chunks(sorted(set(accepted))):
            marks = ",".join("?" * len(chunk))
            sql = (
                "SELECT h.hseq, h.id, h.kind, h.branch, h.body_bytes, w.waits_for, "  # nosec B608 -- only '?' placeholders are interpolated
                "EXISTS (SELECT 1 FROM items i WHERE i.project = w.project AND i.id = w.waits_for) "
                "OR EXISTS (SELECT 1 FROM branches b WHERE b.project = w.project AND b.branch = w.waits_for) "
                "FROM held h JOIN held_waits w ON w.project = h.project AND w.item_id = h.id "
                "WHERE h.project = ? AND h.released = 0 AND h.id IN "
                f"(SELECT item_id FROM held_waits WHERE project = ? AND waits_for IN ({marks}))"
            )
            for hseq, item_id, kind, branch, size, dep, met in tx.execute(sql, (project, project, *chunk)):
                waiter = found.setdefault(str(item_id), _Waiter(int(hseq), str(item_id), str(kind), str(branch), int(size), []))
                if (str(dep), bool(met)) not in waiter.waits:
                    waiter.waits.append((str(dep), bool(met)))
        return sorted(found.values(), key=lambda w: w.hseq)

    def _check_quota(self, tx: Tx, project: str, held_count: int, released_bytes: int, quota: HeldQuota) -> None:
        """Raise QuotaExceeded if the project would hold more than ``quota`` after this push."""
        retry = "Nothing was stored: retry once the items they wait for have arrived"
        if held_count > quota.items:
            raise QuotaExceeded(
                f"this push would leave {held_count} items waiting for items not received yet (at most {quota.items}). {retry}"
            )
        rows = tx.execute("SELECT COALESCE(SUM(body_bytes), 0) FROM held WHERE project = ? AND released = 0", (project,))
        held_bytes = int(rows[0][0]) - released_bytes  # the released rows are marked only after this check
        if held_bytes > quota.bytes:
            raise QuotaExceeded(
                f"this push would leave {held_bytes} bytes of items waiting for items not received yet (at most {quota.bytes}). {retry}"
            )

    def _move(self, tx: Tx, acceptor: _Acceptor) -> None:
        """Copy released items from held into the pull order (in SQL: no body passes through Python), then mark them."""
        project = acceptor.project
        for chunk in _chunks(acceptor.moves):
            values = ",".join(["(?, ?)"] * len(chunk))
            sql = (
                f"WITH moved (id, seq) AS (VALUES {values}) "  # nosec B608 -- only '?' placeholders are interpolated
                "INSERT INTO items (project, seq, id, kind, digest, body, received_at) "
                "SELECT h.project, moved.seq, h.id, h.kind, h.digest, h.body, ? FROM moved JOIN held h ON h.project = ? AND h.id = moved.id"
            )
            tx.execute(sql, (*(v for move in chunk for v in move), acceptor.now, project))
            marks = ",".join("?" * len(chunk))
            # Marked, never deleted (no role may delete); the body now lives in items, so drop the copy.
            sql = f"UPDATE held SET released = 1, body = '' WHERE project = ? AND id IN ({marks})"  # nosec B608 -- only '?' placeholders are interpolated
            tx.execute(sql, (project, *(item_id for item_id, _ in chunk)))

    # -- pull and facts ----------------------------------------------------------------------

    def pull(self, project: str, cursor: int, limit: int) -> PullPage:
        """Accepted items after ``cursor``, in acceptance order."""
        with self.reads.reader() as tx:
            rows = tx.execute(
                "SELECT seq, body FROM items WHERE project = ? AND seq > ? ORDER BY seq LIMIT ?", (project, cursor, limit)
            )
            counters = tx.execute("SELECT next_seq FROM projects WHERE project = ?", (project,))
            held = tx.execute("SELECT COUNT(*) FROM held WHERE project = ? AND released = 0", (project,))[0][0]
        last = int(counters[0][0]) - 1 if counters else 0
        return PullPage([(int(seq), str(body)) for seq, body in rows], last, int(held))

    def counts(self, project: str) -> dict[str, int]:
        """Items accepted and held for a project (for tests, health and operators)."""
        with self.reads.reader() as tx:
            items = tx.execute("SELECT COUNT(*), COUNT(DISTINCT id) FROM items WHERE project = ?", (project,))[0]
            held = tx.execute("SELECT COUNT(*) FROM held WHERE project = ? AND released = 0", (project,))[0][0]
        return {"items": int(items[0]), "distinct": int(items[1]), "held": int(held)}

    def ping(self) -> None:
        with self.reads.reader() as tx:
            tx.execute("SELECT 1")


class _Acceptor:
    """Hands out sequence numbers to items whose dependencies are accepted, within one transaction."""

    def __init__(self, project: str, next_seq: int, known: set[str], branches: set[str]) -> None:
        self.project = project
        self.next_seq = next_seq
        self.known = known  # accepted item ids seen so far
        self.branches = branches  # branch ids with an accepted branch event
        self.fresh: list[str] = []  # ids and branch ids this transaction accepted, in order
        self.new_branches: list[str] = []
        self.inserts: list[tuple[object, ...]] = []  # new items accepted at once, with their bodies
        self.moves: list[tuple[str, int]] = []  # held items released: (id, seq)
        self.now = time.time()

    def has(self, dependency: str) -> bool:
        """Is this item id (64 hex) or branch id (32 hex) accepted in this transaction or looked up as accepted?"""
        return dependency in self.known or dependency in self.branches

    def missing(self, p: _Pending) -> list[str]:
        """What ``p`` still waits for: its predecessor, its parents, and for a record its branch."""
        needs = dict.fromkeys(d for d in (p.after, p.parent, *p.more_parents) if d)
        if p.kind == "record":
            needs[p.branch] = None
        return [d for d in needs if not self.has(d)]

    def try_accept(self, p: _Pending) -> bool:
        if self.missing(p):
            return False
        self.inserts.append((self.project, self._take(p.id, p.kind, p.branch), p.id, p.kind, p.digest, p.body, self.now))
        return True

    def release(self, item_id: str, kind: str, branch: str) -> None:
        self.moves.append((item_id, self._take(item_id, kind, branch)))

    def _take(self, item_id: str, kind: str, branch: str) -> int:
        seq = self.next_seq
        self.next_seq += 1
        self.known.add(item_id)
        self.fresh.append(item_id)
        if kind == "branch" and branch not in self.branches:
            self.branches.add(branch)
            self.new_branches.append(branch)
            self.fresh.append(branch)
        return seq
