"""The servers are pip extras: the engine, its adapters and the CLI's other commands never load them,
and a missing extra is one line naming the ``pip install`` to run (README, docs/operations.md).

What it proves: importing ``sovseal``, the SDK, the CLI and every framework adapter leaves uvicorn,
Starlette, the PostgreSQL driver and the MCP SDK unimported; with those blocked from importing (as
if the extra were not installed), ``import sovseal.server`` / ``sovseal.mcp.server`` raise
:class:`MissingExtraError` with that one line, ``sovseal serve`` and ``sovseal mcp`` print it as
one line and exit 6, and ``init``/``status`` still work. Each check runs in a fresh interpreter,
since this one has imported the servers already.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sovseal.errors import MissingExtraError, SovsealError
from sovseal.extras import EXTRAS, install_command

ROOT = Path(__file__).resolve().parents[2]

#: The top-level modules of the two extras (and what the MCP SDK brings with it).
SERVER_MODULES = ("uvicorn", "starlette", "psycopg", "psycopg_binary", "psycopg_pool", "sse_starlette", "mcp")

SERVER_LINE = "the replication server needs the server extra: pip install 'sovseal[server]'"
MCP_LINE = "the MCP server needs the mcp extra: pip install 'sovseal[mcp]'"

#: Prepended to a probe: a finder that makes every module of argv[1] (comma-separated) fail to
#: import, as on an install without the extra.
BLOCKER = """
import importlib.abc, sys
BLOCKED = set(sys.argv.pop(1).split(","))

class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None

sys.meta_path.insert(0, Blocked())
"""


def python(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("SOVSEAL_")}
    environ.update(env or {})
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code), *args],
        cwd=ROOT, env=environ, capture_output=True, text=True, timeout=180, check=False,
    )


def test_the_engine_the_adapters_and_the_cli_import_no_server_module() -> None:
    proc = python(
        """
        import sys
        import sovseal, sovseal.sdk, sovseal.cli, sovseal.integration
        import langchain_sovseal
        import langgraph.checkpoint.sovseal, langgraph.store.sovseal
        import llama_index.vector_stores.sovseal, llama_index.retrievers.sovseal
        import llama_index.embeddings.sovseal, llama_index.storage.chat_store.sovseal
        server = set(sys.argv[1].split(","))
        print(",".join(sorted(m for m in sys.modules if m.split(".")[0] in server)))
        """,
        ",".join(SERVER_MODULES),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "", f"imported without a server in use: {proc.stdout.strip()}"


def test_the_extras_name_the_pyproject_extras() -> None:
    """Each extra the code asks for is declared in pyproject.toml, with the modules the code checks."""
    import tomllib

    declared = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["optional-dependencies"]
    requirements = {extra: " ".join(declared[extra]).lower() for extra in EXTRAS}
    assert "uvicorn" in requirements["server"] and "starlette" in requirements["server"] and "psycopg" in requirements["server"]
    assert "mcp" in requirements["mcp"]
    assert "sovseal[server,mcp]" in declared["test"], "the README's test command must install both servers"
    dependencies = " ".join(tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["dependencies"]).lower()
    for module in ("uvicorn", "starlette", "psycopg", "mcp"):
        assert module not in dependencies, f"{module} is a core dependency again: it belongs to an extra"
    for adapter in sorted((ROOT / "integrations").glob("*/pyproject.toml")):
        needs = tomllib.loads(adapter.read_text(encoding="utf-8"))["project"]["dependencies"]
        assert [d for d in needs if d.startswith("sovseal")] == ["sovseal>=0.1.0"], f"{adapter}: the core without extras"


def test_the_error_is_typed_and_one_line() -> None:
    assert issubclass(MissingExtraError, SovsealError) and issubclass(MissingExtraError, ImportError)
    assert install_command("server") == "pip install 'sovseal[server]'"


@pytest.mark.parametrize(
    ("module", "blocked", "line"),
    [
        ("sovseal.server", "uvicorn", SERVER_LINE),
        ("sovseal.server", "psycopg", SERVER_LINE),
        ("sovseal.mcp.server", "mcp", MCP_LINE),
    ],
)
def test_importing_a_server_without_its_extra_names_the_install(module: str, blocked: str, line: str) -> None:
    proc = python(
        BLOCKER
        + f"""
try:
    import {module}
except Exception as exc:
    print(type(exc).__name__, "|", exc)
else:
    print("imported")
""",
        blocked,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines() == [f"MissingExtraError | {line}"]


CLI = BLOCKER + """
from sovseal.cli import run
sys.argv = ["sovseal", *sys.argv[1:]]
run()
"""


@pytest.mark.parametrize(("command", "line"), [(["serve"], SERVER_LINE), (["serve", "--create-key"], SERVER_LINE), (["mcp"], MCP_LINE)])
def test_the_cli_says_which_extra_to_install(command: list[str], line: str, tmp_path: Path) -> None:
    env = {"SOVSEAL_HOME": str(tmp_path / "home"), "SOVSEAL_KEY_FALLBACK": "file", "HOME": str(tmp_path)}
    proc = python(CLI, ",".join(SERVER_MODULES), *command, env=env)
    assert proc.returncode == 6, (proc.stdout, proc.stderr)
    assert proc.stderr.splitlines() == [f"error: {line}"]
    assert not (tmp_path / ".sovseal-server").exists()


def test_the_other_commands_work_without_the_extras(tmp_path: Path) -> None:
    env = {"SOVSEAL_HOME": str(tmp_path / "home"), "SOVSEAL_KEY_FALLBACK": "file", "HOME": str(tmp_path)}
    blocked = ",".join(SERVER_MODULES)
    for command in (["init"], ["status"], ["log"], ["serve", "--help"], ["mcp", "--help"]):
        proc = python(CLI, blocked, *command, env=env)
        assert proc.returncode == 0, (command, proc.stdout, proc.stderr)
