"""Opening a store's vector index for one embedder: the recorded model is checked first.

An index holds the vectors of one model; vectors of two models cannot be compared. So the first
opening of ``index/`` records the embedder's fingerprint in ``index/model.json`` (under the index's
open lock, so two first openings record one model), and every later opening compares the
embedder at hand with the record. A different or unreadable record does not open the index: the
caller gets an :class:`~sovseal.errors.EmbedderMismatchError` to keep and raise on recall, while
reads and writes of the store go on (docs/embedder.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sovseal.durable import atomic_write, make_dirs
from sovseal.embed.fingerprint import RECORD, decode_record, describe, encode_record, same_model
from sovseal.errors import EmbedderMismatchError
from sovseal.filelock import WriterLock
from sovseal.recall import vector_index


def open_vector_index(
    store_path: Path, current: dict[str, Any], dim: int, *, read_only: bool, owner: str
) -> vector_index.VectorIndex | EmbedderMismatchError:
    """The index under ``store_path/index`` for the embedder fingerprinted ``current``, or the
    error that recall must raise because the index holds another model's vectors."""
    directory = store_path / "index"
    recorded, unreadable = _recorded_model(directory, current, read_only=read_only)
    if unreadable is not None or (recorded is not None and not same_model(recorded, current)):
        what = f"an unreadable {directory / RECORD} ({unreadable})" if unreadable else describe(recorded)
        return EmbedderMismatchError(
            f"the vector index of {store_path} was embedded by {what}, and this handle embeds with {describe(current)}: "
            "vectors of two models cannot be compared, so recall is refused until the index is rebuilt. "
            "Reads work, and new memories are still stored (the rebuild embeds them).",
            advice=(
                "To switch the store to the current model, run `sovseal rebuild-index` with the same SOVSEAL_MODEL_DIR "
                "(it re-embeds every memory, with a progress bar, and records the model); "
                "from Python, sovseal.rebuild_index(path, embedder=...) does the same for any embedder. "
                "To keep the old model, open the store with it again (the same SOVSEAL_MODEL_DIR or embedder)"
            ),
            cli_advice=(
                "to switch the store to the current model, run `sovseal rebuild-index` with the same SOVSEAL_MODEL_DIR "
                "(it re-embeds every memory, with a progress bar, and records the model); to keep the old model, "
                "run the command with the SOVSEAL_MODEL_DIR the store was built with"
            ),
            recorded=recorded,
            current=current,
        )
    if not read_only:
        vector_index.remove_discarded(directory)  # what a rebuild-index a crash interrupted left aside
    # Looked up at call time, not bound at import: a test may substitute the index class.
    return vector_index.VectorIndex(directory, dim, read_only=read_only, owner=owner)


def _recorded_model(
    directory: Path, current: dict[str, Any], *, read_only: bool
) -> tuple[dict[str, Any] | None, str | None]:
    """(the fingerprint ``index/model.json`` records, why it is unreadable). Without one (a new
    index, or one made before fingerprints were recorded), ``current`` is recorded and adopted;
    a read-only store adopts it without writing."""
    path = directory / RECORD
    if read_only:
        if not path.exists():
            return None, None
        return _read_record(path)
    make_dirs(directory)
    lock = WriterLock(directory / "open.lock", timeout=60.0)  # the index's own open lock
    try:
        lock.acquire()
        try:
            if not path.exists():
                atomic_write(path, encode_record(current))
                return None, None
            return _read_record(path)
        finally:
            lock.release()
    finally:
        lock.close()


def _read_record(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    try:
        return decode_record(path.read_bytes()), None
    except (OSError, ValueError) as exc:
        return None, str(exc)
