"""sovseal.sdk."""
