"""Checkpoints (docs/design.md, "Checkpoints (cold open)"): a cache of what replay computes.

Every test compares a store opened from a checkpoint with the same store replayed whole (the
checkpoint set aside): the lineage must be identical, array for array, and so must everything a
user reads. A checkpoint that does not fit (damaged, older, another store, another journal) must
be ignored, never trusted.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from sovseal import Sovseal
from sovseal.store import CHECKPOINT, LocalStore
from tests.fakes import fake_embed


def _lineage_arrays(store: LocalStore) -> dict[str, np.ndarray]:
    """The lineage's checkpoint arrays, every branch's view computed (a view is a cache kept in
    the order it was built: compared as a mapping)."""
    with store.reading() as lineage:
        for branch in lineage.branches.values():
            lineage.view(branch)
        return lineage.to_arrays()


def _replayed(directory: Path, key: bytes) -> dict[str, np.ndarray]:
    """The lineage of ``directory`` replayed from its journal alone (the checkpoint set aside)."""
    path = directory / CHECKPOINT
    aside = path.with_name("aside")
    moved = path.exists()
    if moved:
        path.rename(aside)
    try:
        store = LocalStore(directory, key, read_only=True)
        try:
            assert store.restored is None
            return _lineage_arrays(store)
        finally:
            store.close()
    finally:
        if moved:
            aside.rename(path)


def _same(left: dict[str, np.ndarray], right: dict[str, np.ndarray]) -> None:
    assert left.keys() == right.keys()
    for name in left:
        if name.startswith("v") and name.endswith(".paths"):
            view = name[: -len(".paths")]
            assert dict(zip(left[name].tolist(), left[f"{view}.nodes"].tolist())) == dict(
                zip(right[name].tolist(), right[f"{view}.nodes"].tolist())
            ), view
        elif not name.endswith(".nodes"):
            assert np.array_equal(left[name], right[name], equal_nan=left[name].dtype.kind == "f"), name


def _busy_store(directory: Path, key: bytes) -> Sovseal:
    """A store with two branches, tombstones, a reinforcement and a rollback."""
    mem = Sovseal(directory, key=key, embedder=fake_embed)
    for i in range(40):
        mem.store(f"notes.{i % 15}", {"i": i}, metadata={"k": i % 3})
    mem.delete("notes.3")
    mem.store("notes.4", {"i": 34})  # the same value again: a reinforcement
    fork_at = mem.snapshot()
    assert fork_at is not None
    mem.fork(branch="side")
    mem.store("side.only", {"x": 1})
    mem.checkout("main")
    mem.store("main.more", {"y": 1})
    mem.rollback(fork_at)
    mem.store("after.rollback", {"y": 2})
    return mem


def test_restored_lineage_equals_replay_and_reads_match(tmp_path: Path) -> None:
    key = os.urandom(32)
    with _busy_store(tmp_path, key) as mem:
        assert mem._store.write_checkpoint() is not None
        log, state, heads = mem.log(), mem.state(), mem.heads()
    with Sovseal(tmp_path, key=key, embedder=fake_embed) as mem:
        assert mem._store.restored is not None
        _same(_lineage_arrays(mem._store), _replayed(tmp_path, key))
        assert (mem.log(), mem.state(), mem.heads()) == (log, state, heads)
        assert mem.view("side").get("side.only").payload == {"x": 1}
        assert mem.verify().ok


def test_frames_after_the_checkpoint_are_replayed(tmp_path: Path) -> None:
    key = os.urandom(32)
    with _busy_store(tmp_path, key) as mem:
        mem._store.write_checkpoint()
        for i in range(10):
            mem.store(f"later.{i}", {"i": i})
        mem.delete("notes.5")
        mem.reinforce("notes.6")
        expected = mem.state()
    with Sovseal(tmp_path, key=key, embedder=fake_embed) as mem:
        assert mem._store.restored is not None
        assert mem.state() == expected
        _same(_lineage_arrays(mem._store), _replayed(tmp_path, key))
        mem.store("and.then", {"z": 1})  # appends continue the journal's sequence
        assert mem.verify().ok
    with Sovseal(tmp_path, key=key, embedder=fake_embed) as mem:
        assert mem.get("and.then").payload == {"z": 1}
