"""``store_many``: several records checked up front, embedded in one batch, each durable and chained."""

from __future__ import annotations

import asyncio
import errno
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest

from sovseal import AsyncSovseal, Sovseal
from sovseal.errors import InvalidInputError, StorageError, StoreClosedError
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


def test_a_batch_is_made_durable_with_one_journal_fsync(
    store_dir: Path, key: bytes, monkeypatch: pytest.MonkeyPatch, count_fsyncs: Callable[[], list[int]]
) -> None:
    """Nothing is acknowledged before store_many returns, so one fsync covers the batch (not one per item)."""
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        mem.store("warm", "up")  # the journal, branch and directory exist: what follows is the batch alone
        synced = count_fsyncs()
        results = mem.store_many([{"path": f"p{i}", "payload": i} for i in range(50)])
        monkeypatch.undo()
        assert len(results) == 50 and len({r.snapshot_id for r in results}) == 50
        assert len(synced) == 1, f"expected one fsync for the batch, got {len(synced)}"
    with Sovseal(store_dir, key=key, embedder=fake_embed) as again:
        assert [again.get(f"p{i}").payload for i in range(50)] == list(range(50))  # type: ignore[union-attr]
        assert again.verify().ok


def test_a_failed_batch_fsync_stores_nothing_and_closes_the_handle(
    store_dir: Path, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a failed fsync the batch may never reach the disk (fsyncgate): it is cut off, never left readable."""
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        mem.store("kept", "before")

        def failing(fd: int) -> None:
            raise OSError(errno.EIO, "injected I/O error")

        monkeypatch.setattr(os, "fsync", failing)
        with pytest.raises(StorageError):
            mem.store_many([{"path": "lost", "payload": 1}, {"path": "lost2", "payload": 2}])
        monkeypatch.undo()
        with pytest.raises(StoreClosedError):
            mem.store("after", "closed")
    with Sovseal(store_dir, key=key, embedder=fake_embed) as again:
        assert again.get("kept").payload == "before"  # type: ignore[union-attr]
        assert again.get("lost") is None and again.get("lost2") is None
        assert again.verify().ok
