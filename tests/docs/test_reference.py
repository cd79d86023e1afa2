"""The CLI and MCP reference pages describe what the code has: every command, option and environment
variable of ``sovseal`` is in docs/cli.md, and every MCP tool with each of its arguments is in
docs/mcp.md's tool table. The commands and tools are read from the code itself (click's command tree,
the FastMCP server's tool list), so a new option or tool without documentation fails here."""

from __future__ import annotations

import asyncio
import os
import re
from pathlib import Path

import click
import pytest

from sovseal import Sovseal
from sovseal.cli import main
from sovseal.mcp.server import TOOLS, build_server
from tests.fakes import fake_embed

DOCS = Path(__file__).resolve().parents[2] / "docs"


def _commands(group: click.Group, prefix: str = "") -> list[tuple[str, click.Command]]:
    found = []
    for name, command in sorted(group.commands.items()):
        full = f"{prefix} {name}".strip()
        found.append((full, command))
        if isinstance(command, click.Group):
            found += _commands(command, full)
    return found


COMMANDS = _commands(main)


def test_the_command_tree_is_read() -> None:
    names = {name for name, _ in COMMANDS}
    assert {"store", "recall", "serve", "restore", "consolidate rollback", "key import"} <= names


@pytest.mark.parametrize(("name", "command"), COMMANDS, ids=[name for name, _ in COMMANDS])
def test_every_cli_command_option_and_variable_is_documented(name: str, command: click.Command) -> None:
    text = (DOCS / "cli.md").read_text(encoding="utf-8")
    assert re.search(rf"^###.*`{re.escape(name)}\b", text, re.M), f"docs/cli.md has no section for `{name}`"
    for param in command.params:
        if not isinstance(param, click.Option):
            continue
        flag = max(param.opts, key=len)  # the long form
        assert re.search(rf"(?<![\w-]){re.escape(flag)}(?![\w-])", text), f"docs/cli.md does not document {flag} of `sovseal {name}`"
        for variable in [param.envvar] if isinstance(param.envvar, str) else param.envvar or []:
            assert variable in text, f"docs/cli.md does not name {variable} ({flag} of `sovseal {name}`)"


def test_serve_documents_the_role_urls_it_reads() -> None:
    """The least-privilege URLs are read from the environment, not options: the reference says so."""
    from sovseal.server.runner import READER_URL_ENV, WRITER_URL_ENV

    for page in ("cli.md", "operations.md"):
        text = (DOCS / page).read_text(encoding="utf-8")
        assert WRITER_URL_ENV in text and READER_URL_ENV in text, page
    help_text = main.commands["serve"].help or ""
    assert WRITER_URL_ENV in help_text and READER_URL_ENV in help_text


def _tool_rows() -> dict[str, str]:
    text = (DOCS / "mcp.md").read_text(encoding="utf-8")
    return {m.group(1): m.group(0) for m in re.finditer(r"^\| `(\w+)` \|.*$", text, re.M)}


def test_every_mcp_tool_and_argument_is_documented(tmp_path: Path) -> None:
    with Sovseal(tmp_path / "store", key=os.urandom(32), embedder=fake_embed) as mem:
        tools = asyncio.run(build_server(mem).list_tools())
    served = {tool.name: tool for tool in tools}
    assert set(served) == set(TOOLS)
    rows = _tool_rows()
    for name, tool in served.items():
        assert name in rows, f"docs/mcp.md's tool table has no row for {name}"
        for argument in tool.inputSchema.get("properties", {}):
            assert f"`{argument}`" in rows[name], f"docs/mcp.md does not document {argument} of {name}"
    cli_help = main.commands["mcp"].help or ""
    assert all(name in cli_help for name in TOOLS), "sovseal mcp --help does not list every tool"


def test_every_environment_variable_the_code_reads_is_documented() -> None:
    """Each ``SOVSEAL_*`` name in the package's source (and the framework packages') is on a docs page."""
    root = DOCS.parent
    sources = [*(root / "sovseal").rglob("*.py"), *(root / "integrations").rglob("*.py")]
    names = set()
    for source in sources:
        names |= set(re.findall(r"\bSOVSEAL_[A-Z][A-Z_]*[A-Z]\b", source.read_text(encoding="utf-8")))
    assert {"SOVSEAL_HOME", "SOVSEAL_SERVER_WRITER_URL"} <= names
    docs = "\n".join(page.read_text(encoding="utf-8") for page in DOCS.rglob("*.md"))
    missing = sorted(n for n in names if n not in docs)
    assert not missing, f"read by the code but documented nowhere: {missing}"
