"""The `sovseal` console script run the way a user runs it: a real process, a real model, a real disk.

One full round trip (init, store, recall, fork, rollback, verify, export, key export/import, import into
a fresh home, verify) and the bad-input paths, checking exit codes and that no traceback ever shows.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.cli.support import clean_env


def sovseal_script() -> str:
    found = shutil.which("sovseal") or str(Path(sys.executable).with_name("sovseal"))
    assert Path(found).exists(), "the `sovseal` console script is not installed (pip install -e .)"
    return found


class Shell:
    def __init__(self, home: Path) -> None:
        self.env = clean_env(home)
        self.script = sovseal_script()

    def __call__(self, *args: str, code: int = 0, input: str | None = None, home: Path | None = None) -> subprocess.CompletedProcess[str]:
        env = dict(self.env)
        if home is not None:
            env["SOVSEAL_HOME"] = str(home)
        proc = subprocess.run(
            [self.script, *args], env=env, input=input, capture_output=True, text=True, timeout=120, check=False
        )
        assert "Traceback" not in proc.stderr, proc.stderr
        assert proc.returncode == code, f"sovseal {' '.join(args)}: exit {proc.returncode}\n{proc.stdout}\n{proc.stderr}"
        return proc

    def json(self, *args: str, **kwargs: object) -> object:
        return json.loads(self(*args, "--json", **kwargs).stdout)  # type: ignore[arg-type]


@pytest.fixture
def sh(tmp_path: Path) -> Shell:
    return Shell(tmp_path / "home")


def test_full_round_trip_as_a_user(sh: Shell, tmp_path: Path) -> None:
    assert sh.json("init")["created"] is True
    first = sh.json("store", "user.editor", "The user edits code in neovim with a dark theme.")["snapshot_id"]
    sh("store", "project.deploy", "Deploys go through GitHub Actions, then a manual approval.", "--type", "procedural")

    top = sh.json("recall", "how do deployments get approved?", "-k", "1")
    assert [m["path"] for m in top] == ["project.deploy"]

    assert sh("fork", first, "--name", "experiment").stdout.strip() == "experiment"
    rolled = sh.json("rollback", first[:16])
    assert rolled["head"] == first
    assert "no memory at path 'project.deploy'" in sh("get", "project.deploy", code=3).stderr
    sh("rollback", rolled["previous_head"])  # and forward again: nothing was deleted
    assert sh.json("get", "project.deploy")["type"] == "procedural"
    assert sh("verify").stdout.startswith("ok: 2 records, 2 branches")

    backup = tmp_path / "backup.sovseal"
    sh("export", str(backup))
    key_text = sh("key", "export").stdout
    fresh = tmp_path / "fresh"
    sh("key", "import", input=key_text, home=fresh)
    sh("import", str(backup), home=fresh)
    assert sh.json("verify", home=fresh)["ok"] is True
    assert sh.json("log", "--graph", home=fresh) == sh.json("log", "--graph")
    assert sh.json("get", "project.deploy", home=fresh)["payload"] == top[0]["payload"]


def test_bad_input_prints_one_line_and_a_documented_exit_code(sh: Shell) -> None:
    sh("status", code=3)
    sh("init")
    proc = sh("store", "a.b", '{"unclosed": ', code=2)
    assert proc.stderr.startswith("error: PAYLOAD is not valid JSON") and proc.stderr.count("\n") == 1
    assert sh("rollback", "snap_" + "ab" * 32, code=3).stderr.startswith("error: no snapshot")
    sh("get", "a.b", "--branch", "nope", code=3)
    env_without_fallback = sh.env.pop("SOVSEAL_KEY_FALLBACK")
    try:
        assert "SOVSEAL_KEY_FALLBACK=file" in sh("status", code=4).stderr
    finally:
        sh.env["SOVSEAL_KEY_FALLBACK"] = env_without_fallback


def test_recall_failing_fast_exits_with_its_code_every_time(sh: Shell) -> None:
    """The model loads in a thread while the store opens; a recall that fails before it is loaded
    must still exit with its documented code, not abort in native code as the interpreter exits
    under the loading thread (`terminate called without an active exception`, exit 134)."""
    sh("init")
    sh("store", "a", "some memory")
    for _ in range(4):  # the abort was racy: about one run in two
        assert "no branch named 'ghost'" in sh("recall", "x", "--branch", "ghost", code=3).stderr
        assert "type must be one of" in sh("recall", "x", "--filter", '{"type": "weird"}', code=2).stderr
        assert proc_lines(sh("recall", "x", "--filter", '{"nope": 1}', code=2)) == 1


def test_recall_without_the_model_says_so_once(sh: Shell, tmp_path: Path) -> None:
    """The loading thread's own failure prints no traceback: the recall reports it, on one line."""
    sh("init")
    sh("store", "a", "some memory")
    sh.env["SOVSEAL_MODEL_DIR"] = str(tmp_path / "no-model")
    proc = sh("recall", "x", code=6)
    assert proc_lines(proc) == 1 and "SOVSEAL_MODEL_DIR" in proc.stderr


def proc_lines(proc: subprocess.CompletedProcess[str]) -> int:
    """How many lines the command printed on stderr."""
    return len(proc.stderr.strip().splitlines())


def test_text_that_is_not_utf8_is_named_as_such(sh: Shell) -> None:
    """A real process decodes stdin and argv with surrogateescape: a byte that is not UTF-8 arrives
    as a lone surrogate, which must be reported as input that is not UTF-8 text."""
    sh("init")
    proc = subprocess.run(
        [sh.script, "store", "p", "-"], env=sh.env, input=b"caf\xe9", capture_output=True, timeout=120, check=False
    )
    assert proc.returncode == 2 and proc.stderr.decode().startswith("error: PAYLOAD is not UTF-8 text"), proc.stderr
    assert "not UTF-8 text" in sh("store", "p", "caf\udce9", code=2).stderr  # argv: the same bytes, as an argument
