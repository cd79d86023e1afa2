"""Bad input gets a clear typed error, and nothing already stored changes."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.errors import (
    CanonicalizationError,
    InvalidInputError,
    PayloadTooLargeError,
    StoreClosedError,
)
from tests.fakes import fake_embed

BAD_PAYLOADS = [
    (math.nan, CanonicalizationError, "NaN"),
    (math.inf, CanonicalizationError, "nfinit"),
    ({"a": [1, -math.inf]}, CanonicalizationError, "nfinit"),
    ({1: "non-string key"}, CanonicalizationError, "key"),
    (b"bytes", CanonicalizationError, "bytes"),
    ({"s": {1, 2}}, CanonicalizationError, "set"),
    (object(), CanonicalizationError, "object"),
    ("x" * 300_000, PayloadTooLargeError, "not blobs"),
]


@pytest.fixture
def seeded(mem: Sovseal) -> tuple[Sovseal, bytes, dict[str, object]]:
    mem.store("kept.one", {"v": 1})
    mem.store("kept.two", "two")
    return mem, (mem.path / "journal.log").read_bytes(), mem.state()


def assert_intact(seeded: tuple[Sovseal, bytes, dict[str, object]]) -> None:
    mem, journal, state = seeded
    assert (mem.path / "journal.log").read_bytes() == journal
    assert mem.state() == state
    assert mem.verify().ok


@pytest.mark.parametrize(("payload", "error", "message"), BAD_PAYLOADS)
def test_bad_payloads(seeded: tuple[Sovseal, bytes, dict[str, object]], payload: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        seeded[0].store("new.path", payload)
    assert_intact(seeded)


@pytest.mark.parametrize("path", ["", "   ", None, 42, b"bytes", "a\x00b", "p" * 1025])
def test_bad_paths(seeded: tuple[Sovseal, bytes, dict[str, object]], path: object) -> None:
    with pytest.raises(InvalidInputError, match="path"):
        seeded[0].store(path, "value")  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match="path"):
        seeded[0].get(path)  # type: ignore[arg-type]
    assert_intact(seeded)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"metadata": ["not", "a", "dict"]}, "metadata"),
        ({"metadata": {"score": math.nan}}, "NaN"),
        ({"type": "forever"}, "episodic, semantic, procedural"),
        ({"provenance": "rumour"}, "explicit, observed"),
    ],
)
def test_bad_options(seeded: tuple[Sovseal, bytes, dict[str, object]], kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        seeded[0].store("new.path", "value", **kwargs)  # type: ignore[arg-type]
    assert_intact(seeded)


@pytest.mark.parametrize("k", [0, -1, 1001, 2.5, True])
def test_bad_recall_k(seeded: tuple[Sovseal, bytes, dict[str, object]], k: object) -> None:
    with pytest.raises(InvalidInputError, match="k must be"):
        seeded[0].recall("query", k=k)  # type: ignore[arg-type]


def test_bad_fork_names_and_closed_store(store_dir: Path, key: bytes) -> None:
    mem = Sovseal(store_dir, key=key, embedder=fake_embed)
    mem.store("a", 1)
    with pytest.raises(InvalidInputError, match="branch"):
        mem.fork(branch="")
    mem.close()
    with pytest.raises(StoreClosedError, match="closed"):
        mem.store("a", 2)


def test_bad_key(store_dir: Path) -> None:
    with pytest.raises(InvalidInputError):
        Sovseal(store_dir, key=b"too short", embedder=fake_embed)
    with pytest.raises(InvalidInputError):
        Sovseal(store_dir, key="sovseal-key-v1:not-a-key", embedder=fake_embed)
