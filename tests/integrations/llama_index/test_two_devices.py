"""LlamaIndex on two devices (issue #19): ``SovsealVectorStore`` and the chat stores written on two
devices with one key and one real ``sovseal serve``, before either saw the other's writes. After both
push and pull, every node is found on both, and both show the chat's messages from both devices in the
same order, each device's batch together."""

from __future__ import annotations

import asyncio

import pytest

pytest.importorskip("llama_index.vector_stores.sovseal", reason="pip install -e integrations/llama-index-sovseal")

from llama_index.core.base.llms.types import ChatMessage, MessageRole
from llama_index.core.schema import TextNode
from llama_index.core.vector_stores.types import VectorStoreQuery
from llama_index.storage.chat_store.sovseal import (
    SovsealChatStore,
    SovsealLegacyChatStore,
)
from llama_index.vector_stores.sovseal import SovsealVectorStore

from tests.fakes import fake_embed
from tests.integrations.conftest import Devices


def test_llama_index_nodes_added_on_two_devices_are_found_on_both(devices: Devices) -> None:

    store_a = SovsealVectorStore(devices.a, embedder=fake_embed)
    store_b = SovsealVectorStore(devices.b, embedder=fake_embed)
    store_a.add([TextNode(id_="a1", text="tea"), TextNode(id_="both", text="from a")])
    store_b.add([TextNode(id_="b1", text="coffee"), TextNode(id_="both", text="from b")])
    devices.sync()
    for store in (store_a, store_b):
        result = store.query(VectorStoreQuery(query_str="tea", similarity_top_k=10))
        assert {n.node_id for n in result.nodes} == {"a1", "b1", "both"}
    both = {n.node_id: n.get_content() for n in store_a.get_nodes(node_ids=["both"])}
    assert both == {n.node_id: n.get_content() for n in store_b.get_nodes(node_ids=["both"])}


def test_llama_index_chat_store_keeps_both_devices_messages_in_one_order(devices: Devices) -> None:


    def msg(text: str) -> ChatMessage:
        return ChatMessage(role=MessageRole.USER, content=text)

    chats_a, chats_b = SovsealChatStore(devices.a), SovsealChatStore(devices.b)
    legacy_a, legacy_b = SovsealLegacyChatStore(devices.a), SovsealLegacyChatStore(devices.b)

    def seen(store: SovsealChatStore) -> list[str]:
        return [m.content for m in asyncio.run(store.get_messages("chat"))]

    asyncio.run(chats_a.add_messages("chat", [msg("start")]))
    devices.sync()
    asyncio.run(chats_a.add_messages("chat", [msg("a1"), msg("a2")]))
    asyncio.run(chats_b.add_messages("chat", [msg("b1"), msg("b2")]))
    devices.sync()
    assert seen(chats_a) == seen(chats_b)
    assert seen(chats_a)[0] == "start" and seen(chats_a)[1:] in (["a1", "a2", "b1", "b2"], ["b1", "b2", "a1", "a2"])
    assert [m.content for m in legacy_a.get_messages("chat")] == [m.content for m in legacy_b.get_messages("chat")] == seen(chats_a)
    assert asyncio.run(chats_a.count_messages("chat")) == asyncio.run(chats_b.count_messages("chat")) == 5
    archived = asyncio.run(chats_b.archive_oldest_messages("chat", 2))
    assert [m.content for m in archived] == seen(chats_a)[:2]
    asyncio.run(chats_b.add_messages("chat", [msg("after")]))
    devices.sync()
    assert seen(chats_a) == seen(chats_b) and seen(chats_a)[-1] == "after" and len(seen(chats_a)) == 4
    assert asyncio.run(chats_a.get_keys()) == asyncio.run(chats_b.get_keys()) == ["chat"]
