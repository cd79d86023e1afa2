"""Lineage semantics through the public API: ids, branches, fork, rollback, tombstones, reinforcement."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.canonical import canonicalize
from sovseal.errors import InvalidInputError, UnknownBranchError, UnknownSnapshotError
from tests.fakes import fake_embed


def expected_id(op: str, path: str, payload: object, parent: str, *, type: str = "semantic") -> str:
    entry = {"op": op, "path": path, "payload": payload, "metadata": {}, "type": type, "provenance": "explicit"}
    return "snap_" + hashlib.sha256(canonicalize(entry) + parent.encode()).hexdigest()


def test_snapshot_ids_hash_the_whole_entry_and_the_parent(mem: Sovseal) -> None:
    a = mem.store("a", {"v": 1})
    assert a.snapshot_id == expected_id("store", "a", {"v": 1}, "")
    b = mem.store("b", {"v": 1})  # same payload, other path: must not collide
    assert b.snapshot_id == expected_id("store", "b", {"v": 1}, a.snapshot_id)
    assert b.snapshot_id != a.snapshot_id
    d = mem.delete("a")
    assert d is not None and d.snapshot_id == expected_id("delete", "a", None, b.snapshot_id)


def test_replaying_the_same_operations_gives_byte_equal_ids(tmp_path: Path, key: bytes) -> None:
    logs = []
    for name in ("one", "two"):
        with Sovseal(tmp_path / name, key=key, embedder=fake_embed) as m:
            m.store("user.editor", "vim")
            m.store("user.editor", "neovim")
            m.delete("user.editor")
            m.store("user.shell", {"name": "fish", "version": 3.0})
            logs.append([(e.snapshot_id, e.parent_id, e.seq, e.op, e.path) for e in m.log()])
    assert logs[0] == logs[1]
    assert [e[2] for e in logs[0]] == [4, 3, 2, 1]


def test_state_is_the_latest_value_per_path_without_tombstones(mem: Sovseal) -> None:
    mem.store("user.editor", "vim")
    mem.store("user.shell", "zsh")
    mem.store("user.editor", "neovim")
    mem.delete("user.shell")
    assert mem.state() == {"user.editor": "neovim"}
    assert mem.get("user.shell") is None
    assert mem.get("user.editor").payload == "neovim"


def test_rollback_moves_head_and_destroys_nothing(mem: Sovseal) -> None:
    first = mem.store("k", "v1").snapshot_id
    mem.store("k", "v2")
    head = mem.store("other", "x").snapshot_id
    mem.rollback(first)
    assert mem.state() == {"k": "v1"}
    assert mem.snapshot() == first
    mem.rollback(head)  # the later snapshots are still there
    assert mem.state() == {"k": "v2", "other": "x"}


def test_store_after_rollback_reuses_an_existing_snapshot_when_ids_coincide(mem: Sovseal) -> None:
    first = mem.store("k", "v1").snapshot_id
    second = mem.store("k", "v2").snapshot_id
    mem.rollback(first)
    again = mem.store("k", "v2")
    assert again.snapshot_id == second
    assert mem.status().records == 2  # nothing duplicated


def test_fork_creates_an_independent_branch(mem: Sovseal) -> None:
    base = mem.store("framework", "vitest").snapshot_id
    mem.store("editor", "neovim")
    assert mem.fork(base, branch="agent-b") == "agent-b"
    assert mem.branch == "agent-b"
    mem.store("framework", "jest")
    assert mem.state() == {"framework": "jest"}
    assert [e.seq for e in mem.log()] == [2, 1]  # seq is the depth in the history: the fork continues from its base
    mem.checkout("main")
    assert mem.state() == {"framework": "vitest", "editor": "neovim"}
    assert sorted(mem.branches()) == ["agent-b", "main"]


def test_fork_without_name_invents_one_and_rejects_duplicates(mem: Sovseal) -> None:
    mem.store("a", 1)
    name = mem.fork()
    assert name.startswith("fork-")
    with pytest.raises(InvalidInputError, match="already exists"):
        mem.fork(branch=name)


def test_unknown_snapshot_and_branch_are_typed_errors(mem: Sovseal) -> None:
    mem.store("a", 1)
    missing = "snap_" + "0" * 64
    with pytest.raises(UnknownSnapshotError, match="no snapshot"):
        mem.rollback(missing)
    with pytest.raises(UnknownSnapshotError):
        mem.fork(missing, branch="x")
    with pytest.raises(InvalidInputError, match="snap_"):
        mem.rollback("not-an-id")
    with pytest.raises(UnknownBranchError):
        mem.checkout("nope")
    assert mem.state() == {"a": 1}
    assert mem.branches() == ["main"]


def test_store_with_explicit_parent(mem: Sovseal) -> None:
    first = mem.store("a", 1).snapshot_id
    mem.store("b", 2)
    result = mem.store("c", 3, parent=first)
    assert result.snapshot_id == expected_id("store", "c", 3, first)
    assert mem.state() == {"a": 1, "c": 3}


def test_reinforcement_appends_nothing_and_survives_restart(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as m:
        sid = m.store("fact", "the sky is blue").snapshot_id
        again = m.store("fact", "the sky is blue")
        m.store("fact", "the sky is blue")
        assert again.reinforced and again.snapshot_id == sid
        assert len(m.log()) == 1
        memory = m.get("fact")
        assert memory.reinforce_count == 2 and memory.last_reinforced is not None
        changed = m.store("fact", "the sky is blue", metadata={"source": "chat"})  # another entry
        assert not changed.reinforced
    with Sovseal(store_dir, key=key, embedder=fake_embed) as m:
        assert m.get("fact").reinforce_count == 0  # the new entry has not been reinforced
        m.rollback(sid)
        assert m.get("fact").reinforce_count == 2


def test_deleting_a_missing_path_appends_nothing(mem: Sovseal) -> None:
    assert mem.delete("never.stored") is None
    assert mem.log() == []


def test_restart_is_byte_equal(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as m:
        for i in range(20):
            m.store(f"p{i % 7}", {"i": i, "text": f"value {i}"}, type="episodic")
        m.fork(m.log()[5].snapshot_id, branch="side")
        m.store("p1", "side value")
        before = (m.state(), [e.snapshot_id for e in m.log()], m.branches())
        m.checkout("main")
        main_before = (m.state(), [e.snapshot_id for e in m.log()])
    with Sovseal(store_dir, key=key, embedder=fake_embed, branch="side") as m:
        assert (m.state(), [e.snapshot_id for e in m.log()], m.branches()) == before
        m.checkout("main")
        assert (m.state(), [e.snapshot_id for e in m.log()]) == main_before
        assert m.verify().ok


def test_memory_fields(mem: Sovseal) -> None:
    mem.store("user.diet", {"likes": ["tea"]}, metadata={"source": "chat", "n": 2}, type="episodic", provenance="observed")
    m = mem.get("user.diet")
    assert (m.path, m.payload, m.metadata, m.type, m.provenance) == (
        "user.diet",
        {"likes": ["tea"]},
        {"source": "chat", "n": 2},
        "episodic",
        "observed",
    )
    assert m.snapshot_id == mem.snapshot() and m.created_at.tzinfo is not None


def test_similarity_recall_sees_only_head(mem: Sovseal) -> None:
    mem.store("a", "alpha")
    mem.store("b", "beta")
    mem.store("a", "gamma")  # shadows alpha
    mem.delete("b")
    found = mem.recall("alpha", k=5)
    assert [(m.path, m.payload) for m in found] == [("a", "gamma")]
