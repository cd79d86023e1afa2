"""``store(..., if_heads=...)``: a compare-and-append for callers that keep their own index of branches.

The store checks, as it appends (under the writer lock, after catching up with other processes),
that each named branch's HEAD is still the snapshot the caller knows; otherwise it stores nothing.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.errors import HeadMovedError, InvalidInputError, UnknownBranchError
from tests.fakes import fake_embed


def test_a_store_at_the_head_it_names_appends(mem: Sovseal) -> None:
    head = mem.store("a", 1).snapshot_id
    result = mem.store("b", 2, if_heads={"main": head})
    assert mem.snapshot() == result.snapshot_id
    assert mem.log()[1].snapshot_id == head


def test_a_head_moved_by_another_handle_stores_nothing(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as first, Sovseal(store_dir, key=key, embedder=fake_embed) as second:
        seen = first.store("a", 1).snapshot_id
        assert second.snapshot() == seen
        moved = second.store("b", 2).snapshot_id  # another process writes to the branch
        size = (store_dir / "journal.log").stat().st_size
        with pytest.raises(HeadMovedError, match="another writer"):
            first.store("c", 3, if_heads={"main": seen})
        assert (store_dir / "journal.log").stat().st_size == size  # not a byte appended
        assert first.snapshot() == moved and first.get("c") is None
        assert first.store("c", 3, if_heads={"main": moved}).snapshot_id == first.snapshot()


def test_the_heads_named_may_be_of_other_branches(mem: Sovseal) -> None:
    """A record on one branch can be stored on the condition that another branch did not move."""
    main_head = mem.store("a", 1).snapshot_id
    mem.fork(branch="side")
    side_head = mem.store("s", 1).snapshot_id
    with pytest.raises(HeadMovedError, match="'side'"):
        mem.store("t", 2, if_heads={"side": main_head})  # main's HEAD is not side's
    mem.view("main").store("m", 1)
    with pytest.raises(HeadMovedError, match="'main'"):
        mem.store("t", 2, if_heads={"side": side_head, "main": main_head})  # main moved
    assert mem.get("t") is None
    now = mem.view("main").snapshot()
    assert mem.store("t", 2, if_heads={"side": side_head, "main": now}).snapshot_id == mem.snapshot()
    with pytest.raises(UnknownBranchError):
        mem.store("u", 3, if_heads={"nowhere": now})


def test_a_reinforcement_is_checked_too(mem: Sovseal) -> None:
    first = mem.store("a", 1).snapshot_id
    later = mem.store("b", 2).snapshot_id
    with pytest.raises(HeadMovedError):
        mem.store("a", 1, if_heads={"main": first})
    assert mem.store("a", 1, if_heads={"main": later}).reinforced


@pytest.mark.parametrize("bad", ["snap_00", {"main": b"snap_00"}, {1: "snap_00"}, [("main", "snap_00")]])
def test_if_heads_must_map_branches_to_snapshot_ids(mem: Sovseal, bad: object) -> None:
    with pytest.raises(InvalidInputError, match="if_heads"):
        mem.store("a", 1, if_heads=bad)  # type: ignore[arg-type]


def test_if_heads_with_a_list_checks_every_head_and_heads_of_lists_them(tmp_path: Path, key: bytes) -> None:
    """A branch a pull left with two heads: a list names them all; one missing (or one more) refuses."""
    laptop = Sovseal(tmp_path / "laptop", key=key, embedder=fake_embed)
    phone = Sovseal(tmp_path / "phone", key=key, embedder=fake_embed)
    with laptop, phone:
        laptop.store("base", "0")
        phone.import_items(laptop.export_items())
        first = laptop.store("a", "laptop").snapshot_id
        second = phone.store("a", "phone").snapshot_id
        laptop.import_items(phone.export_items())
        heads = laptop.heads_of("main")
        assert sorted(heads) == sorted([first, second]) and heads[0] == laptop.snapshot()  # type: ignore[type-var]
        with pytest.raises(HeadMovedError):
            laptop.store("b", "x", if_heads={"main": [first]})
        merged = laptop.store("b", "x", if_heads={"main": list(reversed(heads))}).snapshot_id  # type: ignore[arg-type]
        assert laptop.heads_of() == [merged]
        with pytest.raises(UnknownBranchError):
            laptop.heads_of("nope")
        with pytest.raises(InvalidInputError):
            laptop.store("c", "y", if_heads={"main": 3})  # type: ignore[dict-item]
