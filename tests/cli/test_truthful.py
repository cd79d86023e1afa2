"""The command line never says something untrue (issue 35, item 4): each test drives the real CLI."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.cli.conftest import Run

# -- an empty payload is refused ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "stdin"),
    [(("x", ""), None), (("x", "-"), ""), (("x", "-"), "\n  \n"), (("x", '""'), None), (("x", "   "), None)],
)
def test_an_empty_payload_is_refused_and_nothing_is_stored(store: Run, args: tuple[str, str], stdin: str | None) -> None:
    line = store.fails(2, "store", *args, input=stdin)
    assert "PAYLOAD is empty" in line and "nothing was stored" in line and "sovseal delete PATH" in line
    assert store.json("status")["records"] == 0
    store.fails(3, "get", "x")


def test_a_payload_that_is_not_empty_is_still_stored(store: Run) -> None:
    store("store", "x", "-", input="  some text  ")
    assert store.json("get", "x")["payload"] == "  some text  "
    assert json.loads(store("get", "x", "--json").stdout)["path"] == "x"


# -- import says how many items were new -----------------------------------------------------------


def test_import_says_how_many_items_were_new(store: Run, tmp_path: Path) -> None:
    for i in range(3):
        store("store", f"user.fact{i}", f"fact number {i}")
    store("fork", "--name", "side")
    backup = tmp_path / "backup.sovseal"
    store("export", str(backup))
    total = store.json("import", str(backup))["items"]  # into the store it came from: nothing is new
    fresh = {"SOVSEAL_HOME": str(tmp_path / "fresh")}
    key = tmp_path / "key.txt"
    key.write_text(store("key", "export").stdout)
    store("key", "import", "-", input=key.read_text(), **fresh)
    first = store("import", str(backup), **fresh).stdout
    assert first.startswith(f"imported {total} new items into ") and "already" not in first
    again = store("import", str(backup), **fresh).stdout
    assert again.startswith(f"imported 0 new items ({total} already present) into "), again
    data = store.json("import", str(backup), **fresh)
    assert (data["items"], data["new"], data["present"]) == (total, 0, total)
    store("store", "user.fact9", "one more")  # the source moves on: a new backup has one new item
    store("export", str(backup), "--force")
    assert store("import", str(backup), **fresh).stdout.startswith(f"imported 1 new item ({total} already present) into ")
