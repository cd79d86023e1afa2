"""Large values: the Store takes a value of any size, as InMemoryStore does, splitting one that does not
fit in a record into part records (as the saver does for blobs); the saver takes a large checkpoint."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from langgraph.store.memory import InMemoryStore
from langgraph.store.sovseal import SovsealStore

from sovseal.errors import IntegrityError
from tests.fakes import fake_embed


def big_value(size: int, tag: str = "big") -> dict[str, Any]:
    """About ``size`` bytes of JSON: unicode text, numbers, nesting."""
    chunk = "sovseal récit 記憶 "
    return {
        "tag": tag,
        "text": (chunk * (size // len(chunk.encode()) + 1))[: size // 2],
        "rows": [{"i": i, "v": i * 0.5} for i in range(size // 40)],
    }


@pytest.mark.parametrize("size", [0, 200_000, 1 << 20])
def test_store_put_of_a_large_value_works_like_in_memory_store(tmp_path: Path, size: int) -> None:
    value = big_value(size) if size else {}
    key = os.urandom(32)
    ref = InMemoryStore()
    with SovsealStore.open(tmp_path, key=key, embedder=fake_embed) as mine:
        for store in (mine, ref):
            store.put(("docs", "big"), "k", value)
            store.put(("docs", "small"), "k", {"tag": "small"})
        for store in (mine, ref):
            assert store.get(("docs", "big"), "k").value == value
            assert [(i.key, i.value) for i in store.search(("docs", "big"), filter={"tag": value.get("tag")})] == [("k", value)]
        assert sorted(i.namespace for i in mine.search(("docs",), limit=10)) == sorted(i.namespace for i in ref.search(("docs",), limit=10))
    with SovsealStore.open(tmp_path, key=key, embedder=fake_embed) as again:  # read back from the records
        assert again.get(("docs", "big"), "k").value == value


def test_a_large_value_replaced_by_a_small_one_and_deleted(tmp_path: Path) -> None:
    key = os.urandom(32)
    with SovsealStore.open(tmp_path, key=key, embedder=fake_embed) as store:
        store.put(("n",), "k", big_value(600_000))
        parts = [p for p in store.sovseal.state() if "/part/" in p]
        assert len(parts) >= 2  # stored in parts
        store.put(("n",), "k", {"now": "small"})
        assert not [p for p in store.sovseal.state() if "/part/" in p]  # the old parts are tombstoned
        store.put(("n",), "k", big_value(300_000, "again"))
        store.delete(("n",), "k")
        assert store.get(("n",), "k") is None
        assert not [p for p in store.sovseal.state() if p.startswith("langgraph/store/")]
    with SovsealStore.open(tmp_path, key=key, embedder=fake_embed) as store:
        assert store.get(("n",), "k") is None
        assert store.search(("n",)) == []


def test_a_large_value_is_found_by_recall(tmp_path: Path) -> None:
    with SovsealStore.open(tmp_path, key=os.urandom(32), embedder=fake_embed) as store:
        store.put(("m",), "big", {"text": "the lighthouse keeper logs every storm " * 20_000})
        store.put(("m",), "other", {"text": "a recipe for bread"})
        found = store.search(("m",), query="lighthouse keeper storm", limit=1)
        assert [i.key for i in found] == ["big"]
        assert found[0].score is not None


def test_a_part_swapped_between_two_large_values_is_refused(tmp_path: Path) -> None:
    key = os.urandom(32)
    with SovsealStore.open(tmp_path, key=key, embedder=fake_embed) as store:
        store.put(("s",), "a", big_value(400_000, "a"))
        store.put(("s",), "b", big_value(400_000, "b"))
        h = store.sovseal
        a_part = next(p for p in h.state() if p.startswith("langgraph/store/s/=a/part/"))
        b_part = a_part.replace("/=a/", "/=b/")
        h.store(b_part, h.get(a_part).payload, index=False)  # a writer with the key, replaying a's part as b's
    with SovsealStore.open(tmp_path, key=key, embedder=fake_embed) as store, pytest.raises(IntegrityError):
        store.get(("s",), "b")


def test_the_limit_is_64_mib_as_in_the_other_adapters(tmp_path: Path, saver: Any) -> None:
    """Over 64 MiB (langchain-sovseal's and llama-index-sovseal's limit too) a value is refused and nothing is stored."""
    from sovseal.errors import PayloadTooLargeError
    from sovseal.integration import MAX_VALUE_BYTES
    from tests.integrations.langgraph.checkpoints import put

    assert MAX_VALUE_BYTES == 64 * 1024 * 1024
    too_big = "x" * (MAX_VALUE_BYTES + 1)
    with SovsealStore.open(tmp_path / "store", key=os.urandom(32), embedder=fake_embed) as store:
        with pytest.raises(PayloadTooLargeError, match="64 MiB"):
            store.put(("n",), "k", {"text": too_big})
        assert store.get(("n",), "k") is None
        assert not [p for p in store.sovseal.state() if p.startswith("langgraph/store/")]
    with pytest.raises(PayloadTooLargeError, match="64 MiB"):
        put(saver, "huge", text=too_big)
    assert saver.get_tuple({"configurable": {"thread_id": "huge", "checkpoint_ns": ""}}) is None
    config = put(saver, "huge", text="small")
    with pytest.raises(PayloadTooLargeError, match="64 MiB"):
        saver.put_writes(config, [("text", too_big)], "task")
    assert saver.get_tuple(config).pending_writes == []
