"""Small real LangGraph graphs for the saver tests (no LLM: node functions and a fake chat model).

Imported by the tests and by the child process of the restart test, so it has no test-only deps.
"""

from __future__ import annotations

import itertools
import operator
from typing import Annotated, Any, TypedDict

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt


class ChatState(MessagesState):
    notes: Annotated[list[str], operator.add]


def fake_chat_model() -> GenericFakeChatModel:
    """langchain-core's fake chat model, standing in for an LLM: it answers from a fixed cycle."""
    return GenericFakeChatModel(messages=itertools.cycle(["Paris.", "It has about two million people.", "The Louvre."]))


def chat_graph() -> StateGraph:
    """plan -> chat (the fake chat model) -> review."""
    model = fake_chat_model()

    def plan(state: ChatState) -> dict[str, Any]:
        return {"notes": [f"plan for {len(state['messages'])} message(s)"]}

    def chat(state: ChatState) -> dict[str, Any]:
        return {"messages": [model.invoke(state["messages"])]}

    def review(state: ChatState) -> dict[str, Any]:
        last = state["messages"][-1]
        return {"notes": [f"reviewed: {last.content}"]}

    builder = StateGraph(ChatState)
    builder.add_node("plan", plan)
    builder.add_node("chat", chat)
    builder.add_node("review", review)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "chat")
    builder.add_edge("chat", "review")
    builder.add_edge("review", END)
    return builder


def approval_graph() -> StateGraph:
    """draft -> approve (interrupts for a human) -> publish."""

    def draft(state: ChatState) -> dict[str, Any]:
        return {"messages": [AIMessage(content="draft: sovseal seals every checkpoint")], "notes": ["drafted"]}

    def approve(state: ChatState) -> dict[str, Any]:
        answer = interrupt({"question": "publish this draft?", "draft": state["messages"][-1].content})
        return {"notes": [f"approval: {answer}"]}

    def publish(state: ChatState) -> dict[str, Any]:
        return {"notes": ["published" if state["notes"][-1] == "approval: yes" else "discarded"]}

    builder = StateGraph(ChatState)
    builder.add_node("draft", draft)
    builder.add_node("approve", approve)
    builder.add_node("publish", publish)
    builder.add_edge(START, "draft")
    builder.add_edge("draft", "approve")
    builder.add_edge("approve", "publish")
    builder.add_edge("publish", END)
    return builder


def parent_with_subgraph(*, interrupt_inside: bool = False) -> StateGraph:
    """intake -> research (a compiled subgraph: search -> summarize [-> confirm]) -> answer."""

    def search(state: ChatState) -> dict[str, Any]:
        return {"notes": ["searched"]}

    def summarize(state: ChatState) -> dict[str, Any]:
        return {"notes": ["summarized"], "messages": [AIMessage(content="summary of the research")]}

    def confirm(state: ChatState) -> dict[str, Any]:
        return {"notes": [f"confirmed: {interrupt('confirm the summary?')}"]}

    sub = StateGraph(ChatState)
    sub.add_node("search", search)
    sub.add_node("summarize", summarize)
    sub.add_edge(START, "search")
    sub.add_edge("search", "summarize")
    if interrupt_inside:
        sub.add_node("confirm", confirm)
        sub.add_edge("summarize", "confirm")
        sub.add_edge("confirm", END)
    else:
        sub.add_edge("summarize", END)

    def intake(state: ChatState) -> dict[str, Any]:
        return {"notes": ["intake"]}

    def answer(state: ChatState) -> dict[str, Any]:
        return {"messages": [AIMessage(content=f"answer after {len(state['notes'])} notes")]}

    builder = StateGraph(ChatState)
    builder.add_node("intake", intake)
    builder.add_node("research", sub.compile())
    builder.add_node("answer", answer)
    builder.add_edge(START, "intake")
    builder.add_edge("intake", "research")
    builder.add_edge("research", "answer")
    builder.add_edge("answer", END)
    return builder


class LoopState(TypedDict):
    count: int
    log: Annotated[list[str], operator.add]


def loop_graph(steps: int) -> StateGraph:
    """One node that counts and logs, run ``steps`` times: the shape of the saver benchmark's graph."""

    def step(state: LoopState) -> dict[str, Any]:
        return {"count": state["count"] + 1, "log": [f"step {state['count']}"]}

    builder = StateGraph(LoopState)
    builder.add_node("step", step)
    builder.add_edge(START, "step")
    builder.add_conditional_edges("step", lambda s: END if s["count"] >= steps else "step")
    return builder


def ask(text: str) -> dict[str, Any]:
    return {"messages": [HumanMessage(content=text)], "notes": []}


def shape(history: list[Any]) -> list[tuple[Any, ...]]:
    """What a history is made of, without ids and timestamps: (source, step, next, messages, notes)."""
    return [
        (
            s.metadata.get("source"),
            s.metadata.get("step"),
            tuple(s.next),
            tuple(m.content for m in s.values.get("messages", [])),
            tuple(s.values.get("notes", [])),
        )
        for s in history
    ]
