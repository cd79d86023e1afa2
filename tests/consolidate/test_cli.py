"""`sovseal consolidate` end to end through the CLI (in-process, fake embedder, a test chat model by import path)."""

from __future__ import annotations

from pathlib import Path

import pytest

import sovseal.cli as cli
from tests.cli.conftest import Run
from tests.fakes import fake_embed

MODEL = "tests.consolidate.models:rule_model"


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    monkeypatch.setattr(cli, "EMBEDDER", fake_embed)
    env: dict[str, str | None] = {
        "SOVSEAL_HOME": str(tmp_path / "home"),
        "SOVSEAL_KEY_FALLBACK": "file",
        "SOVSEAL_KEY": None,
        "SOVSEAL_KEY_FILE": None,
        "SOVSEAL_BRANCH": None,
        "SOVSEAL_CONSOLIDATE_MODEL": None,
        "LANCEDB_LOG": "error",
    }
    runner = Run(tmp_path / "home", env)
    runner("init")
    runner("store", "user.pet", "The user has a dog named Biscuit")
    runner("store", "chat.1", "Setup day. fact:user.editor=The user edits code in neovim;", "--type", "episodic")
    runner(
        "store", "chat.2", "Pets. fact:user.pet=The user has a dog named Biscuit; fact:user.shell=The user runs zsh;", "--type", "episodic"
    )
    return runner


def test_help_says_what_runs_without_a_model(run: Run) -> None:
    text = run("consolidate", "--help").stdout
    assert "Without --model only decay runs" in text and "--model MODULE:FACTORY" in text
    assert "rollback" in text and "runs" in text
    assert "sovseal consolidate --model" in text


def test_consolidate_runs_rollback_end_to_end(run: Run) -> None:
    decay_only = run("consolidate")
    assert decay_only.stdout.startswith("finished run-") and "decay" in decay_only.stdout
    assert "skipped promotion: needs a chat model" in decay_only.stderr

    report = run.json("consolidate", "--model", MODEL, "--batch-size", "1")
    assert report["resumed"] is False and report["counts"]["promotion"] == {"steps": 2, "episodes": 2, "new": 2, "reinforced": 1}
    assert run.json("get", "user.editor")["payload"] == "The user edits code in neovim"
    assert "digest." in run("log").stdout

    assert run("consolidate", "--model", MODEL).stdout.startswith("nothing to do")
    listed = run.json("consolidate", "runs")
    assert [r["status"] for r in listed] == ["done", "done"] and listed[1]["run"] == report["run"]
    assert listed[1]["head_before"] == report["head_before"] and listed[1]["head_after"] == report["head_after"]

    undone = run("consolidate", "rollback", report["run"])
    assert undone.stdout.startswith(f"rolled back {report['run']}: ")
    run.fails(3, "get", "user.editor")
    assert run.json("consolidate", "runs")[1]["status"] == "rolled_back"
    assert "already rolled back" in run("consolidate", "rollback", report["run"]).stdout
    assert run.json("verify")["ok"] is True


def test_consolidate_errors_are_one_line_with_an_exit_code(run: Run) -> None:
    assert "package.module:factory" in run.fails(2, "consolidate", "--model", "no_colon_here")
    assert "cannot import" in run.fails(2, "consolidate", "--model", "tests.consolidate.models:no_such_factory")
    assert "not the JSON asked for" in run.fails(6, "consolidate", "--json", "--model", "tests.consolidate.models:prose_model")
    assert "need a chat model" in run.fails(6, "consolidate", "--passes", "promotion")
    assert "no consolidation run" in run.fails(2, "consolidate", "rollback", "run-nope")
    assert run.json("consolidate", "runs") == []  # the failed run wrote nothing, not even its audit record
