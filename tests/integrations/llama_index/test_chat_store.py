"""SovsealChatStore as LlamaIndex's Memory uses it (ACTIVE / ARCHIVED, limits, offsets, flushing to a
VectorMemoryBlock on a SovsealVectorStore), after a restart, and the legacy BaseChatStore."""

from __future__ import annotations

import asyncio
import inspect
from pathlib import Path

import pytest

pytest.importorskip("llama_index.vector_stores.sovseal", reason="pip install -e integrations/llama-index-sovseal")

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.memory import ChatMemoryBuffer, Memory, VectorMemoryBlock
from llama_index.core.storage.chat_store.base import BaseChatStore
from llama_index.core.storage.chat_store.base_db import AsyncDBChatStore, MessageStatus
from llama_index.storage.chat_store.sovseal import SovsealChatStore, SovsealLegacyChatStore
from llama_index.vector_stores.sovseal import SovsealVectorStore

from sovseal import Sovseal

ACTIVE, ARCHIVED = MessageStatus.ACTIVE, MessageStatus.ARCHIVED


def memory_on(store: SovsealChatStore, **kwargs) -> Memory:
    """``Memory.from_defaults(chat_store=...)``; before llama-index-core took that argument, set ``sql_store``."""
    if "chat_store" in inspect.signature(Memory.from_defaults).parameters:
        return Memory.from_defaults(chat_store=store, **kwargs)
    memory = Memory.from_defaults(**kwargs)
    memory.sql_store = store
    return memory


def user(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.USER, content=text)


def bot(text: str) -> ChatMessage:
    return ChatMessage(role=MessageRole.ASSISTANT, content=text)


def texts(messages) -> list[str]:
    return [m.content for m in messages]


@pytest.fixture
def client(store_dir: Path, key: bytes, embed_model):
    with Sovseal(store_dir, key=key, embedder=embed_model.embedder) as c:
        yield c


def test_is_the_chat_store_memory_takes(client) -> None:
    store = SovsealChatStore(client)
    assert isinstance(store, AsyncDBChatStore)
    assert isinstance(SovsealLegacyChatStore(client), BaseChatStore)
    memory = memory_on(store, session_id="s")
    assert memory.sql_store is store


def test_async_db_chat_store_semantics(client) -> None:
    store = SovsealChatStore(client)

    async def run():
        await store.add_message("alice", user("m0"))
        await store.add_messages("alice", [bot("m1"), user("m2"), bot("m3"), user("m4")])
        await store.add_message("bob", user("hello bob"))
        assert texts(await store.get_messages("alice")) == ["m0", "m1", "m2", "m3", "m4"]
        assert texts(await store.get_messages("alice", limit=2)) == ["m0", "m1"]
        assert texts(await store.get_messages("alice", limit=2, offset=3)) == ["m3", "m4"]
        assert texts(await store.get_messages("alice", offset=4)) == ["m4"]
        assert await store.count_messages("alice") == 5
        assert (await store.get_messages("alice"))[1].role == MessageRole.ASSISTANT

        assert texts(await store.archive_oldest_messages("alice", 2)) == ["m0", "m1"]
        assert texts(await store.get_messages("alice")) == ["m2", "m3", "m4"]
        assert texts(await store.get_messages("alice", status=ARCHIVED)) == ["m0", "m1"]
        assert texts(await store.get_messages("alice", status=None)) == ["m0", "m1", "m2", "m3", "m4"]
        assert await store.count_messages("alice", status=ARCHIVED) == 2
        assert await store.count_messages("alice", status=None) == 5

        assert texts(await store.delete_oldest_messages("alice", 1)) == ["m2"]  # the oldest ACTIVE one
        assert texts(await store.get_messages("alice", status=None)) == ["m0", "m1", "m3", "m4"]
        assert (await store.delete_message("alice", 3)).content == "m3"  # by sequence number
        assert await store.delete_message("alice", 3) is None
        assert texts(await store.get_messages("alice")) == ["m4"]

        await store.delete_messages("alice", status=ARCHIVED)
        assert texts(await store.get_messages("alice", status=None)) == ["m4"]
        assert await store.get_keys() == ["alice", "bob"]

        await store.set_messages("alice", [user("fresh start"), bot("ok")])
        assert texts(await store.get_messages("alice", status=None)) == ["fresh start", "ok"]
        await store.set_messages("alice", [user("archived import")], status=ARCHIVED)
        assert texts(await store.get_messages("alice", status=ARCHIVED)) == ["archived import"]
        assert await store.count_messages("alice") == 0

        await store.delete_messages("bob")
        assert await store.get_keys() == ["alice"]
        assert await store.archive_oldest_messages("nobody", 3) == []

    asyncio.run(run())


def test_keys_that_look_like_paths_stay_apart(client) -> None:
    store = SovsealChatStore(client)

    async def run():
        await store.add_message("team", user("to the team"))
        await store.add_message("team/alice", user("to alice"))
        await store.add_message("a b?c%", user("odd key"))
        assert texts(await store.get_messages("team")) == ["to the team"]
        assert texts(await store.get_messages("team/alice")) == ["to alice"]
        assert sorted(await store.get_keys()) == ["a b?c%", "team", "team/alice"]

    asyncio.run(run())


def test_concurrent_adds_keep_every_message(client) -> None:
    store = SovsealChatStore(client)

    async def run():
        await asyncio.gather(*(store.add_message("k", user(f"m{i}")) for i in range(8)))
        assert sorted(texts(await store.get_messages("k"))) == sorted(f"m{i}" for i in range(8))

    asyncio.run(run())


def test_memory_flushes_to_a_vector_memory_block_and_survives_a_restart(store_dir: Path, key: bytes, embed_model) -> None:
    facts = [
        "My sister Ingrid lives in Reykjavik and keeps three Icelandic horses.",
        "I am allergic to peanuts, so please never suggest satay.",
        "My favourite board game is Terraforming Mars.",
        "Our wedding anniversary is on the ninth of October.",
    ]

    def memory(client: Sovseal) -> Memory:
        block = VectorMemoryBlock(
            name="long_term",
            vector_store=SovsealVectorStore(client, embedder=embed_model, collection="memory"),
            embed_model=embed_model,
            similarity_top_k=2,
            retrieval_context_window=1,
        )
        return memory_on(
            SovsealChatStore(client),
            session_id="user-42",
            memory_blocks=[block],
            token_limit=120,
            chat_history_token_ratio=0.5,
            token_flush_size=40,
        )

    async def chat(mem: Memory) -> None:
        for fact in facts:
            await mem.aput(user(fact))
            await mem.aput(bot("Noted, I will remember that."))

    with Sovseal(store_dir, key=key, embedder=embed_model.embedder) as client:
        mem = memory(client)
        asyncio.run(chat(mem))
        archived = asyncio.run(mem.aget_all(status=ARCHIVED))
        active = asyncio.run(mem.aget_all(status=ACTIVE))
        assert archived and active, "the token limit forced a flush"
        assert texts(archived + active) == [t for f in facts for t in (f, "Noted, I will remember that.")]
        assert facts[0] in texts(archived)

    with Sovseal(store_dir, key=key, embedder=embed_model.embedder) as client:  # a new process, the same memory
        mem = memory(client)
        assert texts(asyncio.run(mem.aget_all(status=None))) == texts(archived + active)
        ctx = asyncio.run(mem.aget(input="Where does my sister Ingrid live?"))
        joined = " ".join(str(m.content) for m in ctx)
        assert "Reykjavik" in joined, "the flushed fact came back from the vector memory block"
        assert facts[0] not in texts(asyncio.run(mem.aget_all(status=ACTIVE)))  # ...not from the active window
    blobs = [p.read_bytes() for p in store_dir.rglob("*") if p.is_file()]
    for needle in (b"Reykjavik", b"Terraforming", b"peanuts", b"user-42"):
        assert not any(needle in blob for blob in blobs), needle


def test_legacy_chat_store_with_chat_memory_buffer(store_dir: Path, key: bytes, embed_model) -> None:
    with SovsealLegacyChatStore(path=store_dir, key=key, embedder=embed_model) as store:
        buffer = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="u1", token_limit=1000)
        buffer.put(user("hi"))
        buffer.put(bot("hello"))
        assert texts(buffer.get_all()) == ["hi", "hello"]
        store.add_message("u1", user("third"))
        assert texts(store.get_messages("u1")) == ["hi", "hello", "third"]
        assert store.delete_message("u1", 1).content == "hello"
        assert store.delete_message("u1", 9) is None
        assert store.delete_last_message("u1").content == "third"
        assert store.get_keys() == ["u1"]
        store.set_messages("u2", [user("a"), bot("b")])
        assert texts(asyncio.run(store.aget_messages("u2"))) == ["a", "b"]
        assert texts(store.delete_messages("u2")) == ["a", "b"]
        assert store.get_keys() == ["u1"]
    with SovsealLegacyChatStore(path=store_dir, key=key, embedder=embed_model) as store:
        assert texts(store.get_messages("u1")) == ["hi"]


def test_chat_history_is_in_the_lineage(client) -> None:
    store = SovsealChatStore(client)

    async def run():
        await store.add_messages("k", [user("one"), bot("two")])
        checkpoint = client.snapshot()
        await store.add_message("k", user("three"))
        await store.archive_oldest_messages("k", 2)
        client.rollback(checkpoint)
        assert texts(await store.get_messages("k")) == ["one", "two"]

    asyncio.run(run())


def test_a_chat_written_by_an_earlier_release_reads_and_goes_on(client) -> None:
    """Earlier releases named a message ``{seq:012d}`` with no batch: such chats order by seq, and
    new messages go after them."""
    for seq, text in enumerate(["old one", "old two"]):
        client.store(
            f"llamaindex/chat/c/{seq:012d}",
            user(text).model_dump(mode="json"),
            metadata={"chat_key": "c", "seq": seq, "status": "active", "role": "user"},
            type="episodic",
        )
    store = SovsealChatStore(client)
    asyncio.run(store.add_messages("c", [user("new one"), bot("new two")]))
    assert texts(asyncio.run(store.get_messages("c"))) == ["old one", "old two", "new one", "new two"]
    assert asyncio.run(store.delete_message("c", 1)).content == "old two"
    assert texts(asyncio.run(store.get_messages("c"))) == ["old one", "new one", "new two"]
