"""Issue #23 ("Forget for real"): the LangChain components erase when asked, and only then.

A plain delete is a tombstone (history kept, rollback brings it back). ``erase=True`` (or
``erase_on_delete=True``) purges: the documents read as gone exactly as InMemoryVectorStore's delete
leaves them, the lineage verifies, and a scan of every file of the store directory finds neither the
sealed bytes the erased records had on disk nor, after decrypting everything the key still opens,
their plaintext. Large documents (part records) too.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_sovseal import (
    SovsealByteStore,
    SovsealChatMessageHistory,
    SovsealVectorStore,
)

from sovseal import Sovseal
from tests.erasure_scan import assert_gone, sealed_under
from tests.fakes import fake_embed

FAKE = DeterministicFakeEmbedding(size=16)
SECRET = "the vault combination is 7351-alpha-quebec"
#: Over 128 KiB of JSON: stored as a descriptor record and part records.
BIG = ("the vault combination is 7351-alpha-quebec, said the tool output\n" * 4_000)[:200_000]


@pytest.fixture
def store(store_dir: Path, key: bytes) -> Iterator[SovsealVectorStore]:
    with SovsealVectorStore(FAKE, path=store_dir, key=key, collection="docs") as s:
        yield s


def _docs() -> list[Document]:
    return [
        Document(id="secret", page_content=SECRET, metadata={"source": "vault.md"}),
        Document(id="big", page_content=BIG, metadata={"source": "tool"}),
        Document(id="keep", page_content="the cafeteria opens at nine", metadata={"source": "notes.md"}),
    ]


def test_erase_reads_like_in_memory_delete_and_leaves_nothing_on_disk(store: SovsealVectorStore, store_dir: Path, key: bytes) -> None:
    ref = InMemoryVectorStore(FAKE)
    ref.add_documents(_docs())
    store.add_documents(_docs())
    store.add_documents([Document(id="secret", page_content=SECRET + " (rotated)", metadata={"source": "vault.md"})])  # a second version
    ref.add_documents([Document(id="secret", page_content=SECRET + " (rotated)", metadata={"source": "vault.md"})])
    mem = store.client
    mem.fork(branch="side")  # the secret on another branch too
    mem.store("langchain/docs/secret", {"on": "a branch"})
    mem.checkout("main")
    before = sealed_under(mem, "langchain/docs/")
    before_parts = sealed_under(mem, "langchain-parts/")
    assert len(before["langchain/docs/secret"]) == 3 and len(before_parts) >= 2

    assert store.delete(["secret", "big", "never-stored"], erase=True) is True
    ref.delete(["secret", "big", "never-stored"])
    for query in ("vault combination", "tool output", "cafeteria"):
        assert [d.id for d in store.similarity_search(query, k=3)] == [d.id for d in ref.similarity_search(query, k=3)]
    assert store.get_by_ids(["secret", "big", "keep"]) == ref.get_by_ids(["secret", "big", "keep"])
    assert [d.id for d in store.get_by_ids(["keep"])] == ["keep"]
    assert store.checkout("side").get_by_ids(["secret"]) == []  # every branch
    report = mem.verify()
    assert report.ok, report.problems
    assert report.erased == 3 + 1 + len(before_parts)  # three versions of the secret, the big one, its parts
    assert not any(p.startswith("langchain-parts/") for p in mem.state())
    sealed = [*before["langchain/docs/secret"], *before["langchain/docs/big"], *(s for v in before_parts.values() for s in v)]
    store.close()
    assert_gone(store_dir, key, sealed, b"7351", b"said the tool output")


def test_erase_of_a_big_document_reaches_every_version_of_its_parts(store: SovsealVectorStore, store_dir: Path, key: bytes) -> None:
    store.add_documents([Document(id="big", page_content=BIG)])
    store.add_documents([Document(id="big", page_content=BIG.replace("7351", "9999"))])  # new parts; the old ones tombstoned
    store.delete(["big"])  # a plain delete first: the descriptor is no longer visible
    sealed = [s for v in sealed_under(store.client, "langchain").values() for s in v]
    assert len(sealed) >= 2 + 2 * 2  # two descriptors and a tombstone, at least two parts each
    store.delete(["big"], erase=True)  # an id deleted earlier is still erased, parts of every version too
    assert store.client.verify().ok
    store.close()
    assert_gone(store_dir, key, sealed, b"7351", b"9999", b"said the tool output")


def test_default_delete_keeps_history_and_rollback_brings_it_back(store: SovsealVectorStore) -> None:
    store.add_documents(_docs())
    before = store.snapshot()
    store.delete(["secret", "big"])
    assert store.get_by_ids(["secret", "big"]) == []
    assert {e.path for e in store.log() if e.op == "delete"} >= {"langchain/docs/secret", "langchain/docs/big"}
    assert "erased" not in {e.op for e in store.log()}
    store.rollback(before)
    assert [d.page_content for d in store.get_by_ids(["secret", "big"])] == [SECRET, BIG]


def test_erase_on_delete_makes_erasure_the_default(store_dir: Path, key: bytes) -> None:
    with SovsealVectorStore(FAKE, path=store_dir, key=key, erase_on_delete=True) as store:
        store.add_documents(_docs())
        before = store.snapshot()
        store.delete(["secret"])
        assert "erased" in {e.op for e in store.log()}
        store.rollback(before)  # nothing to roll back to: the content is gone
        assert store.get_by_ids(["secret"]) == []
        assert [d.id for d in store.get_by_ids(["keep"])] == ["keep"]
        store.delete(["keep"], erase=False)  # one call can still keep history
        store.rollback(store.log()[1].snapshot_id)
        assert [d.id for d in store.get_by_ids(["keep"])] == ["keep"]
    with pytest.raises(TypeError):
        SovsealVectorStore(FAKE, path=store_dir, key=key, erase_on_delete="yes")  # type: ignore[arg-type]


def test_erase_the_whole_collection_leaves_other_collections(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=FAKE.embed_documents) as mem:
        docs = SovsealVectorStore(FAKE, client=mem, collection="docs")
        other = SovsealVectorStore(FAKE, client=mem, collection="docs2")  # shares the prefix but the '/'
        docs.add_documents(_docs())
        other.add_documents([Document(id="x", page_content="kept " + SECRET)])
        docs.delete(["keep"])  # deleted before: the erasure of the collection reaches it too
        sealed = [s for v in sealed_under(mem, "langchain/docs/").values() for s in v]
        docs.delete(erase=True, reason="user 42 asked")
        assert docs.similarity_search("anything", k=5) == []
        assert [d.id for d in other.similarity_search("vault", k=5)] == ["x"]
        assert mem.verify().ok
    assert_gone(store_dir, key, sealed, b"cafeteria", b"said the tool output")


def test_erase_arguments(store: SovsealVectorStore) -> None:
    store.add_documents(_docs())
    with pytest.raises(TypeError, match="reason"):
        store.delete(["keep"], reason="no erase, no reason")
    with pytest.raises(TypeError):
        store.delete(["keep"], erase="yes")
    with pytest.raises(TypeError, match="unexpected"):
        store.delete(["keep"], erase=True, bogus=1)
    assert [d.id for d in store.get_by_ids(["keep"])] == ["keep"]  # nothing happened


def test_erasing_many_documents_compacts_once(store: SovsealVectorStore, monkeypatch: pytest.MonkeyPatch) -> None:
    store.add_documents([Document(id=f"d{i}", page_content=f"note {i}") for i in range(30)])
    mem = store.client
    monkeypatch.setattr(type(mem), "_compaction_due", lambda self: False)  # the store's own threshold aside
    compactions: list[object] = []
    real = type(mem).compact
    monkeypatch.setattr(type(mem), "compact", lambda self: compactions.append(1) or real(self))
    store.delete([f"d{i}" for i in range(20)], erase=True)
    assert len(compactions) == 1
    assert len(store.get_by_ids([f"d{i}" for i in range(30)])) == 10
    store.delete(["missing"], erase=True)  # nothing erased: no compaction
    assert len(compactions) == 1


@pytest.mark.asyncio
async def test_async_delete_erases(store: SovsealVectorStore) -> None:
    await store.aadd_documents(_docs())
    await store.adelete(["secret"], erase=True)
    assert store.get_by_ids(["secret"]) == []
    assert "erased" in {e.op for e in store.log()}


# -- chat message history --------------------------------------------------------------------------


def test_chat_history_clear_erases_with_the_flag(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        kept = SovsealChatMessageHistory("s1", client=mem)
        kept.add_messages([HumanMessage("hello"), AIMessage("hi")])
        history = SovsealChatMessageHistory("s2", client=mem, erase_on_delete=True)
        history.add_messages([HumanMessage("my card is 4111 1111 1111 1111"), AIMessage(BIG)])
        nested = SovsealChatMessageHistory("s2/x", client=mem)  # its records are under s2's prefix: untouched
        nested.add_messages([HumanMessage("nested session")])
        sealed = [s for p, v in sealed_under(mem, "langchain").items() if "/s2/" in p and "/s2/x/" not in p for s in v]
        sealed += [s for v in sealed_under(mem, "langchain-parts/").values() for s in v]
        history.clear()
        assert history.messages == []
        assert [m.content for m in kept.messages] == ["hello", "hi"]
        assert [m.content for m in nested.messages] == ["nested session"]
        assert mem.verify().ok
        plain = SovsealChatMessageHistory("s1", client=mem)
        before = plain.client.snapshot()
        plain.clear()  # the default: tombstones
        mem.rollback(before)
        assert [m.content for m in plain.messages] == ["hello", "hi"]
        plain.clear(erase=True)  # or per call
        assert plain.messages == [] and "erased" in {e.op for e in mem.log()}
    assert_gone(store_dir, key, sealed, b"4111", b"said the tool output")


@pytest.mark.asyncio
async def test_chat_history_aclear_erases(store_dir: Path, key: bytes) -> None:
    with SovsealChatMessageHistory("s", path=store_dir, key=key, embedder=fake_embed) as history:
        await history.aadd_messages([HumanMessage("secret plans")])
        await history.aclear(erase=True)
        assert await history.aget_messages() == []
        assert "erased" in {e.op for e in history.client.log()}


# -- byte store ------------------------------------------------------------------------------------


def test_byte_store_mdelete_erases(store_dir: Path, key: bytes) -> None:
    big = b"\x00\x01 PRIVATE-KEY-MATERIAL " * 8_000  # over 96 KiB: part records
    with SovsealByteStore(path=store_dir, key=key, embedder=fake_embed) as kv:
        kv.mset([("a", b"PRIVATE-KEY-MATERIAL-a"), ("big", big), ("c", b"kept")])
        kv.mset([("a", b"PRIVATE-KEY-MATERIAL-a2")])
        sealed = [s for p, v in sealed_under(kv.client, "langchain").items() if not p.endswith("/c") for s in v]
        before = kv.client.snapshot()
        kv.mdelete(["c"])  # the default: a tombstone
        kv.client.rollback(before)
        assert kv.mget(["c"]) == [b"kept"]
        kv.mdelete(["a", "big", "missing"], erase=True)
        assert kv.mget(["a", "big", "c"]) == [None, None, b"kept"]
        assert sorted(kv.yield_keys()) == ["c"]
        assert kv.client.verify().ok
    assert_gone(store_dir, key, sealed, b"PRIVATE-KEY-MATERIAL")
    with SovsealByteStore(path=store_dir, key=key, embedder=fake_embed, erase_on_delete=True) as kv:
        kv.mdelete(["c"])
        assert kv.mget(["c"]) == [None]
        assert [e.op for e in kv.client.log()].count("erased") >= 2  # c's value and its tombstone


def test_another_handle_stops_serving_erased_messages_from_its_cache(tmp_path: Path) -> None:
    """A purge moves no head: a handle that read the session before sees the erasure all the same."""
    from langchain_sovseal import SovsealChatMessageHistory

    from sovseal import Sovseal
    from tests.fakes import fake_embed

    key = os.urandom(32)
    with Sovseal(tmp_path / "s", key=key, embedder=fake_embed) as one, Sovseal(tmp_path / "s", key=key, embedder=fake_embed) as two:
        writer = SovsealChatMessageHistory("alice", client=one)
        writer.add_messages([HumanMessage("my card is 4111 1111 1111 1111"), AIMessage("noted")])
        reader = SovsealChatMessageHistory("alice", client=two)
        assert len(reader.messages) == 2  # read and cached by the second handle
        writer.clear(erase=True)
        assert reader.messages == []
