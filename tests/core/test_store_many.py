"""``store_many``: several records checked up front, embedded in one batch, each durable and chained."""

from __future__ import annotations

import asyncio
from pathlib import Path

import numpy as np
import pytest

from sovseal import AsyncSovseal, Sovseal
from sovseal.errors import InvalidInputError
from tests.fakes import fake_embed


def test_store_many_is_store_in_order_with_one_embedding_batch(store_dir: Path, key: bytes) -> None:
    batches: list[list[str]] = []

    def counting(texts):  # type: ignore[no-untyped-def]
        batches.append(list(texts))
        return fake_embed(texts)

    with Sovseal(store_dir, key=key, embedder=counting) as mem:
        results = mem.store_many(
            [
                {"path": "a", "payload": "alpha", "type": "episodic"},
                {"path": "b", "payload": {"v": 2}, "metadata": {"n": 2}, "text": "bravo"},
                {"path": "kv", "payload": "not for recall", "index": False},
                {"path": "a", "payload": "alpha again"},
            ]
        )
        assert [b for b in batches if len(b) > 1] == [["a: alpha", "bravo", "a: alpha again"]]
        assert mem.state() == {"a": "alpha again", "b": {"v": 2}, "kv": "not for recall"}
        log = mem.log()
        assert [e.snapshot_id for e in reversed(log)] == [r.snapshot_id for r in results]
        assert [e.parent_id for e in reversed(log)][1:] == [r.snapshot_id for r in results][:-1]  # one chain
        assert {m.path for m in mem.recall("bravo", k=10)} == {"a", "b"}
        assert mem.verify().ok
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:  # durable: all there after reopening
        assert mem.get("b").metadata == {"n": 2}  # type: ignore[union-attr]


def test_storing_the_visible_value_again_reinforces_it(mem: Sovseal) -> None:
    first = mem.store("a", "alpha")
    again = mem.store_many([{"path": "a", "payload": "alpha"}])
    assert again[0].reinforced and again[0].snapshot_id == first.snapshot_id
    assert mem.get("a").reinforce_count == 1  # type: ignore[union-attr]


def test_given_vectors_are_used_instead_of_embedding(store_dir: Path, key: bytes) -> None:
    def refuse(texts):  # type: ignore[no-untyped-def]
        if len(texts) > 1:
            raise AssertionError("store_many with vectors must not embed the items")
        return fake_embed(texts)

    with Sovseal(store_dir, key=key, embedder=refuse) as mem:
        vectors = fake_embed(["first", "second"])
        mem.store_many([{"path": "x", "payload": "first"}, {"path": "y", "payload": "second"}], vectors=vectors)
        hits = mem.recall_by_vector(vectors[1], k=1)
        assert [m.path for m in hits] == ["y"]
        with pytest.raises(InvalidInputError, match="one row per item"):
            mem.store_many([{"path": "z", "payload": "third"}], vectors=vectors)
        with pytest.raises(InvalidInputError, match="dimensions"):
            mem.store_many([{"path": "z", "payload": "third"}], vectors=np.ones((1, 3)))
        assert "z" not in mem.state()


@pytest.mark.parametrize(
    ("items", "match"),
    [
        ("not a list", "list of item mappings"),
        ([{"path": "a"}], "needs path and payload"),
        ([{"path": "a", "payload": 1, "colour": "red"}], "unknown: colour"),
        ([{"path": "a", "payload": 1}, ["b", 2]], "item 1 must be a mapping"),
        ([{"path": "a", "payload": 1}, {"path": "b", "payload": float("nan")}], "JSON"),
        ([{"path": "a", "payload": 1, "index": False, "text": "t"}], "index=False"),
    ],
)
def test_a_bad_item_stores_nothing(mem: Sovseal, items: object, match: str) -> None:
    mem.store("keep", "kept")
    with pytest.raises(InvalidInputError, match=match):
        mem.store_many(items)  # type: ignore[arg-type]
    assert mem.state() == {"keep": "kept"}


def test_async_store_many(store_dir: Path, key: bytes) -> None:
    async def main() -> dict[str, object]:
        async with AsyncSovseal(store_dir, key=key, embedder=fake_embed) as mem:
            await mem.store_many([{"path": "a", "payload": 1}, {"path": "b", "payload": 2}])
            return await mem.state()

    assert asyncio.run(main()) == {"a": 1, "b": 2}
