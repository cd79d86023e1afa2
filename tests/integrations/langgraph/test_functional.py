"""LangGraph's functional API (@entrypoint / @task) on the saver, against InMemorySaver: the same
results, the same state and history, an interrupt resumed, tasks cached across a resume, and the
previous return value (``previous``) carried from turn to turn."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sovseal import AsyncSovsealSaver, SovsealSaver
from langgraph.func import entrypoint, task
from langgraph.types import Command, interrupt


def build(checkpointer: Any, calls: list[str]) -> Any:
    @task
    def draft(topic: str) -> str:
        calls.append(f"draft {topic}")
        return f"an essay about {topic}"

    @task
    def score(text: str) -> int:
        calls.append("score")
        return len(text)

    @entrypoint(checkpointer=checkpointer)
    def workflow(topic: str, *, previous: Any = None) -> dict[str, Any]:
        essay = draft(topic).result()
        points = score(essay).result()
        verdict = interrupt({"essay": essay, "points": points})
        total = (previous or {}).get("total", 0) + points
        return {"essay": essay, "verdict": verdict, "total": total}

    return workflow


def without_ids(chunk: Any) -> Any:
    """A streamed chunk with each Interrupt as its value (interrupt ids are random per run)."""
    if isinstance(chunk, dict) and "__interrupt__" in chunk:
        return {"__interrupt__": [i.value for i in chunk["__interrupt__"]]}
    return chunk


def run_turns(workflow: Any, thread: str) -> list[Any]:
    cfg = {"configurable": {"thread_id": thread}}
    out = []
    for topic, answer in (("cats", "approve"), ("the sea 🌊", "reject")):
        out.append([without_ids(c) for c in workflow.stream(topic, cfg)])
        out.append(workflow.invoke(Command(resume=answer), cfg))
    return out


def test_entrypoint_with_interrupts_matches_in_memory_saver(saver: SovsealSaver) -> None:
    mine_calls: list[str] = []
    ref_calls: list[str] = []
    mine, ref = build(saver, mine_calls), build(InMemorySaver(), ref_calls)
    got, want = run_turns(mine, "fn/é"), run_turns(ref, "fn/é")
    assert got == want
    assert got[0][-1] == {"__interrupt__": [{"essay": "an essay about cats", "points": 19}]}
    assert got[-1] == {"essay": "an essay about the sea 🌊", "verdict": "reject", "total": 43}
    assert mine_calls == ref_calls == ["draft cats", "score", "draft the sea 🌊", "score"]  # tasks not re-run on resume
    cfg = {"configurable": {"thread_id": "fn/é"}}
    assert mine.get_state(cfg).values == ref.get_state(cfg).values
    shape = lambda wf: [(s.metadata.get("step"), s.metadata.get("source"), s.next) for s in wf.get_state_history(cfg)]
    assert shape(mine) == shape(ref)


@pytest.mark.asyncio
async def test_async_entrypoint(tmp_path: Path) -> None:
    calls: list[str] = []

    @task
    async def double(x: int) -> int:
        calls.append(f"double {x}")
        return 2 * x

    async with AsyncSovsealSaver.open(tmp_path / "fn", key=os.urandom(32)) as saver:

        @entrypoint(checkpointer=saver)
        async def workflow(xs: list[int], *, previous: Any = None) -> int:
            doubled = [await double(x) for x in xs]
            return (previous or 0) + sum(doubled)

        cfg = {"configurable": {"thread_id": "a"}}
        assert await workflow.ainvoke([1, 2, 3], cfg) == 12
        assert await workflow.ainvoke([10], cfg) == 32  # previous carried
        assert (await workflow.aget_state(cfg)).values == 32
        assert len([s async for s in workflow.aget_state_history(cfg)]) >= 2
