"""The Embedder's contract: inputs it accepts and refuses, the query cache, async twins, thread safety."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import numpy as np
import pytest

from sovseal.embed import DIM, Embedder
from sovseal.embed import embedder as embedder_module
from sovseal.embed.embedder import QUERY_CACHE_SIZE
from sovseal.errors import InvalidInputError

AWKWARD = [
    "",
    " ",
    "x" * 100_000,
    "ctrl \x00\x01\x02\x1b[0m\x7f\u200b\ufeff end",
    "lone surrogate \ud800 here",
    "ελληνικά русский عربى हिन्दी 中文 日本語 한국어 ไทย",
    "🧑🏿‍🚀🏳️‍🌈🇺🇳",
    "\n\n\t\r",
]


@pytest.mark.parametrize("bad", [None, 42, b"bytes", ["ok", 3], ["ok", None], [b"x"], object()])
def test_non_string_input_is_refused(embedder: Embedder, bad: object) -> None:
    with pytest.raises(InvalidInputError):
        embedder.embed_documents(bad)  # type: ignore[arg-type]


def test_a_bare_string_is_not_a_list_of_texts(embedder: Embedder) -> None:
    with pytest.raises(InvalidInputError, match="embed_query"):
        embedder.embed_documents("hello")


@pytest.mark.parametrize("bad", [None, 1, b"q", ["q"]])
def test_query_must_be_a_string(embedder: Embedder, bad: object) -> None:
    with pytest.raises(InvalidInputError):
        embedder.embed_query(bad)  # type: ignore[arg-type]


def test_awkward_texts_embed(embedder: Embedder) -> None:
    vectors = embedder.embed_documents(AWKWARD)
    assert vectors.shape == (len(AWKWARD), DIM)
    assert np.isfinite(vectors).all()
    np.testing.assert_allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-5)
    for text in AWKWARD:
        assert embedder.embed_query(text).shape == (DIM,)


def test_empty_batch_and_any_sequence(embedder: Embedder) -> None:
    assert embedder.embed_documents([]).shape == (0, DIM)
    np.testing.assert_array_equal(embedder.embed_documents(("a", "b")), embedder(["a", "b"]))
    assert embedder.dim == DIM == 384


def test_query_cache_hit_returns_an_independent_copy(embedder: Embedder) -> None:
    first = embedder.embed_query("what does the user drink in the morning?")
    first[:] = 0  # a caller scribbling on its vector must not poison the cache
    second = embedder.embed_query("what does the user drink in the morning?")
    assert np.linalg.norm(second) == pytest.approx(1.0, abs=1e-5)
    assert embedder._query_cache["what does the user drink in the morning?"] is not second


def test_query_cache_is_lru_and_bounded(built_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert QUERY_CACHE_SIZE == 256
    monkeypatch.setattr(embedder_module, "QUERY_CACHE_SIZE", 4)  # same code path, 4 queries instead of 256
    e = Embedder(built_dir)
    for i in range(4):
        e.embed_query(f"q{i}")
    e.embed_query("q0")  # refresh q0: q1 is now the oldest
    e.embed_query("one more")
    least_recent_first = [e._query_cache.popitem()[0] for _ in range(len(e._query_cache))]
    assert least_recent_first == ["q2", "q3", "q0", "one more"]


def test_async_twins(embedder: Embedder) -> None:
    async def both() -> tuple[np.ndarray, np.ndarray]:
        return await embedder.aembed_documents(["tea", "coffee"]), await embedder.aembed_query("tea")

    docs, query = asyncio.run(both())
    assert docs.shape == (2, DIM)
    np.testing.assert_allclose(query, docs[0], atol=1e-6)


def test_ready_is_idempotent_and_thread_safe(built_dir: Path) -> None:
    e = Embedder(built_dir, threads=1)
    threads = [threading.Thread(target=e.ready) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    model = e._model
    e.ready()
    assert model is not None and e._model is model
    assert e.origin == str(built_dir) and e.model_sha256 is not None


def test_concurrent_callers_get_their_own_answers(embedder: Embedder) -> None:
    texts = [f"memory number {i} about topic {i % 7}" for i in range(24)]
    expected = embedder.embed_documents(texts)
    results: dict[int, np.ndarray] = {}

    def work(i: int) -> None:
        results[i] = embedder.embed_documents(texts[i::4])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(4):
        np.testing.assert_allclose(results[i], expected[i::4], atol=1e-5)


def test_threads_must_be_positive() -> None:
    with pytest.raises(InvalidInputError):
        Embedder(threads=0)
