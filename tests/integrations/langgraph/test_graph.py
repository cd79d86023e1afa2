"""Real LangGraph graphs on the sovseal saver (no LLM: node functions and langchain-core's fake chat
model): history, replay from the past, update_state on the past, the rollback helper, interrupt and
resume, subgraph namespaces, a process restart, the async saver and create_react_agent with the
store. Each history is compared with the same graph run on LangGraph's InMemorySaver.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
import uuid
import warnings
from pathlib import Path
from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sovseal import AsyncSovsealSaver, SovsealSaver
from langgraph.checkpoint.sovseal._layout import (
    archive_branch,
    checkpoint_path,
    live_branch,
)
from langgraph.config import get_store
from langgraph.store.sovseal import SovsealStore
from langgraph.types import Command

from sovseal.models import LogEntry
from tests.fakes import fake_embed
from tests.integrations.langgraph.graphs import (
    approval_graph,
    ask,
    chat_graph,
    parent_with_subgraph,
    shape,
)

REPO = Path(__file__).resolve().parents[3]


def chain(saver: SovsealSaver, branch: str) -> dict[str, LogEntry]:
    """The records on a branch's chain by path (the newest record of each path)."""
    handle = saver.sovseal
    previous = handle.branch
    handle.checkout(branch)
    try:
        entries = handle.log()
    finally:
        handle.checkout(previous)
    out: dict[str, LogEntry] = {}
    for entry in entries:
        out.setdefault(entry.path, entry)
    return out


def plain(values: dict[str, Any]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A graph's output without message ids (random per run)."""
    return tuple(m.content for m in values.get("messages", [])), tuple(values.get("notes", []))


def cid(snapshot: Any) -> str:
    return snapshot.config["configurable"]["checkpoint_id"]


def test_history_replay_update_state_and_rollback(saver: SovsealSaver) -> None:
    graph = chat_graph().compile(checkpointer=saver)
    reference = chat_graph().compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "chat-1", "user_id": "ada"}}
    for g in (graph, reference):
        g.invoke(ask("What is the capital of France?"), cfg)

    history = list(graph.get_state_history(cfg))
    assert shape(history) == shape(list(reference.get_state_history(cfg)))
    assert [s.metadata["step"] for s in history] == [3, 2, 1, 0, -1]
    assert history[0].metadata["user_id"] == "ada"  # copied from the config, and sealed with the checkpoint

    # A thread is a branch, and each checkpoint's record has its parent checkpoint's record as lineage parent.
    records = chain(saver, live_branch("chat-1"))
    path = {cid(s): checkpoint_path("chat-1", "", cid(s)) for s in history}
    for s in history[:-1]:
        parent = s.parent_config["configurable"]["checkpoint_id"]
        assert records[path[cid(s)]].parent_id == records[path[parent]].snapshot_id

    # Replay from the past: a fork. LangGraph keeps the old future; so does sovseal, on an archive branch.
    past = next(s for s in history if s.next == ("chat",))
    past_ref = next(s for s in reference.get_state_history(cfg) if s.next == ("chat",))
    graph.invoke(None, past.config)
    reference.invoke(None, past_ref.config)
    after_replay = list(graph.get_state_history(cfg))
    assert shape(after_replay) == shape(list(reference.get_state_history(cfg)))
    assert {cid(s) for s in history} <= {cid(s) for s in after_replay}
    fork = next(s for s in after_replay if s.metadata["source"] == "fork")
    records = chain(saver, live_branch("chat-1"))
    assert records[checkpoint_path("chat-1", "", cid(fork))].parent_id == records[path[cid(past)]].snapshot_id
    assert archive_branch("chat-1", 1) in saver.sovseal.branches()

    # update_state on the past: an "update" child of the past checkpoint, then continue from it.
    edited = graph.update_state(past.config, {"notes": ["edited by a human"]})
    edited_ref = reference.update_state(past_ref.config, {"notes": ["edited by a human"]})
    out = graph.invoke(None, edited)
    assert plain(out) == plain(reference.invoke(None, edited_ref))
    assert "edited by a human" in out["notes"]

    # The rollback helper appends a copy of the past as the new head, like as_node="__copy__".
    before = {cid(s) for s in graph.get_state_history(cfg)}
    rolled = saver.rollback(past.config)
    reference.update_state(past_ref.config, None, as_node="__copy__")
    head = graph.get_state(cfg)
    assert cid(head) == rolled["configurable"]["checkpoint_id"] > max(before)
    assert head.values == past.values and head.next == past.next == ("chat",)
    assert head.metadata["source"] == "fork" and head.parent_config == past.parent_config
    assert shape(list(graph.get_state_history(cfg))) == shape(list(reference.get_state_history(cfg)))
    assert before < {cid(s) for s in graph.get_state_history(cfg)}  # append-only: nothing was removed
    assert graph.invoke(None, cfg)["notes"][-1].startswith("reviewed: ")

    report = saver.verify("chat-1")
    assert report.ok, report.problems
    assert report.checkpoints == len(list(graph.get_state_history(cfg)))


def test_interrupt_and_subgraph_namespaces(saver: SovsealSaver) -> None:
    graph = parent_with_subgraph(interrupt_inside=True).compile(checkpointer=saver)
    reference = parent_with_subgraph(interrupt_inside=True).compile(checkpointer=InMemorySaver())
    cfg = {"configurable": {"thread_id": "research-1"}}
    for g in (graph, reference):
        g.invoke(ask("research sovseal"), cfg)

    state = graph.get_state(cfg, subgraphs=True)
    assert state.next == ("research",)
    sub = state.tasks[0].state
    ns = sub.config["configurable"]["checkpoint_ns"]
    assert ns.startswith("research:") and sub.next == ("confirm",)
    assert sub.values["notes"] == ["intake", "searched", "summarized"]
    assert state.tasks[0].interrupts[0].value == "confirm the summary?"
    listed = list(saver.list({"configurable": {"thread_id": "research-1"}}))
    assert {t.config["configurable"]["checkpoint_ns"] for t in listed} == {"", ns}
    assert len(list(saver.list({"configurable": {"thread_id": "research-1", "checkpoint_ns": ns}}))) >= 3

    out = graph.invoke(Command(resume="looks right"), cfg)
    assert plain(out) == plain(reference.invoke(Command(resume="looks right"), cfg))
    assert "confirmed: looks right" in out["notes"] and out["messages"][-1].content.startswith("answer after")
    assert shape(list(graph.get_state_history(cfg))) == shape(list(reference.get_state_history(cfg)))
    assert saver.verify("research-1").ok


_CHILD = textwrap.dedent(
    """
    import json, os, sys
    from langgraph.checkpoint.sovseal import SovsealSaver
    from tests.integrations.langgraph.graphs import approval_graph, ask

    with SovsealSaver.open(os.environ["STORE"], key=bytes.fromhex(os.environ["KEY"])) as saver:
        graph = approval_graph().compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "post-1"}}
        graph.invoke(ask("write a post"), cfg)
        print(json.dumps(list(graph.get_state(cfg).next)))
    """
)


def test_resume_after_process_restart(tmp_path: Path, key: bytes) -> None:
    store = tmp_path / "checkpoints"
    env = {**os.environ, "STORE": str(store), "KEY": key.hex(), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", _CHILD], cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == '["approve"]'

    with SovsealSaver.open(store, key=key) as saver:  # a new process's view: the index is rebuilt from the journal
        graph = approval_graph().compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "post-1"}}
        state = graph.get_state(cfg)
        assert state.next == ("approve",)
        assert state.interrupts[0].value["question"] == "publish this draft?"
        out = graph.invoke(Command(resume="yes"), cfg)
        assert out["notes"] == ["drafted", "approval: yes", "published"]
        assert saver.verify("post-1").ok


@pytest.mark.asyncio
async def test_async_saver_interrupt_resume_and_rollback(tmp_path: Path, key: bytes) -> None:
    async with AsyncSovsealSaver.open(tmp_path / "checkpoints", key=key) as saver:
        graph = approval_graph().compile(checkpointer=saver)
        cfg = {"configurable": {"thread_id": "post-2"}}
        await graph.ainvoke(ask("write a post"), cfg)
        waiting = await graph.aget_state(cfg)
        assert waiting.next == ("approve",)
        with pytest.raises(asyncio.InvalidStateError):
            saver.get_tuple(cfg)  # a sync call on the event loop's thread would block it
        assert (await asyncio.to_thread(saver.get_tuple, cfg)) is not None  # from another thread it is fine

        out = await graph.ainvoke(Command(resume="no"), cfg)
        assert out["notes"][-1] == "discarded"

        rolled = await saver.arollback(waiting.config)  # back to "waiting for approval", appended as the head
        head = await graph.aget_state(cfg)
        assert cid(head) == rolled["configurable"]["checkpoint_id"] and head.next == ("approve",)
        out = await graph.ainvoke(Command(resume="yes"), cfg)
        assert out["notes"][-1] == "published"

        history = [s async for s in graph.aget_state_history(cfg)]
        assert [s.metadata["source"] for s in history].count("fork") == 1
        assert cid(waiting) in {cid(s) for s in history}
        assert (await saver.averify("post-2")).ok


class _ToolCallingFake(GenericFakeChatModel):
    """langchain-core's fake chat model, able to sit in create_react_agent (tools are scripted)."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> _ToolCallingFake:
        return self


def test_create_react_agent_with_saver_and_store(tmp_path: Path, key: bytes) -> None:
    @tool
    def remember(fact: str) -> str:
        """Save a fact about the user."""
        get_store().put(("memories", "ada"), uuid.uuid4().hex, {"fact": fact})
        return "saved"

    @tool
    def recall_facts(query: str) -> str:
        """Find facts about the user."""
        return "; ".join(item.value["fact"] for item in get_store().search(("memories", "ada"), query=query, limit=3))

    script = [
        AIMessage(content="", tool_calls=[{"name": "remember", "args": {"fact": "Ada prefers green tea"}, "id": "call-1"}]),
        AIMessage(content="Noted."),
        AIMessage(content="", tool_calls=[{"name": "recall_facts", "args": {"query": "what does Ada drink"}, "id": "call-2"}]),
        AIMessage(content="You prefer green tea."),
    ]
    with (
        SovsealSaver.open(tmp_path / "checkpoints", key=key) as saver,
        SovsealStore.open(tmp_path / "memories", key=os.urandom(32), embedder=fake_embed) as store,
        warnings.catch_warnings(),
    ):
        warnings.simplefilter("ignore")  # create_react_agent is deprecated in favour of langchain.agents
        from langgraph.prebuilt import create_react_agent

        agent = create_react_agent(_ToolCallingFake(messages=iter(script)), [remember, recall_facts], checkpointer=saver, store=store)
        cfg = {"configurable": {"thread_id": "agent-1"}}
        agent.invoke({"messages": [("user", "I like green tea")]}, cfg)
        assert [i.value for i in store.search(("memories", "ada"))] == [{"fact": "Ada prefers green tea"}]
        out = agent.invoke({"messages": [("user", "What do I drink?")]}, cfg)
        assert out["messages"][-1].content == "You prefer green tea."
        assert len(out["messages"]) == 8  # both turns: the checkpointer kept the first
        tool_answers = [m.content for m in out["messages"] if isinstance(m, ToolMessage)]
        assert tool_answers == ["saved", "Ada prefers green tea"]
        assert saver.verify("agent-1").ok
