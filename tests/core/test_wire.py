"""The outbox and the restore path at the store level: what would be sent, and replaying it elsewhere."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.errors import IntegrityError
from sovseal.storage.wire import WireItem
from tests.fakes import fake_embed


def history(mem: Sovseal) -> None:
    a = mem.store("user.editor", "vim").snapshot_id
    mem.store("user.editor", "neovim")
    mem.store("user.shell", {"name": "fish"})
    mem.store("user.shell", {"name": "fish"})  # a reinforcement
    mem.fork(a, branch="experiment")
    mem.store("user.editor", "helix")
    mem.checkout("main")
    mem.delete("user.shell")
    mem.rollback(a)
    mem.store("user.pager", "less")


def snapshot_of(mem: Sovseal) -> dict[str, object]:
    out: dict[str, object] = {}
    for branch in mem.branches():
        mem.checkout(branch)
        out[branch] = (
            mem.state(),
            [e.snapshot_id for e in mem.log()],
            {p: mem.get(p).reinforce_count for p in mem.state()},
        )
    return out


def test_outbox_holds_every_replicable_frame_until_acked(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        history(mem)
        items = mem._store.outbox(1000)
        kinds = [i.kind for i in items]
        assert kinds.count("record") == mem.status().records
        assert kinds.count("reinforce") == 1 and kinds.count("branch") >= 3
        assert mem.status().outbox_records == len(items)
        again = mem._store.outbox(1000)
        assert [i.sealed for i in again] == [i.sealed for i in items]  # a retry resends identical bytes
        mem._store.ack([i.id for i in items[:5]])
        assert mem.status().outbox_records == len(items) - 5
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        assert [i.id for i in mem._store.outbox(1000)] == [i.id for i in items[5:]]  # acks are durable


def test_items_carry_no_plaintext(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        history(mem)
        blob = json.dumps([i.to_json() for i in mem._store.outbox(1000)])
    for secret in ("user.editor", "neovim", "helix", "fish", "experiment", "main", "snap_"):
        assert secret not in blob


def test_a_second_device_with_the_key_restores_everything(tmp_path: Path, key: bytes) -> None:
    with Sovseal(tmp_path / "one", key=key, embedder=fake_embed) as one:
        history(one)
        items = [WireItem.from_json(json.loads(json.dumps(i.to_json()))) for i in one._store.outbox(1000)]
        expected = snapshot_of(one)
    with Sovseal(tmp_path / "two", key=key, embedder=fake_embed) as two:
        own = len(two._store.outbox(1000))
        late = two._store.import_items(items[6:])  # the second half arrives first: it must wait
        assert late == items[6:]
        assert two._store.import_items(items[:6]) == []
        assert two._store.import_items(late) == []
        assert snapshot_of(two) == expected
        assert two.verify().ok
        assert two._store.import_items(items) == []  # idempotent
        assert len(two._store.outbox(1000)) == own  # imported items are not sent back


def test_forged_items_are_refused(tmp_path: Path, key: bytes) -> None:
    with Sovseal(tmp_path / "one", key=key, embedder=fake_embed) as one:
        history(one)
        items = one._store.outbox(1000)
    record = next(i for i in items if i.kind == "record")
    flipped = WireItem(
        record.kind, record.id, record.parent, record.branch, record.path_hash, record.sealed[:-1] + b"\0", record.created_at
    )
    with Sovseal(tmp_path / "two", key=key, embedder=fake_embed) as two:
        with pytest.raises(IntegrityError):
            two._store.import_items([flipped])
        assert two.status().records == 0
    with Sovseal(tmp_path / "three", key=bytes(32), embedder=fake_embed) as other:
        with pytest.raises(IntegrityError):
            other._store.import_items(items)  # under another key nothing opens
        assert other.status().records == 0


def test_export_and_import_through_the_public_api(tmp_path: Path, key: bytes) -> None:
    with Sovseal(tmp_path / "one", key=key, embedder=fake_embed) as one:
        history(one)
        one._store.ack([i.id for i in one._store.outbox(3)])  # acknowledged items are exported too
        items = one.export_items()
        expected, heads = snapshot_of(one), one.heads()
    with Sovseal(tmp_path / "two", key=key, embedder=fake_embed) as two:
        assert two.import_items(items) == []
        assert two.heads() == heads and snapshot_of(two) == expected
