"""The saver's sovseal semantics beyond the conformance suite: large checkpoints in parts, copy_thread
sharing records, append-only deletion, prune re-rooting, deletions surviving a fork, a second handle
on the same store (and its pending writes for a checkpoint the first stored), and one handle shared
with the store."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.sovseal import SovsealSaver
from langgraph.checkpoint.sovseal._layout import (
    archive_branch,
    checkpoint_path,
    live_branch,
    writes_branch,
    writes_path,
)
from langgraph.store.sovseal import SovsealStore

from sovseal import Sovseal
from tests.fakes import fake_embed


def put(saver: SovsealSaver, thread: str, parent: dict[str, Any] | None = None, *, ns: str = "", **metadata: Any) -> dict[str, Any]:
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6(clock_seq=1))
    checkpoint["channel_values"] = {"n": metadata.get("step", 0)}
    checkpoint["channel_versions"] = {"n": 1}
    config = {"configurable": {"thread_id": thread, "checkpoint_ns": ns}}
    if parent is not None:
        config["configurable"]["checkpoint_id"] = parent["configurable"]["checkpoint_id"]
    return saver.put(config, checkpoint, {"source": "loop", "step": 0, **metadata}, {"n": 1})


def ids(saver: SovsealSaver, thread: str, **conf: Any) -> list[str]:
    return [t.checkpoint["id"] for t in saver.list({"configurable": {"thread_id": thread, **conf}})]


def chain_length(saver: SovsealSaver, branch: str) -> int:
    handle = saver.sovseal
    previous = handle.branch
    handle.checkout(branch)
    try:
        return len(handle.log())
    finally:
        handle.checkout(previous)


def test_large_checkpoints_and_writes_go_in_parts_and_survive_a_restart(saver_dir: Path, key: bytes) -> None:
    big_value = os.urandom(300 * 1024)
    big_write = "w" * (600 * 1024)
    with SovsealSaver.open(saver_dir, key=key) as saver:
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"blob": big_value, "small": 1}
        checkpoint["channel_versions"] = {"blob": 1, "small": 1}
        cfg = saver.put({"configurable": {"thread_id": "big", "checkpoint_ns": ""}}, checkpoint, {"step": 1}, {"blob": 1, "small": 1})
        saver.put_writes(cfg, [("blob", big_write), ("small", 2)], "task")
        saver.put_writes(cfg, [("tiny", 3)], "other-task")
    with SovsealSaver.open(saver_dir, key=key) as saver:
        found = saver.get_tuple({"configurable": {"thread_id": "big"}})
        assert found.checkpoint["channel_values"] == {"blob": big_value, "small": 1}
        assert sorted(found.pending_writes) == sorted([("task", "blob", big_write), ("task", "small", 2), ("other-task", "tiny", 3)])
        report = saver.verify("big")
        assert report.ok and report.checkpoints == 1 and report.writes == 2
        assert report.records >= 1 + 2 + 1 + 3 + 1  # checkpoint + its 2 parts, writes + 3 parts, other writes


def test_copy_thread_shares_records_instead_of_copying(saver: SovsealSaver) -> None:
    a = put(saver, "src", step=0)
    b = put(saver, "src", a, step=1)
    saver.put_writes(b, [("ch", "pending")], "task")
    put(saver, "src", ns="child:1", step=0)
    records = saver.sovseal.status().records

    saver.copy_thread("src", "dst")
    assert saver.sovseal.status().records == records  # no record written: the new branches share them
    assert ids(saver, "dst") == ids(saver, "src")
    assert saver.get_tuple({"configurable": {"thread_id": "dst"}}).pending_writes == [("task", "ch", "pending")]

    c = put(saver, "dst", b, step=2)  # the copies diverge
    assert ids(saver, "dst")[0] == c["configurable"]["checkpoint_id"]
    assert c["configurable"]["checkpoint_id"] not in ids(saver, "src")
    saver.delete_thread("src")
    assert ids(saver, "src") == [] and len(ids(saver, "dst")) == 4
    assert saver.verify("dst").ok


def test_delete_is_append_only_and_the_thread_id_can_be_reused(saver: SovsealSaver) -> None:
    a = put(saver, "t", step=0)
    put(saver, "t", a, step=1)
    records = saver.sovseal.status().records
    saver.delete_thread("t")
    assert saver.get_tuple({"configurable": {"thread_id": "t"}}) is None
    assert saver.sovseal.status().records == records  # moved back to the anchor: nothing appended, nothing erased
    again = put(saver, "t", step=7)
    assert ids(saver, "t") == [again["configurable"]["checkpoint_id"]]
    assert saver.verify("t").ok


def test_prune_keep_latest_re_roots_the_thread(saver: SovsealSaver) -> None:
    cfg = None
    for step in range(6):
        cfg = put(saver, "long", cfg, step=step)
    saver.put_writes(cfg, [("ch", "kept")], "task")
    child = put(saver, "long", ns="child:1", step=0)
    put(saver, "long", child, ns="child:1", step=1)
    assert chain_length(saver, live_branch("long")) == 8

    saver.prune(["long"], strategy="keep_latest")
    assert ids(saver, "long", checkpoint_ns="") == [cfg["configurable"]["checkpoint_id"]]
    assert len(ids(saver, "long", checkpoint_ns="child:1")) == 1
    assert saver.get_tuple(cfg).pending_writes == [("task", "ch", "kept")]
    assert chain_length(saver, live_branch("long")) == 2  # the two kept checkpoints, on a branch made again
    assert saver.verify("long").ok


def test_a_deleted_checkpoint_stays_deleted_across_a_fork(saver: SovsealSaver) -> None:
    one = put(saver, "t", step=1, run_id="r1")
    two = put(saver, "t", one, step=2, run_id="r2")
    three = put(saver, "t", two, step=3, run_id="r3")
    saver.delete_for_runs(["r1"])  # a tombstone after `three`
    fork = put(saver, "t", two, step=3, run_id="r4")  # parent `two` is not the newest: a fork at `two`, before the tombstone
    remaining = set(ids(saver, "t"))
    assert one["configurable"]["checkpoint_id"] not in remaining
    assert {c["configurable"]["checkpoint_id"] for c in (two, three, fork)} == remaining
    assert saver.verify("t").ok


def test_a_second_handle_sees_what_the_first_wrote(saver_dir: Path, key: bytes) -> None:
    with SovsealSaver.open(saver_dir, key=key) as first, SovsealSaver.open(saver_dir, key=key) as second:
        a = put(first, "shared", step=0)
        assert ids(second, "shared") == [a["configurable"]["checkpoint_id"]]
        b = put(second, "shared", a, step=1)
        assert ids(first, "shared") == [b["configurable"]["checkpoint_id"], a["configurable"]["checkpoint_id"]]
        first.delete_thread("shared")
        assert ids(second, "shared") == []


def test_writes_for_a_checkpoint_another_handle_stored_are_bound_to_its_record(saver_dir: Path, key: bytes) -> None:
    """A handle whose index predates a checkpoint (another handle stored it) finds it when it
    stores the checkpoint's pending writes, and binds them to that checkpoint's record."""
    with SovsealSaver.open(saver_dir, key=key) as first, SovsealSaver.open(saver_dir, key=key) as second:
        a = put(first, "t", step=0)
        second.put_writes(a, [("channel", "first")], "task-0")  # the second handle has loaded the thread and its writes
        b = put(first, "t", a, step=1)
        b_id = b["configurable"]["checkpoint_id"]
        second.put_writes(b, [("channel", "value")], "task-1")
        found = first.get_tuple(b)
        assert found is not None and found.pending_writes == [("task-1", "channel", "value")]
        writes = second.sovseal.view(writes_branch("t")).get(writes_path("t", "", b_id, "task-1"))
        checkpoint = second.sovseal.view(live_branch("t")).get(checkpoint_path("t", "", b_id))
        assert writes is not None and checkpoint is not None
        assert writes.payload["checkpoint_snapshot"] == checkpoint.snapshot_id


def test_a_handle_whose_index_is_stale_stores_from_the_fresh_one(saver_dir: Path, key: bytes) -> None:
    """A put or put_writes is written from the saver's index, the store checking as it appends that
    the branch's HEAD is the one the index knows; when another handle moved it, nothing is stored,
    the index is refreshed and the record planned again: the second handle's checkpoint names the
    parent the first one stored, the chain stays linear, and both tasks' writes are kept."""
    with SovsealSaver.open(saver_dir, key=key) as first, SovsealSaver.open(saver_dir, key=key) as second:
        a = put(first, "t", step=0)
        second.put_writes(a, [("channel", "from second")], "task-2")  # the second handle indexes the thread
        b = put(first, "t", a, step=1)  # ... which the first moves on: live and writes branches
        first.put_writes(a, [("channel", "from first")], "task-1")
        c = put(second, "t", b, step=2)
        second.put_writes(c, [("channel", "after")], "task-3")
        b_id, c_id = b["configurable"]["checkpoint_id"], c["configurable"]["checkpoint_id"]
        record = second.sovseal.view(live_branch("t")).get(checkpoint_path("t", "", c_id))
        parent = second.sovseal.view(live_branch("t")).get(checkpoint_path("t", "", b_id))
        assert record is not None and parent is not None
        assert record.payload["parent_snapshot"] == parent.snapshot_id  # not None: b was found
        assert ids(first, "t") == [c_id, b_id, a["configurable"]["checkpoint_id"]]
        assert [b for b in first.verify("t").branches if ":fork:" in b] == []  # no fork: one linear chain
        found = first.get_tuple(a)
        assert found is not None and sorted(found.pending_writes) == [
            ("task-1", "channel", "from first"),
            ("task-2", "channel", "from second"),
        ]
        assert second.get_tuple(c).pending_writes == [("task-3", "channel", "after")]  # type: ignore[union-attr]
        assert first.verify("t").ok and second.verify("t").ok


def test_a_new_thread_is_created_without_listing_every_branch_of_the_store(saver: SovsealSaver) -> None:
    """A store holds a branch or more per thread: a new thread asks for its own branches by name."""
    first = put(saver, "old", step=0)
    saver.put_writes(first, [("channel", 1)], "task")
    listings: list[int] = []
    handle = saver.sovseal
    real_branches = handle.branches
    handle.branches = lambda: listings.append(1) or real_branches()  # type: ignore[method-assign]
    new = put(saver, "new", step=0)
    saver.put_writes(new, [("channel", 2)], "task")
    assert listings == []
    assert [t.pending_writes for t in saver.list({"configurable": {"thread_id": "new"}})] == [[("task", "channel", 2)]]


def test_one_handle_shared_by_saver_and_store(tmp_path: Path, key: bytes) -> None:
    with Sovseal(tmp_path / "one", key=key, embedder=fake_embed) as handle:
        handle.store("user.editor", {"value": "neovim"})  # the user's own memories on main
        saver = SovsealSaver(handle)
        store = SovsealStore(handle)
        cfg = put(saver, "t", step=0)
        store.put(("prefs",), "tea", {"kind": "green"})
        assert handle.branch == "main"  # every adapter call puts the handle back on its branch
        assert saver.get_tuple(cfg) is not None
        assert store.get(("prefs",), "tea").value == {"kind": "green"}
        assert set(handle.state()) == {"user.editor", "langgraph/store/prefs/=tea"}  # checkpoints are on their own branch
        assert handle.recall("green tea", k=1)[0].path == "langgraph/store/prefs/=tea"
        assert handle.verify().ok


def test_a_write_after_another_handle_deleted_the_thread_starts_it_again(saver_dir: Path, key: bytes) -> None:
    """A saver whose index still holds a thread that another handle deleted (its branches are gone)
    finds out as it writes, and starts the thread again, as it would a new one."""
    with SovsealSaver.open(saver_dir, key=key) as first, SovsealSaver.open(saver_dir, key=key) as second:
        a = put(first, "t", step=0)
        b = put(second, "t", a, step=1)
        second.put_writes(b, [("channel", "before")], "task")
        first.delete_thread("t")
        c = put(second, "t", b, step=2)
        second.put_writes(c, [("channel", "after")], "task")
        assert ids(second, "t") == ids(first, "t") == [c["configurable"]["checkpoint_id"]]
        assert first.get_tuple(c).pending_writes == [("task", "channel", "after")]
        first.delete_thread("t")
        second.put_writes(c, [("channel", "again")], "task")  # its checkpoint is gone: kept, as InMemorySaver keeps it
        assert second.get_tuple({"configurable": {"thread_id": "t"}}) is None
        assert first.verify("t").ok and second.verify("t").ok


def test_a_fork_by_another_handle_is_found_with_its_archive(saver_dir: Path, key: bytes) -> None:
    """A saver that indexed a thread before another handle time-travelled on it finds the archive
    branch the fork made (by name: the live branch moved), so the abandoned future still lists."""
    with SovsealSaver.open(saver_dir, key=key) as first, SovsealSaver.open(saver_dir, key=key) as second:
        a = put(first, "t", step=0)
        b = put(first, "t", a, step=1)
        c = put(first, "t", b, step=2)
        assert ids(second, "t") == [cid["configurable"]["checkpoint_id"] for cid in (c, b, a)]  # indexed
        fork = put(first, "t", a, step=3)  # time travel: b and c stay readable on an archive branch
        again = put(first, "t", b, step=4)  # and again: the future with `fork` goes to a second archive
        expected = sorted(x["configurable"]["checkpoint_id"] for x in (a, b, c, fork, again))
        assert sorted(ids(second, "t")) == sorted(ids(first, "t")) == expected
        assert [x for x in second.verify("t").branches if ":fork:" in x] == [archive_branch("t", 1), archive_branch("t", 2)]
        assert second.get_tuple({"configurable": {"thread_id": "t"}}).config == again
