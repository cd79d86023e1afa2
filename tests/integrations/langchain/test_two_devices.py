"""LangChain on two devices (issue #19): ``SovsealVectorStore`` and ``SovsealChatMessageHistory``
written on two devices with one key and one real ``sovseal serve``, before either saw the other's
writes. After both push and pull, every document is searchable on both, and both show the session's
messages from both devices in the same order, each device's batch together."""

from __future__ import annotations

from langchain_core.documents import Document
from langchain_core.embeddings import Embeddings
from langchain_core.messages import AIMessage, HumanMessage
from langchain_sovseal import SovsealChatMessageHistory, SovsealVectorStore

from tests.fakes import fake_embed
from tests.integrations.conftest import Devices


class FakeEmbeddings(Embeddings):
    """The devices' own embedder (tests.fakes.fake_embed) as LangChain ``Embeddings``."""

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        return fake_embed(texts).tolist()

    def embed_query(self, text: str) -> list[float]:
        return fake_embed([text])[0].tolist()


def test_langchain_documents_added_on_two_devices_are_searchable_on_both(devices: Devices) -> None:

    store_a = SovsealVectorStore(FakeEmbeddings(), client=devices.a, collection="notes")
    store_b = SovsealVectorStore(FakeEmbeddings(), client=devices.b, collection="notes")
    store_a.add_documents([Document(id="a1", page_content="tea"), Document(id="both", page_content="from a")])
    store_b.add_documents([Document(id="b1", page_content="coffee"), Document(id="both", page_content="from b")])
    devices.sync()
    for store in (store_a, store_b):
        found = {d.id for d in store.similarity_search("tea", k=10)}
        assert found == {"a1", "b1", "both"}
        assert store.similarity_search("coffee", k=1)[0].id == "b1"
    assert [d.page_content for d in store_a.get_by_ids(["both"])] == [d.page_content for d in store_b.get_by_ids(["both"])]


def test_langchain_chat_history_keeps_both_devices_messages_in_one_order(devices: Devices) -> None:

    chat_a = SovsealChatMessageHistory("session", client=devices.a)
    chat_b = SovsealChatMessageHistory("session", client=devices.b)
    chat_a.add_messages([HumanMessage(content="hello from a"), AIMessage(content="hi a")])
    devices.sync()
    assert [m.content for m in chat_b.messages] == ["hello from a", "hi a"]
    chat_a.add_messages([HumanMessage(content="a asks"), AIMessage(content="a answered")])
    chat_b.add_messages([HumanMessage(content="b asks"), AIMessage(content="b answered")])
    devices.sync()
    seen_a, seen_b = [m.content for m in chat_a.messages], [m.content for m in chat_b.messages]
    assert seen_a == seen_b
    assert seen_a[:2] == ["hello from a", "hi a"]
    rest = seen_a[2:]
    assert sorted(rest) == sorted(["a asks", "a answered", "b asks", "b answered"])
    assert rest in (["a asks", "a answered", "b asks", "b answered"], ["b asks", "b answered", "a asks", "a answered"])
    chat_b.add_messages([HumanMessage(content="after the sync")])
    devices.sync()
    assert [m.content for m in chat_a.messages] == [m.content for m in chat_b.messages] == [*seen_a, "after the sync"]
    chat_a.clear()
    devices.sync()
    assert chat_a.messages == chat_b.messages == []


def test_a_history_read_earlier_shows_the_other_device_s_writes_and_erasures(devices: Devices) -> None:
    """What a history read once is never served again stale: a pull that adds a head, and an
    erasure on the other device (which moves no head), both show at the next read."""
    chat_a, chat_b = SovsealChatMessageHistory("sdk", client=devices.a), SovsealChatMessageHistory("sdk", client=devices.b)
    chat_a.add_messages([HumanMessage(content="from a")])
    assert [m.content for m in chat_a.messages] == ["from a"]
    chat_b.add_messages([HumanMessage(content="from b")])
    devices.sync()
    assert [m.content for m in chat_a.messages] == [m.content for m in chat_b.messages]
    assert sorted(m.content for m in chat_a.messages) == ["from a", "from b"]
    chat_b.clear(erase=True)
    devices.sync()
    assert chat_a.messages == chat_b.messages == []
