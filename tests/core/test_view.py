"""``Sovseal.view``: a second handle on one open store, with its own branch and nothing else of its own."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from sovseal import AsyncSovseal, Sovseal
from sovseal.errors import UnknownBranchError
from tests.fakes import fake_embed


def test_a_view_works_on_its_branch_without_moving_the_original(mem: Sovseal) -> None:
    base = mem.store("a", "on main").snapshot_id
    mem.fork(base, branch="side")
    mem.checkout("main")
    side = mem.view("side")
    side.store("b", "only on the side branch")
    assert mem.branch == "main" and side.branch == "side"
    assert mem.state() == {"a": "on main"}
    assert side.state() == {"a": "on main", "b": "only on the side branch"}
    assert side.recall("only on the side branch", k=5)[0].path == "b"
    assert "b" not in {m.path for m in mem.recall("only on the side branch", k=5)}
    assert side._shared is mem._shared  # one index, one catalog, one embedder


def test_closing_a_view_leaves_the_store_open_and_closing_the_store_closes_views(mem: Sovseal) -> None:
    view = mem.view()
    view.close()
    mem.store("a", "still writable")
    assert view.get("a").payload == "still writable"  # type: ignore[union-attr]
    mem.close()
    with pytest.raises(Exception, match="closed"):
        view.get("a")


def test_a_view_of_an_unknown_branch_fails(mem: Sovseal) -> None:
    with pytest.raises(UnknownBranchError):
        mem.view("nope")


def test_async_view(store_dir: Path, key: bytes) -> None:
    async def main() -> tuple[dict[str, object], dict[str, object]]:
        async with AsyncSovseal(store_dir, key=key, embedder=fake_embed) as mem:
            sid = (await mem.store("a", 1)).snapshot_id
            await mem.fork(sid, branch="side")
            await mem.checkout("main")
            side = mem.view("side")
            await side.store("b", 2)
            return await mem.state(), await side.state()

    assert asyncio.run(main()) == ({"a": 1}, {"a": 1, "b": 2})
