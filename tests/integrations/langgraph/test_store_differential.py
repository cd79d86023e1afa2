"""SovsealStore against InMemoryStore with odd namespaces and keys (unicode, slashes, percent signs,
'=', ':', '*', spaces, 200 characters, the empty key), empty and 300 KB values, the namespaces and
TTL arguments both refuse, and threads using one store at once."""

from __future__ import annotations

import os
import tempfile
import threading
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.memory import InMemoryStore
from langgraph.store.sovseal import SovsealStore

from tests.fakes import fake_embed
from tests.integrations.langgraph.test_store import INDEX, check

LABELS = ["a", "thé", "x/y", "100%", "=k", "b:c", "*", "sp ace", "🙂", "n" * 200]
KEYS = ["k", "", "ключ", "a/b", "%2F", "=", "k" * 200]
BIG_TEXT = "ω" * 150_000  # 300 KB of UTF-8: more than a record holds

labels = st.sampled_from(LABELS)
namespaces = st.lists(labels, min_size=1, max_size=3).map(tuple)
values = st.one_of(
    st.just({}),
    st.fixed_dictionaries({"text": st.sampled_from(["green tea", "rust compiler", "paris trip", BIG_TEXT]), "n": st.integers(0, 3)}),
    st.fixed_dictionaries({"nested": st.fixed_dictionaries({"deep": st.lists(st.text(max_size=5), max_size=3)})}),
)
operations = st.one_of(
    st.tuples(st.just("put"), namespaces, st.sampled_from(KEYS), values, st.sampled_from([None, False])),
    st.tuples(st.just("delete"), namespaces, st.sampled_from(KEYS)),
    st.tuples(st.just("get"), namespaces, st.sampled_from(KEYS)),
    st.tuples(
        st.just("search"),
        st.lists(labels, max_size=2).map(tuple),
        st.sampled_from([None, {"n": 1}, {"n": {"$ne": 1}}]),
        st.integers(1, 4),
        st.integers(0, 1),
    ),
    st.tuples(
        st.just("query"), st.lists(labels, max_size=1).map(tuple), st.sampled_from(["tea", "compiler"]), st.none(), st.integers(1, 4)
    ),
    st.tuples(
        st.just("namespaces"),
        st.one_of(st.none(), st.lists(st.sampled_from(["a", "thé", "*"]), min_size=1, max_size=2).map(tuple)),
        st.one_of(st.none(), st.lists(labels, min_size=1, max_size=1).map(tuple)),
        st.one_of(st.none(), st.integers(1, 2)),
    ),
)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(operations, min_size=3, max_size=20))
def test_odd_namespaces_keys_and_values_match_in_memory_store(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory(prefix="sovseal-store-odd-") as d, SovsealStore.open(d, key=os.urandom(32), index=INDEX) as mine:
        ref = InMemoryStore(index=INDEX)
        for op in ops:
            check(mine, ref, op)


@pytest.mark.parametrize(
    "call",
    [
        lambda s: s.put(("a.b",), "k", {}),
        lambda s: s.put((), "k", {}),
        lambda s: s.put(("langgraph", "x"), "k", {}),
        lambda s: s.put(("a", ""), "k", {}),
        lambda s: s.put(("a",), "k", {"v": 1}, ttl=5),
        lambda s: s.search(("a",), query="x", filter={"v": {"$in": [1]}}),
    ],
)
def test_what_in_memory_store_refuses_is_refused_the_same_way(tmp_path: Any, call: Any) -> None:
    with SovsealStore.open(tmp_path, key=os.urandom(32), embedder=fake_embed) as mine:
        ref = InMemoryStore()
        ref.put(("a",), "k", {"v": 1})
        mine.put(("a",), "k", {"v": 1})
        outcomes = []
        for store in (ref, mine):
            try:
                call(store)
                outcomes.append(None)
            except Exception as exc:  # noqa: BLE001 - the type is what is compared
                outcomes.append(type(exc))
        assert outcomes[0] is not None or outcomes[1] is None  # never refuse what the reference takes
        assert outcomes[0] == outcomes[1] or (outcomes[0] and outcomes[1] and issubclass(outcomes[1], outcomes[0]))
        assert supports_ttl_is_the_same(ref, mine)


def supports_ttl_is_the_same(ref: InMemoryStore, mine: SovsealStore) -> bool:
    return ref.supports_ttl == mine.supports_ttl


def test_threads_using_one_store_at_once_end_as_the_serial_reference(tmp_path: Any) -> None:
    with SovsealStore.open(tmp_path, key=os.urandom(32), embedder=fake_embed) as mine:
        ref = InMemoryStore()
        errors: list[BaseException] = []

        def worker(w: int, store: Any) -> None:
            try:
                for i in range(8):
                    store.put(("users", f"u{w}", "é/x"), f"k{i}", {"w": w, "i": i, "text": f"note {i}"})
                    if i % 3 == 2:
                        store.delete(("users", f"u{w}", "é/x"), f"k{i - 1}")
                    assert store.get(("users", f"u{w}", "é/x"), f"k{i}").value["i"] == i
                    store.search(("users",), limit=5)
                store.put(("shared",), "last", {"w": 0})  # every thread writes one item: one wins
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        threads = [threading.Thread(target=worker, args=(w, mine)) for w in range(6)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        for w in range(6):
            worker(w, ref)
        key = lambda i: (i.namespace, i.key)
        assert sorted(((i.namespace, i.key, i.value) for i in mine.search((), limit=1000)), key=str) == sorted(
            ((i.namespace, i.key, i.value) for i in ref.search((), limit=1000)), key=str
        )
        assert mine.list_namespaces() == ref.list_namespaces()
        assert sorted(map(key, mine.search(("users",), limit=1000))) == sorted(map(key, ref.search(("users",), limit=1000)))
