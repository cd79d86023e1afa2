"""The saver's payload format 2 and its read path: blobs as Latin-1 (hex for binary-heavy bytes),
format-1 records still read, records remembered from the saver's own writes still rechecked on
disk, and the per-operation HEAD checks still seeing another handle's writes."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from langgraph.checkpoint.sovseal import SovsealSaver
from langgraph.checkpoint.sovseal._common import (
    PART_BYTES,
    RECORD_BLOB_CHARS,
    decode_blob,
    encode_blob,
    encode_bytes,
    latin1_size,
    no_embedding,
)
from langgraph.checkpoint.sovseal._layout import checkpoint_path, live_branch, pack_blobs, writes_branch

from sovseal import Sovseal
from sovseal.canonical import canonicalize
from sovseal.errors import IntegrityError
from sovseal.storage.entries import MAX_ENTRY_BYTES
from tests.integrations.langgraph.checkpoints import put


@given(st.binary(max_size=600))
def test_a_blob_round_trips_and_its_size_is_its_canonical_size(data: bytes) -> None:
    how, text, size = encode_blob(data)
    assert decode_blob({how: text}, "test") == data
    assert size == len(canonicalize(text)) - 2  # what sovseal will seal, quotes aside
    assert size <= 2 * len(data)  # never more than format 1's hex
    assert latin1_size(data) == len(canonicalize(data.decode("latin-1"))) - 2


def test_text_goes_as_latin1_and_random_bytes_as_hex() -> None:
    assert encode_blob(b"\x82\xa4role\xa4user")[0] == "b"
    assert encode_blob(bytes(range(32)) * 8)[0] == "d"  # control bytes escape to six characters


def test_worst_case_parts_fit_in_a_record() -> None:
    data = bytes(range(32)) * (PART_BYTES // 16)  # escapes everywhere: every part falls back to hex
    descriptors, parts = pack_blobs("langgraph/checkpoint/t//1", {"checkpoint": ("msgpack", data)})
    assert descriptors["checkpoint"]["n"] == len(parts) >= 2
    for _, payload in parts:
        assert len(canonicalize(payload)) < MAX_ENTRY_BYTES
    small, none = pack_blobs("p", {"a": ("msgpack", b"x" * 100)}, budget=RECORD_BLOB_CHARS)
    assert none == [] and small["a"] == {"t": "msgpack", "b": "x" * 100}


def test_a_format_1_record_is_still_read(saver: SovsealSaver) -> None:
    """A record written before format 2 (hex blobs) reads as it did."""
    cfg = put(saver, "old", answer="forty-two")
    path = checkpoint_path("old", "", cfg["configurable"]["checkpoint_id"])
    handle = saver.sovseal.view(live_branch("old"))
    payload = handle.get(path).payload
    blobs = {name: {"t": d["t"], "d": encode_bytes(decode_blob(d, name))} for name, d in payload["blobs"].items()}
    handle.store(path, {**payload, "format": 1, "blobs": blobs}, index=False)
    found = saver.get_tuple(cfg)
    assert found is not None and found.checkpoint["channel_values"] == {"answer": "forty-two"}


def test_a_record_never_read_since_it_was_written_is_still_rechecked(saver_dir: Path, key: bytes) -> None:
    """put remembers what it sealed; the first read must still notice bytes changed on disk."""
    journal = saver_dir / "journal.log"
    with SovsealSaver.open(saver_dir, key=key) as saver:
        first = put(saver, "t", answer="one")
        start = journal.stat().st_size
        saver.put_writes(first, [("answer", "a pending write worth forging")], "task")
        end = journal.stat().st_size
        data = bytearray(journal.read_bytes())
        data[(start + end) // 2] ^= 0x40  # inside the writes record
        journal.write_bytes(bytes(data))
        with pytest.raises(IntegrityError):
            saver.get_tuple(first)
        with pytest.raises(IntegrityError):
            list(saver.list({"configurable": {"thread_id": "t"}}))


def test_writes_on_a_checkpoint_another_handle_stored(saver_dir: Path, key: bytes) -> None:
    """put_writes checks only the writes branch first; a checkpoint it does not know makes it look again."""
    with SovsealSaver.open(saver_dir, key=key) as first, SovsealSaver.open(saver_dir, key=key) as second:
        a = put(first, "shared", n=0)
        b = put(second, "shared", a, n=1)
        first.put_writes(b, [("n", 2)], "task")
        found = second.get_tuple({"configurable": {"thread_id": "shared"}})
        assert found.config["configurable"]["checkpoint_id"] == b["configurable"]["checkpoint_id"]
        assert found.pending_writes == [("task", "n", 2)]
        b_record = second.sovseal.view(live_branch("shared")).snapshot()
        c = put(first, "shared", b, n=2)  # first's live index is stale: the HEAD check reloads it
        assert [t.checkpoint["id"] for t in second.list({"configurable": {"thread_id": "shared"}})] == [
            c["configurable"]["checkpoint_id"],
            b["configurable"]["checkpoint_id"],
            a["configurable"]["checkpoint_id"],
        ]
        assert second.sovseal.view(live_branch("shared")).log(limit=1)[0].parent_id == b_record  # chained after b


def test_list_and_alist_limit_before_and_filter(saver: SovsealSaver) -> None:
    cfg = None
    made = []
    for n in range(40):
        cfg = put(saver, "t", cfg, n=n)
        made.append(cfg["configurable"]["checkpoint_id"])
    newest_first = made[::-1]
    thread = {"configurable": {"thread_id": "t"}}
    assert [t.checkpoint["id"] for t in saver.list(thread, limit=5)] == newest_first[:5]
    assert [t.checkpoint["id"] for t in saver.list(thread, before=cfg, limit=3)] == newest_first[1:4]

    async def collect(**kwargs: Any) -> list[str]:
        return [t.checkpoint["id"] async for t in saver.alist(thread, **kwargs)]

    assert asyncio.run(collect(limit=20)) == newest_first[:20]
    assert asyncio.run(collect()) == newest_first
    assert asyncio.run(collect(filter={"source": "loop"}, limit=17)) == newest_first[:17]
    assert asyncio.run(collect(filter={"source": "input"})) == []
    assert saver.get_tuple(thread).checkpoint["id"] == made[-1]


def test_threads_rooted_on_the_anchor_still_read_and_write(saver_dir: Path, key: bytes) -> None:
    """Stores written before the SDK could create an empty branch: the first saver made the branch
    ``langgraph:anchor`` (a marker record and its tombstone: nothing visible), every thread branch was
    forked at it, and delete_thread rolled a thread's branches back to it. Such threads read, grow,
    fork, copy, prune and delete as new ones do; a thread left at the anchor reads as empty."""
    with Sovseal(saver_dir, key=key, embedder=no_embedding) as handle:
        anchor = handle.view()
        anchor.fork(None, branch="langgraph:anchor")
        anchor.store("langgraph/anchor", {"anchor": "langgraph"}, type="procedural", provenance="observed", index=False)
        anchor.delete("langgraph/anchor")
        root = anchor.snapshot()
        for thread in ("old", "deleted"):
            handle.create_branch(live_branch(thread), root)
            handle.create_branch(writes_branch(thread), root)
        saver = SovsealSaver(handle)  # writes its records on the anchor-rooted branches
        a = put(saver, "old", n=0)
        b = put(saver, "old", a, n=1)
        saver.put_writes(b, [("n", 2)], "task")
    with SovsealSaver.open(saver_dir, key=key) as saver:
        thread = {"configurable": {"thread_id": "old"}}
        assert [t.checkpoint["channel_values"] for t in saver.list(thread)] == [{"n": 1}, {"n": 0}]
        assert saver.get_tuple(thread).pending_writes == [("task", "n", 2)]
        assert saver.get_tuple({"configurable": {"thread_id": "deleted"}}) is None
        assert list(saver.list({"configurable": {"thread_id": "deleted"}})) == []
        put(saver, "deleted", n=7)
        assert [t.checkpoint["channel_values"] for t in saver.list({"configurable": {"thread_id": "deleted"}})] == [{"n": 7}]
        fork = put(saver, "old", a, n=10)  # time travel: the old future goes to an archive branch
        assert len(list(saver.list(thread))) == 3 and saver.get_tuple(thread).config == fork
        saver.copy_thread("old", "copy")
        assert [t.checkpoint["id"] for t in saver.list({"configurable": {"thread_id": "copy"}})] == [
            t.checkpoint["id"] for t in saver.list(thread)
        ]
        saver.prune(["old"], strategy="keep_latest")
        assert [t.config for t in saver.list(thread)] == [fork]
        assert saver.verify("old").ok and saver.verify("copy").ok and saver.verify("deleted").ok
        saver.delete_thread("old")
        assert saver.get_tuple(thread) is None and len(list(saver.list({"configurable": {"thread_id": "copy"}}))) == 3
