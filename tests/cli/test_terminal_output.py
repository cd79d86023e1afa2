"""Stored text never drives the terminal: in human output, control characters in paths, payloads,
metadata and branch names are shown as visible escapes (``\\x1b``), the same on a terminal and in a
pipe, so a memory cannot set the window title, clear the screen, hide text or split a `log` line.
``--json`` stays exact JSON."""

from __future__ import annotations

import re

from tests.cli.conftest import Run

PAYLOAD = "hello\x1b]0;TITLE-SET-BY-MEMORY\x07\x1b[2J\x1b[31mred\x7f\x9b\nsecond line\tand a tab"
HIDDEN_PATH = "user.\x1b[8mhidden\x1b[0m"
SPLIT_PATH = "two\nlines"
SHOWN_PAYLOAD = "hello\\x1b]0;TITLE-SET-BY-MEMORY\\x07\\x1b[2J\\x1b[31mred\\x7f\\x9b"
STYLE = re.compile(r"\x1b\[[0-9;]*m")  # the CLI's own styling (bold, dim, colours), on a terminal only
CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def _seeded(store: Run) -> Run:
    for _ in range(2):  # reinforced: `mind` lists it
        store("store", "note", "-", "--as", "text", "-m", '{"by": "\\u009b2J\\u007f"}', input=PAYLOAD)
    store("store", HIDDEN_PATH, "x")
    store("store", SPLIT_PATH, "y")
    store("fork", "--name", "exp\x1b[2J")
    return store


def _on_a_terminal(store: Run, *args: str, **env: str) -> str:
    """What reaches a terminal, with the CLI's own styling removed: only stored text remains."""
    text = store(*args, color=True, FORCE_COLOR="1", **env).stdout
    return STYLE.sub("", text)


def test_control_characters_are_shown_escaped_on_a_terminal_and_in_a_pipe(store: Run) -> None:
    _seeded(store)
    for args in (("get", "note"), ("log",), ("log", "--graph"), ("mind", "--all"), ("branches",), ("status",)):
        piped = store(*args).stdout
        assert not CONTROL.search(piped), (args, piped)
        shown = _on_a_terminal(store, *args)
        assert not CONTROL.search(shown), (args, shown)
        assert shown.split() == piped.split(), args  # the same text either way (a terminal only adds style and padding)
    got = store("get", "note").stdout
    assert got.startswith(SHOWN_PAYLOAD + "\nsecond line\tand a tab\n")  # multi-line text keeps its lines and tabs
    assert '"by": "\\x9b2J\\x7f"' in got  # JSON escapes C0 in metadata itself, but not C1 or DEL
    log = store("log").stdout
    assert "two\\nlines" in log and "user.\\x1b[8mhidden\\x1b[0m" in log and len(log.splitlines()) == 3
    assert "exp\\x1b[2J" in store("branches").stdout
    assert "hello\\x1b]0;TITLE" in store("mind").stdout


def test_recall_table_shows_control_characters_escaped(store: Run, real_model: None) -> None:
    _seeded(store)
    wide = {"COLUMNS": "300"}  # no cell folds
    for shown in (store("recall", "hello", "-k", "4", **wide).stdout, _on_a_terminal(store, "recall", "hello", "-k", "4", **wide)):
        assert not CONTROL.search(shown), shown
        assert "TITLE-SET-BY-MEMORY\\x07" in shown and "user.\\x1b[8mhidden\\x1b[0m" in shown and "two\\nlines" in shown


def test_json_output_stays_exact(store: Run) -> None:
    _seeded(store)
    assert store.json("get", "note")["payload"] == PAYLOAD
    assert {e["path"] for e in store.json("log")} == {"note", HIDDEN_PATH, SPLIT_PATH}
