"""The MCP server (``sovseal mcp``): the store's tools for agents, over stdio.

It ships as the ``mcp`` extra (``pip install 'sovseal[mcp]'``): without it, importing this package
raises :class:`~sovseal.errors.MissingExtraError` naming that command.
"""

from sovseal.extras import require

require("mcp")
