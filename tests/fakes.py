"""Test doubles that stand in for what is not under test.

``fake_embed`` replaces the ONNX model where a test is about the engine (lineage, storage,
crypto), not embedding quality: it hashes each text to a fixed random vector, so equal texts
get equal vectors and tests run in milliseconds. The real model is exercised by tests/embed
and by the tests that say so.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

FAKE_DIM = 32


def fake_embed(texts: Sequence[str]) -> np.ndarray:
    out = np.empty((len(texts), FAKE_DIM), dtype=np.float32)
    for i, text in enumerate(texts):
        seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
        out[i] = np.random.default_rng(seed).standard_normal(FAKE_DIM)
    return out
