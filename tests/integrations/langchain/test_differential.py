"""Differential property tests: random operation sequences against LangChain's reference stores.

Each example runs the same operations on a sovseal component and on LangChain's in-memory
reference (``InMemoryVectorStore``, ``InMemoryChatMessageHistory``, ``InMemoryByteStore``) and
compares every answer, as LangChain documents them: ``get_by_ids`` in the order asked, missing ids
skipped; searches best first by cosine similarity; ``messages`` in the order added; ``mget`` with
``None`` for missing keys; ``yield_keys(prefix=)`` the keys that start with the prefix (compared as
sets: the reference yields in insertion order, sovseal in key order).

Both vector stores use LangChain's ``DeterministicFakeEmbedding`` (a seeded random vector per text),
so ranking is compared exactly without the on-device model. Content includes the empty string and a
200k-character text (stored in part records); ids and keys include unicode, slashes, dots, spaces
and 900-character strings (sovseal paths are at most 1,024 characters with the collection prefix).
A last test runs writers in threads against one store and compares the end state.
"""

from __future__ import annotations

import os
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.stores import InMemoryByteStore
from langchain_core.vectorstores import InMemoryVectorStore
from langchain_sovseal import SovsealByteStore, SovsealChatMessageHistory, SovsealVectorStore

from sovseal import Sovseal
from tests.fakes import fake_embed

FAKE = DeterministicFakeEmbedding(size=16)
BIG = "tool output line\n" * 11_765 + "é☃"  # 200,007 characters: stored in parts
ODD_IDS = ["a", "a/b", "a/b/", "../up", "a.b.c", "é☃ ü", " ", "x" * 900, "part/0", "langchain/default/a"]
ids = st.one_of(
    st.sampled_from(ODD_IDS), st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), min_size=1, max_size=12)
)
contents = st.sampled_from(["", "alpha", "beta gamma", "alpha", BIG, "Ünïcødé ☃"])
metadata = st.fixed_dictionaries({"tag": st.sampled_from(["x", "y"]), "n": st.integers(0, 3)})
SETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _fake_embed_fn(texts: list[str]) -> np.ndarray:
    return np.asarray(FAKE.embed_documents(list(texts)), dtype=np.float32)


def _new_dir() -> str:
    return tempfile.mkdtemp(prefix="sovseal-diff-")


# -- vector store ------------------------------------------------------------------------------

vector_ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.lists(st.tuples(ids, contents, metadata), min_size=1, max_size=4)),
        st.tuples(st.just("delete"), st.lists(ids, min_size=1, max_size=3)),
        st.tuples(st.just("get"), st.lists(ids, min_size=1, max_size=4)),
        st.tuples(st.just("search"), contents, st.integers(1, 6), st.sampled_from([None, "x", "y"])),
    ),
    min_size=1,
    max_size=10,
)


def _check_search(ours: list[tuple[Document, float]], ref_all: list[tuple[Document, float]], k: int) -> None:
    """Same scores best first; each id returned has the reference's score for it (ties may order differently)."""
    ref_score = {d.id: s for d, s in ref_all}
    assert [round(s, 4) for _, s in ours] == [round(s, 4) for _, s in ref_all[:k]]
    for doc, score in ours:
        assert ref_score[doc.id] == pytest.approx(score, abs=1e-4)
        assert doc == next(d for d, _ in ref_all if d.id == doc.id)


@SETTINGS
@given(ops=vector_ops)
def test_vector_store_matches_in_memory_vector_store(ops: list[tuple[Any, ...]]) -> None:
    ref = InMemoryVectorStore(FAKE)
    with SovsealVectorStore(FAKE, path=_new_dir(), key=os.urandom(32)) as ours:
        for op in ops:
            if op[0] == "add":
                batch = {doc_id: (text, md) for doc_id, text, md in op[1]}  # one id once per call
                docs = [Document(page_content=t, metadata=md, id=i) for i, (t, md) in batch.items()]
                assert ours.add_documents(docs) == ref.add_documents(docs)
            elif op[0] == "delete":
                ours.delete(op[1])
                ref.delete(op[1])
            elif op[0] == "get":
                assert ours.get_by_ids(op[1]) == ref.get_by_ids(op[1])
            else:
                _, query, k, tag = op
                flt = None if tag is None else {"tag": tag}
                by_tag = None if tag is None else (lambda d, t=tag: d.metadata["tag"] == t)
                ref_all = ref.similarity_search_with_score(query, k=1000, filter=by_tag)
                _check_search(ours.similarity_search_with_score(query, k=k, filter=flt), ref_all, k)
        everything = list(ref.store)
        assert sorted(ours.get_by_ids(everything), key=lambda d: d.id) == sorted(ref.get_by_ids(everything), key=lambda d: d.id)


# -- chat history ------------------------------------------------------------------------------

messages = st.lists(
    st.one_of(
        st.builds(HumanMessage, content=contents),
        st.builds(lambda c: AIMessage(content=c, tool_calls=[{"name": "t", "args": {"q": c[:5]}, "id": "call"}]), contents),
        st.builds(lambda c: ToolMessage(content=c, tool_call_id="call"), contents),
    ),
    min_size=1,
    max_size=4,
)
chat_ops = st.lists(
    st.one_of(st.tuples(st.just("add"), messages), st.tuples(st.just("clear")), st.tuples(st.just("read"))), min_size=1, max_size=8
)


@SETTINGS
@given(session=ids, ops=chat_ops)
@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_chat_history_matches_in_memory_history(session: str, ops: list[tuple[Any, ...]]) -> None:
    ref = InMemoryChatMessageHistory()
    with Sovseal(_new_dir(), key=os.urandom(32), embedder=fake_embed) as mem:
        ours = SovsealChatMessageHistory(session, client=mem)
        for op in ops:
            if op[0] == "add":
                ours.add_messages(op[1])
                ref.add_messages(op[1])
            elif op[0] == "clear":
                ours.clear()
                ref.clear()
            assert ours.messages == ref.messages
        assert SovsealChatMessageHistory(session, client=mem).messages == ref.messages  # a fresh reader


# -- byte store --------------------------------------------------------------------------------

values = st.one_of(st.binary(max_size=64), st.sampled_from([b"", b"\x00" * 300_000]))
kv_ops = st.lists(
    st.one_of(
        st.tuples(st.just("mset"), st.lists(st.tuples(ids, values), min_size=1, max_size=4)),
        st.tuples(st.just("mget"), st.lists(ids, min_size=1, max_size=4)),
        st.tuples(st.just("mdelete"), st.lists(ids, min_size=1, max_size=3)),
        st.tuples(st.just("keys"), st.sampled_from([None, "", "a", "x", "é"])),
    ),
    min_size=1,
    max_size=10,
)


@SETTINGS
@given(ops=kv_ops)
def test_byte_store_matches_in_memory_byte_store(ops: list[tuple[Any, ...]]) -> None:
    ref = InMemoryByteStore()
    with Sovseal(_new_dir(), key=os.urandom(32), embedder=fake_embed) as mem:
        ours = SovsealByteStore(mem, namespace="diff")
        for op in ops:
            if op[0] == "mset":
                pairs = list(dict(op[1]).items())  # the last value of a key within one call wins in both
                ours.mset(pairs)
                ref.mset(pairs)
            elif op[0] == "mget":
                assert ours.mget(op[1]) == ref.mget(op[1])
            elif op[0] == "mdelete":
                ours.mdelete(op[1])
                ref.mdelete(op[1])
            else:
                assert set(ours.yield_keys(prefix=op[1])) == set(ref.yield_keys(prefix=op[1]))


# -- threads -----------------------------------------------------------------------------------


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_threads_writing_one_store_end_as_the_reference() -> None:
    """Eight threads add documents, messages and values at once through one handle; the end state
    is what the reference holds after the same writes one by one."""
    ref_vs, ref_kv = InMemoryVectorStore(FAKE), InMemoryByteStore()
    ref_chat = {f"s{t}": InMemoryChatMessageHistory() for t in range(8)}
    with Sovseal(_new_dir(), key=os.urandom(32), embedder=_fake_embed_fn) as mem:  # the store's model is FAKE
        vs = SovsealVectorStore(FAKE, client=mem)
        kv = SovsealByteStore(mem)

        def work(t: int) -> None:
            for i in range(4):
                docs = [Document(page_content=BIG if i == 3 and t == 0 else f"doc {t}.{i}", id=f"t{t}/d{i}", metadata={"t": t})]
                vs.add_documents(docs)
                SovsealChatMessageHistory(f"s{t}", client=mem).add_messages([HumanMessage(f"q{t}.{i}"), AIMessage("")])
                kv.mset([(f"t{t}.k{i}", bytes([t, i]) * (100_000 if i == 2 else 1))])

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(work, range(8)))
        for t in range(8):
            for i in range(4):
                content = BIG if i == 3 and t == 0 else f"doc {t}.{i}"
                ref_vs.add_documents([Document(page_content=content, id=f"t{t}/d{i}", metadata={"t": t})])
                ref_chat[f"s{t}"].add_messages([HumanMessage(f"q{t}.{i}"), AIMessage("")])
                ref_kv.mset([(f"t{t}.k{i}", bytes([t, i]) * (100_000 if i == 2 else 1))])
        every = sorted(ref_vs.store)
        assert vs.get_by_ids(every) == ref_vs.get_by_ids(every)
        for session, history in ref_chat.items():
            assert SovsealChatMessageHistory(session, client=mem).messages == history.messages
        keys = sorted(ref_kv.yield_keys())
        assert sorted(kv.yield_keys()) == keys and kv.mget(keys) == ref_kv.mget(keys)
        _check_search(vs.similarity_search_with_score("doc 3.1", k=5), ref_vs.similarity_search_with_score("doc 3.1", k=1000), 5)
