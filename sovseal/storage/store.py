"""The local store: journal + lineage + sealing + the cross-process writer lock.

This is the engine's durable half. It knows keys, frames and branches; it does not embed,
index or rank (that is :mod:`sovseal.sdk.client` and :mod:`sovseal.recall.vector_index`). Every public method
either reads under the in-process mutex (never the file lock: readers do not block on a writer
in another process) or writes under both, re-reading the journal's tail first so that several
processes appending to one store form one chain per branch.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import hmac
import json
import logging
import math
import os
import threading
import time
import uuid
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sovseal.canonical import canonicalize, loads
from sovseal.crypto.primitives import record_fields_aad
from sovseal.crypto.sealing import Sealing
from sovseal.durable import atomic_write, fsync_dir, make_dirs
from sovseal.errors import (
    PASS_KEY_CLI,
    RUN_VERIFY,
    RUN_VERIFY_CLI,
    DamagedRecordError,
    ErasedError,
    HeadMovedError,
    IntegrityError,
    InvalidInputError,
    KeyUnavailableError,
    ReadOnlyStoreError,
    StorageError,
    UnknownBranchError,
    UnknownSnapshotError,
)
from sovseal.filelock import Exclusive, WriterLock

from . import frames as fr
from .entries import Entry, snapshot_id
from .journal import FORMAT, HEADER, JOURNAL_HEADER, Journal, JournalHeaderError, Order
from .lineage import Branch, Damage, Lineage, Node, kind_name
from .migration import migrate_journal
from .wire import WireItem

STORE_FORMAT = 1
DEFAULT_BRANCH = "main"
log = logging.getLogger(__name__)

_JOURNAL = "journal.log"
_LOCK = "LOCK"
_META = "store.json"
_COMPACTING = "journal.compacting"  # + ".<pid>.<token>.tmp": sovseal.storage.compaction's new journal
CHECKPOINT = Path("state") / "checkpoint"
#: What the checkpoint's arrays are (lineage, catalog, keyword index); raised when they change, so
#: a checkpoint written by another version is replaced, never misread.
CHECKPOINT_LAYOUT = 1
#: A checkpoint is written when this many records are past the last one (in the background, by
#: the recall engine), and on close when at least CHECKPOINT_ON_CLOSE are (docs/design.md).
CHECKPOINT_EVERY = 10_000
CHECKPOINT_ON_CLOSE = 1_000
_ACKS_PER_FRAME = 4096


def _cannot_write(directory: Path) -> bool:
    """Does an existing store live where this process cannot write (read-only volume or permissions)?"""
    journal = directory / _JOURNAL
    if not journal.is_file():
        return False
    return not (os.access(directory, os.W_OK) and os.access(journal, os.W_OK)) or _read_only_volume(directory)


def _read_only_volume(directory: Path) -> bool:
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _remove_stale(checkpoint: Path, age: float = 600.0) -> None:
    """Remove checkpoint files a killed writer left half-written (older than ``age`` seconds)."""
    try:
        leftovers = list(checkpoint.parent.glob(f"{checkpoint.name}.*.tmp"))
    except OSError:
        return
    for leftover in leftovers:
        try:
            if time.time() - leftover.stat().st_mtime > age:
                leftover.unlink()
        except OSError:
            pass


def parent_ids(sids: Iterable[str]) -> str:
    """The parent part of a snapshot id's hash input: the parents' ids, sorted, joined by ",".

    One parent gives its id unchanged (so every id of journal format 2 stays what it was); a
    genesis snapshot gives "".
    """
    return ",".join(sorted(sids))


class _NotYet(Exception):
    """An imported item refers to something not imported yet."""


def _depends_on(item: WireItem) -> set[str]:
    """The ids an imported item must find here before it applies: parents, target, erased records."""
    return {item.parent, *item.parents, *(wire for wire, _ in item.erased)} - {""}


def _set_aside(item: WireItem, set_aside: set[str], why: str) -> None:
    """Record a pulled item that does not authenticate (or depends on one that did not); log it once."""
    if item.id not in set_aside:
        set_aside.add(item.id)
        log.warning("pulled %s %s does not authenticate and was set aside (never applied): %s", item.kind, item.id, why)


#: How far ahead of this device's clock an imported time may be (clocks of two devices differ).
_CLOCK_SKEW = 86_400.0


def _clock(item: WireItem) -> int:
    """A format-3 item's clock: its time in µs (authenticated by the AAD once the item opens)."""
    hlc = round(item.created_at * 1e6) if math.isfinite(item.created_at) else 0
    if not 0 < hlc < fr.MAX_HLC:
        raise IntegrityError(f"replicated item {item.id} has the time {item.created_at!r}, not a clock value; it was not imported")
    return hlc


def _legacy_clock(item: WireItem) -> int:
    """A format-2 item's time, which nothing authenticates: refused unless plausible.

    Plausible: finite, from 2000-01-01 on, and at most a day ahead of this device's clock. A server
    that rewrote it to NaN, 1e300 or -1e12 gets the item refused instead of crashing every later read.
    """
    hlc = fr.legacy_hlc(item.created_at)
    if hlc == fr.UNKNOWN_HLC or item.created_at > time.time() + _CLOCK_SKEW:
        raise IntegrityError(
            f"replicated item {item.id} has the time {item.created_at!r}, which is not a plausible unix time; it was "
            "not imported (its time is not authenticated: it was stored by an older sovseal, and changed on the way)"
        )
    return hlc


@dataclass(frozen=True, slots=True)
class Opened:
    """A record that was opened and verified: its entry, snapshot id and parent's id."""

    node: Node
    entry: Entry
    snapshot_id: str
    parent_id: str | None


@dataclass(frozen=True, slots=True)
class Appended:
    node: Node
    snapshot_id: str
    reinforced: bool


class LocalStore:
    """One store directory, opened with one master key."""

    def __init__(self, directory: Path, master: bytes, *, lock_timeout: float = 10.0, read_only: bool | None = None) -> None:
        """Open (or create) the store in ``directory``.

        ``read_only``: None opens read-only when the store exists and its directory or journal
        cannot be written (a read-only volume, a mounted backup); True always does. A read-only
        store reads, recalls, verifies and exports; every write raises ReadOnlyStoreError. It
        cuts no torn tail and migrates nothing: it reads the journal as it is.
        """
        self.directory = directory
        self.lock_timeout = lock_timeout
        self.read_only = _cannot_write(directory) if read_only is None else read_only
        if self.read_only and not (directory / _JOURNAL).is_file():
            raise StorageError(errno.ENOENT, f"no sovseal store at {directory} to open read-only")
        if not self.read_only:
            make_dirs(directory)
        self.sealing = Sealing(master)
        self._key_confirmed = False  # store.json names this key's id (set by _check_meta)
        self._rotating_to: str | None = None  # store.json: a key rotation to this key id is unfinished
        self.store_uuid = self._check_meta()
        self._journal = Journal(directory / _JOURNAL, self.sealing.journal_key, read_only=self.read_only)
        self._flock = None if self.read_only else WriterLock(directory / _LOCK, lock_timeout)
        self._mutex = threading.RLock()
        self._batches = 0  # unsynced batches the mutex holder is inside: its appends wait for the outermost's fsync
        self._lineage = Lineage()
        self._end = 0
        self._last_frame = 0  # where the last frame before _end starts (0: none yet)
        #: The checkpoint this handle started from: its header, and its arrays until the recall
        #: engine takes the catalog's (:meth:`take_restored`). None: the journal was replayed whole.
        self.restored: dict[str, Any] | None = None
        self._restored_arrays: dict[str, Any] | None = None
        self.checkpointed = 0  # the nodes the newest checkpoint this handle read or wrote covers
        self.checkpoint_has_catalog = False  # ... and whether it holds the recall catalog
        self._sids: dict[int, str] = {}
        self._names: dict[bytes, str] = {}
        self.repairs: list[str] = []  # what recovery did on open, for status()
        self.versions_set_aside = 0  # pulled versions of held snapshots that did not authenticate
        self.rotated_to: str | None = None  # a pulled redaction said the store moved to this key id
        self.closed = False
        try:
            with self._mutex:
                self._restore()
            if self.read_only:
                with self._mutex:
                    self._catch_up(owner=False)  # read the journal as it is: nothing cut, nothing migrated
            else:
                with self._writing():
                    self._bind_meta()
                    if not self._lineage.unattributed_damage:  # never write into a journal that lost frames
                        self._ensure_branch(DEFAULT_BRANCH)
        except JournalHeaderError as exc:
            self.close()
            if exc.key_is_right:
                raise
            if self._rotating_to is not None:
                raise self._rotation_unfinished() from None
            if self._key_confirmed:
                raise IntegrityError(
                    f"the header of the journal in {directory} is damaged: store.json names this key, yet the header "
                    "does not authenticate under it. Nothing was changed; restore this store from a replica or backup."
                ) from None
            raise KeyUnavailableError(
                f"no frame of the journal in {directory} authenticates under this key: it is the wrong key (or the "
                "journal's header is damaged).",
                advice="Pass the store's own key.",
                cli_advice=PASS_KEY_CLI,
            ) from None
        except BaseException:
            self.close()
            raise

    # -- opening -------------------------------------------------------------------------

    def _check_meta(self) -> str:
        """Bind the directory to one key: opening with another key fails before anything is read."""
        meta_path = self.directory / _META
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        if "key_id" in meta:
            self._rotating_to = meta.get("rotating_to")
            # During a rotation the journal is under one of the two keys: the header decides which.
            self._key_confirmed = self.sealing.key_id in (meta["key_id"], self._rotating_to)
            if not self._key_confirmed:
                raise KeyUnavailableError(
                    f"the store at {self.directory} was created with key id {meta.get('key_id')}; the key given has id "
                    f"{self.sealing.key_id}.",
                    advice="Pass the store's own key (key=..., or the one in its keychain entry / key file).",
                    cli_advice=PASS_KEY_CLI,
                )
            return str(meta["store_uuid"])
        return str(meta.get("store_uuid") or uuid.uuid4())  # the key module may have written one

    def _bind_meta(self) -> None:
        """Record the key id of a new store, once its journal is known to authenticate under the key."""
        meta_path = self.directory / _META
        meta = json.loads(meta_path.read_text()) if meta_path.exists() else {}
        if "key_id" not in meta:
            meta = {"format": STORE_FORMAT, "store_uuid": self.store_uuid, "key_id": self.sealing.key_id}
            atomic_write(meta_path, json.dumps(meta, indent=2).encode())
        elif meta.get("rotating_to") == self.sealing.key_id:  # the journal is under the new key: finish the switch
            self.set_meta(key_id=self.sealing.key_id, rotating_to=None)
            self._rotating_to = None
            self.repairs.append("finished a key rotation interrupted after the journal was switched to this key")

    def set_meta(self, **fields: Any) -> None:
        """Change fields of ``store.json`` atomically (a None value removes the field)."""
        meta_path = self.directory / _META
        meta = json.loads(meta_path.read_text())
        for name, value in fields.items():
            if value is None:
                meta.pop(name, None)
            else:
                meta[name] = value
        atomic_write(meta_path, json.dumps(meta, indent=2).encode())

    def _rotation_unfinished(self) -> KeyUnavailableError:
        meta = json.loads((self.directory / _META).read_text())
        if self.sealing.key_id == self._rotating_to:
            return KeyUnavailableError(
                f"a rotation of the store at {self.directory} to this key (id {self.sealing.key_id}) stopped before the "
                f"switch: the store is still under key id {meta['key_id']}, unchanged. Open it with that key, or run "
                "`sovseal key rotate` to finish the rotation"
            )
        return KeyUnavailableError(
            f"the store at {self.directory} was rotated to key id {self._rotating_to}: open it with the new key (staged "
            "in its keychain entry or key file; `sovseal key rotate` finishes the switch)"
        )

    def close(self) -> None:
        with self._mutex:
            if not self.closed:
                self.closed = True
                self._journal.close()
                if self._flock is not None:
                    self._flock.close()

    # -- locking and catching up ---------------------------------------------------------

    def _writing(self) -> Exclusive:
        """``with``: the mutex and the writer lock, caught up with other writers (ReadOnlyStoreError if read-only)."""
        if self._flock is None:
            raise ReadOnlyStoreError(
                errno.EROFS,
                f"the store at {self.directory} is open read-only (its directory or journal cannot be written, or it was "
                "opened with read_only=True); nothing was stored. Reads, recall, verify and export work; to write, copy "
                "the store to a writable place and open the copy",
            )
        return Exclusive(self._mutex, self._flock, self._caught_up)

    def _caught_up(self) -> None:
        """Catch up on taking the writer lock; inside a batch this thread has held it all along, so
        nothing can have changed since the batch caught up."""
        if not self._batches:
            self._catch_up(owner=True)

    @contextmanager
    def reading(self) -> Iterator[Lineage]:
        with self._mutex:
            self._catch_up(owner=False)
            yield self._lineage

    def _catch_up(self, *, owner: bool) -> None:
        """Apply frames other processes appended; the lock owner also cuts a torn tail off.

        A journal that another process migrated or compacted (a new file at the path) is reopened
        and read from its start; the lock owner lets the writer lock go meanwhile, so other writers
        are not kept waiting by this handle's replay. A journal that is gone raises: nothing may be
        acknowledged into a file nobody will read again.
        """
        while self._journal.replaced():  # (again, if it was replaced once more while the lock was free)
            self._reopen_journal()
            if owner and self._flock is not None:
                self._flock.release()
                try:
                    self._catch_up(owner=False)
                finally:
                    self._flock.acquire()
        if self._journal.size() == self._end:
            if owner and self._journal.format != FORMAT and not self._lineage.unattributed_damage:
                self._migrate()
            return
        scan = self._journal.scan(self._end)
        decode = self.decode
        for frame in scan.frames:
            size = len(frame.body) + HEADER.size
            if frame.order is Order.REPEATED:  # already applied in its own place: never twice
                self._lineage.damage.append(Damage(frame.offset, "a frame appears again after its place (replayed or moved back)"))
                continue
            if frame.order is Order.AFTER_GAP:  # whatever was cut out or moved may have moved any HEAD
                self._lineage.unattributed(frame.offset, "frames before this one are missing or out of order")
            try:
                decoded = decode(frame.body)
            except ValueError:
                self._lineage.unattributed(frame.offset, "a frame could not be decoded")
                continue
            placed = (
                not frame.authentic
                and isinstance(decoded, fr.RecordFrame)
                and hmac.compare_digest(decoded.head_tag, self._journal.tag(frame.slot, self._head_bytes(frame.body)))
            )
            self._lineage.apply(decoded, frame.offset, size, frame.authentic, placed=placed)
        if scan.frames:
            self._last_frame = scan.frames[-1].offset
        self._end = scan.end
        if owner and scan.torn_tail:
            self.repairs.append(f"cut a torn tail of {scan.torn_tail} bytes left by an interrupted write")
            self._journal.truncate(scan.end)
        self._count_seals()
        if owner and self._journal.format != FORMAT and not self._lineage.unattributed_damage:
            self._migrate()

    # -- checkpoints -------------------------------------------------------------------------

    def _restore(self) -> None:
        """Start from ``state/checkpoint`` when it fits this journal (docs/design.md, "Checkpoints").

        Anything that does not fit (missing, damaged, another key, store or journal, a journal
        that no longer holds the frame it ends at) is ignored: the journal is then replayed whole.
        The caller holds the mutex; the writer lock is not needed, since nothing is written.
        """
        if not (self.directory / _JOURNAL).is_file():
            return
        if not self.read_only:
            _remove_stale(self.directory / CHECKPOINT)
            _remove_stale(self.directory / _COMPACTING)
            _remove_stale(self.directory / "journal.rotating")  # sovseal.storage.rotation's new journal
        if not (self.directory / CHECKPOINT).is_file():
            return  # a small store has none: nothing heavy (numpy) is imported to find that out
        from . import checkpoint as cp

        try:
            header, arrays = cp.read(self.directory / CHECKPOINT, self.sealing.keys.k_rest)
            if header.get("kind") != "store" or header.get("layout") != CHECKPOINT_LAYOUT:
                raise cp.CheckpointRefused("it was written by another version of sovseal")
            fits = (
                header.get("store_uuid") == self.store_uuid
                and self._journal.resume(
                    int(header["end"]), int(header["slot"]), int(header["last_offset"]), bytes.fromhex(header["last_mac"])
                )
                and self._journal.format == FORMAT
                and header.get("journal_id") == self._journal.journal_id.hex()
            )
            if not fits:
                raise cp.CheckpointRefused("it was made from another store or journal, or the journal changed under it")
            lineage = Lineage.from_arrays(arrays)
        except cp.CheckpointRefused as exc:
            log.debug("checkpoint not used: %s", exc)
            self._journal.forget_resume()
            return
        except (KeyError, ValueError, TypeError, IndexError) as exc:  # authentic, yet not what this version writes
            log.warning("checkpoint not used (%s); replaying the journal", exc)
            self._journal.forget_resume()
            return
        self._lineage = lineage
        self._end = int(header["end"])
        self._last_frame = int(header["last_offset"])
        self.restored = header
        self._restored_arrays = arrays
        self.checkpointed = int(header["nodes"])
        self.checkpoint_has_catalog = "c.state" in arrays
        self._count_seals()

    def audit_restored(self) -> list[Damage]:
        """Damage in the frames the checkpoint this handle started from covers (none without one).

        Such a handle never read those frames: bytes damaged since the checkpoint was written
        would go unseen, while an open without the checkpoint would find them. verify() calls
        this; record frames it skips, since verify() opens every record anyway.
        The caller holds the mutex.
        """
        if self.restored is None:
            return []
        records = {node.offset for node in self._lineage.nodes}
        found: list[Damage] = []
        for frame in self._journal.audit(int(self.restored["end"])):
            if frame.order is Order.REPEATED:
                found.append(Damage(frame.offset, "a frame appears again after its place (replayed or moved back)"))
            elif frame.order is Order.AFTER_GAP:
                found.append(Damage(frame.offset, "frames before this one are missing or out of order"))
            elif not frame.authentic and frame.offset not in records:
                try:
                    kind = kind_name(self.decode(frame.body))
                except ValueError:
                    kind = "journal"  # not even its kind can be read
                found.append(Damage(frame.offset, f"a {kind} frame failed authentication"))
        return found

    def take_restored(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """The checkpoint's header and arrays, once (the recall engine restores its catalog from them)."""
        with self._mutex:
            arrays, self._restored_arrays = self._restored_arrays, None
            return None if arrays is None or self.restored is None else (self.restored, arrays)

    def checkpoint_state(self) -> tuple[dict[str, Any], dict[str, Any]] | None:
        """(header, arrays) describing the lineage now, for a checkpoint; None when there is
        nothing a checkpoint could describe (an empty or damaged journal, a format-2 one).

        The caller holds the mutex (so that what it adds, the recall catalog, is of the same moment).
        """
        if self._last_frame == 0 or self._journal.format != FORMAT or self._lineage.damage:
            return None
        head = os.pread(self._journal.fileno(), HEADER.size, self._last_frame)
        _, mac, _seq = HEADER.unpack(head)
        header = {
            "kind": "store",
            "layout": CHECKPOINT_LAYOUT,
            "store_uuid": self.store_uuid,
            "journal_id": self._journal.journal_id.hex(),
            "end": self._end,
            "slot": self._journal.next_seq(self._end),
            "last_offset": self._last_frame,
            "last_mac": mac.hex(),
            "nodes": len(self._lineage.nodes),
        }
        return header, self._lineage.to_arrays()

    def write_checkpoint(self, add_arrays: Any = None) -> int | None:
        """Write ``state/checkpoint`` for the lineage as it is now; returns the frames it covers.

        ``add_arrays(header, arrays)``, called under the store's lock, may add arrays of its own (the
        recall catalog). None when nothing was written (read-only, empty, or damaged).
        """
        if self.read_only or self.closed:
            return None
        with self._mutex:
            self._catch_up(owner=False)
            state = self.checkpoint_state()
            if state is None:
                return None
            header, arrays = state
            if add_arrays is not None:
                add_arrays(header, arrays)
        from . import checkpoint as cp

        cp.write(self.directory / CHECKPOINT, self.sealing.keys.k_rest, header, arrays)
        self.checkpointed = max(self.checkpointed, int(header["nodes"]))
        self.checkpoint_has_catalog = "c.state" in arrays
        return int(header["nodes"])

    def checkpoint_if_due(self, least: int, *, add_arrays: Any = None, catalog: bool = False) -> None:
        """:meth:`write_checkpoint` when ``least`` records or more are past the last checkpoint
        (``catalog``: or it lacks the catalog ``add_arrays`` adds and the store has that many).

        Failures are logged, never raised: a checkpoint is only ever a cache.
        """
        if self.read_only or self.closed:
            return
        try:
            with self.reading() as lineage:
                size = len(lineage.nodes)
            lacking = catalog and not self.checkpoint_has_catalog and size >= least
            if size - self.checkpointed >= least or lacking:
                self.write_checkpoint(add_arrays)
        except Exception as exc:  # noqa: BLE001 - a store without a checkpoint only opens slower
            if not self.closed:
                log.warning("writing the checkpoint failed (the store opens by replaying its journal): %s", exc)

    def _migrate(self) -> None:
        """Rewrite a format-2 journal as the current format (:mod:`sovseal.storage.migration`).

        The caller holds the writer lock and has caught up. A journal with damage is not migrated:
        it stays readable, and writes to it are refused until it is restored.
        """
        if self._lineage.damage:
            return
        count = migrate_journal(self._journal, self.sealing.journal_key)
        self._reopen_journal()
        self.repairs.append(f"migrated the journal from format 2 to format {FORMAT} ({count} frames)")
        self._catch_up(owner=True)

    def decode(self, body: bytes) -> fr.Frame:
        """Decode a frame body of this store's journal, in the journal's format (ValueError if malformed)."""
        return fr.decode(body) if self._journal.format == FORMAT else fr.decode_v2(body)

    def _head_bytes(self, body: bytes) -> bytes:
        """The head of a record frame's body, as its head tag covers it in this journal's format."""
        if self._journal.format == FORMAT:
            return bytes(body[: fr.RecordFrame.head_size(body)])
        return fr.v2_record_head(body)

    def _reopen_journal(self) -> None:
        """The journal file was replaced (migrated or compacted by another process): read the new one."""
        path = self._journal.path
        if not path.exists():
            raise StorageError(
                f"the journal {path} was deleted or moved while this store was open; nothing more is stored through "
                "this handle. If the store directory was removed on purpose, close the handle; otherwise restore it "
                "from a replica or backup"
            )
        self._journal.close()
        self._journal = Journal(path, self.sealing.journal_key, read_only=self.read_only)
        self._lineage = Lineage()
        self._end = 0
        self._last_frame = 0
        self._sids.clear()

    def _check_still_there(self) -> None:
        """After an append: refuse to acknowledge it if the journal is no longer the store's file."""
        if self._journal.replaced():
            raise StorageError(
                f"the journal {self._journal.path} was deleted or replaced while this store was open: the last write "
                "went into a file the store no longer has, so it was not stored. Reopen the store (restore it first "
                "if its directory was removed) and store again"
            )

    def _count_seals(self) -> None:
        """Count the seals the journal holds (other processes seal with the same keys too)."""
        self.sealing.sync.observe(self._lineage.sync_seals)
        self.sealing.rest.observe(self._lineage.rest_seals)

    # -- identifiers (keyed: see sovseal.crypto.sealing) ----------------------------------------

    def wire_id(self, sid: str) -> bytes:
        return self.sealing.wire_id(sid)

    def path_hash(self, path: str) -> bytes:
        return self.sealing.path_hash(path)

    def branch_id(self, name: str) -> bytes:
        return self.sealing.branch_id(name)

    # -- reading -------------------------------------------------------------------------

    def branch(self, name: str) -> Branch:
        branch = self._lineage.branches.get(self.branch_id(name))
        if branch is None or branch.deleted:
            if self._lineage.unattributed_damage:
                raise IntegrityError(
                    f"no branch {name!r} can be trusted: the journal has damage that may have held it",
                    advice=RUN_VERIFY,
                    cli_advice=RUN_VERIFY_CLI,
                )
            raise UnknownBranchError(
                f"no branch named {name!r}",
                advice="list them with branches()",
                cli_advice="list branches with `sovseal branches`",
            )
        if not branch.authentic:
            raise IntegrityError(f"the HEAD of branch {name!r} failed authentication", advice=RUN_VERIFY, cli_advice=RUN_VERIFY_CLI)
        return branch

    def branch_names(self) -> list[str]:
        return sorted(self._branch_name(b) for b in self._lineage.branches.values() if not b.deleted)

    def _branch_name(self, branch: Branch) -> str:
        name = self._names.get(branch.branch_id)
        if name is None:
            name = str(self._open_branch_event(branch.created_by)["branch"])
            self._names[branch.branch_id] = name
        return name

    def _tick(self) -> int:
        """A clock value for a new frame: now, in µs, and above every frame this store has seen.

        The caller holds the writer lock and has caught up, so the clock rises across processes too.
        """
        return max(int(time.time() * 1e6), self._lineage.max_hlc + 1)

    def _open_branch_event(self, frame: fr.BranchFrame) -> dict[str, Any]:
        event = loads(self.sealing.unseal(frame.sealed_event, self.sealing.branch_aad(frame), frame.flags))
        if not isinstance(event, dict) or self.branch_id(str(event.get("branch"))) != frame.branch_id:
            raise IntegrityError("a branch event does not match its keyed branch id", advice=RUN_VERIFY, cli_advice=RUN_VERIFY_CLI)
        return event

    def sid_of(self, idx: int) -> str:
        """The snapshot id of a node, opened from its sealed copy and checked against its wire id."""
        sid = self._sids.get(idx)
        if sid is None:
            node = self._lineage.nodes[idx]
            sid = self.sealing.open_sid(node.sealed_sid, node.wire_id)
            if self.wire_id(sid) != node.wire_id:
                raise IntegrityError(f"snapshot {sid} does not match its keyed id", advice=RUN_VERIFY, cli_advice=RUN_VERIFY_CLI)
            self._sids[idx] = sid
        return sid

    def parent_id(self, idx: int) -> str | None:
        """The parent part of a node's snapshot id: its parent's id, several joined, None for a genesis."""
        node = self._lineage.nodes[idx]
        if node.parent < 0:
            return None
        return self.sid_of(node.parent) if not node.more_parents else parent_ids(self.sid_of(p) for p in node.parents)

    def order(self, idx: int) -> tuple[int, bytes]:
        """How heads and competing writes are ordered, newest last: (clock, wire id)."""
        return self._lineage.order(idx)

    def resolve(self, sid: object) -> int:
        if not isinstance(sid, str) or not sid.startswith("snap_"):
            raise InvalidInputError(f"a snapshot id looks like 'snap_<64 hex>'; got {sid!r}")
        idx = self._lineage.by_wire.get(self.wire_id(sid))
        if idx is None:
            raise UnknownSnapshotError(
                f"no snapshot {sid} in this store",
                advice="list snapshots with log()",
                cli_advice="list snapshots with `sovseal log --graph`",
            )
        return idx

    def recheck_ids(self, sids: Iterable[str]) -> None:
        """:meth:`recheck` records by snapshot id under one hold of the lock.

        A record this handle already knows needs no catch-up with other writers first: its frame
        stays where it was written, and a journal cut short or rewritten under it fails the re-read.
        """
        with self._mutex:
            for sid in sids:
                try:
                    idx = self.resolve(sid)
                except UnknownSnapshotError:
                    self._catch_up(owner=False)  # written by another process since this handle last looked
                    idx = self.resolve(sid)
                self.recheck(idx)

    def recheck(self, idx: int) -> bytes:
        """Re-read one record's frame and check its MAC; returns the frame body. IntegrityError if altered."""
        node = self._lineage.nodes[idx]
        where = f"the record at journal byte {node.offset}"
        if not node.authentic:
            raise IntegrityError(f"{where} failed authentication (it was altered on disk)", advice=RUN_VERIFY, cli_advice=RUN_VERIFY_CLI)
        authentic, body = self._journal.read_frame(node.offset, node.size)
        if not authentic:
            raise IntegrityError(f"{where} changed on disk after the store was opened", advice=RUN_VERIFY, cli_advice=RUN_VERIFY_CLI)
        return body

    def open(self, idx: int) -> Opened:
        """Decrypt one record and re-derive its snapshot id; anything off raises IntegrityError.

        An erased record raises ErasedError: its content is gone (or about to be, at compaction).
        """
        node = self._lineage.nodes[idx]
        if node.redacted:
            raise ErasedError(f"snapshot {self.sid_of(idx)} was erased by a purge; its content is gone for good")
        try:
            return self._open(idx)
        except IntegrityError as exc:
            raise DamagedRecordError(exc.message, offset=node.offset, snapshot_id=self.sid_of(idx), path=self._path_of(idx)) from None

    def _holds(self, idx: int, canonical: bytes) -> bool:
        """Whether record ``idx`` holds the entry ``canonical`` (storing it again reinforces it).
        A damaged record holds nothing that can be read: a new version replaces it at HEAD."""
        try:
            return self.open(idx).entry.canonical() == canonical
        except DamagedRecordError:
            return False

    def _path_of(self, idx: int) -> str | None:
        """The path of a damaged record, from another version of it that opens (None: none does)."""
        node = self._lineage.nodes[idx]
        for other in self._lineage.nodes.with_paths({node.path_hash}):
            if other != idx and not self._lineage.nodes[other].redacted:
                with contextlib.suppress(IntegrityError):
                    return self._open(other).entry.path
        return None

    def _open(self, idx: int) -> Opened:
        node = self._lineage.nodes[idx]
        where = f"the record at journal byte {node.offset}"
        frame = self.decode(self.recheck(idx))
        if not isinstance(frame, fr.RecordFrame):  # an authentic frame of another kind where a record should be
            raise IntegrityError(f"{where} is not a record frame", advice=RUN_VERIFY, cli_advice=RUN_VERIFY_CLI)
        if frame.hlc == fr.UNKNOWN_HLC:
            raise IntegrityError(
                f"{where} has a time that is not a plausible unix time (it came so from a server)",
                advice=RUN_VERIFY,
                cli_advice=RUN_VERIFY_CLI,
            )
        canonical = self.sealing.unseal(frame.sealed_entry, self.sealing.record_aad(frame), frame.flags)
        parent_id = self.parent_id(idx)
        sid = snapshot_id(canonical, parent_id or "")
        if self.wire_id(sid) != node.wire_id or self.sid_of(idx) != sid:
            raise IntegrityError(f"{where} does not re-derive its snapshot id", advice=RUN_VERIFY, cli_advice=RUN_VERIFY_CLI)
        entry = Entry.from_canonical(canonical)
        if self.path_hash(entry.path) != node.path_hash or (entry.op == "delete") != (node.op is fr.Op.DELETE):
            raise IntegrityError(f"{where} does not match its keyed path or operation", advice=RUN_VERIFY, cli_advice=RUN_VERIFY_CLI)
        return Opened(node, entry, sid, parent_id)

    # -- writing -------------------------------------------------------------------------

    def _append(self, frames: list[fr.Frame]) -> None:
        """Append ``frames`` in one write and apply them to the lineage; fsynced at once, or, inside
        :meth:`unsynced_batch`, by the batch's one fsync at its end.

        Each record frame is tagged for the place it takes (:meth:`Journal.tag`). The caller holds
        the writer lock and has caught up, so the journal ends at ``self._end``: the frames are
        numbered from there, and the journal refuses the write if it does not end there after all.
        What was written is applied from the frames in memory: re-reading it would only find these
        same bytes.
        """
        if self._journal.format != FORMAT:
            raise StorageError(
                f"the journal {self._journal.path} is in format {self._journal.format} and has damage, so it was not "
                f"migrated to format {FORMAT}; nothing was stored. Run `sovseal verify` to see the damage, then restore "
                "the store from a replica or backup (reads of undamaged paths still work)"
            )
        first = self._journal.next_seq(self._end)
        bodies = [self._encode(frame, first + i) for i, frame in enumerate(frames)]
        start = self._journal.append(bodies, sync=not self._batches, expect=self._end)
        self._check_still_there()
        offset = max(start, JOURNAL_HEADER.size)  # a new journal's header went in the same write
        for frame, body in zip(frames, bodies, strict=True):
            size = len(body) + HEADER.size
            self._lineage.apply(frame, offset, size, True)
            self._last_frame = offset
            offset += size
        self._end = offset
        self._count_seals()

    def _encode(self, frame: fr.Frame, seq: int) -> bytes:
        """A frame's body for the place numbered ``seq``: a record's head is tagged for that place."""
        if isinstance(frame, fr.RecordFrame):
            return frame.encode_tagged(lambda head: self._journal.tag(seq, head))
        return frame.encode()

    def _branch_frame(self, reason: fr.BranchReason, name: str, head: int) -> fr.BranchFrame:
        """A branch event setting ``name``'s HEAD to node ``head`` (-1: none), replacing its current head."""
        branch_id = self.branch_id(name)
        branch = self._lineage.branches.get(branch_id)
        after = branch.replaceable if branch is not None else ()
        head_wire = self._lineage.nodes[head].wire_id if head >= 0 else fr.NO_ID
        frame = fr.BranchFrame(reason, self._tick(), branch_id, head_wire, b"", after=after)
        event = {"branch": name, "head": self.sid_of(head) if head >= 0 else None, "reason": reason.name.lower(), "at": frame.created_at}
        return dataclasses.replace(frame, sealed_event=self.sealing.seal(canonicalize(event), self.sealing.branch_aad(frame)))

    def _ensure_branch(self, name: str) -> None:
        if self.branch_id(name) not in self._lineage.branches:
            self._append([self._branch_frame(fr.BranchReason.CREATE, name, -1)])

    def append(
        self, branch_name: str, entry: Entry, *, parent: str | None = None, if_heads: Mapping[str, str | frozenset[str]] | None = None
    ) -> Appended | None:
        """Append ``entry`` to a branch, durably.

        Storing the visible value reinforces it instead; deleting a path that is not visible
        appends nothing and returns None. ``if_heads`` ({branch name: snapshot id}): append only
        if each of those branches' HEAD is still that snapshot (checked under the writer lock, after
        catching up with other writers), else raise HeadMovedError and append nothing.
        """
        with self._writing():
            if if_heads:
                self._check_heads(if_heads)
            return self._append_entry(branch_name, entry, parent)

    def _check_heads(self, if_heads: Mapping[str, str | frozenset[str]]) -> None:
        """HeadMovedError unless each named branch's HEAD is the snapshot given, or (a set of ids) its
        heads are exactly those (caller holds the writer lock)."""
        for name, expected in if_heads.items():
            branch = self.branch(name)
            if isinstance(expected, frozenset):
                found: object = frozenset(self.sid_of(t) for t in branch.heads.values() if t >= 0)
            else:
                found = self.sid_of(branch.head) if branch.head >= 0 else None
            if found != expected:
                raise HeadMovedError(
                    f"the HEAD of branch {name!r} is no longer what the caller saw: another writer (or a pull) changed "
                    "the branch; nothing was stored. Read the branch again and retry"
                )

    def append_many(self, branch_name: str, entries: list[Entry]) -> list[Appended | None]:
        """Append ``entries`` in order, each as :meth:`append` would, with one fsync for all.

        Nothing is acknowledged before this returns, so one fsync at the end gives every entry
        the durability of its own fsync at a fraction of the cost. If an entry fails, the ones
        before it are still made durable and the error propagates: a batch keeps a prefix.
        """
        with self.unsynced_batch():
            return [self._append_entry(branch_name, entry, None) for entry in entries]

    @contextmanager
    def unsynced_batch(self) -> Iterator[None]:
        """``with``: hold the mutex and the writer lock; every append inside waits for one fsync at the end.

        Nothing written inside is durable before the block ends, so the caller acknowledges none of
        it before then; other threads' reads and writes wait on the mutex meanwhile, so nobody sees
        a write before it is durable. A batch inside another adds its appends to the outer one's fsync.

        If that fsync fails the batch may never reach the disk, yet this handle has already
        applied it (and would skip it on a retry as "already here"): it is cut off and the handle
        closes, so a reopen sees only durable frames.
        """
        lost_batch = False
        try:
            with self._writing():
                start = self._end
                self._batches += 1
                try:
                    yield
                finally:
                    self._batches -= 1
                    if not self._batches:
                        try:
                            self._journal.sync()
                        except StorageError:
                            self._journal.cut_back(start)
                            lost_batch = True
                            raise
        finally:
            if lost_batch:
                self.close()

    def _append_entry(self, branch_name: str, entry: Entry, parent: str | None) -> Appended | None:
        """The body of :meth:`append`; the caller holds the writer lock.

        Without ``parent`` the record goes on *every* head of the branch: its parents are all their
        snapshots, so a branch that a pull left with several heads is merged by this write
        (docs/design.md, "Branches with several heads"). Either way it replaces every head.
        """
        canonical = entry.canonical()
        branch = self.branch(branch_name)
        nodes = self._lineage.nodes
        if parent is None:
            heads = branch.heads
            if len(heads) == 1:  # the usual branch: one head, nothing to sort
                targets = [t for t in heads.values() if t >= 0]
            else:
                targets = sorted({t for t in heads.values() if t >= 0}, key=lambda t: nodes[t].wire_id)
        else:
            targets = [self.resolve(parent)]
        path_hash = self.path_hash(entry.path)
        if parent is None or (len(branch.heads) == 1 and targets == [branch.head]):
            visible = self._lineage.view(branch).get(path_hash)
            if visible is None and entry.op == "delete":
                return None  # nothing to delete: a tombstone would change nothing
            if visible is not None and entry.op == "store" and self._holds(visible, canonical):
                frame = fr.ReinforceFrame(self._tick(), nodes[visible].wire_id, b"")
                event = canonicalize({"reinforce": self.sid_of(visible), "at": frame.at})
                sealed = self.sealing.seal(event, self.sealing.reinforce_aad(frame))
                self._append([dataclasses.replace(frame, sealed_event=sealed)])
                return Appended(nodes[visible], self.sid_of(visible), reinforced=True)
        sid = snapshot_id(canonical, self.sid_of(targets[0]) if len(targets) == 1 else parent_ids(self.sid_of(t) for t in targets))
        wire = self.wire_id(sid)
        existing = self._lineage.by_wire.get(wire)
        if existing is not None:
            # Same entry on the same parents: the snapshot already exists (a retried store, or a
            # replay after rollback). Ids are deterministic, so HEAD moves to it; nothing is duplicated.
            self._append([self._branch_frame(fr.BranchReason.ADVANCE, branch_name, existing)])
            return Appended(nodes[existing], sid, reinforced=False)
        parents = tuple([nodes[t].wire_id for t in targets])
        replaces = branch.replaceable
        explicit = replaces != parents
        op = fr.Op.DELETE if entry.op == "delete" else fr.Op.STORE
        hlc = self._tick()
        flags = int(fr.Flag.EXPLICIT_AFTER) if explicit else 0  # a plain int, as decoded frames carry it
        after = replaces if explicit else ()
        sealed_sid = self.sealing.seal_sid(sid, wire)
        # The AAD of the clear fields, as Sealing.record_aad computes it from the frame when it is read.
        aad = record_fields_aad(self.sealing.key_id, wire, parents, flags, hlc, branch.branch_id, path_hash, after)
        sealed = self.sealing.seal(canonical, aad)
        record = fr.RecordFrame(op, hlc, wire, parents, branch.branch_id, path_hash, sealed_sid, sealed, flags, after)
        self._append([record])
        idx = self._lineage.by_wire[wire]
        self._sids[idx] = sid
        return Appended(nodes[idx], sid, reinforced=False)

    def create_branch(self, name: str, at: str | None) -> None:
        """A new branch at snapshot ``at`` (None: empty). A deleted name is created again: its
        create event replaces the delete."""
        with self._writing():
            existing = self._lineage.branches.get(self.branch_id(name))
            if existing is not None and not existing.deleted:
                raise InvalidInputError(f"a branch named {name!r} already exists; pick another name")
            head = self.resolve(at) if at is not None else -1
            self._append([self._branch_frame(fr.BranchReason.CREATE, name, head)])

    def delete_branch(self, name: str) -> None:
        """A delete event replacing every head of ``name``: the branch points at nothing and is no
        longer listed. Its records stay in the lineage (reachable from other branches or not)."""
        with self._writing():
            self.branch(name)
            self._append([self._branch_frame(fr.BranchReason.DELETE, name, -1)])

    def move_head(self, name: str, sid: str) -> None:
        with self._writing():
            self.branch(name)
            idx = self.resolve(sid)
            self._append([self._branch_frame(fr.BranchReason.ROLLBACK, name, idx)])

    # -- the journal file, for compaction (sovseal.storage.compaction) -------------------------------

    @property
    def journal_path(self) -> Path:
        return self._journal.path

    @property
    def journal_key(self) -> bytes:
        return self.sealing.journal_key

    def journal_size(self) -> int:
        return self._journal.size()

    def journal_end(self) -> int:
        """Where the last whole frame this handle has read ends (the caller holds the mutex)."""
        return self._end

    def writing(self) -> Exclusive:
        """``with``: hold the writer lock, caught up with every other writer."""
        return self._writing()

    def check_compactable(self) -> None:
        """StorageError unless the journal can be rewritten: writable, current format, no damage."""
        with self.writing():
            if self._journal.format != FORMAT:
                raise StorageError("the journal is in an older format with damage and was not migrated; it cannot be compacted")
            if self._lineage.damage:
                raise StorageError(
                    f"the journal {self._journal.path} has damage; compaction never rewrites it. Run `sovseal verify`, then "
                    "restore the store from a replica or backup"
                )

    def replace_journal(self, new: Path, sealing: Sealing | None = None) -> None:
        """Put a rewritten journal in place of this one (the caller holds the writer lock).

        The checkpoint goes first (it names the old journal and may hold erased paths), then the
        rename and the directory fsync; this handle then reads the new journal from its start,
        under ``sealing`` when the new journal is under another key (a rotation).
        """
        (self.directory / CHECKPOINT).unlink(missing_ok=True)
        self.checkpointed, self.checkpoint_has_catalog = 0, False
        os.replace(new, self._journal.path)
        fsync_dir(self.directory)
        if sealing is not None:
            self.sealing = sealing
            self._names.clear()
        # This handle reads the new journal on its next call (Journal.replaced() says it is new), as
        # other processes do: not now, while every writer waits for the lock.

    # -- erasure (docs/design.md, "Redaction skeletons") ------------------------------------

    def open_redaction(self, where: tuple[int, int]) -> tuple[fr.RedactionFrame, dict[str, Any]]:
        """The redaction frame at ``where`` (offset, size) and its opened body; IntegrityError if altered."""
        authentic, body = self._journal.read_frame(*where)
        if not authentic:
            raise IntegrityError(
                f"the redaction at journal byte {where[0]} failed authentication",
                advice=RUN_VERIFY,
                cli_advice=RUN_VERIFY_CLI,
            )
        frame = self.decode(body)
        if not isinstance(frame, fr.RedactionFrame):
            raise IntegrityError(f"journal byte {where[0]} is not a redaction frame", advice=RUN_VERIFY, cli_advice=RUN_VERIFY_CLI)
        return frame, self._open_redaction_body(frame)

    def _open_redaction_body(self, frame: fr.RedactionFrame) -> dict[str, Any]:
        body = loads(self.sealing.unseal(frame.sealed_body, self.sealing.redaction_aad(frame), frame.flags))
        if not isinstance(body, dict):
            raise IntegrityError("a redaction's body is not an object; it was not applied")
        named = {self.wire_id(str(sid)) for sid in body.get("purged", ())}
        if named != set(frame.wire_ids) or len(body.get("purged", ())) != len(frame.erased):
            raise IntegrityError("a redaction does not name exactly the records it erases; it was not applied")
        return dict(body)

    def _skeleton_of(self, frame: fr.RecordFrame) -> fr.RecordFrame:
        """The skeleton of an erased record whose frame still holds its content, from its redaction's seal."""
        redaction, _ = self.open_redaction(self._lineage.redactions[frame.wire_id])
        return frame.skeleton(dict(redaction.erased)[frame.wire_id])

    def erasure(self, idx: int) -> dict[str, Any]:
        """Check an erased record end to end and say who erased it: ``{"sid", "op", "at", "reason",
        "redaction", ...}`` (the redaction's body less its list). IntegrityError if anything is off.

        Its frame is a skeleton whose seal opens under its clear fields and names its snapshot id, or
        (not compacted yet) a record that still opens; either way an authentic redaction names it.

        Devices that purged one path concurrently each erased the record with a redaction (and a
        seal) of their own, and each compacted to its own skeleton; once synced, every device holds
        all of them. Every redaction naming the record must open, and the skeleton must be the one
        one of them made. The redaction reported is the earliest (by clock, then event id): the
        same on every device, whichever skeleton it holds.
        """
        node = self._lineage.nodes[idx]
        frame = self.decode(self.recheck(idx))
        if not isinstance(frame, fr.RecordFrame):
            raise IntegrityError(f"journal byte {node.offset} is not a record frame", advice=RUN_VERIFY, cli_advice=RUN_VERIFY_CLI)
        sid = self.sid_of(idx)
        where = self._lineage.redactions.get(node.wire_id)
        if where is None:
            raise IntegrityError(f"snapshot {sid} is a skeleton that no redaction names", advice=RUN_VERIFY, cli_advice=RUN_VERIFY_CLI)
        opened = [self.open_redaction(place) for place in (where, *self._lineage.redacted_again.get(node.wire_id, ()))]
        if frame.redacted:
            if not any(dict(redaction.erased)[node.wire_id] == frame.sealed_entry for redaction, _ in opened):
                raise IntegrityError(
                    f"the skeleton of snapshot {sid} is not the one its redaction made",
                    advice=RUN_VERIFY,
                    cli_advice=RUN_VERIFY_CLI,
                )
            op = self.sealing.open_skeleton(frame, frame.sealed_entry)["op"]
        else:
            op = self._open(idx).entry.op
        if ("delete" if node.op is fr.Op.DELETE else "store") != op:
            raise IntegrityError(
                f"the skeleton of snapshot {sid} does not match its operation",
                advice=RUN_VERIFY,
                cli_advice=RUN_VERIFY_CLI,
            )
        redaction, body = min(opened, key=lambda pair: (pair[0].hlc, pair[0].event_id))
        body.pop("purged", None)
        return {"sid": sid, "op": op, "redaction": redaction.event_id.hex(), **body}

    def purge(self, select: Any, description: Mapping[str, Any]) -> tuple[list[str], bool]:
        """Erase records for good: append redaction frames naming them (and their skeleton seals).

        ``select(lineage)`` names the nodes, under the writer lock after catching up (so what another
        process acknowledged before is included). Returns the snapshot ids erased ([] when every one
        was already) and whether ``select`` named any node at all. The content stays in the journal
        until :func:`sovseal.storage.compaction.compact`.
        """
        with self._writing():
            lineage = self._lineage
            named = set(select(lineage))
            targets = sorted(idx for idx in named if not lineage.nodes[idx].redacted)
            erased: list[str] = []
            for start in range(0, len(targets), fr.MAX_ERASED):
                frame, sids = self.redaction_frame(targets[start : start + fr.MAX_ERASED], description)
                self._append([frame])
                erased += sids
            return erased, bool(named)

    def purged_under(self, prefixes: Iterable[str]) -> bool:
        """Whether a purge already erased a path under one of ``prefixes`` (here, or on a device
        whose redaction was pulled): its redaction's body names that path, or a prefix within one.

        Paths are stored keyed, so once erased a path under a prefix is listed nowhere; only the
        redaction bodies still say what a purge named. A purge by prefix run again (to finish one a
        crash cut short before its rewrite) matches nothing else, yet it is no unknown path.
        """
        wanted = tuple(prefixes)
        with self.reading() as lineage:
            for where in sorted({*lineage.redactions.values(), *(w for later in lineage.redacted_again.values() for w in later)}):
                try:
                    _, body = self.open_redaction(where)
                except IntegrityError:
                    continue  # verify() reports it; what it names cannot be trusted
                named = [body.get("path"), body.get("prefix"), *body.get("paths", ()), *body.get("prefixes", ())]
                if any(isinstance(each, str) and each.startswith(wanted) for each in named):
                    return True
        return False

    def redaction_frame(self, targets: list[int], description: Mapping[str, Any]) -> tuple[fr.RedactionFrame, list[str]]:
        """A sealed redaction frame erasing the nodes ``targets`` (at most MAX_ERASED), not appended,
        and their snapshot ids. The caller holds the writer lock."""
        pairs: list[tuple[bytes, bytes]] = []
        sids: list[str] = []
        for idx in targets:
            node = self._lineage.nodes[idx]
            frame = self.decode(self.recheck(idx))
            if not isinstance(frame, fr.RecordFrame):
                raise IntegrityError(f"journal byte {node.offset} is not a record frame", advice=RUN_VERIFY, cli_advice=RUN_VERIFY_CLI)
            sid = self.sid_of(idx)
            op = "delete" if node.op is fr.Op.DELETE else "store"
            skeleton = canonicalize({"sid": sid, "op": op, "redacted": True})
            pairs.append((node.wire_id, self.sealing.seal(skeleton, self.sealing.skeleton_aad(frame))))
            sids.append(sid)
        redaction = fr.RedactionFrame(self._tick(), tuple(pairs), b"")
        body = canonicalize({**description, "purged": sids, "at": redaction.at})
        return dataclasses.replace(redaction, sealed_body=self.sealing.seal(body, self.sealing.redaction_aad(redaction))), sids

    def lineage_now(self) -> Lineage:
        """The lineage as it is (the caller holds the writer lock, so it is caught up and stays so)."""
        return self._lineage

    def sid_of_wire(self, wire: bytes) -> str:
        return self.sid_of(self._lineage.by_wire[wire])

    # -- replication: the outbox out, acks in, items from another device in ----------------

    def outbox(self, limit: int) -> list[WireItem]:
        """Up to ``limit`` unacknowledged items, oldest first, with the exact bytes first stored."""
        with self.reading() as lineage:
            out: list[WireItem] = []
            for offset, size in lineage.pending.first(limit):
                _, body = self._journal.read_frame(offset, size)
                out.append(self.wire_item(self.decode(body)))
            return out

    def export_all(self) -> list[WireItem]:
        """Every replicable frame as a wire item, acknowledged or not, in journal order."""
        with self.reading():
            scan = self._journal.scan(0)
            out: list[WireItem] = []
            for frame in scan.frames:
                if frame.offset >= self._end:
                    break
                if not frame.authentic:
                    raise IntegrityError(
                        f"journal byte {frame.offset} failed authentication",
                        advice="run verify() before exporting",
                        cli_advice=RUN_VERIFY_CLI,
                    )
                decoded = self.decode(frame.body)
                if not isinstance(decoded, fr.AckFrame):
                    out.append(self.wire_item(decoded))
            return out

    def wire_item(self, frame: fr.Frame) -> WireItem:
        """A replicable frame as the item the server receives (an erased record: its skeleton)."""
        if isinstance(frame, fr.RecordFrame) and not frame.redacted and frame.wire_id in self._lineage.redactions:
            frame = self._skeleton_of(frame)  # erased, not compacted yet: its content never leaves again
        if isinstance(frame, fr.RedactionFrame):
            return WireItem(
                "redaction",
                frame.event_id.hex(),
                "",
                "",
                "",
                frame.sealed_body,
                frame.at,
                flags=int(frame.flags),
                erased=tuple((wire.hex(), seal) for wire, seal in frame.erased),
            )
        if isinstance(frame, fr.RecordFrame):
            return WireItem(
                "record",
                frame.wire_id.hex(),
                frame.parent_wire_id.hex() if frame.parents else "",
                frame.branch_id.hex(),
                frame.path_hash.hex(),
                frame.sealed_entry,
                frame.created_at,
                flags=int(frame.flags),
                after=tuple(a.hex() for a in frame.after),
                parents=tuple(p.hex() for p in frame.parents),
            )
        if isinstance(frame, fr.BranchFrame):
            head = "" if frame.head_wire_id == fr.NO_ID else frame.head_wire_id.hex()
            return WireItem(
                "branch",
                frame.event_id.hex(),
                head,
                frame.branch_id.hex(),
                "",
                frame.sealed_event,
                frame.created_at,
                frame.reason.name,
                flags=int(frame.flags),
                after=tuple(a.hex() for a in frame.after),
            )
        if not isinstance(frame, fr.ReinforceFrame):
            raise ValueError(f"a {type(frame).__name__} is local bookkeeping and never replicated")
        event, target = frame.event_id.hex(), frame.wire_id.hex()
        return WireItem("reinforce", event, target, "", "", frame.sealed_event, frame.at, flags=int(frame.flags))

    def ack(self, ids: list[str]) -> None:
        """Mark items as durably stored by the server: they leave the outbox, durably."""
        wanted = [bytes.fromhex(i) for i in ids]
        with self._writing():
            known = [i for i in wanted if i in self._lineage.pending]
            for start in range(0, len(known), _ACKS_PER_FRAME):
                self._append([fr.AckFrame(tuple(known[start : start + _ACKS_PER_FRAME]))])

    def import_items(self, items: list[WireItem], set_aside: set[str] | None = None) -> list[WireItem]:
        """Replay items pulled from a server, in order; returns the suffix that must wait.

        Order matters (a branch event moves a HEAD relative to the records before it), so
        items apply strictly in the order given: at the first one whose parent or branch is not
        here yet, it and everything after it are returned for a later call. Every record is
        opened and its snapshot id re-derived before it is written, and the sealed bytes are
        kept as they came, so this device never re-encrypts them. Items already present are
        skipped, so a pull can be repeated safely.

        Without ``set_aside`` an item that does not authenticate raises IntegrityError (an import
        of a file the caller chose). With it (a pull), such an item is set aside instead: its id
        joins ``set_aside``, it is logged once, never applied, and the items after it go on, so one
        forgery cannot stop replication for good. An item that waits on an id in ``set_aside``
        (its parent, target or an erased record) is set aside too: nothing genuine depends on a
        forgery, so it would otherwise wait for ever.
        """
        with self.unsynced_batch():
            for position, item in enumerate(items):
                try:
                    frame = self._from_wire(item)
                except _NotYet:
                    if set_aside is not None and not set_aside.isdisjoint(_depends_on(item)):
                        _set_aside(item, set_aside, "it depends on an item set aside")
                        continue
                    return list(items[position:])
                except IntegrityError as exc:
                    if set_aside is None:
                        raise
                    _set_aside(item, set_aside, str(exc))
                    continue
                if set_aside is not None:
                    set_aside.discard(item.id)  # set aside once (altered bytes), genuine now
                if frame is None:
                    continue
                if isinstance(frame, fr.RecordFrame) and frame.wire_id in self._lineage.by_wire:
                    self._append([frame])  # another version: this device's own may still be unsent
                else:
                    self._append([frame, fr.AckFrame((bytes.fromhex(item.id),))])
        return []

    def _holds_version(self, wire: bytes, sealed: bytes) -> bool:
        """Does this store already hold the snapshot ``wire`` with exactly these sealed bytes?"""
        if hashlib.sha256(sealed).digest() in self._lineage.versions.get(wire, ()):
            return True
        frame = self.decode(self.recheck(self._lineage.by_wire[wire]))
        return isinstance(frame, fr.RecordFrame) and frame.sealed_entry == sealed

    def _from_wire(self, item: WireItem) -> fr.Frame | None:
        """One item as a frame (None: already here). Raises IntegrityError on anything forged.

        A format-3 item's clock and links are in its AAD, so a server that changed any of them made
        it fail to open. A LEGACY item's time was never authenticated: it must be a plausible time
        (:func:`_legacy_clock`), or the item is refused.
        """
        lineage = self._lineage
        ident = bytes.fromhex(item.id)
        flags = fr.Flag(item.flags)
        hlc = _legacy_clock(item) if flags & fr.LEGACY else _clock(item)
        after = tuple(bytes.fromhex(a) for a in item.after)
        if item.kind == "redaction":
            return self._redaction_from_wire(item, ident, hlc, flags)
        if item.kind == "record":
            held = lineage.by_wire.get(ident)
            if held is not None and (lineage.nodes[held].redacted or flags & fr.REDACTED):
                return None  # erased here (never resurrected), or a skeleton of a record whose redaction follows
            if held is not None and (flags & fr.LEGACY or self._holds_version(ident, item.sealed)):
                return None
            parents = tuple(bytes.fromhex(p) for p in item.parents or ((item.parent,) if item.parent else ()))
            if parents[:1] != ((bytes.fromhex(item.parent),) if item.parent else ()):
                raise IntegrityError(f"replicated record {item.id} names two different first parents; it was not imported")
            if held is not None:  # another version of a snapshot held here: a forged one is set aside
                return self._version_from_wire(item, lineage.nodes[held], hlc, flags, after, parents)
            if any(p not in lineage.by_wire for p in parents) or bytes.fromhex(item.branch) not in lineage.branches:
                raise _NotYet
            return self._record_from_wire(item, ident, hlc, flags, after, parents)
        if hashlib.sha256(item.sealed).hexdigest() != item.id:
            raise IntegrityError(f"replicated event {item.id} does not match its bytes; it was not imported")
        if ident in lineage.events:
            return None
        target = bytes.fromhex(item.parent) if item.parent else fr.NO_ID
        if item.parent and target not in lineage.by_wire:
            raise _NotYet
        if item.kind == "reinforce":
            reinforce = fr.ReinforceFrame(hlc, target, item.sealed, flags)
            self.sealing.unseal(item.sealed, self.sealing.reinforce_aad(reinforce), flags)
            return reinforce
        try:
            reason = fr.BranchReason[item.reason]
        except KeyError:
            raise IntegrityError(f"replicated branch event {item.id} has an unknown reason") from None
        event = fr.BranchFrame(reason, hlc, bytes.fromhex(item.branch), target, item.sealed, flags, after)
        self._open_branch_event(event)
        return event

    def _record_from_wire(
        self, item: WireItem, ident: bytes, hlc: int, flags: fr.Flag, after: tuple[bytes, ...], parents: tuple[bytes, ...]
    ) -> fr.RecordFrame:
        """A pulled record (or skeleton) as a frame, its ids re-derived; IntegrityError if forged."""
        lineage = self._lineage
        branch_id, path_hash = bytes.fromhex(item.branch), bytes.fromhex(item.path_hash)
        above = max((lineage.nodes[lineage.by_wire[p]].hlc for p in parents), default=0)
        if flags & fr.LEGACY:
            hlc = max(hlc, above + 1) if parents else hlc  # as the migration does: the same value everywhere
        elif hlc <= above:
            raise IntegrityError(f"replicated record {item.id} is not later than its parents; it was not imported")
        frame = fr.RecordFrame(fr.Op.STORE, hlc, ident, parents, branch_id, path_hash, b"", item.sealed, flags, after)
        if flags & fr.REDACTED:  # a skeleton: its seal authenticates its clear fields and names its snapshot
            skeleton = self.sealing.open_skeleton(frame, item.sealed)
            op = fr.Op.DELETE if skeleton["op"] == "delete" else fr.Op.STORE
            sealed_sid = self.sealing.seal_sid(str(skeleton["sid"]), ident)
            return dataclasses.replace(frame, op=op, sealed_sid=sealed_sid)
        canonical = self.sealing.unseal(item.sealed, self.sealing.record_aad(frame), flags)
        sid = snapshot_id(canonical, parent_ids(self.sid_of(lineage.by_wire[p]) for p in parents))
        entry = Entry.from_canonical(canonical)
        if self.wire_id(sid) != ident or self.path_hash(entry.path) != path_hash:
            raise IntegrityError(f"replicated record {item.id} does not re-derive its ids; it was not imported")
        op = fr.Op.DELETE if entry.op == "delete" else fr.Op.STORE  # the entry says; open() checks the two agree
        return dataclasses.replace(frame, op=op, sealed_sid=self.sealing.seal_sid(sid, ident))

    def _version_from_wire(
        self, item: WireItem, held: Node, hlc: int, flags: fr.Flag, after: tuple[bytes, ...], parents: tuple[bytes, ...]
    ) -> fr.RecordFrame | None:
        """Another version of a snapshot this store holds, or None when it is forged: set aside.

        Anyone with the project's API key can push bytes under an existing id, and the server cannot
        tell them from a version (it cannot open them). Refusing the whole pull there, as for a new
        record, would stop every device's replication at that item for good; the snapshot is here
        already, so nothing is lost by setting the forgery aside (logged, and counted in
        ``versions_set_aside``). A version names the same parents: one that does not is forged too.
        """
        lineage = self._lineage
        try:
            if sorted(parents) != sorted(lineage.nodes[i].wire_id for i in held.parents):
                raise IntegrityError(f"replicated record {item.id} names other parents than the snapshot held here")
            frame = self._record_from_wire(item, held.wire_id, hlc, flags, after, parents)
        except IntegrityError as exc:
            self.versions_set_aside += 1
            log.warning("a version of snapshot %s that does not authenticate was set aside: %s", item.id, exc)
            return None
        if frame.branch_id not in lineage.branches:
            raise _NotYet  # authentic, written on a branch whose creation has not arrived yet
        return frame

    def _redaction_from_wire(self, item: WireItem, ident: bytes, hlc: int, flags: fr.Flag) -> fr.RedactionFrame | None:
        """A pulled redaction as a frame (None: already here); it waits until every record it names is here."""
        if hashlib.sha256(item.sealed).digest() != ident or flags & fr.LEGACY:
            raise IntegrityError(f"replicated redaction {item.id} does not match its bytes; it was not imported")
        if ident in self._lineage.events:
            return None
        erased = tuple((bytes.fromhex(wire), seal) for wire, seal in item.erased)
        frame = fr.RedactionFrame(hlc, erased, item.sealed, int(flags))
        body = self._open_redaction_body(frame)
        if "rotated_to" in body:  # another device moved the store to a new key (sovseal.storage.rotation.retirement)
            self.rotated_to = str(body["rotated_to"])
        lineage = self._lineage
        if any(wire not in lineage.by_wire for wire, _ in erased):
            raise _NotYet
        for wire, seal in erased:  # every skeleton it brings fits its record here
            record = self.decode(self.recheck(lineage.by_wire[wire]))
            if not isinstance(record, fr.RecordFrame):
                raise IntegrityError(f"replicated redaction {item.id} names something that is not a record; it was not imported")
            if record.redacted:
                continue
            if str(self.sealing.open_skeleton(record, seal)["sid"]) != self.sid_of(lineage.by_wire[wire]):
                raise IntegrityError(f"replicated redaction {item.id} carries a skeleton of another snapshot; it was not imported")
        return frame

    # -- facts for status() --------------------------------------------------------------

    @property
    def key_id(self) -> str:
        return self.sealing.key_id

    @property
    def seals(self) -> tuple[int, int]:
        return self.sealing.sync.used, self.sealing.rest.used

