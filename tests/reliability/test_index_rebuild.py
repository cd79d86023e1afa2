"""Compaction and index rebuilds while writers run: no lost and no resurrected records.

LanceDB has had bugs where concurrent writes and ``optimize()`` lost or resurrected rows.
sovseal's index is rebuildable from the journal, so
the property to prove is about what recall returns: after background IVF builds, frequent
compactions by two handles on one table, the table deleted from under the writers, and a third
handle rebuilding it while a writer goes on, every record visible on every branch is found by
recall (nothing lost) and recall returns nothing that is not visible (nothing resurrected: no
deleted path, no record of another branch, no record rolled back away).

Test scale without changing defaults: the writers' indexes are the real ``VectorIndex`` built with
its own parameters (``ivf_min_rows``, ``compact_every``, ``flush_batch``) instead of the defaults
(8,000 rows, every 32 batches), and ``EXACT_MAX_ALLOWED`` is lowered so searches go through the
IVF lists instead of falling back to an exact scan at up to 4,000 allowed rows.
"""

from __future__ import annotations

import random
import shutil
import threading
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pytest

from sovseal import Sovseal
from sovseal.recall import vector_index as index_module
from sovseal.recall.vector_index import VectorIndex
from sovseal.sdk.client import MAX_RECALL_K
from sovseal.storage.entries import make_entry, memory_text
from tests.fakes import FAKE_DIM, fake_embed
from tests.reliability._soak import scale


class SmallIndex(VectorIndex):
    """The real index with test-scale parameters; remembers its instances to count IVF builds."""

    made: ClassVar[list[VectorIndex]] = []

    def __init__(self, directory: Path, dim: int, **_: Any) -> None:
        super().__init__(directory, dim, flush_interval=0.05, flush_batch=32, compact_every=2, ivf_min_rows=150)
        SmallIndex.made.append(self)


def vector_of(path: str, payload: Any) -> np.ndarray:
    v = fake_embed([memory_text(make_entry("store", path, payload))])[0]
    return v / np.linalg.norm(v)


def main_writer(mem: Sovseal, count: int, model: dict[str, Any], rng: random.Random, errors: list[BaseException]) -> None:
    """Stores and deletes on main; ``model`` is main's expected state."""
    try:
        for i in range(count):
            path, payload = f"main.{i}", {"i": i, "text": f"main memory {i}"}
            mem.store(path, payload)
            model[path] = payload
            if i % 7 == 6:
                victim = f"main.{rng.randrange(i)}"
                if mem.delete(victim) is not None:
                    model.pop(victim)
    except BaseException as exc:  # noqa: BLE001 - surfaced by the test thread
        errors.append(exc)


def fork_writer(mem: Sovseal, rounds: int, models: dict[str, dict[str, Any]], errors: list[BaseException]) -> None:
    """Forks main's HEAD, stores and deletes on the fork, rolls it back to the fork point, stores again."""
    try:
        while mem.snapshot() is None:  # fork from a main that has records
            threading.Event().wait(0.01)
        for r in range(rounds):
            mem.checkout("main")
            base = mem.snapshot()
            name = mem.fork(base, branch=f"fork{r}")
            state = dict(mem.state())
            for j in range(6):
                mem.store(f"fork{r}.{j}", f"fork {r} memory {j}")
            mem.delete(f"fork{r}.0")
            mem.rollback(base)  # everything stored on the fork since is no longer visible on it
            mem.store(f"fork{r}.after", f"fork {r} after rollback")
            state[f"fork{r}.after"] = f"fork {r} after rollback"
            models[name] = state
    except BaseException as exc:  # noqa: BLE001
        errors.append(exc)


def check_recall(mem: Sovseal, branch: str, state: dict[str, Any]) -> int:
    """Every visible record is recall's top hit for its own vector; recall returns nothing invisible."""
    for path, payload in state.items():
        found = mem.recall_by_vector(vector_of(path, payload), k=1, branch=branch)
        assert [(m.path, m.payload) for m in found] == [(path, payload)], f"lost on {branch}: {path}"
    probe = np.random.default_rng(len(state)).standard_normal(FAKE_DIM)
    everything = mem.recall_by_vector(probe, k=min(len(state) + 20, MAX_RECALL_K), branch=branch)
    for m in everything:
        assert m.path in state and state[m.path] == m.payload, f"resurrected on {branch}: {m.path}"
    assert len(everything) == min(len(state), MAX_RECALL_K)
    return len(state)


def test_ivf_builds_compactions_and_a_lost_index_lose_and_resurrect_nothing(
    tmp_path: Path, key: bytes, monkeypatch: pytest.MonkeyPatch, figures: dict[str, Any]
) -> None:
    """Two handles write (main: stores and deletes; forks: fork, store, delete, rollback) while their
    indexes build IVF lists and compact; the table is deleted mid-run and a third handle rebuilds it
    while the main writer goes on. Afterwards recall agrees exactly with state on every branch."""
    monkeypatch.setattr(index_module, "EXACT_MAX_ALLOWED", 20)
    monkeypatch.setattr(index_module, "VectorIndex", SmallIndex)  # the client imports it from there when it opens one
    SmallIndex.made.clear()
    store = tmp_path / "store"
    rng = random.Random(7)
    count, rounds = scale(400, 3000), scale(6, 40)
    a = Sovseal(store, key=key, embedder=fake_embed)
    b = Sovseal(store, key=key, embedder=fake_embed)
    a.ready()
    b.ready()
    index_a = SmallIndex.made[0]
    main_model: dict[str, Any] = {}
    fork_models: dict[str, dict[str, Any]] = {}
    errors: list[BaseException] = []
    writers = [
        threading.Thread(target=main_writer, args=(a, count, main_model, rng, errors)),
        threading.Thread(target=fork_writer, args=(b, rounds, fork_models, errors)),
    ]
    for t in writers:
        t.start()
    # The table disappears from under both writers once the first IVF lists exist.
    while index_a.ivf_builds == 0 and writers[0].is_alive():
        writers[0].join(0.05)
    shutil.rmtree(store / "index" / "vectors.lance", ignore_errors=True)
    # A third handle opens meanwhile: its table is gone or torn, so it rebuilds by re-embedding.
    with Sovseal(store, key=key, embedder=fake_embed) as c:
        c.checkout("main")
        rebuilt = len(c.recall_by_vector(np.ones(FAKE_DIM), k=5))
    for t in writers:
        t.join(timeout=300)
    assert not errors, errors
    ivf_builds = sum(i.ivf_builds for i in SmallIndex.made)
    a.close()
    b.close()
    assert ivf_builds > 0, "no IVF index was built: the scenario did not exercise it"

    with Sovseal(store, key=key, embedder=fake_embed) as mem:  # a fresh handle: loads or rebuilds the index
        assert mem.verify().ok
        checked = 0
        for branch, model in [("main", main_model), *fork_models.items()]:
            mem.checkout(branch)
            assert mem.state() == model, branch
            checked += check_recall(mem, branch, model)
    figures.update(
        records=count,
        forks=len(fork_models),
        ivf_builds=ivf_builds,
        recall_checks=checked,
        deleted_on_main=count - len(main_model),
        third_handle_results=rebuilt,
        tables_rebuilt=sum(i.rebuilt for i in SmallIndex.made),
    )
