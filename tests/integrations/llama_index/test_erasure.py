"""Issue #23 ("Forget for real"): the LlamaIndex components erase when asked, and only then.

A plain delete is a tombstone (history kept, rollback brings it back). ``erase=True`` (or
``erase_on_delete=True``) purges: the nodes leave queries and ``get_nodes`` exactly as
``SimpleVectorStore``'s delete leaves them, ``verify()`` is ok, and a scan of every file of the store
directory finds neither the sealed bytes the erased records had on disk nor, after decrypting
everything the key still opens, their plaintext. Large (part-split) texts and messages too.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sovseal import Sovseal
from tests.erasure_scan import assert_gone, sealed_under
from tests.fakes import fake_embed
from tests.integrations.llama_index.conftest import INSTALLED, SKIP_REASON

pytestmark = pytest.mark.skipif(not INSTALLED, reason=SKIP_REASON)

if INSTALLED:
    from llama_index.core import Document, StorageContext, VectorStoreIndex
    from llama_index.core.llms import ChatMessage
    from llama_index.core.schema import NodeRelationship, RelatedNodeInfo, TextNode
    from llama_index.core.storage.chat_store.base_db import MessageStatus
    from llama_index.core.vector_stores import SimpleVectorStore
    from llama_index.core.vector_stores.types import VectorStoreQuery
    from llama_index.storage.chat_store.sovseal import (
        SovsealChatStore,
        SovsealLegacyChatStore,
    )
    from llama_index.vector_stores.sovseal import SovsealVectorStore


SECRET = "the vault combination is 7351-alpha-quebec"
#: Over 128 KiB of JSON: a descriptor record and part records.
BIG = ("the vault combination is 7351-alpha-quebec, said the tool output\n" * 4_000)[:200_000]


def _node(node_id: str, text: str, doc: str | None = None) -> TextNode:
    relationships = {NodeRelationship.SOURCE: RelatedNodeInfo(node_id=doc)} if doc else {}
    return TextNode(id_=node_id, text=text, relationships=relationships, embedding=[float(x) for x in fake_embed([text])[0]])


def _nodes() -> list[TextNode]:
    return [
        _node("vault-0", SECRET, doc="vault"),
        _node("vault-1", BIG, doc="vault"),
        _node("cafe", "the cafeteria opens at nine", doc="notes"),
    ]


@pytest.fixture
def mem(store_dir: Path, key: bytes):
    with Sovseal(store_dir, key=key, embedder=fake_embed) as m:
        yield m


def _query(text: str) -> VectorStoreQuery:
    return VectorStoreQuery(query_embedding=[float(x) for x in fake_embed([text])[0]], similarity_top_k=3)


def test_erase_ref_doc_reads_like_simple_store_delete_and_leaves_nothing_on_disk(mem: Sovseal, store_dir: Path, key: bytes) -> None:
    ref = SimpleVectorStore()
    ref.add(_nodes())
    store = SovsealVectorStore(mem, embedder=fake_embed, use_node_embeddings=True)
    store.add(_nodes())
    store.add([_node("vault-0", SECRET + " (rotated)", doc="vault")])  # a second version
    ref.add([_node("vault-0", SECRET + " (rotated)", doc="vault")])
    mem.fork(branch="side")
    mem.store("llamaindex/default/vault-0", {"on": "a branch"})
    mem.checkout("main")
    before = sealed_under(mem, "llamaindex/default/vault-")
    parts = sealed_under(mem, "llamaindex-parts/")
    assert len(before["llamaindex/default/vault-0"]) == 3 and len(parts) >= 2

    store.delete("vault", erase=True, reason="stored by mistake")
    ref.delete("vault")
    for text in (SECRET, BIG, "cafeteria"):
        assert store.query(_query(text)).ids == ref.query(_query(text)).ids
    assert [n.node_id for n in store.get_nodes()] == ["cafe"]
    assert store.get_nodes(["vault-0", "vault-1"]) == []
    mem.checkout("side")
    assert mem.get("llamaindex/default/vault-0") is None  # every branch
    mem.checkout("main")
    report = store.verify()
    assert report.ok, report.problems
    assert report.erased == 3 + 1 + len(parts)
    assert "erased" in {e.op for e in store.log()}
    mem.close()
    sealed = [s for v in (*before.values(), *parts.values()) for s in v]
    assert_gone(store_dir, key, sealed, b"7351", b"said the tool output")


def test_delete_ref_doc_through_the_index_passes_erase(store_dir: Path, key: bytes, embed_model) -> None:
    with SovsealVectorStore(path=store_dir, key=key, embedder=embed_model) as store:
        documents = [Document(text=SECRET, doc_id="vault"), Document(text="the cafeteria opens at nine", doc_id="notes")]
        index = VectorStoreIndex.from_documents(
            documents, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed_model
        )
        found = sealed_under(store.client, "llamaindex/")
        vault = [s for p, v in found.items() for s in v if store.client.get(p).metadata.get("ref_doc_id") == "vault"]
        assert vault and len(vault) < sum(len(v) for v in found.values())
        index.delete_ref_doc("vault", erase=True)
        hits = index.as_retriever(similarity_top_k=5).retrieve("vault combination")
        assert {h.node.ref_doc_id for h in hits} == {"notes"}
        assert store.verify().ok
    assert_gone(store_dir, key, vault, b"7351")


def test_erase_nodes_by_id_reaches_parts_of_every_version_and_earlier_deletes(mem: Sovseal, store_dir: Path, key: bytes) -> None:
    store = SovsealVectorStore(mem, embedder=fake_embed, use_node_embeddings=True)
    store.add([_node("big", BIG)])
    store.add([_node("big", BIG.replace("7351", "9999"))])  # new parts, the old ones tombstoned
    store.delete_nodes(["big"])  # a plain delete first
    sealed = [s for v in sealed_under(mem, "llamaindex").values() for s in v]
    assert len(sealed) >= 2 + 2 * 2
    store.delete_nodes(["big", "never-stored"], erase=True)
    assert store.verify().ok
    mem.close()
    assert_gone(store_dir, key, sealed, b"7351", b"9999", b"said the tool output")


def test_default_delete_keeps_history_and_the_flag_erases(mem: Sovseal) -> None:
    store = SovsealVectorStore(mem, embedder=fake_embed, use_node_embeddings=True)
    store.add(_nodes())
    before = store.snapshot()
    store.delete("vault")
    assert "erased" not in {e.op for e in store.log()}
    store.rollback(before)
    assert [n.get_content() for n in store.get_nodes(["vault-0", "vault-1"])] == [SECRET, BIG]

    erasing = SovsealVectorStore(mem, embedder=fake_embed, use_node_embeddings=True, erase_on_delete=True)
    erasing.delete_nodes(filters=None, node_ids=["vault-0"])
    erasing.delete("vault", erase=False)  # one call keeps history
    assert "erased" in {e.op for e in store.log()}
    store.rollback(before)
    assert [n.node_id for n in store.get_nodes(["vault-0", "vault-1"])] == ["vault-1"]  # vault-0 is gone for good
    erasing.clear()
    assert store.get_nodes() == []
    store.rollback(before)
    assert store.get_nodes() == []
    assert store.verify().ok


def test_erase_arguments(mem: Sovseal) -> None:
    store = SovsealVectorStore(mem, embedder=fake_embed, use_node_embeddings=True)
    store.add(_nodes())
    with pytest.raises(TypeError, match="reason"):
        store.delete("vault", reason="no erase, no reason")
    with pytest.raises(TypeError):
        store.delete_nodes(["cafe"], erase="yes")
    with pytest.raises(TypeError, match="unexpected"):
        store.delete("vault", erase=True, erased=True)  # a typo never silently keeps history
    assert len(store.get_nodes()) == 3


def test_erasing_many_nodes_compacts_once(mem: Sovseal, monkeypatch: pytest.MonkeyPatch) -> None:
    store = SovsealVectorStore(mem, embedder=fake_embed, use_node_embeddings=True)
    store.add([_node(f"n{i}", f"note {i}", doc="notes") for i in range(30)])
    monkeypatch.setattr(Sovseal, "_compaction_due", lambda self: False)
    compactions: list[int] = []
    real = Sovseal.compact
    monkeypatch.setattr(Sovseal, "compact", lambda self: compactions.append(1) or real(self))
    store.delete("notes", erase=True)
    assert compactions == [1] and store.get_nodes() == []


@pytest.mark.asyncio
async def test_async_deletes_erase(mem: Sovseal) -> None:
    store = SovsealVectorStore(mem, embedder=fake_embed, use_node_embeddings=True)
    await store.async_add(_nodes())
    await store.adelete("vault", erase=True)
    await store.adelete_nodes(["cafe"], erase=True)
    assert store.get_nodes() == [] and store.verify().erased >= 3
    assert {e.op for e in store.log()} == {"erased"}


# -- chat stores -----------------------------------------------------------------------------------


def test_chat_store_erases_with_the_flag_or_per_call(mem: Sovseal, store_dir: Path, key: bytes) -> None:
    chats = SovsealChatStore(mem, erase_on_delete=True)
    asyncio_run = asyncio.run
    asyncio_run(
        chats.add_messages(
            "alice", [ChatMessage(role="user", content="my card is 4111 1111 1111 1111"), ChatMessage(role="assistant", content=BIG)]
        )
    )
    asyncio_run(chats.add_messages("bob", [ChatMessage(role="user", content="hello")]))
    asyncio_run(chats.archive_oldest_messages("alice", 1))  # a second version of the first message
    sealed = [s for p, v in sealed_under(mem, "llamaindex/chat/alice/").items() for s in v]
    sealed += [s for v in sealed_under(mem, "llamaindex-parts/").values() for s in v]
    assert len(sealed) >= 3 + 2
    asyncio_run(chats.delete_messages("alice"))
    assert asyncio_run(chats.get_messages("alice", status=None)) == []
    assert [m.content for m in asyncio_run(chats.get_messages("bob"))] == ["hello"]
    before = mem.snapshot()
    asyncio_run(chats.delete_message("bob", 0, erase=False))  # one call keeps history
    mem.rollback(before)
    assert [m.content for m in asyncio_run(chats.get_messages("bob"))] == ["hello"]
    assert mem.verify().ok
    mem.close()
    assert_gone(store_dir, key, sealed, b"4111", b"said the tool output")


def test_chat_store_default_delete_keeps_history(mem: Sovseal) -> None:
    chats = SovsealChatStore(mem)
    asyncio.run(chats.add_messages("k", [ChatMessage(role="user", content="one"), ChatMessage(role="user", content="two")]))
    before = mem.snapshot()
    asyncio.run(chats.delete_oldest_messages("k", 1))
    assert "erased" not in {e.op for e in mem.log()}
    mem.rollback(before)
    assert [m.content for m in asyncio.run(chats.get_messages("k"))] == ["one", "two"]
    asyncio.run(chats.delete_oldest_messages("k", 1, erase=True))
    asyncio.run(chats.set_messages("k", [ChatMessage(role="user", content="three")], erase=True))
    assert [e.op for e in mem.log()].count("erased") == 2
    assert [m.content for m in asyncio.run(chats.get_messages("k", status=MessageStatus.ACTIVE))] == ["three"]


def test_legacy_chat_store_erases(mem: Sovseal, store_dir: Path, key: bytes) -> None:
    chats = SovsealLegacyChatStore(mem)
    chats.set_messages("k", [ChatMessage(role="user", content=f"secret {i} PIN-{i}{i}{i}") for i in range(4)])
    sealed = sealed_under(mem, "llamaindex/chat/k/")
    paths = sorted(sealed, key=lambda p: mem.get(p).metadata["seq"])
    assert chats.delete_last_message("k", erase=True).content == "secret 3 PIN-333"
    assert chats.delete_message("k", 0, erase=True).content == "secret 0 PIN-000"
    chats.erase_on_delete = True
    assert [m.content for m in chats.delete_messages("k")] == ["secret 1 PIN-111", "secret 2 PIN-222"]
    assert chats.get_messages("k") == []
    assert mem.verify().ok
    mem.close()
    assert_gone(store_dir, key, [s for p in paths for s in sealed[p]], b"PIN-")
