"""sovseal.storage."""
