"""The command line never says something untrue (issue 35, item 4): each test drives the real CLI."""

from __future__ import annotations

import json

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
