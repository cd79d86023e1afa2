"""Every notebook in cookbooks/ runs top to bottom in a fresh ``python3`` kernel, so a broken cookbook
fails the suite. The glob picks up new notebooks without a change here.

Each runs with its own working directory (cookbooks/, so relative paths work as they do for a reader)
and an environment a reader's shell would have, minus their store and keychain: ``SOVSEAL_HOME``
points at a temporary directory that must stay empty (each notebook keeps to its own), the keychain
backend is keyring's failing one, and ``SOVSEAL_MODEL_DIR`` points at the model built once for the
session, so it is not rebuilt per notebook. Every Python process of a notebook (the kernel and what it
starts) loads ``offline/sitecustomize.py``, which refuses and logs any connection or lookup beyond
loopback: a notebook that needs the network fails.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest
from nbclient import NotebookClient

from tests.cli.support import clean_env

COOKBOOKS = Path(__file__).resolve().parents[2] / "cookbooks"
#: Holds the sitecustomize that keeps every process of a notebook off the network.
OFFLINE = Path(__file__).resolve().parent / "offline"
NOTEBOOKS = sorted(COOKBOOKS.glob("*.ipynb"))
#: Seconds any one cell may take on a loaded 2-core machine (a whole notebook takes far less).
CELL_TIMEOUT = 120


def test_there_are_cookbooks() -> None:
    assert len(NOTEBOOKS) >= 7, NOTEBOOKS


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_committed_without_outputs(notebook: Path) -> None:
    nb = nbformat.read(notebook, as_version=4)
    nbformat.validate(nb)
    for cell in nb.cells:
        if cell.cell_type == "code":
            assert cell.outputs == [] and cell.execution_count is None, f"{notebook.name}: clear the outputs before committing"
    assert nb.metadata["kernelspec"]["name"] == "python3"


#: LangChain's and LlamaIndex's fake chat models: where a cookbook's LLM would answer, one of these does.
FAKE_MODELS = re.compile(r"\b(GenericFakeChatModel|FakeListChatModel|MockLLM)\(")
#: A real model built on a commented line: `# model = ChatOpenAI(...)`, `# Settings.llm = OpenAI(...)`.
REAL_MODEL_LINE = re.compile(r"^#\s*.*\b(Chat[A-Z]\w*|OpenAI)\(model=", re.M)


def _commented_cells(nb: nbformat.NotebookNode) -> list[str]:
    """Code cells made only of comments: what a reader uncomments, never run by the test."""
    return [
        cell.source
        for cell in nb.cells
        if cell.cell_type == "code" and cell.source.strip() and all(
            line.lstrip().startswith("#") for line in cell.source.splitlines() if line.strip()
        )
    ]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_a_fake_model_answers_and_a_commented_cell_shows_the_real_one(notebook: Path) -> None:
    """Issue 10: a fake chat model where an LLM would answer, and one commented cell with the
    real-model line. A notebook in which no LLM answers says so in its introduction."""
    nb = nbformat.read(notebook, as_version=4)
    code = "\n".join(cell.source for cell in nb.cells if cell.cell_type == "code")
    real = [cell for cell in _commented_cells(nb) if REAL_MODEL_LINE.search(cell)]
    if FAKE_MODELS.search(code):
        assert real, f"{notebook.name}: a fake chat model answers, but no commented cell shows the real-model line"
    else:
        assert "No chat model is involved" in nb.cells[0].source, (
            f"{notebook.name}: no fake chat model; say in the introduction that no LLM answers here"
        )


def test_the_offline_guard_refuses_the_network_and_allows_loopback(tmp_path: Path) -> None:
    """The control for the guard the notebooks run under: a lookup and a connection off the machine
    are refused and logged (no packet leaves: the refusal comes before the syscall); loopback works."""
    log = tmp_path / "net.log"
    script = (
        "import socket\n"
        "server = socket.create_server(('127.0.0.1', 0))\n"
        "socket.create_connection(server.getsockname(), timeout=5).close()\n"
        "for call in (lambda: socket.getaddrinfo('pypi.org', 443), lambda: socket.create_connection(('192.0.2.1', 443), timeout=1)):\n"
        "    try:\n"
        "        call()\n"
        "    except OSError as exc:\n"
        "        assert 'cookbooks run offline' in str(exc), exc\n"
        "    else:\n"
        "        raise SystemExit('not refused')\n"
    )
    env = {**os.environ, "COOKBOOK_NET_LOG": str(log), "PYTHONPATH": str(OFFLINE)}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=60, check=False)
    assert proc.returncode == 0, proc.stderr
    attempts = log.read_text().splitlines()
    assert len(attempts) == 2 and "pypi.org" in attempts[0] and "192.0.2.1" in attempts[1]


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.stem)
def test_runs_top_to_bottom(notebook: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nb = nbformat.read(notebook, as_version=4)
    # The kernel inherits this process's environment: the reader's, with sovseal pointed away from their home.
    for name, value in clean_env(tmp_path / "home").items():
        monkeypatch.setenv(name, value)
    # The notebooks pass their keys explicitly: with no keychain and no key-file fallback, one that
    # reached for a stored key would fail closed instead of using (or creating) the reader's.
    monkeypatch.delenv("SOVSEAL_KEY_FALLBACK")
    monkeypatch.setenv("PYTHON_KEYRING_BACKEND", "keyring.backends.fail.Keyring")
    for name in ("SOVSEAL_ENDPOINT", "SOVSEAL_API_KEY", "SOVSEAL_PROJECT"):
        monkeypatch.delenv(name, raising=False)
    # Offline: every Python process the notebook starts refuses (and logs) a connection off this machine.
    net_log = tmp_path / "network-attempts.log"
    monkeypatch.setenv("COOKBOOK_NET_LOG", str(net_log))
    # Its own temporary directory: whatever the notebook leaves there is what it would leave in the reader's.
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setenv("TMPDIR", str(scratch))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(OFFLINE), os.environ.get("PYTHONPATH")])))
    client = NotebookClient(
        nb,
        kernel_name="python3",
        timeout=CELL_TIMEOUT,
        resources={"metadata": {"path": str(COOKBOOKS)}},
    )
    client.execute()  # raises CellExecutionError, with the failing cell and its traceback
    assert not net_log.exists(), f"the notebook reached for the network:\n{net_log.read_text()}"
    home = tmp_path / "home"
    assert not home.exists() or not any(home.iterdir()), "the notebook wrote to SOVSEAL_HOME; keep to its temporary directory"
    assert sorted(p.name for p in scratch.iterdir()) == [], "the notebook left files in the temporary directory; clean up at its end"
