"""SovsealChatMessageHistory: per-session messages as sealed records, with RunnableWithMessageHistory."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest
from langchain_core.chat_history import BaseChatMessageHistory
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage, ToolMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
from langchain_sovseal import SovsealChatMessageHistory, SovsealRetriever

from sovseal import Sovseal


def _client(store_dir: Path, key: bytes) -> Sovseal:
    return Sovseal(store_dir, key=key, embedder=DeterministicFakeEmbedding(size=8).embed_documents)


def _echo_model(prompt: PromptValue) -> AIMessage:
    """A fake chat model: answers with how many messages it was shown and the last human line."""
    messages = prompt.to_messages()
    last = [m for m in messages if isinstance(m, HumanMessage)][-1]
    return AIMessage(content=f"saw {len(messages)} messages; last: {last.content}")


def test_runnable_with_message_history(store_dir: Path, key: bytes) -> None:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You are terse."), MessagesPlaceholder("history"), ("human", "{question}")]
    )
    chain = prompt | RunnableLambda(_echo_model)
    with _client(store_dir, key) as mem:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # LangChain points to LangGraph; this is the compat path
            with_history = RunnableWithMessageHistory(
                chain,
                lambda session_id: SovsealChatMessageHistory(session_id, client=mem),
                input_messages_key="question",
                history_messages_key="history",
            )
        alice = {"configurable": {"session_id": "alice"}}
        bob = {"configurable": {"session_id": "bob"}}
        assert with_history.invoke({"question": "hi"}, config=alice).content == "saw 2 messages; last: hi"
        assert with_history.invoke({"question": "again"}, config=alice).content == "saw 4 messages; last: again"
        assert with_history.invoke({"question": "new here"}, config=bob).content == "saw 2 messages; last: new here"
        history = SovsealChatMessageHistory("alice", client=mem)
        assert [(m.type, m.content) for m in history.messages] == [
            ("human", "hi"),
            ("ai", "saw 2 messages; last: hi"),
            ("human", "again"),
            ("ai", "saw 4 messages; last: again"),
        ]
        assert len(SovsealChatMessageHistory("bob", client=mem).messages) == 2
    # Durable, and readable only with the key: a new process sees the same conversation.
    with SovsealChatMessageHistory(
        "alice", path=store_dir, key=key, embedder=DeterministicFakeEmbedding(size=8).embed_documents
    ) as again:
        assert len(again.messages) == 4


@pytest.mark.asyncio
async def test_async_runnable_with_message_history(store_dir: Path, key: bytes) -> None:
    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])
    with _client(store_dir, key) as mem:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            with_history = RunnableWithMessageHistory(
                prompt | RunnableLambda(_echo_model),
                lambda session_id: SovsealChatMessageHistory(session_id, client=mem),
                input_messages_key="question",
                history_messages_key="history",
            )
        config = {"configurable": {"session_id": "s"}}
        await with_history.ainvoke({"question": "one"}, config=config)
        answer = await with_history.ainvoke({"question": "two"}, config=config)
        assert answer.content == "saw 3 messages; last: two"
        history = SovsealChatMessageHistory("s", client=mem)
        assert len(await history.aget_messages()) == 4
        await history.aclear()
        assert await history.aget_messages() == []


def test_message_types_round_trip(store_dir: Path, key: bytes) -> None:
    messages: list[BaseMessage] = [
        SystemMessage("be brief"),
        HumanMessage("what is 2+2?", id="m1", additional_kwargs={"lang": "en"}),
        AIMessage("", tool_calls=[{"name": "calc", "args": {"expr": "2+2"}, "id": "call1", "type": "tool_call"}]),
        ToolMessage("4", tool_call_id="call1"),
        AIMessage([{"type": "text", "text": "it is 4"}]),
    ]
    with _client(store_dir, key) as mem:
        history = SovsealChatMessageHistory("s1", client=mem)
        assert isinstance(history, BaseChatMessageHistory)
        history.add_messages(messages)
        assert history.messages == messages
        history.add_message(HumanMessage("thanks"))
        assert history.messages[-1] == HumanMessage("thanks") and len(history.messages) == 6


def test_clear_is_a_tombstone_and_rollback_restores(store_dir: Path, key: bytes) -> None:
    with _client(store_dir, key) as mem:
        history = SovsealChatMessageHistory("s", client=mem, namespace="support")
        history.add_messages([HumanMessage("a"), AIMessage("b"), HumanMessage("c")])
        before = mem.snapshot()
        history.clear()
        assert history.messages == []
        history.add_messages([HumanMessage("fresh start")])
        assert [m.content for m in history.messages] == ["fresh start"]
        assert before is not None
        mem.rollback(before)
        assert [m.content for m in history.messages] == ["a", "b", "c"]
        # Other sessions and namespaces are separate, even with look-alike ids.
        assert SovsealChatMessageHistory("s", client=mem).messages == []
        assert SovsealChatMessageHistory("s/x", client=mem, namespace="support").messages == []


def test_messages_are_recallable_memories(store_dir: Path, key: bytes) -> None:
    with _client(store_dir, key) as mem:
        history = SovsealChatMessageHistory("s", client=mem)
        history.add_messages([HumanMessage("my cat is called Turing"), AIMessage("noted")])
        retriever = SovsealRetriever(client=mem, k=1, filter={"session_id": "s", "role": "human"})
        [doc] = retriever.invoke("cat Turing")
        assert doc.metadata == {"session_id": "s", "role": "human"}
        [memory] = retriever.recall_memories("cat Turing")
        assert memory.type == "episodic" and memory.provenance == "observed"


def test_validation(store_dir: Path, key: bytes) -> None:
    with _client(store_dir, key) as mem:
        with pytest.raises(ValueError):
            SovsealChatMessageHistory("", client=mem)
        with pytest.raises(ValueError):
            SovsealChatMessageHistory("s", client=mem, namespace="a/b")
        with pytest.raises(ValueError):
            SovsealChatMessageHistory("s", client=mem, path=store_dir)


def test_a_session_written_by_an_earlier_release_reads_and_goes_on(store_dir: Path, key: bytes) -> None:
    """Earlier releases named message n ``<n>`` (zero-padded); those sessions read in order and take
    new batches after them."""
    from langchain_core.messages import message_to_dict

    with _client(store_dir, key) as mem:
        for n, message in enumerate([HumanMessage("old question"), AIMessage("old answer")]):
            mem.store(f"langchain-chat/default/s/{n:08d}", message_to_dict(message), metadata={"session_id": "s", "role": message.type})
        history = SovsealChatMessageHistory("s", client=mem)
        assert [m.content for m in history.messages] == ["old question", "old answer"]
        history.add_messages([HumanMessage("new question"), AIMessage("new answer")])
        assert [m.content for m in history.messages] == ["old question", "old answer", "new question", "new answer"]
        assert [m.content for m in SovsealChatMessageHistory("s", client=mem).messages][-1] == "new answer"
        history.clear()
        assert history.messages == [] and SovsealChatMessageHistory("s", client=mem).messages == []


def test_the_listing_follows_other_writers_on_the_branch(store_dir: Path, key: bytes) -> None:
    """A session's records are listed once and kept while the branch's heads stay put: another
    handle's write, a rollback or a second history object on the same session are all seen."""
    with _client(store_dir, key) as mem:
        first = SovsealChatMessageHistory("s", client=mem)
        first.add_messages([HumanMessage("one")])
        before = mem.snapshot()
        second = SovsealChatMessageHistory("s", client=mem)
        second.add_messages([AIMessage("two")])
        assert [m.content for m in first.messages] == ["one", "two"]
        with Sovseal(store_dir, key=key, embedder=DeterministicFakeEmbedding(size=8).embed_documents) as other:
            SovsealChatMessageHistory("s", client=other).add_messages([HumanMessage("three")])
        assert [m.content for m in first.messages] == ["one", "two", "three"]
        assert before is not None
        mem.rollback(before)
        assert [m.content for m in second.messages] == ["one"]


def test_sessions_of_earlier_releases_read_and_are_never_served_stale(store_dir: Path, key: bytes) -> None:
    """Earlier releases named a session's messages ``<n>`` (and could write one such name again after
    a clear); they read in order, new messages go after them, and a rewritten name is read afresh.
    The records of a session ``s/b`` are not messages of ``s``."""
    from langchain_core.messages import message_to_dict

    with _client(store_dir, key) as mem:
        for n, text in enumerate(["old one", "old two"]):
            mem.store(f"langchain-chat/default/s/{n:08d}", message_to_dict(HumanMessage(text)), type="episodic")
        SovsealChatMessageHistory("s/b", client=mem).add_messages([HumanMessage("another session")])
        history = SovsealChatMessageHistory("s", client=mem)
        assert [m.content for m in history.messages] == ["old one", "old two"]
        history.add_messages([AIMessage("new")])
        assert [m.content for m in history.messages] == ["old one", "old two", "new"]
        mem.store("langchain-chat/default/s/00000001", message_to_dict(HumanMessage("rewritten")), type="episodic")
        assert [m.content for m in SovsealChatMessageHistory("s", client=mem).messages] == ["old one", "rewritten", "new"]
        assert [m.content for m in SovsealChatMessageHistory("s/b", client=mem).messages] == ["another session"]
