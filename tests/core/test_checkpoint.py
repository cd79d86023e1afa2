"""Checkpoints (docs/design.md, "Checkpoints (cold open)"): a cache of what replay computes.

Every test compares a store opened from a checkpoint with the same store replayed whole (the
checkpoint set aside): the lineage must be identical, array for array, and so must everything a
user reads. A checkpoint that does not fit (damaged, older, another store, another journal) must
be ignored, never trusted.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from sovseal import Sovseal
from sovseal.crypto.primitives import padme
from sovseal.storage import checkpoint
from sovseal.storage.frames import Kind
from sovseal.storage.journal import HEADER, JOURNAL_HEADER
from sovseal.storage.store import CHECKPOINT, LocalStore
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
            assert dict(zip(left[name].tolist(), left[f"{view}.nodes"].tolist(), strict=True)) == dict(
                zip(right[name].tolist(), right[f"{view}.nodes"].tolist(), strict=True)
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


def _checkpointed(directory: Path, key: bytes, records: int = 30) -> dict[str, object]:
    """A store of ``records`` records with a checkpoint covering them; what a user reads of it."""
    with Sovseal(directory, key=key, embedder=fake_embed) as mem:
        for i in range(records):
            mem.store(f"p.{i % 11}", {"i": i})
        assert mem._store.write_checkpoint() is not None
        return {"log": mem.log(), "state": mem.state()}


def _opened(directory: Path, key: bytes) -> tuple[bool, dict[str, object]]:
    with Sovseal(directory, key=key, embedder=fake_embed) as mem:
        return mem._store.restored is not None, {"log": mem.log(), "state": mem.state()}


def _frame_offsets(journal: Path, kind: Kind) -> list[int]:
    """Where the frames of ``kind`` start: frame headers walked by hand, the body's first byte is its kind."""
    data, offset, found = journal.read_bytes(), JOURNAL_HEADER.size, []
    while offset < len(data):
        length = HEADER.unpack_from(data, offset)[0]
        if data[offset + HEADER.size] == kind:
            found.append(offset)
        offset += HEADER.size + length
    return found


@pytest.mark.parametrize("kind", [Kind.BRANCH, Kind.REINFORCE, Kind.RECORD])
def test_verify_finds_damage_in_the_frames_a_checkpoint_covers(tmp_path: Path, kind: Kind) -> None:
    """A frame damaged after the checkpoint was written: the store still opens from the checkpoint
    (its state was read when the frame was whole), and verify() reports the frame all the same."""
    key = os.urandom(32)
    with _busy_store(tmp_path, key) as mem:
        mem.reinforce("notes.6")
        mem.store("last", {"z": 0})  # the checkpoint's own last frame must stay whole
        assert mem._store.write_checkpoint() is not None
    journal = tmp_path / "journal.log"
    offset = _frame_offsets(journal, kind)[0]
    damaged = bytearray(journal.read_bytes())
    damaged[offset + HEADER.size + 20] ^= 0x01
    journal.write_bytes(bytes(damaged))
    with Sovseal(tmp_path, key=key, embedder=fake_embed, read_only=True) as mem:
        assert mem._store.restored is not None
        report = mem.verify()
    assert not report.ok
    assert any(problem.startswith(f"journal byte {offset}:") or f"journal byte {offset} " in problem for problem in report.problems)


def test_the_clear_part_of_a_checkpoint_tells_no_sizes(tmp_path: Path) -> None:
    """What is readable without the key is what fitting the journal needs; the arrays' layout is
    sealed and the sealed stream padded (Padmé), so two checkpoints a purge apart do not give the
    exact length of the path, metadata or words it erased."""
    key = os.urandom(32)
    with Sovseal(tmp_path, key=key, embedder=fake_embed) as mem:
        for i in range(30):
            mem.store(f"p.{i}", {"i": i}, metadata={"topic": "x"})
        mem.store("patient.hiv_status.confirmed", "a secret", metadata={"diagnosis": "confidential"})
        assert mem._store.write_checkpoint() is not None
    data = (tmp_path / CHECKPOINT).read_bytes()
    magic, version, _, length = checkpoint._PREFIX.unpack_from(data)
    header = json.loads(data[checkpoint._PREFIX.size : checkpoint._PREFIX.size + length])
    assert (magic, version) == (checkpoint.MAGIC, 2) and "arrays" not in header
    assert not any(isinstance(v, (list, dict)) for v in header.values())  # plain fields only: no layout, no sizes
    sealed = len(data) - checkpoint._PREFIX.size - length
    chunks = -(-sealed // (checkpoint._CHUNK + 16))
    assert padme(sealed - 16 * chunks) == sealed - 16 * chunks
    restored, _ = _opened(tmp_path, key)
    assert restored


def test_a_flipped_bit_anywhere_makes_the_checkpoint_ignored(tmp_path: Path) -> None:
    key = os.urandom(32)
    expected = _checkpointed(tmp_path, key)
    path = tmp_path / CHECKPOINT
    original = path.read_bytes()
    for position in (12, 50, len(original) // 2, len(original) - 1):  # salt, header, a chunk, a tag
        damaged = bytearray(original)
        damaged[position] ^= 0x01
        path.write_bytes(bytes(damaged))
        restored, seen = _opened(tmp_path, key)
        assert not restored, position
        assert seen == expected
    path.write_bytes(original[: len(original) - 7])  # cut short
    assert _opened(tmp_path, key) == (False, expected)


def test_an_older_checkpoint_of_the_same_journal_is_a_correct_start(tmp_path: Path) -> None:
    key = os.urandom(32)
    _checkpointed(tmp_path, key)
    older = (tmp_path / CHECKPOINT).read_bytes()
    with Sovseal(tmp_path, key=key, embedder=fake_embed) as mem:
        for i in range(20):
            mem.store(f"newer.{i}", {"i": i})
        mem.delete("p.2")
        mem._store.write_checkpoint()
        expected = {"log": mem.log(), "state": mem.state()}
    (tmp_path / CHECKPOINT).write_bytes(older)  # a backup restored over the newer one
    restored, seen = _opened(tmp_path, key)
    assert restored and seen == expected
    with Sovseal(tmp_path, key=key, embedder=fake_embed) as mem:
        _same(_lineage_arrays(mem._store), _replayed(tmp_path, key))


def test_a_checkpoint_of_another_store_under_the_same_key_is_refused(tmp_path: Path) -> None:
    key = os.urandom(32)
    mine, other = tmp_path / "mine", tmp_path / "other"
    expected = _checkpointed(mine, key, records=12)
    _checkpointed(other, key, records=40)
    (mine / CHECKPOINT).write_bytes((other / CHECKPOINT).read_bytes())
    assert _opened(mine, key) == (False, expected)


def test_a_checkpoint_under_another_key_is_refused(tmp_path: Path) -> None:
    key = os.urandom(32)
    mine, other = tmp_path / "mine", tmp_path / "other"
    expected = _checkpointed(mine, key, records=12)
    _checkpointed(other, os.urandom(32), records=12)
    (mine / CHECKPOINT).write_bytes((other / CHECKPOINT).read_bytes())
    assert _opened(mine, key) == (False, expected)


def test_a_journal_changed_under_the_checkpoint_is_replayed(tmp_path: Path) -> None:
    """The journal was replaced by another one (a restore from backup): same store, other frames."""
    key = os.urandom(32)
    _checkpointed(tmp_path, key, records=30)
    checkpoint = (tmp_path / CHECKPOINT).read_bytes()
    shutil.rmtree(tmp_path)
    expected = _checkpointed(tmp_path, key, records=30)  # a new store in the same place: new uuid, new journal id
    (tmp_path / CHECKPOINT).write_bytes(checkpoint)
    assert _opened(tmp_path, key) == (False, expected)


def test_a_journal_cut_short_below_the_checkpoint_is_replayed(tmp_path: Path) -> None:
    """The checkpoint names a frame past the journal's end (the journal was restored from an older copy)."""
    key = os.urandom(32)
    with Sovseal(tmp_path, key=key, embedder=fake_embed) as mem:
        for i in range(10):
            mem.store(f"p.{i}", {"i": i})
    journal = tmp_path / "journal.log"
    shorter = journal.read_bytes()
    with Sovseal(tmp_path, key=key, embedder=fake_embed) as mem:
        for i in range(10):
            mem.store(f"q.{i}", {"i": i})
        mem._store.write_checkpoint()
    journal.write_bytes(shorter)
    restored, seen = _opened(tmp_path, key)
    assert not restored
    assert [e.path for e in seen["log"]] == [f"p.{i}" for i in reversed(range(10))]  # type: ignore[attr-defined]


def test_a_read_only_store_uses_a_checkpoint_and_writes_none(tmp_path: Path) -> None:
    key = os.urandom(32)
    expected = _checkpointed(tmp_path, key)
    before = (tmp_path / CHECKPOINT).read_bytes()
    with Sovseal(tmp_path, key=key, embedder=fake_embed, read_only=True) as mem:
        assert mem._store.restored is not None
        assert {"log": mem.log(), "state": mem.state()} == expected
        assert mem._store.write_checkpoint() is None
    assert (tmp_path / CHECKPOINT).read_bytes() == before


def test_recall_from_a_restored_catalog_matches_a_rebuilt_one(tmp_path: Path) -> None:
    """The catalog and keyword index a checkpoint brings rank exactly as those built by decrypting."""
    key = os.urandom(32)
    words = ["coffee", "tea", "paris", "berlin", "meeting", "deadline", "alice", "bob"]
    with Sovseal(tmp_path, key=key, embedder=fake_embed) as mem:
        for i in range(60):
            mem.store(f"n.{i % 25}", {"t": i}, text=f"{words[i % 8]} {words[(i * 3) % 8]} note {i}", metadata={"k": i % 4})
        mem.delete("n.7")
        mem.recall("coffee", k=3)  # starts the engine: its catalog goes into the checkpoint
        mem._recall_engine().wait_ready()
        mem._store.write_checkpoint(mem._recall_engine().checkpoint_arrays)
    queries = [
        ("coffee in paris", None), ("alice meeting", {"metadata": {"k": 2}}), ("note", {"path": {"$prefix": "n.1"}}), ("checkpoint", None),
    ]

    def answers(mem: Sovseal) -> list[list[tuple[str, float]]]:
        return [[(m.path, round(m.score, 6)) for m in mem.recall(q, k=5, filter=f)] for q, f in queries]

    rebuilt = tmp_path.parent / f"{tmp_path.name}-rebuilt"
    shutil.copytree(tmp_path, rebuilt)
    (rebuilt / CHECKPOINT).unlink()
    shutil.rmtree(rebuilt / "index" / "snapshot", ignore_errors=True)
    try:
        seen = []
        for directory in (tmp_path, rebuilt):
            with Sovseal(directory, key=key, embedder=fake_embed) as mem:
                engine = mem._recall_engine()
                engine.wait_ready()
                assert engine.restored == (directory == tmp_path)
                first = answers(mem)
                mem.store("n.99", {"t": 99}, text="coffee after the checkpoint")
                seen.append((first, answers(mem)))
        assert seen[0] == seen[1]
        assert seen[0][1][-1][0][0] == "n.99"  # the record stored after the restore is found by its words
    finally:
        shutil.rmtree(rebuilt, ignore_errors=True)


CRASHER = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[4])
from sovseal import Sovseal
from sovseal import durable
from sovseal.storage import checkpoint
from tests.fakes import fake_embed

directory, key, point = Path(sys.argv[1]), bytes.fromhex(sys.argv[2]), sys.argv[3]


def die(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGKILL)


with Sovseal(directory, key=key, embedder=fake_embed) as mem:
    mem.store("late.write", {"v": 1})
    if point == "sealing":  # some chunks sealed, none written
        checkpoint._chunks = die
    elif point == "renaming":  # the new file whole and fsynced, not yet renamed over the old one
        durable.os.replace = die
    elif point == "syncing":  # renamed, the directory not yet fsynced
        durable.fsync_dir = die
    mem._store.write_checkpoint()
"""


@pytest.mark.parametrize("point", ["sealing", "renaming", "syncing"])
def test_sigkill_while_writing_a_checkpoint_leaves_a_store_that_opens(tmp_path: Path, point: str) -> None:
    key = os.urandom(32)
    _checkpointed(tmp_path, key)
    before = (tmp_path / CHECKPOINT).read_bytes()
    root = str(Path(__file__).resolve().parents[2])
    done = subprocess.run([sys.executable, "-c", CRASHER, str(tmp_path), key.hex(), point, root], check=False, timeout=120)
    assert done.returncode == -9
    replaced = (tmp_path / CHECKPOINT).read_bytes() != before
    assert replaced == (point == "syncing")  # before the rename the old one is untouched
    leftovers = list((tmp_path / CHECKPOINT).parent.glob("checkpoint.*.tmp"))
    assert len(leftovers) == (point != "syncing")  # the new file, half or whole, that was never renamed
    with Sovseal(tmp_path, key=key, embedder=fake_embed) as mem:
        assert mem._store.restored is not None
        assert mem.get("late.write").payload == {"v": 1}  # acknowledged before the kill
        assert mem.verify().ok
    if leftovers:  # removed once it is old enough to be no live writer's
        old = time.time() - 3600
        os.utime(leftovers[0], (old, old))
        with Sovseal(tmp_path, key=key, embedder=fake_embed):
            pass
        assert not leftovers[0].exists()
