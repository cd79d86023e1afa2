"""The append-only journal: sovseal's source of truth on disk.

Every store, branch move, reinforcement and replication ack is one frame, appended with a
single ``write`` and made durable with ``fsync`` before the call returns. Because a record's
frame *is* its lineage step and its outbox job, the three commit atomically: after a crash a
frame is either whole (and authenticated) or it is a torn tail that recovery cuts off.

The file starts with a fixed header, ``magic ‖ u32 format ‖ 16-byte journal id ‖ 16-byte MAC``,
written with the first frames in the journal's first append. The journal id is random, so two
journals never share it, even under one key. Then frames:
``u32 body length ‖ 16-byte MAC ‖ u64 sequence number ‖ body``. The MAC is a truncated HMAC-SHA256
of the sequence number and the body under a key derived from the store key *and the journal id*,
so it detects torn writes, any edit of any field, and a frame copied in from another journal
(another store or project that uses the same key); a CRC would only catch the first. Frames are
numbered 0, 1, 2, ... in journal order, so a frame cut out of the middle, frames swapped, or an
old frame appended again show as a break in the numbering (:class:`Order`).
"""

from __future__ import annotations

import hashlib
import hmac
import mmap
import os
import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from sovseal.crypto.primitives import PreparedMac, prepared_hmac
from sovseal.durable import fsync_dir, fsync_fd
from sovseal.errors import IntegrityError, JournalFormatError, StorageError
from sovseal.errors import JournalHeaderError as JournalHeaderError  # in the catalogue; still importable from here

HEADER = struct.Struct(">I16sQ")  # body length, MAC, sequence number
_SEQ = struct.Struct(">Q")
#: Large enough for the biggest record (a 256 KiB entry, sealed) and small enough that a scan
#: for surviving frames after a bad one stays cheap.
MAX_FRAME = 320 * 1024
#: A torn write can only be the last append, and one append is at most one frame; a run of
#: unparseable bytes at the end longer than this is damage, never cut off silently.
MAX_TORN_TAIL = MAX_FRAME + HEADER.size
#: The journal's own header: magic, format, journal id, MAC (under the store's journal key).
JOURNAL_HEADER = struct.Struct(">8sI16s16s")
FORMAT = 3
#: Formats this code reads: 3, and 2 (written by the previous release) to migrate it.
READABLE_FORMATS = (2, 3)
_MAGIC = b"SOVSEAL\x0a"  # its first byte is not 0, which every format-1 journal starts with
_V1_MAC_PREFIX = b"sovseal/v1/frame\x00"  # format 1: only to recognise an old journal
_V1_HEADER = struct.Struct(">I16s")
_HEADER_MAC_PREFIX = b"sovseal/v2/journal-header\x00"
_FRAME_KEY_PREFIX = b"sovseal/v2/frame-key\x00"
_MAC_PREFIX = b"sovseal/v2/frame\x00"
_HEAD_TAG_PREFIX = b"sovseal/v2/record-head\x00"


class Order(Enum):
    """Where an authentic frame sits in the numbering (a damaged frame is taken to fill its place)."""

    IN_PLACE = "in place"
    AFTER_GAP = "after a gap"  # numbers were skipped: frames before it were cut out or moved
    REPEATED = "repeated"  # its number came earlier: an old frame appended again, or moved back


@dataclass(slots=True)
class ScannedFrame:
    offset: int  # where the frame's header starts
    body: bytes
    authentic: bool  # False: the MAC failed, the body is damaged or tampered with
    slot: int  # the sequence number this place in the journal calls for
    order: Order = Order.IN_PLACE

    def next_slot(self, seq: int) -> int:
        """Check the frame's own sequence number ``seq`` against its slot; returns the next frame's slot."""
        if not self.authentic or seq == self.slot:
            return self.slot + 1
        if seq > self.slot:
            self.order = Order.AFTER_GAP
            return seq + 1
        self.order = Order.REPEATED
        return self.slot


@dataclass(slots=True)
class ScanResult:
    frames: list[ScannedFrame] = field(default_factory=list)
    end: int = 0  # offset just past the last frame that belongs to the journal
    torn_tail: int = 0  # bytes after ``end`` that are an unfinished or torn append


class Journal:
    """One append-only file of authenticated frames, bound to its own random journal id."""

    def __init__(self, path: Path, key: bytes, *, read_only: bool = False) -> None:
        self.path = path
        self._key = key  # the store's journal key; frame MACs use a key derived from it and the journal id
        # HMACs under the frame key, known once the header is read or written, with their prefixes
        # already absorbed: every MAC and head tag copies one instead of preparing key and prefix again.
        self._frame_mac: PreparedMac | None = None
        self._head_mac: PreparedMac | None = None
        self._seq_at: dict[int, int] = {}  # offset -> sequence number the frame there must carry
        self.format = FORMAT  # a new journal's; an existing one's once its header is read
        self.journal_id = b""  # known once the header is read or written
        self._pending_header = b""  # begin(): the header a new journal's first append writes
        self.read_only = read_only
        if read_only:
            self._fd = os.open(path, os.O_RDONLY)
        else:
            created = not path.exists()
            self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
            if created:
                fsync_fd(self._fd)
                fsync_dir(path.parent)
        # The file this handle holds: an open file keeps its inode, so its number cannot go to
        # another file while the handle lives (replaced() compares the path's against it).
        held = os.fstat(self._fd)
        self._identity = (held.st_ino, held.st_dev)
        self._name = os.fspath(path)  # stat()ed after every append: a str, not converted each time

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def fileno(self) -> int:
        return self._fd

    def forget_resume(self) -> None:
        """Undo a :meth:`resume` that was not used: the next scan starts from byte 0."""
        self._seq_at.clear()

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def replaced(self) -> bool:
        """Is the file at :attr:`path` gone, or another file than the one this handle has open?

        A store directory deleted (or a journal moved away) under an open handle would otherwise
        go on taking appends into an unlinked file that nobody will ever read again; a journal
        migrated or compacted by another process is a new file at the same path.

        One ``stat`` of the path: the held file's identity was taken when it was opened, and a
        path that names the held file is a link to it, so the held file is not unlinked either.
        """
        try:
            named = os.stat(self._name)
        except FileNotFoundError:
            return True
        return (named.st_ino, named.st_dev) != self._identity

    def mac(self, seq: int, body: bytes) -> bytes:
        """The MAC of the frame numbered ``seq`` (the same bytes as :meth:`_mac` under the frame key)."""
        mac = self._frame_mac
        mac = (mac if mac is not None else self._prepared(mac)).copy()
        mac.update(_SEQ.pack(seq))
        mac.update(body)
        return mac.digest()[:16]

    @staticmethod
    def _mac(frame_key: bytes, seq: int, body: bytes) -> bytes:
        return hmac.digest(frame_key, _MAC_PREFIX + _SEQ.pack(seq) + body, "sha256")[:16]

    def tag(self, seq: int, head: bytes) -> bytes:
        """A record's head tag: its clear fields and place authenticated apart from its sealed parts.

        When a record frame fails its MAC, a head that still passes its tag (for the sequence
        number its place in the journal calls for) tells which branch, parent and path the record
        really has, so the damage is pinned on that record alone.
        """
        mac = self._head_mac
        mac = (mac if mac is not None else self._prepared(mac)).copy()
        mac.update(_SEQ.pack(seq))
        mac.update(head)
        return mac.digest()[:16]

    @staticmethod
    def _prepared(mac: PreparedMac | None) -> PreparedMac:
        if mac is None:
            raise RuntimeError("the journal's header has not been read or written yet: scan(0) or append first")
        return mac

    def _use_frame_key(self, frame_key: bytes) -> None:
        """Adopt the frame key of this journal (derived from its id) and prepare its two HMACs."""
        self._frame_mac = prepared_hmac(frame_key, _MAC_PREFIX)
        self._head_mac = prepared_hmac(frame_key, _HEAD_TAG_PREFIX)

    def _forget_frame_key(self) -> None:
        self._frame_mac = self._head_mac = None

    def _derive_frame_key(self, journal_id: bytes) -> bytes:
        return hmac.digest(self._key, _FRAME_KEY_PREFIX + journal_id, "sha256")

    def _new_header(self) -> bytes:
        """A fresh random journal id, sealed into the header a new journal starts with."""
        journal_id = self.journal_id = os.urandom(16)
        fields = JOURNAL_HEADER.pack(_MAGIC, FORMAT, journal_id, bytes(16))[:-16]
        self._use_frame_key(self._derive_frame_key(journal_id))
        self._remember(JOURNAL_HEADER.size, 0)
        return fields + hmac.digest(self._key, _HEADER_MAC_PREFIX + fields, "sha256")[:16]

    def begin(self) -> None:
        """Choose a new (empty) journal's id now, so frames can be tagged before the first append."""
        if self.size() != 0 or self._pending_header:
            raise RuntimeError("begin() is for a new, empty journal, once")
        self._pending_header = self._new_header()

    def _read_header(self, mm: mmap.mmap, size: int) -> None:
        """Check the header and learn the journal id; raises rather than guess at anything else."""
        magic, version, journal_id, mac = JOURNAL_HEADER.unpack_from(mm, 0)
        fields = mm[: JOURNAL_HEADER.size - 16]
        if magic != _MAGIC and self._is_format_1(mm, size):
            raise JournalFormatError(
                f"the journal {self.path} was written by an earlier sovseal (journal format 1); this version reads "
                f"format {FORMAT} only. Nothing was changed. Run `sovseal export` with the version that wrote it, then "
                "`sovseal import` the backup into a new store with this version."
            )
        frame_key = self._derive_frame_key(journal_id)
        if magic == _MAGIC and hmac.compare_digest(mac, hmac.digest(self._key, _HEADER_MAC_PREFIX + fields, "sha256")[:16]):
            if version not in READABLE_FORMATS:
                raise JournalFormatError(
                    f"the journal {self.path} has format {version}; this sovseal reads formats {READABLE_FORMATS} only. "
                    "Nothing was changed. Open it with the sovseal version that wrote it."
                )
            self.format = version
            self.journal_id = journal_id
            self._use_frame_key(frame_key)
            self._remember(JOURNAL_HEADER.size, 0)
            return
        if self._any_authentic(mm, size, frame_key):
            raise JournalHeaderError(
                f"the header of the journal {self.path} is damaged: the frames after it authenticate under this key, "
                "the header does not. Nothing was changed; restore this store from a replica or backup.",
                key_is_right=True,
            )
        raise JournalHeaderError(
            f"the header of the journal {self.path} does not authenticate under this key: the key is wrong, or the "
            "header is damaged. Nothing was changed.",
            key_is_right=False,
        )

    def _is_format_1(self, mm: mmap.mmap, size: int) -> bool:
        """Does the file start with a frame that authenticates as format 1 wrote it (no header)?"""
        length, mac = _V1_HEADER.unpack_from(mm, 0)
        end = _V1_HEADER.size + length
        if not 0 < length <= MAX_FRAME or end > size:
            return False
        return hmac.compare_digest(mac, hmac.digest(self._key, _V1_MAC_PREFIX + mm[_V1_HEADER.size : end], "sha256")[:16])

    @staticmethod
    def _any_authentic(mm: mmap.mmap, size: int, frame_key: bytes) -> bool:
        """Does any frame after the header authenticate under ``frame_key``?"""
        offset = JOURNAL_HEADER.size
        while size - offset >= HEADER.size:
            length, mac, seq = HEADER.unpack_from(mm, offset)
            end = offset + HEADER.size + length
            if length == 0 or length > MAX_FRAME or end > size:
                return False
            if hmac.compare_digest(mac, Journal._mac(frame_key, seq, mm[offset + HEADER.size : end])):
                return True
            offset = end
        return False

    def encode(self, seq: int, body: bytes) -> bytes:
        if len(body) > MAX_FRAME:
            raise ValueError(f"frame of {len(body)} bytes exceeds {MAX_FRAME}")
        return HEADER.pack(len(body), self.mac(seq, body), seq) + body

    def _remember(self, offset: int, seq: int) -> None:
        """The sequence number the frame at ``offset`` must carry (bounded: recent points only)."""
        self._seq_at.pop(offset, None)  # re-inserted as the newest
        self._seq_at[offset] = seq
        if len(self._seq_at) > 16:
            del self._seq_at[next(iter(self._seq_at))]

    def _forget_after(self, offset: int) -> None:
        for stale in [o for o in self._seq_at if o > offset]:
            del self._seq_at[stale]

    def next_seq(self, end: int | None = None) -> int:
        """The sequence number of the next frame appended at ``end`` (default: the file's size).

        ``end`` must be where a scan or append of this handle ended: a writer that holds the lock
        and has caught up passes the end it knows, and :meth:`append` checks it is still the size.
        """
        if end is None:
            end = self.size()
        if end == 0:
            return 0
        seq = self._seq_at.get(end)
        if seq is None:
            raise RuntimeError("scan the journal to its end before appending: the next sequence number is unknown")
        return seq

    def append(self, bodies: list[bytes], *, sync: bool = True, expect: int | None = None) -> int:
        """Append frames with one write and fsync them; returns the offset the write started at.

        A new (empty) journal gets its header in the same write, so it is durable with its first frame.

        ``expect``: where the caller (holding the writer lock, caught up) knows the journal ends,
        and numbered its frames for; a journal of another size means another writer got in, and
        nothing is written (StorageError).

        On any failure the file is cut back to where it was, so a failed append leaves no
        partial frame behind for the next writer (and the caller's store fails loudly).
        ``sync=False`` is for bulk imports that call :meth:`sync` once at the end.
        """
        start = self.size()
        if self.format != FORMAT:
            raise StorageError(f"the journal {self.path} is in format {self.format}; it is migrated before anything is appended")
        if expect is not None and start != expect:  # checked even under python -O
            raise StorageError(
                f"the journal grew while this process held the writer lock (expected byte {expect}, found {start}): "
                "the file lock is not effective here (a network file system?); keep the store on a local disk"
            )
        first = self.next_seq(start)
        # A new journal: its id goes in with its first frames.
        header = (self._pending_header or self._new_header()) if start == 0 else b""
        self._pending_header = b""
        if len(bodies) == 1:  # the usual append: one frame, no generator
            data = header + self.encode(first, bodies[0])
        else:
            data = header + b"".join([self.encode(first + i, b) for i, b in enumerate(bodies)])
        if len(data) > MAX_TORN_TAIL:
            raise ValueError("one append must fit in MAX_TORN_TAIL so that a torn append is recognisable")
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            if sync:
                fsync_fd(self._fd)
        except BaseException as exc:
            self.cut_back(start)
            if header:
                self._forget_frame_key()  # the header is gone with the rest: the next append writes a new one
            if isinstance(exc, OSError):
                raise self._refused(exc) from exc
            raise
        self._remember(start + len(data), first + len(bodies))
        return start

    def sync(self) -> None:
        """fsync the journal; a failure raises StorageError (the caller cuts its batch off)."""
        try:
            fsync_fd(self._fd)
        except OSError as exc:
            raise self._refused(exc) from exc

    def cut_back(self, offset: int) -> None:
        """Drop everything after ``offset`` after a failed append, best effort.

        After a failed write or fsync the bytes past ``offset`` may never reach the disk (and
        Linux may report the next fsync as a success), so they must not stay readable as if
        stored. If even the truncate fails, what is left is at most one torn append, which the
        next writer cuts off.
        """
        self._forget_after(offset)
        try:
            os.ftruncate(self._fd, offset)
        except OSError:
            pass

    def _refused(self, exc: OSError) -> StorageError:
        return StorageError(
            exc.errno,
            f"the disk refused a write to {self.path} ({os.strerror(exc.errno) if exc.errno else exc}); nothing was "
            "stored and the journal was cut back to its last durable frame. Free space or fix the disk, then retry",
        )

    def truncate(self, offset: int) -> None:
        """Cut a torn tail off (only ever under the writer lock)."""
        self._forget_after(offset)
        os.ftruncate(self._fd, offset)
        fsync_fd(self._fd)

    def read_frame(self, offset: int, size: int) -> tuple[bool, bytes]:
        """(authentic, body) of the ``size``-byte frame at ``offset``, as it is on disk now (one read).

        A frame that is no longer there whole (the file was cut, or its length field changed) is
        not authentic.
        """
        data = os.pread(self._fd, size, offset)
        if len(data) != size:
            return False, data[HEADER.size :]
        length, mac, seq = HEADER.unpack_from(data)
        body = data[HEADER.size :]
        return length == len(body) and hmac.compare_digest(mac, self.mac(seq, body)), body

    def scan(self, start: int) -> ScanResult:
        """Read every frame from ``start`` to the end of the file (from 0: the header first).

        ``start`` is 0 or where an earlier scan or append of this handle ended, so that each
        frame's sequence number is checked against its place (:attr:`ScannedFrame.order`).

        A complete frame whose MAC fails is *damage* (a flipped bit, an edit): it is returned
        with ``authentic=False`` and the scan goes on, so that reads of it fail closed and
        verify() reports it. Bytes at the very end that do not form a complete frame are the
        torn tail of an append that never returned; a tail too long to be one append is damage
        and raises instead of being cut. A header that does not authenticate, or a journal of
        another format, raises: nothing in it can be trusted or cut.
        """
        size = self.size()
        result = ScanResult(end=start)
        if start == 0 and size < JOURNAL_HEADER.size:
            result.torn_tail = size  # empty, or its creation was cut short: nothing was acknowledged yet
            return result
        if size > start:
            with mmap.mmap(self._fd, size, prot=mmap.PROT_READ) as mm:
                if start == 0:
                    if size <= MAX_TORN_TAIL and not mm[:].strip(b"\x00"):
                        # The new size, but zeros (design assumption 2): the first append never completed.
                        result.torn_tail = size
                        return result
                    self._read_header(mm, size)
                    start = result.end = JOURNAL_HEADER.size
                slot = self._seq_at.get(start)
                if slot is None:
                    raise RuntimeError(f"scan from byte 0 or from where an earlier scan or append ended, not {start}")
                offset = start
                while size - offset >= HEADER.size:
                    length, mac, seq = HEADER.unpack_from(mm, offset)
                    body_end = offset + HEADER.size + length
                    if length == 0 or length > MAX_FRAME or body_end > size:
                        break
                    body = mm[offset + HEADER.size : body_end]
                    frame = ScannedFrame(offset, body, hmac.compare_digest(mac, self.mac(seq, body)), slot)
                    slot = frame.next_slot(seq)
                    result.frames.append(frame)
                    offset = body_end
                result.end = offset
                self._remember(offset, slot)
                tail = size - result.end
                if tail and (tail > MAX_TORN_TAIL or self._survivor(mm, result.end, size)):
                    raise IntegrityError(
                        f"the journal {self.path} is damaged at byte {result.end}: the {tail} bytes after it "
                        "are not one torn append. Nothing was changed; restore this store from a replica or backup."
                    )
        result.torn_tail = size - result.end
        return result

    def frames(self, start: int, end: int) -> Iterator[ScannedFrame]:
        """The frames from ``start`` (0: the first) to ``end``, one at a time, each with its MAC checked
        (``slot`` is the frame's own sequence number).

        For a region a scan already found whole (compaction and key rotation read a journal this way
        without holding it in memory). A frame that no longer ends by ``end`` raises StorageError.
        """
        for offset, body, authentic, seq in self._walk(start, end):
            yield ScannedFrame(offset, body, authentic, seq)

    def audit(self, end: int) -> Iterator[ScannedFrame]:
        """The frames before ``end`` read afresh from the file, one at a time, each with its MAC and
        its place in the numbering checked as :meth:`scan` checks them (``order``).

        For verify(): a handle that started from a checkpoint never read the frames the checkpoint
        covers, so bytes damaged since it was written would go unseen; this finds them without
        holding the journal in memory. A frame that no longer ends by ``end`` raises StorageError.
        """
        slot = 0
        for offset, body, authentic, seq in self._walk(0, end):
            frame = ScannedFrame(offset, body, authentic, slot)
            slot = frame.next_slot(seq)
            yield frame

    def _walk(self, start: int, end: int) -> Iterator[tuple[int, bytes, bool, int]]:
        """(offset, body, whether its MAC holds, its sequence number) of each frame from ``start`` to ``end``."""
        with mmap.mmap(self._fd, end, prot=mmap.PROT_READ) as mm:
            if self._frame_mac is None:
                self._read_header(mm, end)
            offset = max(start, JOURNAL_HEADER.size)
            while offset < end:
                length, mac, seq = HEADER.unpack_from(mm, offset)
                body_end = offset + HEADER.size + length
                if length == 0 or length > MAX_FRAME or body_end > end:
                    raise StorageError(f"the journal {self.path} changed under a reader at byte {offset}")
                body = mm[offset + HEADER.size : body_end]
                yield offset, body, hmac.compare_digest(mac, self.mac(seq, body)), seq
                offset = body_end

    def resume(self, end: int, slot: int, last_offset: int, last_mac: bytes) -> bool:
        """Start this handle at ``end`` as if it had scanned the journal up to there (a checkpoint).

        True when the header authenticates and the frame at ``last_offset`` ends exactly at
        ``end``, carries the MAC ``last_mac`` and authenticates: the journal is, up to ``end``,
        the one the checkpoint was made from (MACs cover each frame's sequence number and body,
        under a key bound to the journal id). False, and nothing remembered, otherwise.
        """
        size = self.size()
        if end > size or last_offset < JOURNAL_HEADER.size or last_offset + HEADER.size > end:
            return False
        with mmap.mmap(self._fd, size, prot=mmap.PROT_READ) as mm:
            self._read_header(mm, size)
        data = os.pread(self._fd, end - last_offset, last_offset)
        length, mac, seq = HEADER.unpack_from(data)
        body = data[HEADER.size :]
        if length != len(body) or seq != slot - 1 or not hmac.compare_digest(mac, last_mac):
            return False
        if not hmac.compare_digest(mac, self.mac(seq, body)):
            return False
        self._remember(end, slot)
        return True

    def _survivor(self, mm: mmap.mmap, start: int, size: int) -> bool:
        """Does an authentic frame start anywhere after ``start``? Then the bad bytes are damage."""
        for offset in range(start + 1, size - HEADER.size):
            length, mac, seq = HEADER.unpack_from(mm, offset)
            end = offset + HEADER.size + length
            if 0 < length <= MAX_FRAME and end <= size and hmac.compare_digest(mac, self.mac(seq, mm[offset + HEADER.size : end])):
                return True
        return False


class JournalWriter:
    """A new journal written whole, frame by frame: what migration, compaction and key rotation write.

    Frames go out in appends of at most one torn append's size, unsynced. :meth:`check` fsyncs and
    reads back what was written since the last check, comparing every frame with what was meant;
    :meth:`finish` checks the rest. A new journal is renamed over the old one only when it is
    exactly what was meant. Nothing of it is held in memory but the digests.
    """

    def __init__(self, path: Path, key: bytes) -> None:
        self.path = path
        self._key = key
        self.journal = Journal(path, key)
        self.journal.begin()
        self.frames = 0
        self.end = JOURNAL_HEADER.size  # where the next frame goes
        self._digests: list[bytes] = []
        self._checked = 0  # frames read back and found as written
        self._checked_end = 0
        self._batch: list[bytes] = []
        self._batch_bytes = JOURNAL_HEADER.size

    def tag_next(self, head: bytes) -> bytes:
        """The head tag of a record that is the next frame written (``RecordFrame.encode_tagged``)."""
        return self.journal.tag(self.frames, head)

    def add(self, body: bytes) -> int:
        """Add the next frame; returns the offset it takes in the new journal."""
        if self._batch and self._batch_bytes + HEADER.size + len(body) > MAX_TORN_TAIL:
            self.flush()
        offset = self.end
        self._batch.append(body)
        self._batch_bytes += HEADER.size + len(body)
        self._digests.append(hashlib.sha256(body).digest())
        self.frames += 1
        self.end += HEADER.size + len(body)
        return offset

    def flush(self) -> None:
        """Write the frames added so far (not fsynced)."""
        if self._batch:
            self.journal.append(self._batch, sync=False)
            self._batch, self._batch_bytes = [], 0

    def check(self) -> None:
        """fsync, then read back every frame written since the last check: StorageError (and the file
        removed) unless each authenticates and is the one written."""
        self.flush()
        self.journal.sync()
        reader = Journal(self.path, self._key, read_only=True)
        try:
            for frame in reader.frames(self._checked_end, self.end):
                if (
                    not frame.authentic
                    or self._checked >= len(self._digests)
                    or hashlib.sha256(frame.body).digest() != self._digests[self._checked]
                ):
                    raise StorageError(f"the new journal {self.path} did not read back as written; nothing was changed")
                self._checked += 1
        except StorageError:
            self.abandon()
            raise
        finally:
            reader.close()
        if self._checked != len(self._digests):
            self.abandon()
            raise StorageError(f"the new journal {self.path} is missing frames; nothing was changed")
        self._checked_end = self.end

    def finish(self) -> None:
        """Check what was written since the last :meth:`check`, and close the file."""
        self.check()
        self.journal.close()

    def abandon(self) -> None:
        self.journal.close()
        self.path.unlink(missing_ok=True)
