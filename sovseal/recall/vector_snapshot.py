"""The vector index's snapshot: its matrix as a file to memory-map, so a cold open reads no table.

Loading the LanceDB table at open means importing lancedb (about 2 s here) and reading every
vector into memory (300 MB at 200k records). The snapshot holds the same vectors as the index's
in-memory matrix, in its row order (the IVF lists'), beside the lists themselves:

- ``vectors.<gen>.f32``: rows of ``dim`` float32, then spare rows of zeros (a sparse tail) so
  that rows added later can be appended in place;
- ``meta.npz``: the generation, the dimension, how many rows are valid, the node of each row, and
  the IVF lists (centroids, list offsets, rows trained, and the list of each row added after the
  training that has been placed in one), replaced atomically.

The sketch the index scans first (:mod:`sovseal.recall.vector_sketch`) is not here: it is derived from
the matrix once that is resident.

It mirrors the table and is never more than the table: it is written only when every vector of
the matrix is in the table (nothing pending), so a node it holds is a node the table holds.
Vectors the table gained after it (other processes) are read from the table when a recall finds
them missing. Vectors are plaintext by necessity, as in the table (docs/design.md, "Vectors").
"""

from __future__ import annotations

import io
import mmap
import os
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sovseal.durable import atomic_write, fsync_dir, fsync_fd, make_dirs

DIRECTORY = "snapshot"
_NO_TAIL = np.zeros(0, dtype=np.int32)
#: centroids, list offsets, rows trained, list of each row placed since
Ivf = tuple[np.ndarray, list[int], int, np.ndarray]
_META = "meta.npz"
_VERSION = 1


@dataclass
class Snapshot:
    gen: str
    rows: int
    matrix: np.ndarray  # (capacity, dim) float32, copy-on-write mapping of the vectors file
    row_node: np.ndarray  # (rows,) int64
    centroids: np.ndarray | None
    offsets: list[int] | None
    trained_rows: int
    tail_lists: np.ndarray  # (placed,) int32: the list of rows trained_rows, trained_rows + 1, ...


def _vectors(directory: Path, gen: str) -> Path:
    return directory / f"vectors.{gen}.f32"


def load(index_dir: Path, dim: int) -> Snapshot | None:
    """The snapshot in ``index_dir``, or None when there is none or it does not fit ``dim``."""
    directory = index_dir / DIRECTORY
    try:
        with np.load(directory / _META, allow_pickle=False) as meta:
            version, stored_dim, rows = (int(v) for v in meta["header"])
            gen = bytes(meta["gen"]).decode("ascii")
            row_node = np.array(meta["row_node"], dtype=np.int64)
            trained = int(meta["trained_rows"])
            centroids = np.array(meta["centroids"], dtype=np.float32) if trained >= 0 else None
            offsets = [int(o) for o in meta["offsets"]] if trained >= 0 else None
            tail = np.array(meta["tail_lists"], dtype=np.int32) if "tail_lists" in meta.files and trained >= 0 else _NO_TAIL
        if tail.ndim != 1 or (
            len(tail) and (trained + len(tail) > rows or tail.min() < 0 or offsets is None or tail.max() >= len(offsets) - 1)
        ):
            tail = _NO_TAIL  # not what this writer writes: the rows are placed again
        if version != _VERSION or stored_dim != dim or len(row_node) != rows or not gen.isalnum():
            return None
        path = _vectors(directory, gen)
        capacity = os.path.getsize(path) // (4 * dim)
        if capacity < rows or rows == 0:
            return None
        matrix = np.memmap(path, dtype=np.float32, mode="c", shape=(capacity, dim))
    except Exception:  # noqa: BLE001 - missing, cut short, not a zip, wrong fields: the table is read instead
        return None
    # A search reads the rows of a few lists and a few hundred single rows: readahead around each
    # would bring in (and count against the process) most of the file.
    advise = getattr(getattr(matrix, "_mmap", None), "madvise", None)  # numpy keeps its mmap.mmap private
    if advise is not None and hasattr(mmap, "MADV_RANDOM"):
        advise(mmap.MADV_RANDOM)
    return Snapshot(gen, rows, matrix, row_node, centroids, offsets, trained, tail)


def current(index_dir: Path) -> tuple[str, int] | None:
    """(generation, rows) of the snapshot on disk now, or None."""
    try:
        with np.load(index_dir / DIRECTORY / _META, allow_pickle=False) as meta:
            return bytes(meta["gen"]).decode("ascii"), int(meta["header"][2])
    except Exception:  # noqa: BLE001 - as in load()
        return None


def _spare(rows: int) -> int:
    return max(1024, rows // 4)


def write_full(
    index_dir: Path, matrix: np.ndarray, rows: int, row_node: np.ndarray, ivf: Ivf | None
) -> str:
    """A new generation holding ``matrix[:rows]``; returns its id. Older generations are removed
    (a process that has one mapped keeps reading it: the file lives until it is unmapped)."""
    directory = index_dir / DIRECTORY
    make_dirs(directory)
    gen = os.urandom(8).hex()
    path = _vectors(directory, gen)
    dim = matrix.shape[1]
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "wb") as out:
            step = 65536
            for start in range(0, rows, step):
                out.write(np.ascontiguousarray(matrix[start : min(rows, start + step)], dtype=np.float32).tobytes())
            out.truncate((rows + _spare(rows)) * dim * 4)  # a sparse tail for rows appended in place
            out.flush()
            fsync_fd(out.fileno())
            _drop_cache(out.fileno())
        fsync_dir(directory)  # the new file's entry is durable before the meta names it
        _write_meta(directory, gen, dim, rows, row_node[:rows], ivf)
    except BaseException:
        path.unlink(missing_ok=True)
        raise
    for old in directory.glob("vectors.*.f32"):
        if old != path:
            old.unlink(missing_ok=True)
    return gen


def append(
    index_dir: Path, gen: str, matrix: np.ndarray, start: int, rows: int, row_node: np.ndarray, ivf: Ivf | None
) -> bool:
    """Append ``matrix[start:rows]`` to generation ``gen`` (which holds ``start`` rows); False when
    it has no room left (write a full generation instead)."""
    directory = index_dir / DIRECTORY
    path = _vectors(directory, gen)
    dim = matrix.shape[1]
    try:
        capacity = os.path.getsize(path) // (4 * dim)
    except OSError:
        return False
    if rows > capacity:
        return False
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, np.ascontiguousarray(matrix[start:rows], dtype=np.float32).tobytes(), start * dim * 4)
        fsync_fd(fd)
        _drop_cache(fd)
    finally:
        os.close(fd)
    _write_meta(directory, gen, dim, rows, row_node[:rows], ivf)
    return True


def _drop_cache(fd: int) -> None:
    """Drop the file's (clean, fsynced) pages from the page cache.

    Written pages sit in the cache as large folios (2 MB here), and a mapping that touches one
    byte of a large folio maps all of it: a search reading 15 MB of rows would count 200 MB
    against the process. Read back under MADV_RANDOM, pages come in one by one.
    """
    if hasattr(os, "posix_fadvise"):
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def _write_meta(directory: Path, gen: str, dim: int, rows: int, row_node: np.ndarray, ivf: Ivf | None) -> None:
    buffer = io.BytesIO()
    np.savez(
        buffer,
        header=np.array([_VERSION, dim, rows], dtype=np.int64),
        gen=np.frombuffer(gen.encode("ascii"), dtype=np.uint8),
        row_node=np.asarray(row_node, dtype=np.int64),
        centroids=ivf[0] if ivf else np.zeros((0, dim), dtype=np.float32),
        offsets=np.asarray(ivf[1] if ivf else [], dtype=np.int64),
        trained_rows=np.array(ivf[2] if ivf else -1, dtype=np.int64),
        tail_lists=np.asarray(ivf[3] if ivf else _NO_TAIL, dtype=np.int32),
    )
    atomic_write(directory / _META, buffer.getvalue())
