"""Issue #24: empty and very large content, stored once and read back whole; multi-item writes atomic.

These use LangChain's ``DeterministicFakeEmbedding`` (a seeded random vector per text) where the
on-device model is not what is under test; the empty-document search also runs on the real model.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_sovseal import SovsealByteStore, SovsealChatMessageHistory, SovsealEmbeddings, SovsealVectorStore

from sovseal import Sovseal
from sovseal.canonical import canonicalize
from sovseal.errors import CanonicalizationError, IntegrityError, PayloadTooLargeError
from sovseal.integration import parts as _parts
from sovseal.storage.entries import MAX_ENTRY_BYTES
from tests.fakes import fake_embed

FAKE = DeterministicFakeEmbedding(size=16)
#: 200k characters: ASCII, two-byte, three-byte and control characters (JSON-escaped), as a tool output can hold.
BIG = ("line of output\n" * 6_000) + ("é" * 40_000) + ("☃" * 40_000) + ("\x01\"\\" * 10_000)


def _parts_visible(mem: Sovseal) -> list[str]:
    return sorted(p for p in mem.state() if p.startswith("langchain-parts/"))


@pytest.fixture
def mem(store_dir: Path, key: bytes) -> Sovseal:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as m:
        yield m


def test_empty_document_is_searchable_as_in_memory_store(store_dir: Path, key: bytes, real_embeddings: SovsealEmbeddings) -> None:
    """InMemoryVectorStore embeds "" and ranks it like any other vector; so does the sovseal store."""
    docs = [Document(page_content="", id="blank", metadata={"page": 3}), Document(page_content="Expenses are due in 30 days.", id="x")]
    ref = InMemoryVectorStore(real_embeddings)
    ref.add_documents(docs)
    with SovsealVectorStore(real_embeddings, path=store_dir, key=key) as store:
        store.add_documents(docs)
        assert store.get_by_ids(["blank"])[0].page_content == ""
        for query in ("", "an image-only page", "expenses"):
            got = [(d.id, round(s, 4)) for d, s in store.similarity_search_with_score(query, k=2)]
            want = [(d.id, round(s, 4)) for d, s in ref.similarity_search_with_score(query, k=2)]
            assert got == want, query
        assert [d.id for d in store.similarity_search("", k=1, filter={"page": 3})] == ["blank"]


def test_a_140k_document_is_stored_once_and_read_back(store_dir: Path, key: bytes) -> None:
    doc = Document(page_content=BIG[:140_000], id="long", metadata={"source": "report.pdf"})
    with SovsealVectorStore(FAKE, path=store_dir, key=key) as store:
        store.add_documents([doc, Document(page_content="short", id="s")])
        assert store.get_by_ids(["long"])[0] == doc
        assert store.similarity_search(doc.page_content, k=1)[0] == doc  # embedded whole, as InMemoryVectorStore does
        record = store.client.get("langchain/default/long")
        assert record is not None and _parts.descriptor(record.payload) is not None
        parts = _parts_visible(store.client)
        stored = sum(len(canonicalize(store.client.get(p).payload)) for p in parts)
        content = len(canonicalize(doc.page_content))
        assert content <= stored < content + 2_000  # once: the slices plus their small headers
        assert all(len(canonicalize(store.client.get(p).payload)) < MAX_ENTRY_BYTES for p in parts)
        # overwritten by a short text: the old parts are deleted; deleting removes the rest
        store.add_documents([Document(page_content="now short", id="long")])
        assert store.get_by_ids(["long"])[0].page_content == "now short"
        assert _parts_visible(store.client) == []
        store.add_documents([doc])
        store.delete(["long"])
        assert _parts_visible(store.client) == [] and store.get_by_ids(["long"]) == []


def test_a_200k_tool_output_round_trips_through_the_chat_history(mem: Sovseal) -> None:
    history = SovsealChatMessageHistory("agent", client=mem)
    turn = [
        HumanMessage("run the report"),
        AIMessage(content="", tool_calls=[{"name": "report", "args": {}, "id": "call-1"}]),
        ToolMessage(content=BIG, tool_call_id="call-1"),
        AIMessage("done"),
    ]
    history.add_messages(turn)
    assert history.messages == turn
    assert SovsealChatMessageHistory("agent", client=mem).messages == turn  # a fresh reader
    history.clear()
    assert history.messages == [] and _parts_visible(mem) == []


def test_a_refused_turn_writes_nothing(mem: Sovseal) -> None:
    history = SovsealChatMessageHistory("agent", client=mem)
    history.add_messages([HumanMessage("hi")])
    before = mem.snapshot()
    bad = [
        AIMessage(content="", tool_calls=[{"name": "t", "args": {}, "id": "c"}]),
        ToolMessage(content=BIG, tool_call_id="c"),
        ToolMessage(content="x", tool_call_id="c", artifact=object()),  # not JSON: refused
    ]
    with pytest.raises(CanonicalizationError):
        history.add_messages(bad)
    assert mem.snapshot() == before
    assert history.messages == [HumanMessage("hi")] and _parts_visible(mem) == []


def test_add_documents_is_one_write_or_none(store_dir: Path, key: bytes) -> None:
    with SovsealVectorStore(FAKE, path=store_dir, key=key) as store:
        before = store.snapshot()
        with pytest.raises(CanonicalizationError):
            store.add_documents([Document(page_content=BIG, id="a"), Document(page_content="b", metadata={"when": object()})])
        assert store.snapshot() == before and store.get_by_ids(["a"]) == []


def test_the_size_limit_is_the_same_everywhere(mem: Sovseal) -> None:
    too_big = "z" * (_parts.MAX_VALUE_BYTES + 1)
    with pytest.raises(PayloadTooLargeError, match="64 MiB"):
        SovsealChatMessageHistory("s", client=mem).add_messages([HumanMessage(too_big)])
    with SovsealVectorStore(FAKE, client=mem) as store, pytest.raises(PayloadTooLargeError, match="64 MiB"):
        store.add_documents([Document(page_content=too_big)])
    with pytest.raises(PayloadTooLargeError, match="64 MiB"):
        SovsealByteStore(mem).mset([("k", b"\x00" * (_parts.MAX_VALUE_BYTES // 4 * 3 + 3))])
    assert mem.snapshot() is None


def test_large_byte_values_round_trip(mem: Sovseal) -> None:
    kv = SovsealByteStore(mem, namespace="cache")
    values = {"small": b"\x00\x01", "big": os.urandom(1_000_000), "empty": b""}
    kv.mset(list(values.items()))
    assert kv.mget(list(values)) == list(values.values())
    kv.mset([("big", b"now small")])
    assert kv.mget(["big"]) == [b"now small"] and _parts_visible(mem) == []
    kv.mset([("big", values["big"])])
    kv.mdelete(["big"])
    assert kv.mget(["big"]) == [None] and _parts_visible(mem) == []


def test_a_swapped_part_fails_the_read(mem: Sovseal) -> None:
    history = SovsealChatMessageHistory("s", client=mem)
    history.add_messages([ToolMessage(content=BIG, tool_call_id="c")])
    first = _parts_visible(mem)[0]
    part = mem.get(first).payload
    mem.store(first, {**part, "s": part["s"][::-1]}, index=False)
    with pytest.raises(IntegrityError):
        _ = SovsealChatMessageHistory("s", client=mem).messages
