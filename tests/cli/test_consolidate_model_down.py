"""`sovseal consolidate --model` whose model raises (its server is down): one line, exit 6, the
batches finished before the failure kept and the run resumable. (--json keeps progress off stderr.)

The chat models here are fakes: ``RuleChatModel`` (a real LangChain ``BaseChatModel`` answering by
fixed rules, from tests/consolidate/models.py) made to raise what langchain_ollama / langchain_openai
raise when the server is unreachable (``httpx.ConnectError``), and a plain callable raising
``ConnectionRefusedError``. No LLM runs; the store, the CLI and the consolidation passes are real.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from tests.cli.conftest import Run
from tests.consolidate.models import RuleChatModel

_HERE = "tests.cli.test_consolidate_model_down"


class _DownAfterFirst(RuleChatModel):
    """Answers the first call, then its server goes away: httpx.ConnectError from every later call."""

    def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
        if self.calls >= 1:
            raise httpx.ConnectError("[Errno 111] Connection refused")
        return super()._generate(messages, stop, run_manager, **kwargs)


def down_after_first() -> RuleChatModel:
    return _DownAfterFirst()


def refused() -> Any:
    def call(prompt: str) -> str:
        raise ConnectionRefusedError(111, "Connection refused")

    return call


@pytest.fixture
def episodes(store: Run) -> Run:
    store("store", "chat.1", "Setup day. fact:user.editor=The user edits code in neovim;", "--type", "episodic")
    store("store", "chat.2", "Shell talk. fact:user.shell=The user runs zsh;", "--type", "episodic")
    return store


def test_a_model_that_cannot_be_reached_is_one_line_exit_6_and_writes_nothing(episodes: Run) -> None:
    before = episodes.json("status")["head"]
    line = episodes.fails(6, "consolidate", "--json", "--model", f"{_HERE}:refused", SOVSEAL_CONSOLIDATE_MODEL=None)
    assert line.startswith("error: the model failed: ConnectionRefusedError: [Errno 111] Connection refused; ")
    assert "server is reachable" in line and "check the paths" not in line
    # It failed on the first batch: no step, no run record, not one write.
    assert episodes.json("status")["head"] == before
    assert episodes("consolidate", "runs").stdout.strip() == "no consolidation runs yet"


def test_a_model_that_goes_down_mid_run_keeps_the_finished_batches_and_the_run_resumes(episodes: Run) -> None:
    line = episodes.fails(
        6, "consolidate", "--json", "--model", f"{_HERE}:down_after_first", "--batch-size", "1", "--passes", "promotion",
        SOVSEAL_CONSOLIDATE_MODEL=None,
    )
    assert line.startswith("error: the model failed: httpx.ConnectError: [Errno 111] Connection refused; ")
    assert "Traceback" not in line
    # The first batch's step finished and is kept; nothing of the second batch was written.
    assert episodes.json("get", "user.editor")["payload"] == "The user edits code in neovim"
    episodes.fails(3, "get", "user.shell")
    assert [r["status"] for r in episodes.json("consolidate", "runs")] == ["running"]
    # With the server back, the next run resumes that run and finishes it.
    report = episodes.json(
        "consolidate", "--model", "tests.consolidate.models:rule_model", "--batch-size", "1", "--passes", "promotion",
        SOVSEAL_CONSOLIDATE_MODEL=None,
    )
    assert report["resumed"] is True
    assert episodes.json("get", "user.shell")["payload"] == "The user runs zsh"
    assert [r["status"] for r in episodes.json("consolidate", "runs")] == ["done"]
    assert episodes.json("verify")["ok"] is True
