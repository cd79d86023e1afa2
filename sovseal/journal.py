"""The append-only journal: sovseal's source of truth on disk.

Every store, branch move, reinforcement and replication ack is one frame, appended with a
single ``write`` and made durable with ``fsync`` before the call returns. Because a record's
frame *is* its lineage step and its outbox job, the three commit atomically: after a crash a
frame is either whole (and authenticated) or it is a torn tail that recovery cuts off.

Frame on disk: ``u32 body length ‖ 16-byte MAC ‖ body``. The MAC is a truncated
HMAC-SHA256 under a key derived from the store key, so it detects torn writes *and* any edit
of any field; a CRC would only catch the former.
"""

from __future__ import annotations

import hmac
import mmap
import os
import struct
from dataclasses import dataclass, field
from pathlib import Path

from .durable import fsync_dir, fsync_fd
from .errors import IntegrityError, StorageError

HEADER = struct.Struct(">I16s")
#: Large enough for the biggest record (a 256 KiB entry, sealed) and small enough that a scan
#: for surviving frames after a bad one stays cheap.
MAX_FRAME = 320 * 1024
#: A torn write can only be the last append, and one append is at most one frame; a run of
#: unparseable bytes at the end longer than this is damage, never cut off silently.
MAX_TORN_TAIL = MAX_FRAME + HEADER.size
_MAC_PREFIX = b"sovseal/v1/frame\x00"


@dataclass(slots=True)
class ScannedFrame:
    offset: int  # where the frame's header starts
    body: bytes
    authentic: bool  # False: the MAC failed, the body is damaged or tampered with


@dataclass(slots=True)
class ScanResult:
    frames: list[ScannedFrame] = field(default_factory=list)
    end: int = 0  # offset just past the last frame that belongs to the journal
    torn_tail: int = 0  # bytes after ``end`` that are an unfinished or torn append


class Journal:
    """One append-only file of authenticated frames."""

    def __init__(self, path: Path, mac_key: bytes) -> None:
        self.path = path
        self._mac_key = mac_key
        created = not path.exists()
        self._fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        if created:
            fsync_fd(self._fd)
            fsync_dir(path.parent)

    def close(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def size(self) -> int:
        return os.fstat(self._fd).st_size

    def mac(self, body: bytes) -> bytes:
        return hmac.digest(self._mac_key, _MAC_PREFIX + body, "sha256")[:16]

    def encode(self, body: bytes) -> bytes:
        if len(body) > MAX_FRAME:
            raise ValueError(f"frame of {len(body)} bytes exceeds {MAX_FRAME}")
        return HEADER.pack(len(body), self.mac(body)) + body

    def append(self, bodies: list[bytes], *, sync: bool = True) -> int:
        """Append frames with one write and fsync them; returns the offset of the first.

        On any failure the file is cut back to where it was, so a failed append leaves no
        partial frame behind for the next writer (and the caller's store fails loudly).
        ``sync=False`` is for bulk imports that call :meth:`sync` once at the end.
        """
        data = b"".join(self.encode(b) for b in bodies)
        if len(data) > MAX_TORN_TAIL:
            raise ValueError("one append must fit in MAX_TORN_TAIL so that a torn append is recognisable")
        start = self.size()
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(self._fd, view) :]
            if sync:
                fsync_fd(self._fd)
        except BaseException as exc:
            self.cut_back(start)
            if isinstance(exc, OSError):
                raise self._refused(exc) from exc
            raise
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
        os.ftruncate(self._fd, offset)
        fsync_fd(self._fd)

    def read_frame(self, offset: int) -> tuple[bytes, bytes]:
        """(MAC, body) of the frame whose header starts at ``offset``, as they are on disk now."""
        length, mac = HEADER.unpack(os.pread(self._fd, HEADER.size, offset))
        return mac, os.pread(self._fd, length, offset + HEADER.size)

    def scan(self, start: int) -> ScanResult:
        """Read every frame from ``start`` to the end of the file.

        A complete frame whose MAC fails is *damage* (a flipped bit, an edit): it is returned
        with ``authentic=False`` and the scan goes on, so that reads of it fail closed and
        verify() reports it. Bytes at the very end that do not form a complete frame are the
        torn tail of an append that never returned; a tail too long to be one append is damage
        and raises instead of being cut.
        """
        size = self.size()
        result = ScanResult(end=start)
        if size > start:
            with mmap.mmap(self._fd, size, prot=mmap.PROT_READ) as mm:
                offset = start
                while size - offset >= HEADER.size:
                    length, mac = HEADER.unpack_from(mm, offset)
                    body_end = offset + HEADER.size + length
                    if length == 0 or length > MAX_FRAME or body_end > size:
                        break
                    body = mm[offset + HEADER.size : body_end]
                    result.frames.append(ScannedFrame(offset, body, hmac.compare_digest(mac, self.mac(body))))
                    offset = body_end
                result.end = offset
                tail = size - result.end
                if tail and (tail > MAX_TORN_TAIL or self._survivor(mm, result.end, size)):
                    raise IntegrityError(
                        f"the journal {self.path} is damaged at byte {result.end}: the {tail} bytes after it "
                        "are not one torn append. Nothing was changed; restore this store from a replica or backup."
                    )
        result.torn_tail = size - result.end
        return result

    def _survivor(self, mm: mmap.mmap, start: int, size: int) -> bool:
        """Does an authentic frame start anywhere after ``start``? Then the bad bytes are damage."""
        for offset in range(start + 1, size - HEADER.size):
            length, mac = HEADER.unpack_from(mm, offset)
            end = offset + HEADER.size + length
            if 0 < length <= MAX_FRAME and end <= size and hmac.compare_digest(mac, self.mac(mm[offset + HEADER.size : end])):
                return True
        return False
