"""A store written by the release that introduced journal format 3 reads the same with this code.

``tests/core/data/format3`` was written once by ``tests/core/data/make_format3.py`` (key
``bytes(range(32))``, the fake embedder): three branches (one a fork, one made at an older
snapshot), a batch, an unindexed memory, two reinforcements, a delete (a tombstone) and the vector
index. ``expected.json`` is what the writing release read from it. Every later release must read
the same state, history, branches, reinforcement counts and recall, and verify it whole, as
tests/core/test_format3.py does for format 2. Each test works on a copy: the golden files are
never opened for writing.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.storage.journal import JOURNAL_HEADER
from tests.core.data.make_format3 import observe
from tests.fakes import fake_embed

DATA = Path(__file__).parent / "data" / "format3"
KEY = bytes(range(32))
EXPECTED = json.loads((DATA / "expected.json").read_text(encoding="utf-8"))


@pytest.fixture
def store(tmp_path: Path) -> Path:
    target = tmp_path / "store"
    shutil.copytree(DATA / "store", target)
    return target


def _format(path: Path) -> int:
    return int(JOURNAL_HEADER.unpack_from((path / "journal.log").read_bytes())[1])


def test_the_golden_store_is_small_and_format_3() -> None:
    size = sum(p.stat().st_size for p in DATA.rglob("*") if p.is_file())
    assert size < 200_000
    assert _format(DATA / "store") == 3


def test_it_reads_as_the_release_that_wrote_it(store: Path) -> None:
    with Sovseal(store, key=KEY, embedder=fake_embed) as mem:
        assert sorted(mem.branches()) == sorted(EXPECTED["branches"]) == ["draft", "main", "try"]
        assert observe(mem)["branches"] == EXPECTED["branches"]
        assert mem.branch == "main"
        report = mem.verify()
        assert report.ok, report
        assert {query: mem.recall(query, k=1)[0].path for query in EXPECTED["recall"]} == EXPECTED["recall"]
        assert sorted(m.path for m in mem.recall("anything", k=20)) == EXPECTED["recallable"]
        tombstone = next(e for e in mem.log() if e.op == "delete")
        assert tombstone.path == "notes.b" and "notes.b" not in mem.state()
        assert mem.get("kv.cursor").payload == {"n": 3}


def test_a_read_only_open_reads_it_and_writes_nothing(store: Path) -> None:
    before = {p.relative_to(store): p.read_bytes() for p in store.rglob("*") if p.is_file() and "index" not in p.parts}
    with Sovseal(store, key=KEY, embedder=fake_embed, read_only=True) as mem:
        assert observe(mem)["branches"] == EXPECTED["branches"]
        assert mem.verify().ok
    after = {p.relative_to(store): p.read_bytes() for p in store.rglob("*") if p.is_file() and "index" not in p.parts}
    assert {k: v for k, v in after.items() if not k.name.endswith("lock") and k.name != "LOCK"} == {
        k: v for k, v in before.items() if not k.name.endswith("lock") and k.name != "LOCK"
    }


def test_it_takes_new_writes_on_every_branch(store: Path) -> None:
    """The old store is not only readable: it goes on, and a reopen reads old and new together."""
    main_head = EXPECTED["branches"]["main"]["log"][0][0]
    with Sovseal(store, key=KEY, embedder=fake_embed) as mem:
        mem.store("user.new", "written by this release")
        mem.view("try").store("try.more", "and on the fork")
        mem.rollback(main_head)
    with Sovseal(store, key=KEY, embedder=fake_embed) as again:
        assert again.state() == EXPECTED["branches"]["main"]["state"]
        assert again.view("try").state()["try.more"] == "and on the fork"
        assert again.verify().ok
