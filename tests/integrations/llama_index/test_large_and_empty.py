"""Issue #24: empty and very large node texts and chat messages, stored once and read back whole;
multi-item writes are one ``store_many``. Stores here use ``tests.fakes.fake_embed`` (a seeded random
vector per text) and ``use_node_embeddings`` where the vectors come from the test."""

from __future__ import annotations

import asyncio
import os

import pytest

from sovseal import Sovseal
from sovseal.errors import PayloadTooLargeError
from sovseal.integration import MAX_VALUE_BYTES
from tests.fakes import fake_embed
from tests.integrations.llama_index.conftest import INSTALLED, SKIP_REASON

pytestmark = pytest.mark.skipif(not INSTALLED, reason=SKIP_REASON)

if INSTALLED:
    from llama_index.core.llms import ChatMessage
    from llama_index.core.schema import TextNode
    from llama_index.core.vector_stores import SimpleVectorStore
    from llama_index.core.vector_stores.types import VectorStoreQuery
    from llama_index.storage.chat_store.sovseal import SovsealChatStore, SovsealLegacyChatStore
    from llama_index.vector_stores.sovseal import SovsealVectorStore


BIG = ("line of output\n" * 6_000) + ("é" * 40_000) + ("☃" * 40_000) + ("\x01\"\\" * 10_000)  # 200k characters


@pytest.fixture
def mem(tmp_path):
    with Sovseal(tmp_path / "s", key=os.urandom(32), embedder=fake_embed) as m:
        yield m


def _parts_visible(mem: Sovseal) -> list[str]:
    return sorted(p for p in mem.state() if p.startswith("llamaindex-parts/"))


def _node(node_id: str, text: str, **metadata) -> TextNode:
    return TextNode(id_=node_id, text=text, metadata=metadata, embedding=[float(x) for x in fake_embed([text])[0]])


def test_empty_and_large_nodes_rank_as_in_simple_vector_store(mem) -> None:
    nodes = [_node("blank", ""), _node("long", BIG, kind="report"), _node("a", "alpha")]
    ref = SimpleVectorStore()
    ref.add(nodes)
    store = SovsealVectorStore(mem, embedder=fake_embed, use_node_embeddings=True)
    store.add(nodes)
    for text in ("", BIG, "alpha", "other"):
        q = VectorStoreQuery(query_embedding=[float(x) for x in fake_embed([text])[0]], similarity_top_k=3)
        got, want = store.query(q), ref.query(q)
        assert got.ids == want.ids, text
        assert got.similarities == pytest.approx(want.similarities, abs=1e-5)
    assert {n.node_id: n.get_content() for n in store.get_nodes(["blank", "long"])} == {"blank": "", "long": BIG}
    assert _parts_visible(mem)
    store.delete_nodes(["long"])
    assert _parts_visible(mem) == []


def test_an_empty_node_is_embedded_by_the_store(mem) -> None:
    store = SovsealVectorStore(mem, embedder=fake_embed)
    store.add([TextNode(id_="blank", text=""), TextNode(id_="x", text="something")])
    q = VectorStoreQuery(query_embedding=[float(x) for x in fake_embed([" "])[0]], similarity_top_k=1)
    assert store.query(q).ids == ["blank"]  # found: "" is indexed as " " (the same tokens for the on-device model)


def test_a_blank_query_text_is_ranked_by_its_vector_as_in_simple_vector_store(mem) -> None:
    """Recall finds no words in "  ", so it answers nothing; the store ranks it by the vector instead,
    as SimpleVectorStore ranks any query: with the query_embedding LlamaIndex computed, or without one
    by embedding the text itself."""
    nodes = [_node("blank", " "), _node("a", "alpha"), _node("b", "beta")]
    ref = SimpleVectorStore()
    ref.add(nodes)
    store = SovsealVectorStore(mem, embedder=fake_embed, use_node_embeddings=True)
    store.add(nodes)
    vector = [float(x) for x in fake_embed(["  "])[0]]
    want = ref.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=3))
    with_vector = VectorStoreQuery(query_str="  ", query_embedding=vector, similarity_top_k=3)
    for q in (with_vector, VectorStoreQuery(query_str="  ", similarity_top_k=3)):
        got = store.query(q)
        assert got.ids == want.ids and len(got.ids) == 3
        assert got.similarities == pytest.approx(want.similarities, abs=1e-5)


def test_a_200k_message_round_trips_through_both_chat_stores(mem) -> None:
    chats = SovsealChatStore(mem)
    turn = [ChatMessage(role="user", content="run it"), ChatMessage(role="tool", content=BIG), ChatMessage(role="assistant", content="")]
    asyncio.run(chats.add_messages("k", turn))
    assert asyncio.run(chats.get_messages("k")) == turn
    assert SovsealLegacyChatStore(mem).get_messages("k") == turn
    assert asyncio.run(chats.archive_oldest_messages("k", 2)) == turn[:2]
    assert asyncio.run(chats.get_messages("k", status=None)) == turn
    asyncio.run(chats.delete_messages("k"))
    assert asyncio.run(chats.get_messages("k", status=None)) == [] and _parts_visible(mem) == []


def test_a_refused_set_changes_nothing(mem) -> None:
    legacy = SovsealLegacyChatStore(mem)
    legacy.set_messages("k", [ChatMessage(role="user", content="keep me")])
    before = mem.snapshot()
    with pytest.raises(PayloadTooLargeError):
        legacy.set_messages("k", [ChatMessage(role="user", content="new"), ChatMessage(role="tool", content="z" * (MAX_VALUE_BYTES + 1))])
    assert mem.snapshot() == before
    assert [m.content for m in legacy.get_messages("k")] == ["keep me"]
    legacy.set_messages("k", [ChatMessage(role="user", content=BIG)])
    assert [m.content for m in legacy.get_messages("k")] == [BIG]


def test_a_refused_add_writes_no_node(mem) -> None:
    store = SovsealVectorStore(mem, embedder=fake_embed)
    with pytest.raises(PayloadTooLargeError, match="64 MiB"):
        store.add([TextNode(id_="ok", text=BIG), TextNode(id_="huge", text="z" * (MAX_VALUE_BYTES + 1))])
    assert mem.snapshot() is None
