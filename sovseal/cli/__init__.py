"""The ``sovseal`` command line: a thin shell over the same ``Sovseal`` API the library exposes.

Commands parse arguments and render results; what they do lives in the SDK and in
:mod:`sovseal.sdk` (shared with the MCP server), so there is no logic that exists only here.
Human output is plain lines that never wrap (``rich`` draws only the recall table, ``mind`` and
progress bars), with short snapshot ids; ``--json`` prints machine-readable JSON on stdout instead, ids in
full. Progress bars and notes go to stderr, so stdout stays clean for pipes. Every
:class:`SovsealError` becomes one line on stderr, in CLI words, and a documented exit code
(``EXIT_CODES``), never a traceback.

Start-up is part of the interface: a command that neither recalls nor embeds imports no vector
index, model runtime or server library (tests/cli/test_startup.py), so it starts in a few tenths
of a second; the imports that need them sit inside the functions that use them.

One module per command group (``status``, ``writing``, ``reading``, ``maintenance``, ``backup``,
``keys``, ``consolidation``, ``replication``, ``agents``, ``demo``), over the shared parts: the
group (``app``), its error rendering (``errors``) and Ctrl-C answers (``interrupts``), options and
secrets (``options``), opening a store (``opening``) and output (``output``). Importing this
package registers every command on :func:`main`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from sovseal.sdk.client import EmbedFn

#: The embedder every command opens stores with (None: the built-in model). Tests set it to a
#: fake; commands read it at call time (through sovseal.cli.hooks), so one assignment reaches them all.
EMBEDDER: EmbedFn | None = None


def _embedder() -> EmbedFn | None:
    return EMBEDDER  # this module's global at call time: what a test assigned last


# The command modules register their commands on `main` when imported.
from sovseal.cli import agents, backup, consolidation, demo, hooks, keys, maintenance, reading, replication, status, writing  # noqa: E402, F401

hooks.embedder_source = _embedder
from sovseal.cli.app import main, run  # noqa: E402
from sovseal.cli.errors import exit_code  # noqa: E402
from sovseal.cli.interrupts import EXIT_INTERRUPTED  # noqa: E402
from sovseal.errors import EXIT_CODES  # noqa: E402

__all__ = ["EMBEDDER", "EXIT_CODES", "EXIT_INTERRUPTED", "exit_code", "main", "run"]
