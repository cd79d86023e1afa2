"""sovseal.crypto."""
