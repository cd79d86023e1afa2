"""The README's main job, `sovseal demo`, runs end to end offline with the real on-device model,
and leaves nothing behind on the machine unless the user asked for the store with --path."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One SOVSEAL_HOME for the module, so the model cache is built once for all the demos."""
    return tmp_path_factory.mktemp("home")


def demo(home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Run `sovseal demo ARGS` as a user would, offline, with the store's home at ``home``."""
    return subprocess.run(
        [sys.executable, "-m", "sovseal", "demo", *args],
        capture_output=True,
        text=True,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "SOVSEAL_HOME": str(home), **env},
        timeout=300,
        check=False,
    )


def test_sovseal_demo_runs_offline(home: Path, tmp_path: Path) -> None:
    result = demo(home, "--path", str(tmp_path / "demo"))
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "reinforced=True" in out
    assert "state and log byte-equal: True; verify ok=True" in out
    recall_lines = out.split("4. recall")[1].split("5.")[0]
    assert "user.editor" in recall_lines.splitlines()[1]  # the editor memory ranks first for the editor question
    journal = (tmp_path / "demo" / "journal.log").read_bytes()  # --path: the user's store stays
    for secret in (b"neovim", b"golden retriever", b"user.editor", b"Lisbon"):
        assert secret not in journal


def test_sovseal_demo_leaves_nothing_in_the_temp_directory(home: Path, tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    result = demo(home, TMPDIR=str(tmp))
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"store at {tmp}" in result.stdout  # the store really was made under TMPDIR ...
    assert "Removed the temporary store." in result.stdout
    assert sorted(p.name for p in tmp.iterdir()) == []  # ... and nothing is left there (no .ses file either)


def test_sovseal_demo_that_fails_halfway_still_removes_its_store(home: Path, tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    result = demo(home, TMPDIR=str(tmp), SOVSEAL_MODEL_DIR=str(tmp_path / "no-model"))  # fails after the store exists
    assert result.returncode == 6, result.stdout + result.stderr
    assert f"store at {tmp}" in result.stdout and result.stderr.startswith("error: ")
    assert sorted(p.name for p in tmp.iterdir()) == []
