"""AsyncSovseal mirrors Sovseal with await, and concurrent coroutines do not corrupt the chain."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

from sovseal import AsyncSovseal, Sovseal
from tests.fakes import fake_embed


def test_async_api_round_trip(store_dir: Path, key: bytes) -> None:
    async def main() -> None:
        async with AsyncSovseal(store_dir, key=key, embedder=fake_embed) as mem:
            first = await mem.store("user.editor", "vim")
            await asyncio.gather(*(mem.store(f"note.{i}", f"note {i}") for i in range(20)))
            assert len(await mem.log()) == 21
            assert (await mem.get("user.editor")).payload == "vim"
            await mem.fork(first.snapshot_id, branch="side")
            assert mem.branch == "side" and await mem.state() == {"user.editor": "vim"}
            await mem.checkout("main")
            deleted = await mem.delete("note.3")
            assert deleted is not None
            await mem.rollback(first.snapshot_id)
            assert await mem.snapshot() == first.snapshot_id
            assert [m.path for m in await mem.recall("vim", k=1)] == ["user.editor"]
            assert sorted(await mem.branches()) == ["main", "side"]
            assert (await mem.verify()).ok
            assert (await mem.status()).records == 22

    asyncio.run(main())


def test_every_public_name_of_sovseal_is_on_async_sovseal(store_dir: Path, key: bytes) -> None:
    """The async handle mirrors the sync one name for name, recall_params included."""
    missing = {n for n in dir(Sovseal) if not n.startswith("_")} - {n for n in dir(AsyncSovseal) if not n.startswith("_")}
    assert missing == set()

    async def main() -> None:
        async with AsyncSovseal(store_dir, key=key, embedder=fake_embed) as mem:
            params = mem.recall_params
            mem.recall_params = dataclasses.replace(params, fusion="keyword")
            assert mem.recall_params.fusion == "keyword" and mem._sync.recall_params.fusion == "keyword"

    asyncio.run(main())
