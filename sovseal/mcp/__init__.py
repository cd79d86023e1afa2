"""sovseal.mcp."""
