"""DeltaChannel (beta) through the saver: prune and copy_thread keep what the delta chain needs.

A ``DeltaChannel`` stores its value only every ``snapshot_frequency`` updates; in between, LangGraph
rebuilds it by walking the parent chain and replaying pending writes. Each test runs the same real
graph against ``InMemorySaver`` (which never prunes or copies here: it is the value the thread
must keep) and against the sovseal saver, and compares what ``get_state`` returns.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Annotated, Any, TypedDict

import pytest
from langgraph.channels.delta import DeltaChannel
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sovseal import AsyncSovsealSaver, SovsealSaver
from langgraph.graph import END, START, StateGraph


def extend(state: list[str], writes: list[list[str]]) -> list[str]:
    out = list(state)
    for w in writes:
        out.extend(w)
    return out


class LogState(TypedDict):
    log: Annotated[list, DeltaChannel(extend, snapshot_frequency=4)]
    n: int


def log_graph() -> StateGraph:
    """One node that appends to the delta channel ``log`` and counts in ``n``: two updates of ``log`` a turn."""

    def step(state: LogState) -> dict[str, Any]:
        return {"log": [f"x{state['n']}"], "n": state["n"] + 1}

    builder = StateGraph(LogState)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    return builder


def turn(i: int) -> dict[str, Any]:
    return {"log": [f"in{i}"], "n": i * 10}


def expected_log(turns: int) -> list[str]:
    return [x for i in range(turns) for x in (f"in{i}", f"x{i * 10}")]


@pytest.mark.parametrize("turns", [1, 2, 3, 4, 5, 6, 9])
def test_prune_keep_latest_keeps_the_delta_chain(saver: SovsealSaver, turns: int) -> None:
    ours, ref = log_graph().compile(checkpointer=saver), log_graph().compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": f"delta-{turns}"}}
    for i in range(turns):
        ours.invoke(turn(i), cfg)
        ref.invoke(turn(i), cfg)
    before = len(list(saver.list(cfg)))
    saver.prune([f"delta-{turns}"], strategy="keep_latest")
    state = ours.get_state(cfg).values
    assert state == ref.get_state(cfg).values
    assert state["log"] == expected_log(turns)  # the case: {'log': [], 'n': 41} before the fix
    kept = list(saver.list(cfg))
    assert 1 <= len(kept) <= before
    if turns >= 5:  # a snapshot was written at turn 2 or later: everything before it was dropped
        assert len(kept) < before
    # the thread goes on from the pruned state exactly as the unpruned reference does
    ours.invoke(turn(turns), cfg)
    ref.invoke(turn(turns), cfg)
    assert ours.get_state(cfg).values == ref.get_state(cfg).values
    assert ours.get_state(cfg).values["log"] == expected_log(turns + 1)


def test_prune_twice_and_the_oldest_kept_checkpoint_is_the_snapshot(saver: SovsealSaver) -> None:
    graph = log_graph().compile(checkpointer=saver)
    cfg = {"configurable": {"thread_id": "twice"}}
    for i in range(7):
        graph.invoke(turn(i), cfg)
    saver.prune(["twice"])
    kept = list(saver.list(cfg))
    oldest = kept[-1].checkpoint
    newest = kept[0].checkpoint
    assert "log" not in newest["channel_values"]  # the head is not a snapshot point: the walk is needed
    assert "log" in oldest["channel_values"]  # and it ends at the one that holds the value
    assert all("log" not in t.checkpoint["channel_values"] for t in kept[:-1])
    saver.prune(["twice"])  # nothing more to drop
    assert [t.checkpoint["id"] for t in saver.list(cfg)] == [t.checkpoint["id"] for t in kept]
    assert graph.get_state(cfg).values["log"] == expected_log(7)


def test_copy_thread_carries_the_delta_chain(saver: SovsealSaver) -> None:
    graph = log_graph().compile(checkpointer=saver)
    src, dst, after = ({"configurable": {"thread_id": t}} for t in ("src", "dst", "after-prune"))
    for i in range(5):
        graph.invoke(turn(i), src)
    saver.copy_thread("src", "dst")
    assert graph.get_state(dst).values == graph.get_state(src).values
    graph.invoke(turn(5), dst)
    assert graph.get_state(dst).values["log"] == expected_log(6)
    assert graph.get_state(src).values["log"] == expected_log(5)  # the source is unchanged
    saver.prune(["src"])
    saver.copy_thread("src", "after-prune")  # a pruned thread copies what its chain still needs
    assert graph.get_state(after).values["log"] == expected_log(5)


@pytest.mark.asyncio
async def test_async_prune_and_copy(tmp_path: Path, key: bytes) -> None:
    async with AsyncSovsealSaver.open(tmp_path / "a", key=key) as saver:
        graph = log_graph().compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "a"}}
        for i in range(5):
            await graph.ainvoke(turn(i), cfg)
        await saver.aprune(["a"])
        await saver.acopy_thread("a", "b")
        for thread in ("a", "b"):
            state = await graph.aget_state({"configurable": {"thread_id": thread}})
            assert state.values["log"] == expected_log(5)


@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
def test_durability_modes_match_in_memory_saver(saver: SovsealSaver, durability: str) -> None:
    ours, ref = log_graph().compile(checkpointer=saver), log_graph().compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": f"d-{durability}"}}
    for i in range(6):
        ours.invoke(turn(i), cfg, durability=durability)
        ref.invoke(turn(i), cfg, durability=durability)
    assert ours.get_state(cfg).values == ref.get_state(cfg).values
    ours_history = [(s.metadata.get("step"), s.values.get("n")) for s in ours.get_state_history(cfg)]
    ref_history = [(s.metadata.get("step"), s.values.get("n")) for s in ref.get_state_history(cfg)]
    assert ours_history == ref_history
    saver.prune([f"d-{durability}"])
    assert ours.get_state(cfg).values["log"] == expected_log(6)


@pytest.mark.asyncio
@pytest.mark.parametrize("durability", ["sync", "async", "exit"])
async def test_async_durability_modes(tmp_path: Path, key: bytes, durability: str) -> None:
    async with AsyncSovsealSaver.open(tmp_path / durability, key=key) as saver:
        ours, ref = log_graph().compile(checkpointer=saver), log_graph().compile(checkpointer=InMemorySaver())
        cfg = {"configurable": {"thread_id": "t"}}
        for i in range(5):
            await asyncio.gather(ours.ainvoke(turn(i), cfg, durability=durability))
            await ref.ainvoke(turn(i), cfg, durability=durability)
        assert (await ours.aget_state(cfg)).values == (await ref.aget_state(cfg)).values
