"""Tamper evidence and sealing: a changed checkpoint makes get_tuple raise, a record is bound to
(thread, namespace, checkpoint id), and no checkpoint, metadata, write or thread id is on disk in
the clear."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.sovseal import SovsealSaver
from langgraph.checkpoint.sovseal._layout import checkpoint_path, live_branch, part_path

from sovseal.errors import IntegrityError
from tests.integrations.langgraph.checkpoints import put


def flip_byte_between(journal: Path, start: int, end: int) -> None:
    """Flip one byte in the middle of what one operation appended (inside its sealed entry)."""
    data = bytearray(journal.read_bytes())
    data[(start + end) // 2] ^= 0x40
    journal.write_bytes(bytes(data))


def test_tampered_checkpoint_raises_integrity_error(saver_dir: Path, key: bytes) -> None:
    journal = saver_dir / "journal.log"
    with SovsealSaver.open(saver_dir, key=key) as saver:
        first = put(saver, "t", answer="forty-one")
        start = journal.stat().st_size
        second = put(saver, "t", first, answer="forty-two")
        end = journal.stat().st_size
        assert saver.get_tuple(second).checkpoint["channel_values"] == {"answer": "forty-two"}

        flip_byte_between(journal, start, end)  # while the saver is open
        with pytest.raises(IntegrityError):
            saver.get_tuple(second)

    with SovsealSaver.open(saver_dir, key=key) as saver:  # and after a restart: the thread's chain is broken
        with pytest.raises(IntegrityError):
            saver.get_tuple({"configurable": {"thread_id": "t"}})
        with pytest.raises(IntegrityError):
            list(saver.list({"configurable": {"thread_id": "t"}}))
        report = saver.verify("t")
        assert not report.ok and report.problems


def test_a_record_is_bound_to_its_thread_namespace_and_id(saver: SovsealSaver) -> None:
    """A record moved to another checkpoint's path (here through the SDK itself) is refused."""
    a = put(saver, "t", answer="a")
    b = put(saver, "t", a, answer="b")
    path_a = checkpoint_path("t", "", a["configurable"]["checkpoint_id"])
    path_b = checkpoint_path("t", "", b["configurable"]["checkpoint_id"])
    handle = saver.sovseal
    handle.checkout(live_branch("t"))
    handle.store(path_b, handle.get(path_a).payload)  # b's path now holds a's record
    handle.checkout("main")
    with pytest.raises(IntegrityError, match="does not match its path"):
        saver.get_tuple(b)
    assert not saver.verify("t").ok


def test_swapped_parts_of_a_large_checkpoint_are_refused(saver: SovsealSaver) -> None:
    big = os.urandom(400 * 1024)  # two parts and more: a record is at most 256 KiB
    cfg = put(saver, "big", blob=big)
    assert saver.get_tuple(cfg).checkpoint["channel_values"]["blob"] == big
    record = checkpoint_path("big", "", cfg["configurable"]["checkpoint_id"])
    handle = saver.sovseal
    handle.checkout(live_branch("big"))
    part0 = handle.get(part_path(record, "checkpoint", 0)).payload
    part1 = handle.get(part_path(record, "checkpoint", 1)).payload
    handle.store(part_path(record, "checkpoint", 1), {**part1, "d": part0["d"]})  # same place, other bytes
    handle.checkout("main")
    with pytest.raises(IntegrityError, match="do not add up"):
        saver.get_tuple(cfg)


def test_nothing_readable_on_disk(saver_dir: Path, key: bytes) -> None:
    secrets = ["thread-of-ada-lovelace", "ada-lovelace-7731", "secret-channel-value-1815", "secret-pending-write-1852"]
    with SovsealSaver.open(saver_dir, key=key) as saver:
        checkpoint = empty_checkpoint()
        checkpoint["channel_values"] = {"notes": secrets[2]}
        checkpoint["channel_versions"] = {"notes": 1}
        config = {"configurable": {"thread_id": secrets[0], "checkpoint_ns": "", "user_id": secrets[1]}}
        stored = saver.put(config, checkpoint, {"source": "input", "step": -1}, {"notes": 1})
        saver.put_writes(stored, [("notes", secrets[3])], "task-1")
        found = saver.get_tuple(stored)
        assert found.metadata["user_id"] == secrets[1]  # metadata copies the config's user id...
        assert found.pending_writes == [("task-1", "notes", secrets[3])]
    for file in saver_dir.rglob("*"):
        if file.is_file():
            data = file.read_bytes()
            for secret in secrets:  # ...and seals it, like the thread id, the values and the writes
                assert secret.encode() not in data, (secret, file)
