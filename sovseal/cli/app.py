"""The ``sovseal`` group: its help, the order of its commands, and the one place errors and
interrupts become a line on stderr and an exit code.
"""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from sovseal.cli.errors import _ORIGIN, _advice, _cli_message, _one_line, _os_error_message, _usage_failure, exit_code
from sovseal.cli.interrupts import _by_interrupt, _interrupt_exit
from sovseal.errors import (
    EXIT_ERROR,
    SovsealError,
)


class SovsealGroup(click.Group):
    """A click group that turns sovseal and OS errors into one line and an exit code."""

    ORDER = (
        "init", "status", "store", "recall", "get", "delete", "purge", "log", "branches", "fork", "rollback",
        "verify", "compact", "mind", "export", "import", "key", "rebuild-index", "consolidate", "serve", "restore", "mcp", "demo",
    )

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = super().list_commands(ctx)
        rank = {name: i for i, name in enumerate(self.ORDER)}
        return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))

    def make_context(self, info_name: str | None, args: list[str], parent: click.Context | None = None, **extra: Any) -> click.Context:
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:  # the group's own options: `sovseal --bogus`
            _usage_failure(exc)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except click.UsageError as exc:  # a command's arguments and options, or an unknown command
            _usage_failure(exc)
        except (KeyboardInterrupt, click.exceptions.Abort):  # Ctrl-C; click turns it into Abort in a prompt
            _interrupt_exit(ctx)
        except Exception as exc:
            if _by_interrupt(exc):  # e.g. a native module whose import Ctrl-C cut short: ImportError
                _interrupt_exit(ctx)
            if isinstance(exc, SovsealError):
                message = _cli_message(exc, _advice(exc, ctx.meta.get(_ORIGIN)))
                click.echo(f"error: {message}", err=True)
                sys.exit(exit_code(exc))
            if isinstance(exc, OSError):
                click.echo(f"error: {_os_error_message(exc)}", err=True)
                sys.exit(EXIT_ERROR)
            raise


@click.group(cls=SovsealGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(package_name="sovseal")
def main() -> None:
    """sovseal: local-first, encrypted, lineage-tracked memory for LLM agents.

    Every memory is canonicalized, embedded on this device, sealed with AES-256-GCM and appended
    to a tamper-evident lineage of snapshots. Branches, fork and rollback work like git; nothing
    is rewritten except by `sovseal purge`, which erases a path for good, and reads never touch
    the network.

    \b
    Quick start:
      sovseal init                                   create ~/.sovseal and its key
      sovseal store user.editor "The user edits code in neovim"
      sovseal store user.prefs '{"theme": "dark"}' --type procedural
      sovseal recall "which editor does the user use?"
      sovseal log --graph                            the snapshot DAG with its branches
      sovseal verify                                 decrypt everything, re-derive every id

    \b
    Where:    --path DIR or SOVSEAL_HOME (default ~/.sovseal)
    Branch:   --branch NAME or SOVSEAL_BRANCH (default main); nothing else is remembered between runs
    Key:      the OS keychain; headless: SOVSEAL_KEY_FALLBACK=file (a 0600 key file in the store),
              or --key-file FILE / SOVSEAL_KEY with a key from `sovseal key export`
    Scripts:  --json on every command that prints results
    Secrets:  every argument shows in the process list; `-` reads PAYLOAD, QUERY, PATH or
              --key-file from stdin instead, and API keys belong in SOVSEAL_API_KEY

    \b
    Exit codes: 0 ok, 1 integrity failure, 2 bad input, 3 not found (store, path, snapshot,
                branch), 4 key unavailable, 5 store busy, 6 other error
    """
    os.environ.setdefault("LANCEDB_LOG", "error")  # LanceDB's Rust warnings would clutter the output


def run() -> None:
    """The console-script entry point."""
    try:
        main(standalone_mode=True)
    except SovsealError as exc:  # raised outside a command (the group handles those inside one)
        click.echo(f"error: {_one_line(str(exc))}", err=True)
        sys.exit(exit_code(exc))
