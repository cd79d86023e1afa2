"""The optional parts of sovseal and the pip extra that installs each.

``pip install sovseal`` (and every framework adapter) gets the engine, the SDK and the command
line; the replication server and the MCP server bring a web stack, a PostgreSQL driver and the MCP
SDK that an application embedding the engine never loads, so they are extras. The packages that
carry those parts call :func:`require` before their first third-party import, so a missing extra
is one :class:`~sovseal.errors.MissingExtraError` naming the ``pip install`` to run, never a bare
``ModuleNotFoundError`` from somewhere inside.
"""

from __future__ import annotations

import importlib.util
import sys

from .errors import MissingExtraError

#: extra name -> (what it runs, the top-level modules it installs), as pyproject.toml declares them.
EXTRAS: dict[str, tuple[str, tuple[str, ...]]] = {
    "server": ("the replication server", ("uvicorn", "starlette", "psycopg")),
    "mcp": ("the MCP server", ("mcp",)),
}


def install_command(extra: str) -> str:
    """The command that installs ``extra``, quoted so a shell does not read the brackets."""
    return f"pip install 'sovseal[{extra}]'"


def _present(module: str) -> bool:
    """Whether ``module`` can be imported, found without importing it (the PostgreSQL driver is
    loaded only when a ``postgresql://`` URL is used, and stays so)."""
    if module in sys.modules:
        return sys.modules[module] is not None  # None: importing it is blocked
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


def require(extra: str) -> None:
    """Raise :class:`MissingExtraError` unless every module of ``extra`` is installed."""
    what, modules = EXTRAS[extra]
    if not all(_present(module) for module in modules):
        raise MissingExtraError(f"{what} needs the {extra} extra: {install_command(extra)}")
