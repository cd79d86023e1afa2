"""On-device text embeddings: all-MiniLM-L6-v2 on onnxruntime, offline by default.

``Embedder`` is what the engine calls to turn memories and queries into 384-d unit vectors; any
callable ``embed(texts) -> (n, d) array`` can stand in for it. See docs/embedder.md for where the
model comes from and why.
"""

from sovseal.embed.embedder import DIM, Embedder

__all__ = ["DIM", "Embedder"]
