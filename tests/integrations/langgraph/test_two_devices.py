"""LangGraph on two devices (issue #19): the saver and the Store written on two devices with one key
and one real ``sovseal serve``, before either saw the other's writes.

After both push and pull, both devices list the same checkpoints of the thread, both sides' among
them, and ``get_tuple`` returns the same latest one (the greatest checkpoint id); Store items written
on either device are on both, and an item written on both shows the same winner everywhere. The next
write on one device works and merges; after another sync both agree again.
"""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langgraph.checkpoint.base import create_checkpoint, empty_checkpoint
from langgraph.checkpoint.sovseal import SovsealSaver
from langgraph.checkpoint.sovseal._layout import live_branch, writes_branch
from langgraph.store.sovseal import SovsealStore

from tests.integrations.conftest import Devices
from tests.integrations.langgraph.graphs import chat_graph


def _thread(thread_id: str = "shared") -> dict[str, Any]:
    return {"configurable": {"thread_id": thread_id}}


def _listed(saver: SovsealSaver, config: dict[str, Any]) -> list[tuple[Any, ...]]:
    return [(t.config, t.checkpoint, t.metadata, t.parent_config, t.pending_writes) for t in saver.list(config)]


def _latest(saver: SovsealSaver, config: dict[str, Any]) -> tuple[Any, ...] | None:
    found = saver.get_tuple(config)
    return None if found is None else (found.config, found.checkpoint, found.metadata, found.parent_config, found.pending_writes)


def _ids(saver: SovsealSaver, config: dict[str, Any]) -> list[str]:
    return [t.config["configurable"]["checkpoint_id"] for t in saver.list(config)]


def _put(saver: SovsealSaver, config: dict[str, Any], step: int, value: str, parent: dict[str, Any] | None = None) -> dict[str, Any]:
    """One checkpoint after ``parent`` (its config), as LangGraph's loop writes it."""
    previous = saver.get_tuple(parent) if parent is not None else None
    base = previous.checkpoint if previous is not None else empty_checkpoint()
    checkpoint = create_checkpoint(base, None, step)
    checkpoint["channel_values"] = {"value": value}
    checkpoint["channel_versions"] = {"value": saver.get_next_version(None, None)}
    return saver.put(parent or config, checkpoint, {"source": "loop", "step": step, "parents": {}}, {})


@pytest.mark.parametrize("newer", ["a", "b"])
def test_a_thread_written_on_two_devices_lists_both_sides_and_the_same_latest(devices: Devices, newer: str) -> None:
    """Each device runs the graph on the same thread; whichever wrote last, both then agree."""
    saver_a, saver_b = SovsealSaver(devices.a), SovsealSaver(devices.b)
    graph_a, graph_b = chat_graph().compile(checkpointer=saver_a), chat_graph().compile(checkpointer=saver_b)
    config = _thread()
    first, second = (graph_a, graph_b) if newer == "b" else (graph_b, graph_a)
    first.invoke({"messages": [HumanMessage(content=f"first, on {'a' if newer == 'b' else 'b'}")]}, config)
    second.invoke({"messages": [HumanMessage(content=f"second, on {newer}")]}, config)
    mine_a, mine_b = _ids(saver_a, config), _ids(saver_b, config)
    assert len(mine_a) == len(mine_b) == 5  # input, plan, chat, review... each run from an empty thread

    devices.sync()

    listed_a, listed_b = _listed(saver_a, config), _listed(saver_b, config)
    assert listed_a == listed_b
    assert sorted(_ids(saver_a, config)) == sorted(mine_a + mine_b)
    assert _ids(saver_a, config) == sorted(mine_a + mine_b, reverse=True)  # newest checkpoint id first
    latest = _latest(saver_a, config)
    assert latest == _latest(saver_b, config) == listed_a[0]
    assert latest is not None and latest[0]["configurable"]["checkpoint_id"] == max(mine_a + mine_b)
    assert graph_a.get_state(config).values == graph_b.get_state(config).values
    assert graph_a.get_state(config).values["messages"][0].content == f"second, on {newer}"  # the later run's state

    # The next step on one device goes on from the latest and merges the thread's two heads.
    graph_a.invoke({"messages": [HumanMessage(content="and then?")]}, config)
    after = graph_a.get_state(config)
    assert [m.content for m in after.values["messages"]][:3] == [f"second, on {newer}", "Paris.", "and then?"]
    assert len(devices.a.status().heads[live_branch("shared")]) == 1

    devices.sync()
    assert _listed(saver_a, config) == _listed(saver_b, config)
    assert _latest(saver_a, config) == _latest(saver_b, config)
    assert graph_b.get_state(config).values == after.values
    assert len(_ids(saver_b, config)) == 10 + 5  # and the five of the run after the sync
    assert devices.b.status().heads[live_branch("shared")] == devices.a.status().heads[live_branch("shared")]


def test_checkpoints_put_on_two_devices_then_a_put_on_each_converges(devices: Devices) -> None:
    """saver.put directly, with pending writes on both sides, and a put on each device after the sync."""
    saver_a, saver_b = SovsealSaver(devices.a), SovsealSaver(devices.b)
    config = _thread("direct")
    a1 = _put(saver_a, config, 0, "a1")
    saver_a.put_writes(a1, [("value", "from a")], "task-a")
    b1 = _put(saver_b, config, 0, "b1")
    b2 = _put(saver_b, config, 1, "b2", b1)
    saver_b.put_writes(b2, [("value", "from b")], "task-b")
    devices.sync()

    expected = sorted([a1, b1, b2], key=lambda c: c["configurable"]["checkpoint_id"], reverse=True)
    assert _ids(saver_a, config) == _ids(saver_b, config) == [c["configurable"]["checkpoint_id"] for c in expected]
    assert _listed(saver_a, config) == _listed(saver_b, config)
    assert saver_a.get_tuple(a1).pending_writes == saver_b.get_tuple(a1).pending_writes == [("task-a", "value", "from a")]
    assert saver_a.get_tuple(b2).pending_writes == [("task-b", "value", "from b")]
    assert saver_b.get_tuple(b2).parent_config["configurable"]["checkpoint_id"] == b1["configurable"]["checkpoint_id"]

    # Both devices go on from what each thinks is the latest (the same one) before syncing again.
    latest = saver_a.get_tuple(config).config
    assert latest == saver_b.get_tuple(config).config
    a2 = _put(saver_a, config, 2, "a2", latest)
    b3 = _put(saver_b, config, 2, "b3", latest)
    # ...and each from its own older checkpoint (a branch of LangGraph's tree, not time travel by a user).
    a3 = _put(saver_a, config, 1, "a3", a1)
    assert saver_a.get_tuple(config).config == a3
    devices.sync()
    assert _listed(saver_a, config) == _listed(saver_b, config)
    assert _latest(saver_a, config) == _latest(saver_b, config)
    every = [a1, b1, b2, a2, b3, a3]
    assert sorted(_ids(saver_b, config)) == sorted(c["configurable"]["checkpoint_id"] for c in every)
    for c in every:  # every checkpoint reads back the value it was written with, on both devices
        assert saver_a.get_tuple(c).checkpoint["channel_values"] == saver_b.get_tuple(c).checkpoint["channel_values"]
    assert saver_a.verify("direct").ok and saver_b.verify("direct").ok


def test_a_run_under_way_when_the_pull_comes_in_goes_on_without_forking(devices: Devices) -> None:
    """A device whose run is mid-way pulls newer checkpoints from the other: its next checkpoint (parent:
    its own last one, a head of the thread) goes on both heads, with no archive branch."""
    saver_a, saver_b = SovsealSaver(devices.a), SovsealSaver(devices.b)
    config = _thread("under-way")
    a1 = _put(saver_a, config, 0, "a1")
    b1 = _put(saver_b, config, 0, "b1")
    b2 = _put(saver_b, config, 1, "b2", b1)
    devices.sync()
    assert saver_a.get_tuple(config).config == b2  # the newest id, on a's side too
    a2 = _put(saver_a, config, 1, "a2", a1)  # a's run goes on from where it was
    assert saver_a.get_tuple(config).config == a2
    assert saver_a.get_tuple(a2).parent_config["configurable"]["checkpoint_id"] == a1["configurable"]["checkpoint_id"]
    assert not [b for b in devices.a.branches() if ":fork:" in b]
    assert len(devices.a.status().heads[live_branch("under-way")]) == 1
    devices.sync()
    assert _listed(saver_a, config) == _listed(saver_b, config)
    assert [c.config for c in saver_b.list(config)] == [a2, b2, b1, a1]


def test_pending_writes_on_the_same_checkpoint_from_two_devices_are_all_kept(devices: Devices) -> None:
    saver_a, saver_b = SovsealSaver(devices.a), SovsealSaver(devices.b)
    config = _thread("writes")
    c1 = _put(saver_a, config, 0, "one")
    devices.sync()
    assert _ids(saver_b, config) == [c1["configurable"]["checkpoint_id"]]
    saver_a.put_writes(c1, [("value", "a")], "task-a")
    saver_b.put_writes(c1, [("value", "b")], "task-b")
    devices.sync()
    assert saver_a.get_tuple(c1).pending_writes == saver_b.get_tuple(c1).pending_writes
    assert sorted(saver_a.get_tuple(c1).pending_writes) == [("task-a", "value", "a"), ("task-b", "value", "b")]
    assert len(devices.a.status().heads[writes_branch("writes")]) == 2
    saver_b.put_writes(c1, [("value", "b again")], "task-c")  # the next write merges the writes branch
    assert len(devices.b.status().heads[writes_branch("writes")]) == 1
    devices.sync()
    assert saver_a.get_tuple(c1).pending_writes == saver_b.get_tuple(c1).pending_writes
    assert len(saver_a.get_tuple(c1).pending_writes) == 3


# -- the Store ---------------------------------------------------------------------------------------


def test_a_store_namespace_written_on_two_devices(devices: Devices) -> None:
    store_a, store_b = SovsealStore(devices.a), SovsealStore(devices.b)
    ns = ("users", "ada")
    store_a.put(ns, "from-a", {"text": "likes tea"})
    store_b.put(ns, "from-b", {"text": "likes coffee"})
    store_a.put(ns, "same", {"editor": "vim"})
    store_b.put(ns, "same", {"editor": "emacs"})
    for store in (store_a, store_b):
        store.search(ns)  # each device has read its own items before the sync
    devices.sync()

    def seen(store: SovsealStore) -> list[tuple[str, Any]]:
        return sorted((item.key, item.value) for item in store.search(ns, limit=10))

    assert seen(store_a) == seen(store_b)
    assert {key for key, _ in seen(store_a)} == {"from-a", "from-b", "same"}
    winner_a, winner_b = store_a.get(ns, "same"), store_b.get(ns, "same")
    assert winner_a is not None and winner_b is not None and winner_a.value == winner_b.value
    [conflict] = [c for c in devices.a.conflicts() if c.path.endswith("=same")]
    assert winner_a.value == conflict.versions[0].payload  # the core's rule: the newest (clock, id)
    assert store_a.list_namespaces() == store_b.list_namespaces() == [ns]
    by_meaning = [{item.key for item in store.search(ns, query="what does ada drink?")} for store in (store_a, store_b)]
    assert by_meaning[0] == by_meaning[1] == {"from-a", "from-b", "same"}  # recall sees the merged branch

    # The next put on one device merges; after a sync both agree again.
    store_b.put(ns, "same", {"editor": "helix"})
    devices.sync()
    assert store_a.get(ns, "same").value == store_b.get(ns, "same").value == {"editor": "helix"}
    assert seen(store_a) == seen(store_b)
    assert devices.a.conflicts() == devices.b.conflicts() == []
