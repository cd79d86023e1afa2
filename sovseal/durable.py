"""Small durability primitives: the only place sovseal calls fsync (tests/core/test_one_owner.py).

LanceDB and most Python file APIs do not make writes durable; these helpers do: fsync the file
(F_FULLFSYNC on macOS, where fsync only reaches the drive's cache), and fsync the directory that
holds any file or directory created, because a new directory entry is not durable until its
parent is. One owner means every durable write gets the same recipe, and the durability audit
(tests/reliability/test_durability_audit.py) sees every fsync.
"""

from __future__ import annotations

import os
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO


def fsync_fd(fd: int) -> None:
    """Flush one file descriptor to stable storage (F_FULLFSYNC on macOS, where fsync is not enough)."""
    if sys.platform == "darwin":  # pragma: no cover - exercised on macOS only
        import fcntl

        fcntl.fcntl(fd, fcntl.F_FULLFSYNC)
    else:
        os.fsync(fd)


def fsync_dir(path: Path) -> None:
    """Make the entries of a directory (new files, renames) durable."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
    try:
        fsync_fd(fd)
    finally:
        os.close(fd)


def make_dirs(path: Path, mode: int = 0o700) -> None:
    """Create ``path`` and any missing parents, fsyncing each parent that gained an entry.

    Another process may create the same directory at the same moment (two processes opening one
    new store or index): a directory that appears meanwhile is taken as made, and still fsynced.
    """
    missing: list[Path] = []
    current = path
    while not current.exists():
        missing.append(current)
        current = current.parent
    for directory in reversed(missing):
        try:
            os.mkdir(directory, mode)
        except FileExistsError:
            if not directory.is_dir():
                raise
        fsync_dir(directory.parent)


def atomic_write(path: Path, data: bytes, mode: int = 0o600) -> None:
    """Replace ``path`` with ``data`` so that after a crash it holds either the old or the new bytes."""
    with replacing(path, mode) as out:
        out.write(data)


@contextmanager
def replacing(path: Path, mode: int = 0o600) -> Iterator[BinaryIO]:
    """A new file, written through the yielded handle, that replaces ``path`` only once fully
    written and fsynced (then its directory entry is fsynced): a failure or a crash leaves the
    old file as it was, and an exception leaves no temporary file behind. For files streamed in
    pieces (checkpoints, backups) as much as for small ones (:func:`atomic_write`)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp")  # what a store's open sweeps
    try:
        with open(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, mode), "wb") as out:
            yield out
            out.flush()
            fsync_fd(out.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    fsync_dir(path.parent)


def create_file(final: Path, data: bytes, mode: int = 0o600, *, replace: bool = False) -> bool:
    """Durably create ``final`` with ``data``: O_EXCL temp file -> write -> fsync -> publish -> fsync dir.

    For files that hold secrets (key files): the temp name is unguessable, symlinks are not
    followed, and the mode is set exactly, whatever the umask.

    Publishing uses a hard link unless ``replace`` is set, so an existing file is never clobbered;
    returns False if ``final`` already existed (another process won the race).
    """
    tmp = final.with_name(f".{final.name}.{uuid.uuid4().hex}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(tmp, flags, mode)
    try:
        try:
            if os.name == "posix":
                os.fchmod(fd, mode)  # the umask may only narrow it, but be exact
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            fsync_fd(fd)
        finally:
            os.close(fd)
        if replace:
            os.replace(tmp, final)
            created = True
        else:
            try:
                os.link(tmp, final)
                created = True
            except FileExistsError:
                created = False
    finally:
        if tmp.exists():
            tmp.unlink()
    fsync_dir(final.parent)
    return created
