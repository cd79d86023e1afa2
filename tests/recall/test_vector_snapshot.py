"""The vector index's snapshot (sovseal/recall/vector_snapshot.py): a cold open maps it instead of
reading the LanceDB table, and it never holds less than it claims or more than the table."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sovseal import Sovseal
from sovseal.recall import vector_snapshot
from sovseal.recall.vector_index import VectorIndex
from tests.fakes import FAKE_DIM, fake_embed

ROOT = str(Path(__file__).resolve().parents[2])


class Counting:
    """fake_embed that counts the texts it embeds (a re-embedding is what the snapshot must avoid)."""

    def __init__(self) -> None:
        self.texts = 0

    def __call__(self, texts: list[str]) -> np.ndarray:
        self.texts += len(texts)
        return fake_embed(texts)


def _fill(directory: Path, key: bytes, n: int, prefix: str = "v") -> None:
    with Sovseal(directory, key=key, embedder=Counting()) as mem:
        mem.store_many([{"path": f"{prefix}.{i}", "payload": {"i": i}, "text": f"{prefix} text {i}"} for i in range(n)])
        mem.recall("warm", k=1)


def test_close_writes_a_snapshot_that_the_next_open_maps_without_the_table(tmp_path: Path) -> None:
    key = os.urandom(32)
    _fill(tmp_path, key, 300)
    gen, rows = vector_snapshot.current(tmp_path / "index")  # type: ignore[misc]
    assert rows == 300 and gen
    counting = Counting()
    with Sovseal(tmp_path, key=key, embedder=counting) as mem:
        found = mem.recall("v text 17", k=3)
        index = mem._vector_index()
        assert not index._table_open  # nothing was read from LanceDB
        assert isinstance(index._matrix.base, np.memmap) or isinstance(index._matrix.base.base, np.memmap)  # mapped, not read
        assert found[0].path == "v.17"
        assert counting.texts == 1  # the query only
    table = VectorIndex(tmp_path / "index", FAKE_DIM)  # the same vectors, loaded from the table
    shutil.rmtree(tmp_path / "index" / "snapshot")
    try:
        fresh = VectorIndex(tmp_path / "index", FAKE_DIM)
        fresh.wait_ivf()
        query = fake_embed(["v text 17"])[0]
        allowed = np.ones(400, dtype=bool)
        assert fresh.search(query, 10, allowed, exact=True) == table.search(query, 10, allowed, exact=True)
        fresh.close()
    finally:
        table.close()


def test_rows_added_after_the_snapshot_are_appended_in_place(tmp_path: Path) -> None:
    key = os.urandom(32)
    _fill(tmp_path, key, 100)
    gen, _ = vector_snapshot.current(tmp_path / "index")  # type: ignore[misc]
    _fill(tmp_path, key, 50, prefix="w")
    assert vector_snapshot.current(tmp_path / "index") == (gen, 150)
    with Sovseal(tmp_path, key=key, embedder=Counting()) as mem:
        assert mem.recall("w text 3", k=1)[0].path == "w.3"
        assert mem.recall("v text 3", k=1)[0].path == "v.3"


WRITER = """
import sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from sovseal import Sovseal
from tests.recall.test_vector_snapshot import Counting
mem = Sovseal(Path(sys.argv[1]), key=bytes.fromhex(sys.argv[2]), embedder=Counting())
mem.store_many([{"path": f"other.{i}", "payload": {"i": i}, "text": f"other text {i}"} for i in range(40)])
mem._vector_index().flush()  # in the table, but no snapshot: the process dies before it closes
import os
os._exit(0)
"""


def test_vectors_another_process_stored_since_are_read_from_the_table_not_embedded_again(tmp_path: Path) -> None:
    key = os.urandom(32)
    _fill(tmp_path, key, 100)
    done = subprocess.run([sys.executable, "-c", WRITER, str(tmp_path), key.hex(), ROOT], check=False, timeout=120)
    assert done.returncode == 0
    assert vector_snapshot.current(tmp_path / "index")[1] == 100  # type: ignore[index]
    counting = Counting()
    with Sovseal(tmp_path, key=key, embedder=counting) as mem:
        assert mem.recall("other text 7", k=1)[0].path == "other.7"
        assert counting.texts == 1  # the query: the 40 vectors came from the table
        assert mem._vector_index()._table_open


def test_a_damaged_snapshot_falls_back_to_the_table(tmp_path: Path) -> None:
    key = os.urandom(32)
    _fill(tmp_path, key, 80)
    meta = tmp_path / "index" / "snapshot" / "meta.npz"
    meta.write_bytes(meta.read_bytes()[:100])
    counting = Counting()
    with Sovseal(tmp_path, key=key, embedder=counting) as mem:
        assert mem.recall("v text 5", k=1)[0].path == "v.5"
        assert counting.texts == 1
        assert mem._vector_index()._table_open
    for vectors in (tmp_path / "index" / "snapshot").glob("vectors.*.f32"):  # a vectors file cut short
        with open(vectors, "r+b") as f:
            f.truncate(100)
    with Sovseal(tmp_path, key=key, embedder=counting) as mem:
        assert mem.recall("v text 6", k=1)[0].path == "v.6"
        assert counting.texts == 2


@pytest.mark.parametrize("large", [False, True])
def test_damaged_rows_of_the_snapshot_are_dropped_and_embedded_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, large: bool) -> None:
    """Bit flips in the vectors file (the exponent of one float per row) would score those rows
    around 1e36 and rank them first: they are found when the snapshot is read (a small one at
    once, a large one when it is warmed), zeroed, and their records embedded again from the journal."""
    if large:  # every snapshot counts as large, and is warmed at once
        monkeypatch.setattr("sovseal.recall.vector_index.WARM_COPY_BYTES", 0)
        monkeypatch.setattr("sovseal.recall.vector_index.WARM_DELAY", 0.0)
    key = os.urandom(32)
    _fill(tmp_path, key, 80)
    [vectors] = (tmp_path / "index" / "snapshot").glob("vectors.*.f32")
    data = bytearray(vectors.read_bytes())
    damaged_rows = (3, 40, 77)
    for row in damaged_rows:
        data[row * FAKE_DIM * 4 + 3] ^= 0x40  # the top exponent bit of the row's first float
    vectors.write_bytes(bytes(data))
    counting = Counting()
    with Sovseal(tmp_path, key=key, embedder=counting) as mem:
        assert mem._vector_index().warmed.wait(30)  # (that embeds one text, to learn the dimension)
        before = counting.texts
        found = mem.recall("v text 5", k=5)
        assert found[0].path == "v.5" and all(m.score is not None and m.score <= 1.0 for m in found)
        assert counting.texts - before == 1 + len(damaged_rows)  # the query, and the three damaged rows' records
        index = mem._vector_index()
        query = fake_embed(["v text 5"])[0]
        query = query / np.linalg.norm(query)
        nodes, scores = index.search_arrays(query, 80, np.ones(200, dtype=bool), exact=True)
        assert len(nodes) == 80 and float(np.abs(scores).max()) <= 1.0 + 1e-5


def test_another_stores_index_copied_in_is_not_used(tmp_path: Path) -> None:
    """Its vectors would rank this store's records by another's texts: it is rebuilt from the journal."""
    key = os.urandom(32)
    mine, other = tmp_path / "mine", tmp_path / "other"
    _fill(mine, key, 60)
    _fill(other, key, 60, prefix="w")  # the same nodes, other texts
    shutil.rmtree(mine / "index")
    shutil.copytree(other / "index", mine / "index")
    counting = Counting()
    with Sovseal(mine, key=key, embedder=counting) as mem:
        assert mem.recall("v text 17", k=1)[0].path == "v.17"
        assert counting.texts == 1 + 60  # the query, and every record embedded again
    with Sovseal(mine, key=key, embedder=counting) as mem:  # rebuilt as this store's own: used from now on
        assert mem.recall("v text 18", k=1)[0].path == "v.18"
        assert counting.texts == 1 + 60 + 1


def test_the_snapshot_files_are_private(tmp_path: Path) -> None:
    key = os.urandom(32)
    _fill(tmp_path, key, 20)
    for path in (tmp_path / "index" / "snapshot").iterdir():
        assert path.stat().st_mode & 0o077 == 0, path


SNAPSHOT_CRASHER = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[4])
from sovseal import Sovseal
from sovseal.recall import vector_snapshot
from tests.recall.test_vector_snapshot import Counting

directory, key, point = Path(sys.argv[1]), bytes.fromhex(sys.argv[2]), sys.argv[3]


def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)


mem = Sovseal(directory, key=key, embedder=Counting())
mem.store_many([{"path": f"late.{i}", "payload": {"i": i}, "text": f"late text {i}"} for i in range(30)])
mem.recall("late", k=1)
if point == "appending":  # rows written in place, the meta not yet replaced
    vector_snapshot.os.replace = die
elif point == "rewriting":  # a new generation written, the meta not yet replaced
    mem._vector_index()._snapshot_order = False
    vector_snapshot.os.replace = die
mem.close()
"""


@pytest.mark.parametrize("point", ["appending", "rewriting"])
def test_sigkill_while_writing_the_snapshot_leaves_the_previous_one_usable(tmp_path: Path, point: str) -> None:
    key = os.urandom(32)
    _fill(tmp_path, key, 60)
    before = vector_snapshot.current(tmp_path / "index")
    done = subprocess.run([sys.executable, "-c", SNAPSHOT_CRASHER, str(tmp_path), key.hex(), point, ROOT], check=False, timeout=120)
    assert done.returncode == -9
    assert vector_snapshot.current(tmp_path / "index") == before
    counting = Counting()
    with Sovseal(tmp_path, key=key, embedder=counting) as mem:
        assert mem.recall("late text 4", k=1)[0].path == "late.4"  # from the table: flushed before the snapshot
        assert mem.recall("v text 4", k=1)[0].path == "v.4"  # from the previous snapshot
        assert counting.texts == 2  # the two queries: nothing was embedded again


def test_a_small_mapped_matrix_is_copied_into_memory_when_warmed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Past WARM_DELAY a small matrix no longer maps the snapshot (a copy on huge pages), searches
    return the same, and a vector stored before and after the copy is found and persisted."""
    from sovseal.recall import vector_index as index_module

    monkeypatch.setattr(index_module, "WARM_DELAY", 0.5)  # long enough to see the mapping first
    key = os.urandom(32)
    _fill(tmp_path, key, 300)
    with Sovseal(tmp_path, key=key, embedder=Counting()) as mem:
        index = mem._vector_index()
        mapped = index._matrix
        before = mem.recall("v text 17", k=5)
        assert index.warmed.wait(10)
        assert index._matrix is not mapped and index._matrix.base is None  # its own memory
        assert np.array_equal(index._matrix[:300], mapped[:300])
        after = mem.recall("v text 17", k=5)
        assert [m.path for m in after] == [m.path for m in before]
        assert [m.score for m in after] == pytest.approx([m.score for m in before], rel=1e-6)  # decay moves on
        mem.store("w.1", {"i": 1}, text="w text one")
        assert mem.recall("w text one", k=1)[0].path == "w.1"
    with Sovseal(tmp_path, key=key, embedder=Counting()) as mem:
        assert mem.recall("w text one", k=1)[0].path == "w.1"
        assert vector_snapshot.current(tmp_path / "index")[1] == 301  # type: ignore[index]
