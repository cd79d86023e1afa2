"""Fixtures for the CLI tests: an in-process runner over a temporary store, with the fast fake embedder."""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

import sovseal.cli as cli
from tests.cli.support import real_embedder, set_model_base
from tests.fakes import fake_embed


@dataclass
class Run:
    """Runs ``sovseal ARGS`` in-process against one temporary store (``SOVSEAL_HOME``)."""

    home: Path
    env: dict[str, str | None]

    def __call__(
        self, *args: str, input: str | bytes | None = None, code: int | None = 0, color: bool = False, **env: str | None
    ) -> Result:
        """``color``: output as on a terminal (click keeps styles; set FORCE_COLOR=1 for rich's too)."""
        kwargs: dict[str, Any] = {}
        if "mix_stderr" in inspect.signature(CliRunner).parameters:  # click < 8.2
            kwargs["mix_stderr"] = False
        runner = CliRunner(**kwargs)
        result = runner.invoke(cli.main, list(args), input=input, env={**self.env, **env}, catch_exceptions=True, color=color)
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            raise result.exception  # a traceback is a bug: every error must be one line and an exit code
        if code is not None:
            assert result.exit_code == code, f"exit {result.exit_code}, wanted {code}\nstdout: {result.stdout}\nstderr: {result.stderr}"
        return result

    def json(self, *args: str, **kwargs: Any) -> Any:
        return json.loads(self(*args, "--json", **kwargs).stdout)

    def fails(self, code: int, *args: str, **kwargs: Any) -> str:
        """Run a command that must fail with ``code`` and one line on stderr; return that line."""
        result = self(*args, code=code, **kwargs)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
        assert "Traceback" not in result.stderr
        return lines[0]


@pytest.fixture(scope="session", autouse=True)
def _model_base(tmp_path_factory: pytest.TempPathFactory) -> None:
    set_model_base(tmp_path_factory.getbasetemp())


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Run:
    monkeypatch.setattr(cli, "EMBEDDER", fake_embed)
    env: dict[str, str | None] = {
        "SOVSEAL_HOME": str(tmp_path / "home"),
        "SOVSEAL_KEY_FALLBACK": "file",
        "SOVSEAL_KEY": None,
        "SOVSEAL_KEY_FILE": None,
        "SOVSEAL_BRANCH": None,
        "LANCEDB_LOG": "error",
    }
    return Run(tmp_path / "home", env)


@pytest.fixture
def real_model(monkeypatch: pytest.MonkeyPatch) -> None:
    """Use the real on-device model (loaded once per test process) instead of the fake embedder."""
    monkeypatch.setattr(cli, "EMBEDDER", real_embedder())


@pytest.fixture
def store(run: Run) -> Run:
    """An initialised store."""
    run("init")
    return run


