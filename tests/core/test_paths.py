"""One path rule for every entry point: ``~`` and ``$VARS`` expanded, the directory resolved once,
and every file of a store (journal, key, locks, vector index) under that one directory.

Before, ``Sovseal("~/.sovseal")`` put the journal and key in a literal ``./~`` folder while LanceDB
expanded ``~`` itself and put the index under the real home: one store split in two.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.paths import default_home, resolve_path, store_dir, store_exists
from tests.fakes import fake_embed


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A fresh HOME, and a working directory elsewhere, so a literal ``./~`` would show."""
    home = tmp_path / "home"
    home.mkdir()
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SOVSEAL_HOME", raising=False)
    monkeypatch.chdir(cwd)
    return home


def test_tilde_puts_every_file_of_the_store_under_the_real_home(home: Path, key: bytes) -> None:
    with Sovseal("~/.mem", key=key, embedder=fake_embed) as mem:
        mem.store("user.editor", "neovim")
        assert [m.path for m in mem.recall("editor", k=1)] == ["user.editor"]  # the index is opened and written
        assert mem.path == home / ".mem"
    assert {"journal.log", "store.json", "LOCK", "index"} <= {p.name for p in (home / ".mem").iterdir()}
    assert list(Path.cwd().iterdir()) == []  # no ./~ folder
    with Sovseal(home / ".mem", key=key, embedder=fake_embed) as again:  # the same store, by its absolute path
        assert again.get("user.editor").payload == "neovim"


def test_environment_variables_and_relative_paths_resolve_once(home: Path, key: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMDIR", str(home / "by-var"))
    with Sovseal("$MEMDIR/store", key=key, embedder=fake_embed) as mem:
        mem.store("a", "x")
    assert store_exists(home / "by-var" / "store") and store_exists("$MEMDIR/store")
    with Sovseal("rel", key=key, embedder=fake_embed) as mem:
        assert mem.path == Path.cwd() / "rel" and mem.path.is_absolute()


def test_default_home_follows_sovseal_home_with_tilde(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert default_home() == home / ".sovseal"
    monkeypatch.setenv("SOVSEAL_HOME", "~/elsewhere")
    assert default_home() == home / "elsewhere" == store_dir(None)
    assert resolve_path("~/x/../y") == home / "y"


def test_the_cli_and_the_sdk_open_the_same_store_through_tilde(home: Path, key: bytes) -> None:
    """A store made from Python at ``~/.mem`` is the one ``sovseal --path ~/.mem`` reads (the shell
    would expand an unquoted ``~``; a quoted one, or one in SOVSEAL_HOME, reaches sovseal as is)."""
    with Sovseal("~/.mem", key=key, embedder=fake_embed) as mem:
        mem.store("user.editor", "neovim")
    from sovseal.crypto.keychain import export_key

    env = {**os.environ, "SOVSEAL_KEY": export_key(key), "SOVSEAL_HOME": "~/.mem"}
    done = subprocess.run(
        [sys.executable, "-m", "sovseal", "get", "user.editor"], env=env, capture_output=True, text=True, check=False, cwd=Path.cwd()
    )
    assert done.returncode == 0, done.stderr
    assert "neovim" in done.stdout


def test_a_new_store_prints_nothing_and_respects_a_users_log_level(tmp_path: Path) -> None:
    """No Rust ``WARN`` line from LanceDB when a script creates a store; a level the user set still applies."""
    script = textwrap.dedent(
        f"""
        import os
        from sovseal import Sovseal
        from tests.fakes import fake_embed
        with Sovseal({str(tmp_path / "s")!r}, key=os.urandom(32), embedder=fake_embed) as mem:
            mem.store("a", "hello")
            assert mem.recall("hello", k=1)[0].path == "a"
        assert "LANCEDB_LOG" not in os.environ  # not left set for child processes
        """
    )
    root = Path(__file__).resolve().parents[2]
    env = {k: v for k, v in os.environ.items() if k not in ("LANCEDB_LOG", "RUST_LOG")}
    quiet = subprocess.run([sys.executable, "-c", script], env=env, cwd=root, capture_output=True, text=True, check=False)
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == "" and quiet.stdout == ""
    script = script.replace('"s"', '"t"').replace('assert "LANCEDB_LOG" not in os.environ', "pass")
    script = script.replace(repr(str(tmp_path / "s")), repr(str(tmp_path / "t")))
    loud = subprocess.run(
        [sys.executable, "-c", script], env={**env, "LANCEDB_LOG": "warn"}, cwd=root, capture_output=True, text=True, check=False
    )
    assert loud.returncode == 0, loud.stderr
    assert "WARN" in loud.stderr
