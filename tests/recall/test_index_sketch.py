"""The IVF search's sketch and its placed tail (sovseal/recall/vector_sketch.py, sovseal/recall/vector_index.py).

A large search scores the probed rows in the sketch (a quarter-width projection), then the best
few hundred exactly; rows added after the IVF build are placed in their lists and that placement
is kept in the snapshot. What must hold: recall@10 against exact search on real MiniLM vectors,
exact cosines in every result, and a snapshot whose placement is damaged or cut off by a crash is
still used safely.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from sovseal.recall import vector_index as index_module
from sovseal.recall import vector_sketch, vector_snapshot
from sovseal.recall.vector_index import VectorIndex

ROOT = str(Path(__file__).resolve().parents[2])

SUBJECTS = ["my sister", "the landlord", "our team lead", "the vet", "a neighbour", "my doctor", "the kids", "grandpa"]
ACTIONS = [
    "booked a flight to Lisbon for",
    "is allergic to peanuts since",
    "moved the project deadline to",
    "started learning the piano in",
    "paid the electricity invoice on",
    "adopted a rescue dog in",
    "lost the car keys again on",
    "planted tomatoes in the garden in",
    "asked about the database migration on",
    "ran a half marathon in",
]
WHEN = [
    "March",
    "the spring",
    "late August",
    "the week before Christmas",
    "Monday morning",
    "2019",
    "the summer holidays",
    "October",
    "the evening",
    "a rainy weekend",
]
TOPICS = [
    "Quarterly revenue grew because of the new subscription plan.",
    "The recipe needs two eggs, flour and a pinch of salt.",
    "Photosynthesis turns sunlight into chemical energy.",
    "The train to Berlin was cancelled because of a strike.",
    "Backups run every night at two and are kept for a month.",
    "The patient reported headaches after the new medication.",
    "The football match ended in a draw after extra time.",
    "Interest rates rose for the third time this year.",
]


def corpus() -> list[str]:
    """Varied short notes of the kind an agent stores (some 880 of them)."""
    notes = [f"{s} {a} {w}." for s, a, w in itertools.product(SUBJECTS, ACTIONS, WHEN)]
    return notes + [f"{t} ({i})" for i, t in enumerate(TOPICS * 10)]


@pytest.fixture(scope="module")
def real_vectors() -> np.ndarray:
    from sovseal.embed import Embedder

    return Embedder().embed_documents(corpus())  # the model ships with sovseal: no skip


def sketched(monkeypatch: pytest.MonkeyPatch) -> None:
    """Sketch and rescore at any size, rescoring 40 rows (the default 400 would be every row here),
    probing 15 % of the lists."""
    monkeypatch.setattr(index_module, "SKETCH_MIN_ROWS", 0)
    monkeypatch.setattr(index_module, "SKETCH_MIN_SCAN", 0)
    monkeypatch.setattr(index_module, "RESCORE_MIN", 40)
    monkeypatch.setattr(index_module, "IVF_MIN_PROBE", 8)
    monkeypatch.setattr(index_module, "EXACT_MAX_ALLOWED", 10)  # else a store this small is searched exactly


def test_sketched_ivf_search_keeps_recall_at_10_on_real_vectors_and_returns_exact_cosines(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, real_vectors: np.ndarray
) -> None:
    sketched(monkeypatch)
    n = len(real_vectors)
    queries, data = real_vectors[:60], real_vectors[60:]
    index = VectorIndex(tmp_path / "idx", real_vectors.shape[1], ivf_min_rows=200, probe_fraction=0.15)
    try:
        index.add(range(len(data) - 100), data[:-100])
        assert index.wait_ivf() and index._sketch is not None
        index.add(range(len(data) - 100, len(data)), data[-100:])  # after the build: placed in lists
        index.wait_ivf()
        ivf, sketch = index._ivf, index._sketch
        assert ivf is not None and ivf.assigned_rows == len(data) and sketch is not None and sketch.rows == len(data)
        allowed = np.ones(n, dtype=bool)
        overlaps = []
        for q in queries:
            found = index.search_scored(q, 10, allowed, keep=True)
            exact = index.search_scored(q, 10, allowed, exact=True)
            overlaps.append(len(set(found.nodes.tolist()) & set(exact.nodes.tolist())) / 10)
            rows = index._node_row[found.nodes]
            assert found.scores.tolist() == np.vecdot(index._matrix[rows], q).tolist()  # exact, not sketched
            assert found.known is not None
            scored = found.known.computed()
            assert len(scored) < len(data) // 2  # only the rescored rows
            assert np.array_equal(found.known[scored], np.vecdot(index._matrix[index._node_row[scored]], q))
        assert np.mean(overlaps) >= 0.95
        assert vector_sketch.dims_for(real_vectors.shape[1]) == real_vectors.shape[1] // 4
    finally:
        index.close()


def test_a_mask_that_hides_most_of_the_best_rows_still_gets_its_best_allowed_rows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, real_vectors: np.ndarray
) -> None:
    """Older versions of a path (or a filter) are not allowed: the rows rescored are chosen among
    the allowed ones, and with every list probed the result equals the exact search."""
    sketched(monkeypatch)
    data = real_vectors
    index = VectorIndex(tmp_path / "idx", data.shape[1], ivf_min_rows=200, probe_fraction=1.0)
    try:
        index.add(range(len(data)), data)
        assert index.wait_ivf() and index._sketch is not None
        rng = np.random.default_rng(3)
        for share in (0.9, 0.2, 0.03):
            allowed = rng.random(len(data)) < share
            for q in data[rng.choice(len(data), 10, replace=False)]:
                found = index.search(q, 10, allowed)
                exact = index.search(q, 10, allowed, exact=True)
                assert all(allowed[node] for node, _ in found)
                overlap = len({node for node, _ in found} & {node for node, _ in exact})
                assert overlap >= 9  # the sketch decides which rows get rescored, not their scores
                nodes = np.array([node for node, _ in found])
                assert [score for _, score in found] == index.scores_for(q, nodes).tolist()
    finally:
        index.close()


def test_a_replaced_vector_is_rescored_from_its_new_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, real_vectors: np.ndarray
) -> None:
    sketched(monkeypatch)
    data = real_vectors
    index = VectorIndex(tmp_path / "idx", data.shape[1], ivf_min_rows=200, probe_fraction=1.0)
    try:
        index.add(range(len(data)), data)
        assert index.wait_ivf() and index._sketch is not None
        target = data[5]
        index.add([700], target[None, :])  # node 700 now holds the same vector as node 5
        sketch = index._sketch
        assert sketch is not None
        row = index._node_row[700]
        assert np.allclose(sketch.data[row], target @ sketch.basis, atol=1e-6)
        found = dict(index.search(target, 5, np.ones(len(data), dtype=bool)))
        assert 700 in found and 5 in found
    finally:
        index.close()


def _placed_index(directory: Path, data: np.ndarray) -> VectorIndex:
    index = VectorIndex(directory, data.shape[1], ivf_min_rows=200, flush_interval=0.05)
    index.add(range(600), data[:600])
    assert index.wait_ivf()
    index.add(range(600, 700), data[600:700])
    index.wait_ivf()
    return index


def test_the_placement_of_rows_added_after_the_build_is_kept_in_the_snapshot(tmp_path: Path, real_vectors: np.ndarray) -> None:
    index = _placed_index(tmp_path / "idx", real_vectors)
    ivf = index._ivf
    assert ivf is not None and ivf.trained_rows == 600 and len(ivf.tail_lists) == 100
    placed = ivf.tail_lists.copy()
    index.close()
    found = vector_snapshot.load(tmp_path / "idx", real_vectors.shape[1])
    assert found is not None and np.array_equal(found.tail_lists, placed)
    reopened = VectorIndex(tmp_path / "idx", real_vectors.shape[1], ivf_min_rows=200)
    try:
        assert reopened._ivf is not None and np.array_equal(reopened._ivf.tail_lists, placed)
        reopened.add(range(700, 720), real_vectors[700:720])
        reopened.wait_ivf()
        assert reopened._ivf.assigned_rows == 720
    finally:
        reopened.close()
    found = vector_snapshot.load(tmp_path / "idx", real_vectors.shape[1])  # appended in place, placement with it
    assert found is not None and found.rows == 720 and len(found.tail_lists) == 120


@pytest.mark.parametrize("damage", ["out of range", "too long", "two-dimensional"])
def test_a_damaged_placement_is_ignored_and_the_rows_placed_again(tmp_path: Path, real_vectors: np.ndarray, damage: str) -> None:
    index = _placed_index(tmp_path / "idx", real_vectors)
    placed = index._ivf.tail_lists.copy()  # type: ignore[union-attr]
    index.close()
    meta = tmp_path / "idx" / "snapshot" / "meta.npz"
    with np.load(meta) as stored:
        arrays = {name: stored[name] for name in stored.files}
    arrays["tail_lists"] = {
        "out of range": np.full(100, 10**6, dtype=np.int32),
        "too long": np.zeros(500, dtype=np.int32),
        "two-dimensional": np.zeros((10, 10), dtype=np.int32),
    }[damage]
    with open(meta, "wb") as out:
        np.savez(out, **arrays)
    reopened = VectorIndex(tmp_path / "idx", real_vectors.shape[1], ivf_min_rows=200)
    try:
        assert reopened._ivf is not None and len(reopened._ivf.tail_lists) == 0  # the matrix is still used
        assert len(reopened) == 700
        reopened.wait_ivf()
        assert np.array_equal(reopened._ivf.tail_lists, placed)  # placed again, the same way
        query = real_vectors[650]
        assert reopened.search(query, 1, np.ones(700, dtype=bool))[0][0] == 650
    finally:
        reopened.close()


PLACEMENT_CRASHER = """
import os, signal, sys
from pathlib import Path
import numpy as np
sys.path.insert(0, sys.argv[3])
from sovseal.recall import vector_snapshot
from sovseal.recall.vector_index import VectorIndex

directory, point = Path(sys.argv[1]), sys.argv[2]
data = np.load(directory.parent / "data.npy")


def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)


index = VectorIndex(directory, data.shape[1], ivf_min_rows=200, flush_interval=0.05)
index.add(range(700, 720), data[700:720])
index.wait_ivf()
index.flush()
if point == "appending":  # rows written in place, the meta (rows, placement) not yet replaced
    vector_snapshot.os.replace = die
elif point == "rewriting":  # a new generation written, the meta not yet replaced
    index._snapshot_order = False
    vector_snapshot.os.replace = die
index.close()
"""


@pytest.mark.parametrize("point", ["appending", "rewriting"])
def test_sigkill_while_writing_the_placement_leaves_the_previous_snapshot_usable(
    tmp_path: Path, real_vectors: np.ndarray, point: str
) -> None:
    np.save(tmp_path / "data.npy", real_vectors)
    index = _placed_index(tmp_path / "idx", real_vectors)
    placed = index._ivf.tail_lists.copy()  # type: ignore[union-attr]
    index.close()
    before = vector_snapshot.current(tmp_path / "idx")
    done = subprocess.run([sys.executable, "-c", PLACEMENT_CRASHER, str(tmp_path / "idx"), point, ROOT], check=False, timeout=120)
    assert done.returncode == -9
    assert vector_snapshot.current(tmp_path / "idx") == before
    found = vector_snapshot.load(tmp_path / "idx", real_vectors.shape[1])
    assert found is not None and found.rows == 700 and np.array_equal(found.tail_lists, placed)
    reopened = VectorIndex(tmp_path / "idx", real_vectors.shape[1], ivf_min_rows=200)
    try:
        reopened.wait_ivf()
        assert reopened.missing(range(720)) == []  # read from the table: stored before the crash
        everything = np.ones(800, dtype=bool)
        assert reopened.search(real_vectors[710], 1, everything)[0][0] == 710  # from the table
        assert reopened.search(real_vectors[650], 1, everything)[0][0] == 650  # from the snapshot
    finally:
        reopened.close()
    assert os.path.exists(tmp_path / "idx" / "snapshot" / "meta.npz")
