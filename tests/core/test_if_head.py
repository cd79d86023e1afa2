"""``store(..., if_head=...)``: a compare-and-append for callers that keep their own index of a branch.

The store checks, as it appends (under the writer lock, after catching up with other processes),
that the branch's HEAD is still the snapshot the caller knows; otherwise it stores nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.errors import HeadMovedError, InvalidInputError
from tests.fakes import fake_embed


def test_a_store_at_the_head_it_names_appends(mem: Sovseal) -> None:
    head = mem.store("a", 1).snapshot_id
    result = mem.store("b", 2, if_head=head)
    assert mem.snapshot() == result.snapshot_id
    assert mem.log()[1].snapshot_id == head


def test_a_head_moved_by_another_handle_stores_nothing(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as first, Sovseal(store_dir, key=key, embedder=fake_embed) as second:
        seen = first.store("a", 1).snapshot_id
        assert second.snapshot() == seen
        moved = second.store("b", 2).snapshot_id  # another process writes to the branch
        size = (store_dir / "journal.log").stat().st_size
        with pytest.raises(HeadMovedError, match="another writer"):
            first.store("c", 3, if_head=seen)
        assert (store_dir / "journal.log").stat().st_size == size  # not a byte appended
        assert first.snapshot() == moved and first.get("c") is None
        assert first.store("c", 3, if_head=moved).snapshot_id == first.snapshot()


def test_the_head_is_that_of_the_handles_branch(mem: Sovseal) -> None:
    main_head = mem.store("a", 1).snapshot_id
    mem.fork(branch="side")
    side_head = mem.store("s", 1).snapshot_id
    with pytest.raises(HeadMovedError):
        mem.store("t", 2, if_head=main_head)  # main's HEAD, but this handle is on "side"
    assert mem.store("t", 2, if_head=side_head).snapshot_id == mem.snapshot()
    assert mem.view("main").snapshot() == main_head


def test_a_reinforcement_is_checked_too(mem: Sovseal) -> None:
    first = mem.store("a", 1).snapshot_id
    later = mem.store("b", 2).snapshot_id
    with pytest.raises(HeadMovedError):
        mem.store("a", 1, if_head=first)
    assert mem.store("a", 1, if_head=later).reinforced


def test_if_head_must_be_a_snapshot_id(mem: Sovseal) -> None:
    with pytest.raises(InvalidInputError, match="if_head"):
        mem.store("a", 1, if_head=b"snap_00")  # type: ignore[arg-type]
