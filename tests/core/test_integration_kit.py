"""The framework-neutral kit the adapters share (sovseal/integration), on a real store on disk.

The part-record layout is on disk in users' stores (written by langchain-sovseal and
llama-index-sovseal since before the kit existed): one test pins it byte for byte.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.canonical import canonicalize
from sovseal.errors import IntegrityError, PayloadTooLargeError, SovsealError
from sovseal.integration import (
    MAX_VALUE_BYTES,
    Erasure,
    HandleOwner,
    Parts,
    as_text,
    batch_id,
    check_key,
    check_segment,
    check_size,
    deletion,
    descriptor,
    erase_flag,
    erase_records,
    index_text,
    open_handle,
)
from sovseal.integration.parts import INDEX_CHARS, INLINE_BYTES, PART_BYTES
from tests.erasure_scan import assert_gone, sealed_under
from tests.fakes import fake_embed

PARTS = Parts("kit-parts/")
BIG = "".join(f"line {i}: ünïcode and text\n" for i in range(30_000))  # ~0.8 MB: several parts


def _h32(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _store_big(mem: Sovseal, path: str, value: object, group: str = "kit/") -> dict[str, object]:
    payload, items = PARTS.pack(path, value, where=f"the value at {path!r}", group=group)
    record = {"path": path, "payload": payload, "text": index_text(as_text(value)[:100])}
    mem.store_many([*items, record])
    return record


# -- handles -------------------------------------------------------------------------------------


def test_open_handle_opens_or_shares_never_both(store_dir: Path, key: bytes) -> None:
    opened, owned = open_handle(None, path=store_dir, key=key, embedder=fake_embed, branch=None)
    with opened:
        assert owned and opened.branch == "main"
        opened.store("a", 1)
        shared, owned = open_handle(opened)
        assert shared is opened and not owned
        with pytest.raises(ValueError, match="not both"):
            open_handle(opened, path=store_dir)
        with pytest.raises(ValueError, match="not both"):
            open_handle(opened, client_kwargs={"lock_timeout": 1.0})
        with pytest.raises(TypeError, match=r"sovseal\.Sovseal"):
            open_handle(object())  # type: ignore[arg-type]
        opened.fork(branch="side")
    again, owned = open_handle(None, path=store_dir, key=key, branch="side", client_kwargs={"embedder": fake_embed})
    with again:
        assert owned and again.branch == "side" and again.get("a") is not None
    with pytest.raises(ValueError, match="twice"):
        open_handle(None, path=store_dir, key=key, embedder=fake_embed, client_kwargs={"embedder": fake_embed})


class _Component(HandleOwner):
    def __init__(self, client: Sovseal | None, **kwargs: object) -> None:
        self._client, self._owns_client = open_handle(client, **kwargs)  # type: ignore[arg-type]


def test_a_component_closes_only_the_handle_it_opened(store_dir: Path, key: bytes) -> None:
    with _Component(None, path=store_dir, key=key, client_kwargs={"embedder": fake_embed}) as own:
        own.client.store("a", 1)
        with _Component(own.client) as shared:
            assert shared.client is own.client
        assert own.client.get("a") is not None  # the shared handle is still open
    with pytest.raises(SovsealError, match="closed"):  # closed with the component that opened it
        own.client.get("a")


def test_names_are_checked_before_they_become_paths() -> None:
    assert check_segment("docs", "collection") == "docs"
    for bad in ("", "a/b", "a\x00", 3, None):
        with pytest.raises(ValueError, match="collection"):
            check_segment(bad, "collection")
    assert check_key("", "an id") == "" and check_key("a/b c", "an id") == "a/b c"
    with pytest.raises(TypeError, match="an id"):
        check_key(7, "an id")
    with pytest.raises(ValueError, match="NUL"):
        check_key("a\x00", "an id")
    ids = [batch_id() for _ in range(50)]
    assert len(set(ids)) == 50 and all(len(i) == 24 and int(i, 16) >= 0 for i in ids)
    assert sorted(ids, key=lambda i: i[:16]) == ids  # time first: later batches sort later


# -- parts ---------------------------------------------------------------------------------------


def test_small_values_stay_in_their_record() -> None:
    assert PARTS.pack("kit/a", "short", where="x", group="kit/") == ("short", [])
    assert PARTS.pack("kit/a", {"n": 1}, where="x", group="kit/") == ({"n": 1}, [])
    assert descriptor("short") is None and descriptor({"n": 1}) is None and PARTS.paths("short") == []


def test_the_on_disk_layout_is_unchanged() -> None:
    """What langchain-sovseal and llama-index-sovseal wrote before the kit: the same bytes."""
    path, group = "langchain/docs/big", "langchain/docs/"
    payload, items = Parts("langchain-parts/").pack(path, BIG, where="x", group=group)
    data = BIG.encode()
    sha = hashlib.sha256(data).hexdigest()
    value = hashlib.sha256((path + "\x00" + sha).encode()).hexdigest()[:40]
    at = f"{_h32(group)}/{_h32(path)}/{value}"
    assert payload == {"sovseal/parts": {"n": len(items), "bytes": len(data), "sha256": sha, "kind": "str", "at": at}}
    assert [item["path"] for item in items] == [f"langchain-parts/{at}/{i}" for i in range(len(items))]
    for i, item in enumerate(items):
        assert item["index"] is False and set(item) == {"path", "payload", "index"}
        assert {k: v for k, v in item["payload"].items() if k != "s"} == {"of": path, "i": i, "n": len(items), "sha256": sha}
        assert len(canonicalize(item["payload"]["s"])) <= PART_BYTES
    assert "".join(item["payload"]["s"] for item in items) == BIG
    assert len(items) > 1 and INLINE_BYTES < PART_BYTES


def test_large_values_round_trip_through_a_real_store(mem: Sovseal) -> None:
    structured = {"rows": [{"i": i, "text": "x" * 50} for i in range(5_000)]}
    _store_big(mem, "kit/text", BIG)
    _store_big(mem, "kit/json", structured)
    text, obj = mem.get("kit/text"), mem.get("kit/json")
    assert text is not None and obj is not None
    assert descriptor(text.payload) is not None and descriptor(obj.payload)["kind"] == "json"  # type: ignore[index]
    assert PARTS.read(mem, text) == BIG and PARTS.read(mem, obj) == structured
    assert all(p.startswith(PARTS.record_prefix("kit/", "kit/text")) for p in PARTS.paths(text.payload))
    assert all(p.startswith(PARTS.group_prefix("kit/")) for p in PARTS.paths(obj.payload))
    small = mem.get("kit/text")
    assert small is not None
    mem.store("kit/small", "tiny")
    tiny = mem.get("kit/small")
    assert tiny is not None and PARTS.read(mem, tiny) == "tiny"


def test_parts_are_read_from_the_branch_the_record_came_from(mem: Sovseal) -> None:
    mem.store("kit/other", "x")
    side = mem.view()
    side.fork(branch="side")
    _store_big(side, "kit/big", BIG)
    found = mem.get("kit/big", branch="side")
    assert found is not None and mem.get("kit/big") is None
    assert PARTS.read(mem, found, branch="side") == BIG
    with pytest.raises(IntegrityError, match="part 0"):
        PARTS.read(mem, found)  # main has none of its parts


def test_a_damaged_or_missing_part_is_an_integrity_error(mem: Sovseal) -> None:
    _store_big(mem, "kit/a", BIG)
    record = mem.get("kit/a")
    assert record is not None
    first, *_ = PARTS.paths(record.payload)
    part = mem.get(first)
    assert part is not None
    mem.store(first, {**part.payload, "i": 5}, index=False)
    with pytest.raises(IntegrityError, match="does not name its place"):
        PARTS.read(mem, record)
    mem.store(first, {**part.payload, "s": part.payload["s"][:-1] + "?"}, index=False)
    with pytest.raises(IntegrityError, match="do not add up"):
        PARTS.read(mem, record)
    mem.delete(first)
    with pytest.raises(IntegrityError, match="missing"):
        PARTS.read(mem, record)


def test_the_one_size_limit() -> None:
    check_size(MAX_VALUE_BYTES, "a value")
    with pytest.raises(PayloadTooLargeError, match=r"the value of key 'k' is .*64 MiB"):
        check_size(MAX_VALUE_BYTES + 1, "the value of key 'k'")
    with pytest.raises(PayloadTooLargeError, match="64 MiB"):
        PARTS.pack("kit/huge", "z" * (MAX_VALUE_BYTES + 1), where="the huge one", group="kit/")


def test_an_overwrite_drops_the_parts_it_no_longer_names(mem: Sovseal) -> None:
    old = _store_big(mem, "kit/a", BIG)
    before = mem.paths(PARTS.root)
    assert before == sorted(PARTS.paths(old["payload"]))
    new = _store_big(mem, "kit/a", BIG + "more")
    PARTS.drop(mem, [old["payload"]], [new["payload"]])
    assert mem.paths(PARTS.root) == sorted(PARTS.paths(new["payload"])) and not set(before) & set(mem.paths(PARTS.root))
    PARTS.drop(mem, [new["payload"]], [new["payload"]])  # still named: kept
    assert mem.paths(PARTS.root) == sorted(PARTS.paths(new["payload"]))
    record = mem.get("kit/a")
    assert record is not None
    PARTS.delete(mem, [record])
    assert mem.paths("kit") == [] and mem.paths(PARTS.root) == []
    assert PARTS.stale(["plain"], []) == [] and PARTS.delete(mem, []) is None


def test_index_text_and_as_text() -> None:
    assert index_text("") == " " and index_text("x" * (INDEX_CHARS + 5)) == "x" * INDEX_CHARS
    assert as_text("é") == "é" and as_text({"b": 1, "a": "é"}) == json.dumps({"a": "é", "b": 1}, ensure_ascii=False)


# -- erasure -------------------------------------------------------------------------------------


def test_deletion_options_are_checked() -> None:
    assert deletion({}, False) == (False, "") and deletion({}, True) == (True, "")
    assert deletion({"erase": True, "reason": "gdpr"}, False) == (True, "gdpr")
    assert deletion({"erase": False}, True) == (False, "")
    with pytest.raises(TypeError, match="reason"):
        deletion({"reason": "why"}, False)
    with pytest.raises(TypeError, match="unexpected arguments: erse"):
        deletion({"erse": True}, False)
    with pytest.raises(TypeError, match="erase must be a bool"):
        erase_flag("yes", False)
    assert erase_flag(None, True) is True


def test_erasing_a_record_reaches_every_version_and_its_parts(mem: Sovseal, store_dir: Path, key: bytes) -> None:
    secret = BIG + "the launch code is 7351"
    first = _store_big(mem, "kit/secret", secret)
    _store_big(mem, "kit/secret", secret + " (v2)")
    PARTS.drop(mem, [first["payload"]])
    mem.delete("kit/secret")  # deleted earlier with a tombstone: still erased
    mem.store("kit/keep", "keep me")
    sealed = [s for v in sealed_under(mem, "kit/secret").values() for s in v]
    sealed += [s for v in sealed_under(mem, PARTS.root).values() for s in v]
    assert erase_records(mem, PARTS, [], "kit/", paths=["kit/secret", "kit/never-there"], reason="test") >= 2
    assert mem.paths(PARTS.root) == [] and mem.get("kit/keep") is not None
    assert sealed_under(mem, PARTS.root) == {}
    mem.close()
    assert_gone(store_dir, key, sealed, b"launch code is 7351")


def test_erasing_a_group_and_one_compaction(mem: Sovseal) -> None:
    for i in range(3):
        _store_big(mem, f"kit/{i}", BIG + str(i))
    mem.store("kitchen/x", "not in the group")
    compactions: list[object] = []
    real = mem.compact

    def counted() -> object:
        compactions.append(1)
        return real()

    mem.compact = counted  # type: ignore[method-assign]
    with Erasure(mem, PARTS) as erasure:
        erasure.group("kit/", [m.payload for m in mem.find({"path_prefix": "kit/"})])
        erasure.purge("kit/nothing-here")
    assert len(compactions) == 1 and erasure.erased >= 3
    assert mem.paths("kit/") == [] and mem.paths(PARTS.root) == [] and mem.paths("kitchen/") == ["kitchen/x"]
    with Erasure(mem, PARTS) as nothing:
        nothing.record("kit/0", "kit/")  # already erased: nothing to do, no compaction
    assert len(compactions) == 1 and nothing.erased == 0
    with pytest.raises(TypeError, match="reason"):
        Erasure(mem, PARTS, reason=3)  # type: ignore[arg-type]


def test_a_record_and_every_part_it_ever_had_are_one_purge(mem: Sovseal) -> None:
    first = _store_big(mem, "kit/doc", BIG)  # its parts under the record's prefix
    # a later version whose parts sit elsewhere (as a value stored before parts were grouped by record):
    # only its descriptor names them
    second = _store_big(mem, "kit/doc", BIG + "v2", group="elsewhere/")
    outside = PARTS.outside(second["payload"], PARTS.record_prefix("kit/", "kit/doc"))
    assert outside and PARTS.paths(first["payload"])
    mem.store("kit/keep", "keep me")
    purges: list[tuple[object, object]] = []
    real = mem.purge

    def counted(path: object = None, **kwargs: object) -> object:
        purges.append((path, kwargs["prefix"]))
        return real(path, **kwargs)  # type: ignore[arg-type]

    mem.purge = counted  # type: ignore[method-assign]
    with Erasure(mem, PARTS, "asked") as erasure:
        erasure.record("kit/doc", "kit/", second["payload"])
        erasure.purge([])  # nothing named: nothing to do
    assert purges == [(["kit/doc", *outside], [PARTS.record_prefix("kit/", "kit/doc")])]
    parts = len(PARTS.paths(first["payload"])) + len(outside)
    assert erasure.erased == 2 + parts
    assert mem.paths() == ["kit/keep"]
    assert [e.op for e in mem.log()].count("erased") == 2 + parts
