"""A consolidation run replicates like any write: a second device pulls the facts, edges, scores and audit trail."""

from __future__ import annotations

from pathlib import Path

from sovseal import Sovseal
from sovseal.consolidate import consolidate, get_run, retention, rollback_run
from sovseal.server import ServerThread
from tests.consolidate.conftest import fill
from tests.consolidate.models import RuleChatModel
from tests.fakes import fake_embed


def test_a_run_and_its_rollback_reach_a_second_device(tmp_path: Path, key: bytes) -> None:
    with ServerThread(str(tmp_path / "server.sqlite3")) as server:
        api = server.storage.create_api_key()
        with Sovseal(tmp_path / "laptop", key=key, embedder=fake_embed, endpoint=server.url, api_key=api) as laptop:
            fill(laptop)
            first = consolidate(laptop, RuleChatModel())
            consolidate(laptop, RuleChatModel(), passes="promotion")  # nothing new: no run
            assert laptop.replication is not None and laptop.replication.flush(30)
            assert laptop.status().outbox_records == 0
            expected = laptop.state()
            reinforced = laptop.get("user.pet").reinforce_count
            assert reinforced == 1
        with Sovseal(tmp_path / "phone", key=key, embedder=fake_embed, endpoint=server.url, api_key=api) as phone:
            phone.pull()
            assert phone.state() == expected
            assert get_run(phone, first.run).status == "done"
            assert {r.memory.path for r in phone.related("user.editor")} == {"user.testing", "user.shell", "user.pet"}
            assert retention(phone, "chat.1") is not None
            assert phone.get("user.pet").reinforce_count == reinforced  # reinforcements travel too
            rollback_run(phone, first.run)  # undone on the phone ...
            assert phone.replication is not None and phone.replication.flush(30)
        with Sovseal(tmp_path / "laptop", key=key, embedder=fake_embed, endpoint=server.url, api_key=api) as laptop:
            laptop.pull()  # ... and the laptop follows
            assert laptop.get("user.editor") is None and get_run(laptop, first.run).status == "rolled_back"
