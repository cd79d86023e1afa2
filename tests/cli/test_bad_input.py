"""Input the CLI cannot use: every case is one line `error: ...` on stderr and exit 2, never a traceback."""

from __future__ import annotations

from pathlib import Path

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


def test_usage_errors_are_one_line_naming_the_help_to_read(store: Run, tmp_path: Path) -> None:
    line = store.fails(2, "store", "onlypath")
    assert line == "error: missing argument 'PAYLOAD' (see 'sovseal store --help')"
    line = store.fails(2, "store", "a.b", "x", "--type", "nonsense")
    assert line.startswith("error: invalid value for '--type'") and "'nonsense' is not one of" in line
    assert line.endswith("(see 'sovseal store --help')")
    afile = tmp_path / "afile"
    afile.write_text("hi")
    assert "is a file" in store.fails(2, "status", "--path", str(afile))
    assert store.fails(2, "key", "rotate", "--bogus").endswith("(see 'sovseal key rotate --help')")
    assert store.fails(2, "frobnicate") == "error: no such command 'frobnicate' (see 'sovseal --help')"
    assert store.fails(2, "--bogus") == "error: no such option '--bogus' (see 'sovseal --help')"
    assert "Commands:" in store(code=None).output  # no command at all still shows the help


def test_os_errors_name_the_path_and_what_to_do(run: Run, tmp_path: Path) -> None:
    afile = tmp_path / "afile"
    afile.write_text("hi")
    line = run.fails(6, "init", "--path", str(afile / "sub"))
    assert f"{afile} is a file, not a directory" in line and "pick another" in line and "Errno" not in line
    assert afile.read_text() == "hi"


def test_a_payload_that_is_not_utf8_is_bad_input(store: Run) -> None:
    line = store.fails(2, "store", "p", "-", input=b"caf\xe9")
    assert "PAYLOAD is not UTF-8 text" in line and "surrogate" not in line
    assert "QUERY is not UTF-8 text" in store.fails(2, "recall", "-", input=b"caf\xe9")
    store("get", "p", code=3)
