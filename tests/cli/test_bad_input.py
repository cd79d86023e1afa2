"""Input the CLI cannot use: every case is one line `error: ...` on stderr and exit 2, never a traceback."""

from __future__ import annotations

from tests.cli.conftest import Run

DEPTH = 3000  # far past Python's recursion limit: json.loads raises RecursionError, not JSONDecodeError


def test_json_nested_too_deeply_is_bad_input(store: Run) -> None:
    deep_array = "[" * DEPTH + "]" * DEPTH
    assert "nested too deeply" in store.fails(2, "store", "deep", "-", "--as", "json", input=deep_array)
    deep_object = '{"a":' * DEPTH + "1" + "}" * DEPTH
    assert "--metadata" in store.fails(2, "store", "p", "x", "--metadata", deep_object)
    deep_filter = '{"$not":' * DEPTH + "{}" + "}" * DEPTH
    assert "--filter" in store.fails(2, "recall", "q", "--filter", deep_filter)
    store("get", "deep", code=3)  # nothing was stored
    store("get", "p", code=3)


def test_json_number_too_long_is_bad_input(store: Run) -> None:
    line = store.fails(2, "store", "big", "-", "--as", "json", input="1" * 5000)
    assert "PAYLOAD" in line and "--as text" in line
