"""``sovseal mcp``: the MCP server on stdio for agents."""

from __future__ import annotations

from sovseal.cli import hooks
from sovseal.cli.app import main
from sovseal.cli.options import STDIN, _key_text, store_options
from sovseal.errors import InvalidInputError


@main.command(short_help="Run the MCP server on stdio for agents.")
@store_options
def mcp(path: str | None, branch: str, key_file: str | None) -> None:
    """Run the MCP server on stdio, for agents (Claude Desktop, Claude Code, Cursor, ...).

    It creates the store (and key) on first start, warms the embedding model, then serves the
    tools store_memory, recall_memory, get_memory, delete_memory, purge, snapshot, fork, rollback,
    list_branches, switch_branch, memory_log, verify, and message_anonymize and
    message_deanonymize (with the anonymize extra). See docs/mcp.md for client configs.

    \b
      {"mcpServers": {"sovseal": {"command": "sovseal", "args": ["mcp"]}}}
    """
    from sovseal.mcp.server import serve_stdio

    if key_file == STDIN:
        raise InvalidInputError("mcp speaks to its client on stdin, so --key-file cannot be `-`: pass a file, or SOVSEAL_KEY")
    serve_stdio(path, branch=branch, key_text=_key_text(key_file), embedder=hooks.embedder())
