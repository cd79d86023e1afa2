"""The vector index: a LanceDB table of (node, vector) kept up to date in the background.

It is an index, not the source of truth (DESIGN.md §4): the journal holds every record and the
table can be dropped and rebuilt by re-embedding. So ``store`` never waits on LanceDB: a new
vector goes to an in-memory pending set that searches see at once, and a worker thread adds
pending vectors in batches (one Lance version per batch instead of one per record) and
compacts the table every so often. Vectors are plaintext by necessity (see docs/security.md);
no path, payload or id other than the node number is written here.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections.abc import Iterable
from datetime import timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa

log = logging.getLogger(__name__)

_TABLE = "vectors"
#: Above this many allowed nodes, searching with an ``IN (...)`` prefilter costs more than
#: over-fetching and filtering.
_PREFILTER_MAX = 4096


class VectorIndex:
    def __init__(
        self,
        directory: Path,
        dim: int,
        *,
        flush_interval: float = 0.25,
        flush_batch: int = 512,
        compact_every: int = 32,
    ) -> None:
        import lancedb  # imported here: it is slow to import and only this module needs it

        self.directory = directory
        self.dim = dim
        self._flush_interval = flush_interval
        self._flush_batch = flush_batch
        self._compact_every = compact_every
        self._lock = threading.Lock()
        self._pending: dict[int, np.ndarray] = {}
        self._indexed: set[int] = set()
        self._adds_since_compact = 0
        self.last_error: str | None = None
        self.rebuilt = False
        self._db = lancedb.connect(str(directory))
        self._schema = pa.schema([pa.field("node", pa.int64()), pa.field("vector", pa.list_(pa.float32(), dim))])
        self._table = self._open_table()
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._worker = threading.Thread(target=self._run, name="sovseal-index", daemon=True)
        self._worker.start()

    def _open_table(self):  # noqa: ANN202 - lancedb's Table type is not exported stably
        """Open the table, or start it afresh when it is missing, of another dimension, or unreadable.

        Lance does not fsync on local disk, so a crash can leave an unreadable newest manifest;
        since the table is only an index, the answer is to rebuild it, never to fail the store.
        """
        try:
            if _TABLE in self._db.list_tables().tables:
                table = self._db.open_table(_TABLE)
                if table.schema.field("vector").type == self._schema.field("vector").type:
                    nodes = table.to_lance().to_table(columns=["node"]).column("node").to_pylist()
                    self._indexed = set(nodes)
                    return table
                log.warning("vector index has another dimension; rebuilding it")
        except Exception as exc:  # noqa: BLE001 - any failure to read an index means: rebuild it
            log.warning("vector index unreadable (%s); rebuilding it from the journal", exc)
        self.rebuilt = True
        shutil.rmtree(self.directory / f"{_TABLE}.lance", ignore_errors=True)
        return self._db.create_table(_TABLE, schema=self._schema, mode="overwrite")

    # -- writing ---------------------------------------------------------------------------

    def add(self, nodes: Iterable[int], vectors: np.ndarray) -> None:
        with self._lock:
            for node, vector in zip(nodes, vectors, strict=True):
                self._pending[node] = np.asarray(vector, dtype=np.float32)
            if len(self._pending) >= self._flush_batch:
                self._wake.set()

    def pending_count(self) -> int:
        with self._lock:
            return len(self._pending)

    def missing(self, nodes: Iterable[int]) -> list[int]:
        """The nodes that have no vector yet, neither indexed nor pending."""
        with self._lock:
            return [n for n in nodes if n not in self._indexed and n not in self._pending]

    def flush(self) -> None:
        """Write every pending vector to LanceDB now (the worker otherwise does it in batches)."""
        with self._lock:
            batch = dict(self._pending)
        if not batch:
            return
        nodes = np.fromiter(batch.keys(), dtype=np.int64, count=len(batch))
        matrix = np.stack(list(batch.values())).astype(np.float32, copy=False)
        data = pa.table(
            {
                "node": pa.array(nodes, pa.int64()),
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(matrix.ravel()), self.dim),
            }
        )
        self._table.add(data)
        with self._lock:
            for node in batch:
                if self._pending.get(node) is batch[node]:
                    del self._pending[node]
            self._indexed.update(batch)
            self._adds_since_compact += 1
        if self._adds_since_compact >= self._compact_every:
            self.compact()

    def compact(self) -> None:
        """Merge the small fragments that batched adds leave behind, and drop old versions."""
        self._table.optimize(cleanup_older_than=timedelta(minutes=10))
        self._adds_since_compact = 0

    def _run(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self._flush_interval)
            self._wake.clear()
            try:
                self.flush()
                self.last_error = None
            except Exception as exc:  # noqa: BLE001 - keep pending vectors and retry next round
                self.last_error = f"{type(exc).__name__}: {exc}"
                log.warning("vector index flush failed, will retry: %s", exc)

    def close(self) -> None:
        self._stop.set()
        self._wake.set()
        self._worker.join()
        try:
            self.flush()
        except Exception as exc:  # noqa: BLE001 - an index that fails to flush is rebuilt on open
            log.warning("vector index flush on close failed: %s", exc)

    # -- searching -------------------------------------------------------------------------

    def search(self, vector: np.ndarray, limit: int, allowed: set[int]) -> list[tuple[int, float]]:
        """Up to ``limit`` (node, cosine similarity) pairs among ``allowed``, best first."""
        if not allowed or limit <= 0:
            return []
        best: dict[int, float] = {}
        with self._lock:
            pending = [(n, v) for n, v in self._pending.items() if n in allowed]
            indexed = len(self._indexed)
        if pending:
            matrix = np.stack([v for _, v in pending])
            for (node, _), sim in zip(pending, matrix @ vector, strict=True):
                best[node] = float(sim)
        if indexed:
            query = self._table.search(np.asarray(vector, dtype=np.float32)).distance_type("cosine")
            if len(allowed) <= _PREFILTER_MAX:
                ids = ",".join(str(n) for n in allowed)
                rows = query.where(f"node IN ({ids})", prefilter=True).limit(limit).to_arrow()
            else:
                rows = query.limit(limit * 4 + 64).to_arrow()
            for node, dist in zip(rows["node"].to_pylist(), rows["_distance"].to_pylist(), strict=True):
                if node in allowed:
                    best[node] = max(best.get(node, -2.0), 1.0 - float(dist))
        return sorted(best.items(), key=lambda kv: kv[1], reverse=True)[:limit]
