"""SovsealStore: a differential test against LangGraph's InMemoryStore on random operation sequences
(scores aside where the two rank differently), search by meaning through sovseal recall, sealing,
persistence and tamper evidence, and the async path."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.base import MatchCondition
from langgraph.store.memory import InMemoryStore, _does_match
from langgraph.store.sovseal import SovsealStore

from sovseal.errors import IntegrityError
from tests.fakes import FAKE_DIM, fake_embed


def embed_lists(texts: list[str]) -> list[list[float]]:
    return fake_embed(texts).tolist()


INDEX = {"dims": FAKE_DIM, "embed": embed_lists, "fields": ["text"]}
BIG = 10_000

# -- random operation sequences ---------------------------------------------------------------

labels = st.sampled_from(["a", "b", "c"])
namespaces = st.lists(labels, min_size=1, max_size=3).map(tuple)
keys = st.sampled_from(["k1", "k2", "k3"])
words = st.sampled_from(["green tea", "black coffee", "rust compiler", "sofa cat", "paris trip"])
values = st.fixed_dictionaries(
    {"n": st.integers(0, 5), "tag": st.sampled_from(["x", "y"]), "text": words},
    optional={"nested": st.fixed_dictionaries({"m": st.integers(0, 3)}), "items": st.lists(st.integers(0, 2), max_size=2)},
)
filters = st.one_of(
    st.none(),
    st.builds(lambda n: {"n": n}, st.integers(0, 5)),
    st.builds(lambda op, n: {"n": {op: n}}, st.sampled_from(["$eq", "$ne", "$gt", "$gte", "$lt", "$lte"]), st.integers(0, 5)),
    st.builds(lambda t: {"tag": {"$ne": t}}, st.sampled_from(["x", "y"])),
    st.builds(lambda m: {"nested": {"m": m}}, st.integers(0, 3)),
    st.builds(lambda t, n: {"tag": t, "n": {"$lte": n}}, st.sampled_from(["x", "y"]), st.integers(0, 5)),
)
operations = st.one_of(
    st.tuples(st.just("put"), namespaces, keys, values, st.sampled_from([None, False, ["tag"], ["text", "nested.m"]])),
    st.tuples(st.just("delete"), namespaces, keys),
    st.tuples(st.just("get"), namespaces, keys),
    st.tuples(st.just("search"), st.lists(labels, max_size=2).map(tuple), filters, st.integers(1, 6), st.integers(0, 2)),
    st.tuples(st.just("query"), st.lists(labels, max_size=2).map(tuple), words, filters, st.integers(1, 6)),
    st.tuples(
        st.just("namespaces"),
        st.one_of(st.none(), st.lists(st.sampled_from(["a", "b", "*"]), min_size=1, max_size=2).map(tuple)),
        st.one_of(st.none(), st.lists(labels, min_size=1, max_size=1).map(tuple)),
        st.one_of(st.none(), st.integers(1, 3)),
    ),
)


def items_of(results: list[Any]) -> list[tuple[tuple[str, ...], str, Any]]:
    return [(tuple(i.namespace), i.key, i.value) for i in results]


def ident(item: Any) -> str:
    """An item as text that does not depend on the order of its value's keys."""
    return json.dumps([list(item.namespace), item.key, item.value], sort_keys=True)


def check(mine: SovsealStore, ref: InMemoryStore, op: tuple[Any, ...]) -> None:
    kind = op[0]
    if kind == "put":
        _, ns, key, value, index = op
        mine.put(ns, key, value, index=index)
        # A put replaces the item, its vectors included. InMemoryStore keeps the vectors of fields the
        # earlier put indexed and this one does not (it overwrites field by field and clears only on
        # delete), so an item re-put with other ``index=`` fields would still score by a stale field:
        # the reference drops the item first.
        ref.delete(ns, key)
        ref.put(ns, key, value, index=index)
    elif kind == "delete":
        mine.delete(op[1], op[2])
        ref.delete(op[1], op[2])
    elif kind == "get":
        got, want = mine.get(op[1], op[2]), ref.get(op[1], op[2])
        assert (got and (got.namespace, got.key, got.value)) == (want and (want.namespace, want.key, want.value))
    elif kind == "search":
        _, prefix, flt, limit, offset = op
        everything = items_of(ref.search(prefix, filter=flt, limit=BIG))
        by_place = lambda item: item[:2]
        assert sorted(items_of(mine.search(prefix, filter=flt, limit=BIG)), key=by_place) == sorted(everything, key=by_place)
        page = items_of(mine.search(prefix, filter=flt, limit=limit, offset=offset))
        assert len(page) == len(items_of(ref.search(prefix, filter=flt, limit=limit, offset=offset)))
        assert all(item in everything for item in page)
    elif kind == "query":  # same IndexConfig on both sides: the same cosine scores, the same ranking
        _, prefix, query, flt, limit = op
        got = mine.search(prefix, query=query, filter=flt, limit=limit)
        want = ref.search(prefix, query=query, filter=flt, limit=limit)
        assert [None if i.score is None else round(i.score, 5) for i in got] == [
            None if i.score is None else round(i.score, 5) for i in want
        ]
        reference = {ident(i): round(i.score, 5) for i in ref.search(prefix, query=query, filter=flt, limit=BIG) if i.score is not None}
        assert all(reference[ident(i)] == round(i.score, 5) for i in got if i.score is not None)  # ties may pick others
        unscored = {ident(i) for i in got if i.score is None}
        candidates = {ident(i) for i in ref.search(prefix, filter=flt, limit=BIG)}
        assert unscored <= candidates
    else:  # list_namespaces; InMemoryStore also lists namespaces left empty (or only read): drop those
        _, prefix, suffix, depth = op
        conditions = [MatchCondition("prefix", prefix)] if prefix else []
        conditions += [MatchCondition("suffix", suffix)] if suffix else []
        stored = [tuple(i.namespace) for i in ref.search((), limit=BIG)]
        want = [
            ns
            for ns in ref.list_namespaces(prefix=prefix, suffix=suffix, max_depth=depth, limit=BIG)
            if any(s[:depth] == ns and all(_does_match(c, s) for c in conditions) for s in stored)
        ]
        assert mine.list_namespaces(prefix=prefix, suffix=suffix, max_depth=depth, limit=BIG) == want
        assert mine.list_namespaces(prefix=prefix, suffix=suffix, max_depth=depth, limit=2, offset=1) == want[1:3]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(operations, min_size=1, max_size=30))
def test_differential_against_in_memory_store(ops: list[tuple[Any, ...]]) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="sovseal-store-") as directory,
        SovsealStore.open(directory, key=os.urandom(32), index=INDEX) as mine,
    ):
        ref = InMemoryStore(index=INDEX)
        for op in ops:
            check(mine, ref, op)


def test_survives_a_restart_and_matches_after_it(tmp_path: Path) -> None:
    key = os.urandom(32)
    ref = InMemoryStore(index=INDEX)
    with SovsealStore.open(tmp_path / "s", key=key, index=INDEX) as store:
        for i, text in enumerate(["green tea", "black coffee", "rust compiler", "sofa cat"]):
            for s in (store, ref):
                s.put(("users", f"u{i % 2}"), f"k{i}", {"text": text, "n": i})
        for s in (store, ref):
            s.delete(("users", "u0"), "k0")
    with SovsealStore.open(tmp_path / "s", key=key, index=INDEX) as store:  # vectors come back from the sealed records
        for prefix in [("users",), ("users", "u1")]:
            got = store.search(prefix, query="black coffee", limit=10)
            want = ref.search(prefix, query="black coffee", limit=10)
            assert [(i.key, round(i.score, 5)) for i in got] == [(i.key, round(i.score, 5)) for i in want]
        assert store.get(("users", "u0"), "k0") is None
        assert store.get(("users", "u0"), "k2").value == {"text": "rust compiler", "n": 2}


def test_item_times_are_the_records_and_survive_a_restart(tmp_path: Path) -> None:
    """created_at == updated_at on a new item (as InMemoryStore); an update keeps created_at and
    moves updated_at; a put of the same value moves updated_at (a reinforcement, no new record);
    a reopened store gives the very same times as the process that wrote them."""
    key = os.urandom(32)
    with SovsealStore.open(tmp_path / "s", key=key, index=INDEX) as store:
        store.put(("u",), "new", {"text": "green tea"})
        new = store.get(("u",), "new")
        store.put(("u",), "changed", {"text": "green tea"})
        first = store.get(("u",), "changed")
        store.put(("u",), "changed", {"text": "black coffee"})
        changed = store.get(("u",), "changed")
        store.put(("u",), "same", {"text": "sofa cat"})
        before = store.get(("u",), "same")
        records = len(store.sovseal.log())
        store.put(("u",), "same", {"text": "sofa cat"})
        same = store.get(("u",), "same")
        assert len(store.sovseal.log()) == records  # reinforced: no new snapshot
    assert new is not None and new.created_at == new.updated_at
    assert first is not None and changed is not None and before is not None and same is not None
    assert changed.created_at == first.created_at and changed.updated_at > first.updated_at
    assert same.created_at == before.created_at and same.updated_at > before.updated_at
    with SovsealStore.open(tmp_path / "s", key=key, index=INDEX) as store:
        for item in (new, changed, same):
            again = store.get(item.namespace, item.key)
            assert again is not None and (again.created_at, again.updated_at) == (item.created_at, item.updated_at)


def test_search_by_meaning_through_sovseal_recall(tmp_path: Path) -> None:
    with SovsealStore.open(tmp_path / "s", key=os.urandom(32), embedder=fake_embed) as store:
        store.put(("memories", "ada"), "drink", {"text": "Ada drinks green tea every morning", "topic": "food"})
        store.put(("memories", "ada"), "pet", {"text": "Ada has a cat called Babbage", "topic": "home"})
        store.put(("memories", "ada"), "work", {"text": "Ada debugs the rust compiler", "topic": "work"})
        store.put(("memories", "ada"), "secret", {"text": "green tea is the secret", "topic": "food"}, index=False)
        store.put(("memories", "bob"), "drink", {"text": "Bob drinks green tea too", "topic": "food"})

        found = store.search(("memories", "ada"), query="which tea does she drink?", limit=2)
        assert found[0].key == "drink" and "secret" not in [i.key for i in found]
        assert found[0].score is not None and all(i.namespace == ("memories", "ada") for i in found)
        ranked = store.search(("memories", "ada"), query="green tea", limit=3)
        assert "secret" not in [i.key for i in ranked if i.score is not None]  # index=False: never ranked...
        everything = store.search(("memories", "ada"), query="green tea", limit=10)
        assert [i.key for i in everything if i.score is None] == ["secret"]  # ...only listed after the ranked ones
        assert [i.key for i in store.search(("memories",), query="tea", filter={"topic": "home"})] == ["pet"]
        # The items are sovseal memories: recall on the handle finds them too.
        assert store.sovseal.recall("Babbage the cat", k=1)[0].path == "langgraph/store/memories/ada/=pet"


def test_items_are_sealed_records_in_the_lineage(tmp_path: Path) -> None:
    key = os.urandom(32)
    directory = tmp_path / "s"
    with SovsealStore.open(directory, key=key, embedder=fake_embed) as store:
        store.put(("people",), "ada", {"secret": "analytical-engine-1843"})
        store.put(("people",), "ada", {"secret": "analytical-engine-1843"})  # unchanged: reinforced, not re-stored
        store.put(("people",), "ada", {"secret": "difference-engine-1822"})
        store.delete(("people",), "ada")
        ops = [(e.op, e.path) for e in store.sovseal.log()]
        item = "langgraph/store/people/=ada"
        assert ops[:3] == [("delete", item), ("store", item), ("store", item)]
        assert store.sovseal.verify().ok
    for file in directory.rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            assert b"analytical-engine" not in data and b"difference-engine" not in data and b"people" not in data

    with SovsealStore.open(directory, key=key, embedder=fake_embed) as store:
        store.put(("people",), "grace", {"secret": "cobol"})
    journal = directory / "journal.log"
    data = bytearray(journal.read_bytes())
    data[len(data) - 200] ^= 0x40  # inside the last record
    journal.write_bytes(bytes(data))
    with SovsealStore.open(directory, key=key, embedder=fake_embed) as store, pytest.raises(IntegrityError):
        store.get(("people",), "grace")


@pytest.mark.asyncio
async def test_async_batch_with_an_async_embedder(tmp_path: Path) -> None:
    async def embed(texts: list[str]) -> list[list[float]]:
        return embed_lists(texts)

    index = {"dims": FAKE_DIM, "embed": embed, "fields": ["text"]}
    ref = InMemoryStore(index=index)
    async with SovsealStore.aopen(tmp_path / "s", key=os.urandom(32), index=index) as store:
        for s in (store, ref):
            await s.aput(("docs",), "a", {"text": "green tea"})
            await s.aput(("docs",), "b", {"text": "black coffee"})
            await s.aput(("docs", "old"), "c", {"text": "green tea"}, index=False)
        got = await store.asearch(("docs",), query="green tea")
        want = await ref.asearch(("docs",), query="green tea")
        assert [(i.key, i.score and round(i.score, 5)) for i in got] == [(i.key, i.score and round(i.score, 5)) for i in want]
        assert (await store.aget(("docs",), "b")).value == {"text": "black coffee"}
        assert await store.alist_namespaces() == [("docs",), ("docs", "old")]
        vectors = np.asarray(embed_lists(["green tea"]))
        assert got[0].score == pytest.approx(1.0) and vectors.shape == (1, FAKE_DIM)
