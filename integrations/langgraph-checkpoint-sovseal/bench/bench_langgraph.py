"""SovsealSaver / AsyncSovsealSaver against LangGraph's SQLite savers, side by side in one run.

    pip install -e "integrations/langgraph-checkpoint-sovseal[bench]"
    python integrations/langgraph-checkpoint-sovseal/bench/bench_langgraph.py [--n 200] [--steps 50] [--json PATH]

Every saver is file-backed in a fresh temporary directory and durable per operation (SQLite in WAL
mode with synchronous=FULL, its default here; sovseal fsyncs each put and put_writes). Prints p50 latency per
operation and the ratio sovseal / SQLite:

- put: a chat-sized checkpoint (about 4 KB serialized) chained to the previous one;
- put_writes: one task's two writes;
- get_tuple: the newest checkpoint of the thread, with its pending writes;
- list: the 10 newest checkpoints of the thread;
- graph: one 50-step run of a small LangGraph graph (p50 over several runs, one thread each).

Sync pairs SovsealSaver with SqliteSaver; async pairs AsyncSovsealSaver with AsyncSqliteSaver. The
two savers of a pair take turns operation by operation (and run by run), so a disk whose fsync
latency drifts (a shared machine) weighs on both alike. The ratios, not the absolute numbers, are the
point.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import operator
import os
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path
from typing import Annotated, Any, TypedDict

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.sovseal import AsyncSovsealSaver, SovsealSaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph


class LoopState(TypedDict):
    count: int
    log: Annotated[list[str], operator.add]


def loop_graph(steps: int) -> StateGraph:
    def step(state: LoopState) -> dict[str, Any]:
        return {"count": state["count"] + 1, "log": [f"step {state['count']}: the agent thought about something"]}

    builder = StateGraph(LoopState)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", lambda s: END if s["count"] >= steps else "step")
    return builder


def checkpoint(i: int) -> dict[str, Any]:
    cp = empty_checkpoint()
    cp["id"] = str(uuid6(clock_seq=i))
    cp["channel_values"] = {
        "messages": [{"role": "user" if j % 2 else "assistant", "content": f"message {j} " + "lorem ipsum " * 20} for j in range(12)],
        "step": i,
    }
    cp["channel_versions"] = {"messages": f"{i + 1:032}.0", "step": f"{i + 1:032}.0"}
    return cp


def p50(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def row(name: str, sovseal: float, sqlite: float) -> str:
    return f"| {name:<10} | {sovseal:9.3f} | {sqlite:9.3f} | {sovseal / sqlite:5.2f}x |"


class _SyncSide:
    """One saver's state in the lockstep run: its thread config and its samples."""

    def __init__(self, saver: Any, steps: int) -> None:
        self.saver = saver
        self.cfg: dict[str, Any] = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
        self.samples: dict[str, list[float]] = {}
        self.graph = loop_graph(steps).compile(checkpointer=saver)

    def add(self, name: str, seconds: float) -> None:
        self.samples.setdefault(name, []).append(seconds)

    def p50s(self) -> dict[str, float]:
        return {name: p50(values) for name, values in self.samples.items()}


def bench_sync(pair: list[Any], n: int, steps: int, runs: int) -> list[dict[str, float]]:
    """The savers take turns, operation by operation, so both see the same disk and machine load."""
    sides = [_SyncSide(saver, steps) for saver in pair]
    head = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
    for i in range(n):
        for side in sides:
            start = time.perf_counter()
            side.cfg = side.saver.put(dict(side.cfg), checkpoint(i), {"source": "loop", "step": i}, {"messages": 1})
            side.add("put", time.perf_counter() - start)
            start = time.perf_counter()
            side.saver.put_writes(side.cfg, [("messages", {"content": "hi"}), ("step", i)], f"task-{i}")
            side.add("put_writes", time.perf_counter() - start)
    for _ in range(n):
        for side in sides:
            start = time.perf_counter()
            side.saver.get_tuple(head)
            side.add("get_tuple", time.perf_counter() - start)
            start = time.perf_counter()
            list(side.saver.list(head, limit=10))
            side.add("list", time.perf_counter() - start)
    for r in range(runs):
        for side in sides if r % 2 == 0 else sides[::-1]:  # each saver goes first in half the runs
            start = time.perf_counter()
            side.graph.invoke({"count": 0, "log": []}, {"configurable": {"thread_id": f"run-{r}"}})
            side.add(f"graph {steps}", time.perf_counter() - start)
    return [side.p50s() for side in sides]


async def bench_async(pair: list[Any], n: int, steps: int, runs: int) -> list[dict[str, float]]:
    sides = [_SyncSide(saver, steps) for saver in pair]
    head = {"configurable": {"thread_id": "bench", "checkpoint_ns": ""}}
    for i in range(n):
        for side in sides:
            start = time.perf_counter()
            side.cfg = await side.saver.aput(dict(side.cfg), checkpoint(i), {"source": "loop", "step": i}, {"messages": 1})
            side.add("put", time.perf_counter() - start)
            start = time.perf_counter()
            await side.saver.aput_writes(side.cfg, [("messages", {"content": "hi"}), ("step", i)], f"task-{i}")
            side.add("put_writes", time.perf_counter() - start)
    for _ in range(n):
        for side in sides:
            start = time.perf_counter()
            await side.saver.aget_tuple(head)
            side.add("get_tuple", time.perf_counter() - start)
            start = time.perf_counter()
            _ = [t async for t in side.saver.alist(head, limit=10)]
            side.add("list", time.perf_counter() - start)
    for r in range(runs):
        for side in sides if r % 2 == 0 else sides[::-1]:  # each saver goes first in half the runs
            start = time.perf_counter()
            await side.graph.ainvoke({"count": 0, "log": []}, {"configurable": {"thread_id": f"run-{r}"}})
            side.add(f"graph {steps}", time.perf_counter() - start)
    return [side.p50s() for side in sides]


def table(title: str, mine: dict[str, float], theirs: dict[str, float], peer: str) -> None:
    print(f"\n{title}: p50 in ms\n")
    print(f"| operation  | {'sovseal':>9} | {peer[:9]:>9} | ratio |")
    print("|------------|-----------|-----------|-------|")
    for name, value in mine.items():
        print(row(name, value, theirs[name]))


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=200, help="operations per micro-benchmark")
    parser.add_argument("--steps", type=int, default=50, help="steps of the graph run")
    parser.add_argument("--runs", type=int, default=5, help="graph runs")
    parser.add_argument("--json", type=Path, default=None, help="also write the p50s (ms) here")
    args = parser.parse_args()
    key = os.urandom(32)
    with tempfile.TemporaryDirectory(prefix="bench-langgraph-") as tmp:
        root = Path(tmp)
        with SovsealSaver.open(root / "warm", key=key) as warm:  # first use loads the vector index library
            warm.put({"configurable": {"thread_id": "w", "checkpoint_ns": ""}}, checkpoint(0), {}, {})

        conn = sqlite3.connect(root / "sync.sqlite", check_same_thread=False)
        with SovsealSaver.open(root / "sync-sovseal", key=key) as saver:
            sync_mine, sync_sqlite = bench_sync([saver, SqliteSaver(conn)], args.n, args.steps, args.runs)
        conn.close()
        table("Sync: SovsealSaver vs SqliteSaver (file)", sync_mine, sync_sqlite, "SqliteSaver")

        async with (
            AsyncSovsealSaver.open(root / "async-sovseal", key=key) as asaver,
            AsyncSqliteSaver.from_conn_string(str(root / "async.sqlite")) as asqlite,
        ):
            async_mine, async_sqlite = await bench_async([asaver, asqlite], args.n, args.steps, args.runs)
        table("Async: AsyncSovsealSaver vs AsyncSqliteSaver (file)", async_mine, async_sqlite, "AsyncSqlite")
    if args.json:
        report = {
            "n": args.n,
            "steps": args.steps,
            "runs": args.runs,
            "sync": {"sovseal": sync_mine, "sqlite": sync_sqlite},
            "async": {"sovseal": async_mine, "sqlite": async_sqlite},
        }
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
