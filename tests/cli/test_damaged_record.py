"""One damaged record: every error names it and the way out, and `log` stays usable (issue 35).

The record's bytes are flipped in place, as a disk error or an attacker would; the memory path
is sealed inside them, so it is named when another version of it still opens or the command
was given it, and the message says so when neither is the case.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.crypto.keychain import load_master_key
from tests.cli.conftest import Run
from tests.core.test_damaged_record import flip


def _offsets(home: Path) -> list[int]:
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SOVSEAL_KEY_FALLBACK", "file")  # the store's key is in its key file, as the CLI keeps it here
        key, _ = load_master_key(home)
    with Sovseal(home, key=key) as mem, mem._store.reading() as lineage:
        return [node.offset for node in lineage.nodes]


def _damaged_store(store: Run, *, second_version: bool) -> None:
    """a, b and c stored (c twice when ``second_version``), then c's first record damaged."""
    store("store", "a", "alpha is the first letter")
    store("store", "c", "charlie is the third letter")
    store("store", "b", "bravo is the second letter")
    if second_version:
        store("store", "c", "charlie, once more")
    flip(store.home, _offsets(store.home)[1])


def test_get_recall_and_log_name_the_record_the_path_and_the_fix(store: Run) -> None:
    _damaged_store(store, second_version=False)
    line = store.fails(1, "get", "c")
    assert "journal byte" in line and "path 'c'" in line and "`sovseal delete c`" in line
    line = store.fails(1, "recall", "third letter")
    assert "cannot rank it" in line and "journal byte" in line and "`sovseal delete PATH`" in line
    assert "verify()" not in line and "sealed in the damaged bytes" in line  # no Python words; says why no path
    # log lists the whole history, the damaged entry marked, and warns once on stderr.
    result = store("log")
    rows = result.stdout.splitlines()
    assert len(rows) == 3
    assert [row.split()[4] for row in rows] == ["store", "damaged", "store"]
    assert "(fails authentication)" in rows[1]
    assert result.stderr.count("warning:") == 1 and "`sovseal delete PATH`" in result.stderr
    assert [e["op"] for e in store.json("log")] == ["store", "damaged", "store"]


def test_deleting_the_path_is_the_way_out(store: Run) -> None:
    _damaged_store(store, second_version=False)
    store("delete", "c")
    assert {m["path"] for m in store.json("recall", "letter", "-k", "5")} == {"a", "b"}
    rows = store("log").stdout.splitlines()
    assert rows[0].split()[4:6] == ["delete", "c"]
    assert "damaged" in rows[2] and " c " in rows[2]  # the tombstone names the damaged record's path now
    store("get", "c", code=3)  # nothing visible there: not found, not damaged


def test_a_new_version_replaces_a_damaged_one(store: Run) -> None:
    _damaged_store(store, second_version=False)
    store("store", "c", "charlie, mended")  # compared with a record it cannot read: stored, not refused
    assert store.json("get", "c")["payload"] == "charlie, mended"


def test_another_version_names_the_path_in_recall(store: Run) -> None:
    _damaged_store(store, second_version=True)
    store("rollback", store.json("log")[1]["snapshot_id"])  # HEAD back to the damaged version's child
    line = store.fails(1, "recall", "third letter")
    assert "path 'c'" in line and "`sovseal delete c`" in line


def test_purge_says_the_erasure_is_committed_and_why_its_bytes_stay(store: Run) -> None:
    _damaged_store(store, second_version=False)
    line = store.fails(1, "purge", "a", "--yes")
    assert "the purge of 'a' is committed" in line and "compaction never rewrites a journal with damage" in line
    assert "journal byte" in line and "`sovseal compact`" in line
    store("get", "a", code=3)  # erased: reads never return it
    rows = store("log").stdout.splitlines()
    assert rows[-1].split()[4] == "erased" and any("damaged" in row for row in rows)
