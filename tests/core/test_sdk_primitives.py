"""The SDK primitives adapters build on: ``paths``, ``find``, reads with ``branch=``,
``create_branch`` / ``delete_branch`` without switching, and ``delete_many``."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from sovseal import AsyncSovseal, Sovseal
from sovseal.errors import InvalidInputError, UnknownBranchError, UnknownPathError
from tests.fakes import fake_embed


def test_paths_lists_what_is_visible_under_a_prefix_sorted(mem: Sovseal) -> None:
    mem.store("notes/b", "second")
    mem.store("notes/a", "first")
    mem.store("notes/c", "gone soon")
    mem.store("other/x", "elsewhere")
    mem.store("notes/quiet", {"k": 1}, index=False)  # not ranked by recall, still a visible path
    mem.delete("notes/c")
    assert mem.paths("notes/") == ["notes/a", "notes/b", "notes/quiet"]
    assert mem.paths() == ["notes/a", "notes/b", "notes/quiet", "other/x"]
    assert mem.paths("nothing/") == []


def test_paths_and_find_see_what_another_process_wrote(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as first, Sovseal(store_dir, key=key, embedder=fake_embed) as second:
        first.store("a/1", "one")
        assert second.paths("a/") == ["a/1"]
        first.store("a/2", "two", metadata={"n": 2})
        assert second.paths("a/") == ["a/1", "a/2"]
        assert [m.path for m in second.find({"metadata": {"n": {"$gte": 2}}})] == ["a/2"]


def test_find_selects_by_filter_and_opens_only_the_matches(mem: Sovseal) -> None:
    mem.store("doc/1", "alpha", metadata={"tags": ["x", "y"], "year": 2020, "title": "The Alpha Report"})
    mem.store("doc/2", "beta", metadata={"tags": ["y"], "year": 2024, "title": "beta notes"}, type="episodic")
    mem.store("doc/3", "gamma", metadata={"year": 2025}, index=False)
    mem.store("misc/1", "delta", metadata={"year": 2024})
    assert [m.path for m in mem.find({"path_prefix": "doc/"})] == ["doc/1", "doc/2", "doc/3"]
    assert [m.path for m in mem.find({"path_prefix": "doc/", "metadata": {"year": {"$gte": 2024}}})] == ["doc/2", "doc/3"]
    assert [m.path for m in mem.find({"metadata": {"tags": {"$contains": "x"}}})] == ["doc/1"]
    assert [m.path for m in mem.find({"metadata": {"tags": {"$all": ["x", "y"]}}})] == ["doc/1"]
    assert [m.path for m in mem.find({"metadata": {"title": {"$isubstring": "REPORT"}}})] == ["doc/1"]
    assert [m.path for m in mem.find({"type": "episodic"})] == ["doc/2"]
    assert [m.path for m in mem.find(limit=2)] == ["doc/1", "doc/2"]
    found = mem.find({"path": "doc/3"})
    assert found[0].payload == "gamma" and found[0].metadata == {"year": 2025} and found[0].score is None
    assert found[0].snapshot_id == mem.get("doc/3").snapshot_id  # type: ignore[union-attr]


def test_find_refuses_bad_arguments_with_typed_errors(mem: Sovseal) -> None:
    mem.store("a", "x")
    with pytest.raises(InvalidInputError):
        mem.find({"metadata": {"n": {"$bogus": 1}}})
    with pytest.raises(InvalidInputError):
        mem.find(limit=-1)
    with pytest.raises(InvalidInputError):
        mem.paths(3)  # type: ignore[arg-type]
    with pytest.raises(UnknownBranchError):
        mem.find(branch="nope")


def test_find_and_paths_leave_out_erased_records(mem: Sovseal) -> None:
    mem.store("keep", "kept")
    mem.store("secret", "erase me", metadata={"k": 1})
    mem.purge("secret")
    assert mem.paths() == ["keep"]
    assert [m.path for m in mem.find({"metadata": {"k": 1}})] == []


def test_reads_take_a_branch_without_moving_the_handle(mem: Sovseal) -> None:
    base = mem.store("a", "main value").snapshot_id
    mem.create_branch("side", base)
    mem.view("side").store("a", "side value")
    mem.view("side").store("b", "only on side")
    assert mem.branch == "main"
    assert mem.get("a", branch="side").payload == "side value"  # type: ignore[union-attr]
    assert mem.get("a").payload == "main value"  # type: ignore[union-attr]
    assert mem.paths(branch="side") == ["a", "b"]
    assert [m.path for m in mem.find({"path": "b"}, branch="side")] == ["b"]
    assert mem.state(branch="side") == {"a": "side value", "b": "only on side"}
    assert [e.path for e in mem.log(branch="side")] == ["b", "a", "a"]
    assert mem.snapshot(branch="side") == mem.view("side").snapshot()
    assert mem.snapshot(branch="side") != mem.snapshot()
    for read in (mem.get, mem.paths, mem.state, mem.log, mem.snapshot):
        with pytest.raises(UnknownBranchError):
            read("a", branch="missing") if read == mem.get else read(branch="missing")  # type: ignore[operator]
    assert mem.branch == "main"


def test_create_branch_makes_an_empty_branch_or_one_at_a_snapshot_without_switching(mem: Sovseal) -> None:
    sid = mem.store("a", "x").snapshot_id
    mem.create_branch("empty")
    mem.create_branch("at-a", sid)
    assert mem.branch == "main"
    assert mem.branches() == ["at-a", "empty", "main"]
    assert mem.snapshot(branch="empty") is None and mem.paths(branch="empty") == []
    assert mem.state(branch="at-a") == {"a": "x"}
    with pytest.raises(InvalidInputError, match="already exists"):
        mem.create_branch("empty")
    with pytest.raises(InvalidInputError):
        mem.create_branch("")
    empty = mem.view("empty")
    empty.store("b", "first on empty")
    assert mem.state(branch="empty") == {"b": "first on empty"}


def test_delete_branch_removes_it_and_the_name_can_be_used_again(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        mem.store("a", "on main")
        mem.create_branch("thread-1", mem.snapshot())
        mem.view("thread-1").store("t", "thread value")
        view = mem.view("thread-1")
        mem.delete_branch("thread-1")
        assert mem.branches() == ["main"]
        for call in (lambda: mem.get("t", branch="thread-1"), lambda: mem.view("thread-1"), lambda: view.store("x", "y")):
            with pytest.raises(UnknownBranchError):
                call()
        with pytest.raises(UnknownBranchError):
            mem.delete_branch("thread-1")
        assert mem.state() == {"a": "on main"}  # nothing else moved
        assert mem.verify().ok
    with Sovseal(store_dir, key=key, embedder=fake_embed) as again:  # replayed from the journal (or a checkpoint)
        assert again.branches() == ["main"]
        again.create_branch("thread-1")
        assert again.branches() == ["main", "thread-1"]
        assert again.paths(branch="thread-1") == []
        again.view("thread-1").store("t2", "new life")
        again.delete_branch("thread-1")
        assert again.branches() == ["main"]


def test_delete_branch_refuses_the_current_and_the_default_branch(mem: Sovseal) -> None:
    mem.store("a", "x")
    mem.fork(branch="work")
    with pytest.raises(InvalidInputError, match="current branch"):
        mem.delete_branch("work")
    with pytest.raises(InvalidInputError, match="default branch"):
        mem.delete_branch("main")
    mem.checkout("main")
    mem.delete_branch("work")
    assert mem.branches() == ["main"]


def test_a_deleted_branch_survives_a_checkpointed_reopen(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        mem.store("a", "x")
        for i in range(3):
            mem.create_branch(f"b{i}", mem.snapshot())
        mem.delete_branch("b1")
        mem._store.write_checkpoint()
    with Sovseal(store_dir, key=key, embedder=fake_embed) as again:
        assert again.branches() == ["b0", "b2", "main"]
        again.create_branch("b1")
        assert "b1" in again.branches()


def _exchange(a: Sovseal, b: Sovseal) -> None:
    b.import_items(a.export_items())
    a.import_items(b.export_items())


def test_a_delete_reaches_another_device_and_a_concurrent_write_wins_over_it(tmp_path: Path) -> None:
    key = os.urandom(32)
    with Sovseal(tmp_path / "a", key=key, embedder=fake_embed) as a, Sovseal(tmp_path / "b", key=key, embedder=fake_embed) as b:
        a.store("m", "main")
        a.create_branch("quiet", a.snapshot())
        a.create_branch("busy", a.snapshot())
        _exchange(a, b)
        assert b.branches() == ["busy", "main", "quiet"]
        a.delete_branch("quiet")
        a.delete_branch("busy")
        b.view("busy").store("late", "written on b while a deleted the branch")
        _exchange(a, b)
        for device in (a, b):
            assert device.branches() == ["busy", "main"]  # quiet is gone; busy is back with b's write
            assert device.state(branch="busy") == {"m": "main", "late": "written on b while a deleted the branch"}


def test_delete_many_writes_tombstones_in_one_batch(mem: Sovseal) -> None:
    mem.store_many([{"path": f"p/{i}", "payload": i} for i in range(4)])
    results = mem.delete_many(["p/0", "p/2", "p/absent"])
    assert [r is None for r in results] == [False, False, True]
    assert mem.paths("p/") == ["p/1", "p/3"]
    with pytest.raises(InvalidInputError):
        mem.delete_many("p/1")
    with pytest.raises(InvalidInputError):
        mem.delete_many(["p/1", ""])  # a bad path: nothing deleted
    assert mem.paths("p/") == ["p/1", "p/3"]


def test_the_async_client_mirrors_the_primitives(store_dir: Path, key: bytes) -> None:
    async def main() -> None:
        async with AsyncSovseal(store_dir, key=key, embedder=fake_embed) as mem:
            await mem.store("x/1", "one", metadata={"n": 1})
            await mem.create_branch("other", await mem.snapshot())
            assert await mem.paths("x/", branch="other") == ["x/1"]
            assert [m.path for m in await mem.find({"metadata": {"n": 1}})] == ["x/1"]
            assert (await mem.get("x/1", branch="other")).payload == "one"  # type: ignore[union-attr]
            assert len(await mem.log(branch="other")) == 1
            assert await mem.state(branch="other") == {"x/1": "one"}
            assert await mem.heads_of("other") == [await mem.snapshot()]
            await mem.delete_many(["x/1"])
            await mem.delete_branch("other")
            assert await mem.branches() == ["main"]

    asyncio.run(main())


def test_purge_takes_paths_and_prefixes_in_one_redaction(mem: Sovseal) -> None:
    mem.store("chat/s1/0", "hello")
    mem.store("chat/s1/1", "secret reply")
    mem.store("parts/s1/0", "a part")
    mem.store("keep", "kept")
    result = mem.purge("parts/s1/0", prefix="chat/s1/", reason="user asked")
    assert len(result.erased) == 3 and result.compacted
    assert mem.paths() == ["keep"]
    assert [e.op for e in mem.log()].count("erased") == 3
    with pytest.raises(UnknownPathError, match="no version of 'gone' and no path under 'none/'"):
        mem.purge("gone", prefix="none/")


def test_the_embedder_is_public_on_both_clients(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        assert mem.embedder is fake_embed
        assert mem.view().embedder is fake_embed

    async def main() -> None:
        async with AsyncSovseal(store_dir, key=key, embedder=fake_embed) as amem:
            assert amem.embedder is fake_embed

    asyncio.run(main())
