"""The README's main job, `sovseal demo`, runs end to end offline with the real on-device model."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def test_sovseal_demo_runs_offline(tmp_path: Path) -> None:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "SOVSEAL_HOME": str(tmp_path / "home")}
    result = subprocess.run(
        [sys.executable, "-m", "sovseal", "demo", "--path", str(tmp_path / "demo")],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    out = result.stdout
    assert "reinforced=True" in out
    assert "state and log byte-equal: True; verify ok=True" in out
    recall_lines = out.split("4. recall")[1].split("5.")[0]
    assert "user.editor" in recall_lines.splitlines()[1]  # the editor memory ranks first for the editor question
    journal = (tmp_path / "demo" / "journal.log").read_bytes()
    for secret in (b"neovim", b"golden retriever", b"user.editor", b"Lisbon"):
        assert secret not in journal
