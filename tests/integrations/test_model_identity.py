"""A store filled through an adapter is the same model's store when the SDK opens it (issue #22 part 3):
the adapters pass their model's fingerprint through, and the LangGraph Store with its own
``IndexConfig`` gives sovseal's index nothing (it ranks by its own vectors)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import ClassVar

from sovseal import Sovseal
from tests.fakes import FAKE_DIM, fake_embed


class _Fingerprinted:
    """``fake_embed`` as a model with a declared fingerprint (as the on-device Embedder has)."""

    fingerprint: ClassVar[dict[str, object]] = {"model": "fake", "dim": FAKE_DIM}

    def __call__(self, texts):  # type: ignore[no-untyped-def]
        return fake_embed(texts)

    def embed_documents(self, texts):  # type: ignore[no-untyped-def]  # as sovseal.embed.Embedder has
        return fake_embed(texts)

    def embed_query(self, text):  # type: ignore[no-untyped-def]
        return fake_embed([text])[0]


def test_a_langchain_store_and_the_sdk_agree_on_the_model(tmp_path: Path) -> None:
    from langchain_sovseal import SovsealEmbeddings, SovsealVectorStore

    key = os.urandom(32)
    model = _Fingerprinted()
    store = SovsealVectorStore(SovsealEmbeddings(embedder=model), path=tmp_path / "s", key=key)  # type: ignore[arg-type]
    try:
        store.add_texts(["the user edits code in helix"])
    finally:
        store.client.close()
    with Sovseal(tmp_path / "s", key=key, embedder=model) as mem:
        assert [m.payload for m in mem.recall("helix", k=1)] == ["the user edits code in helix"]


def test_a_langgraph_store_with_its_own_index_leaves_sovseal_s_index_to_the_sdk(tmp_path: Path) -> None:
    from langgraph.store.sovseal import SovsealStore

    key = os.urandom(32)
    index = {"dims": FAKE_DIM, "embed": lambda texts: fake_embed(texts).tolist(), "fields": ["text"]}
    with SovsealStore.open(tmp_path / "s", key=key, index=index) as store:  # type: ignore[arg-type]
        store.put(("notes",), "n1", {"text": "standup moved to ten"})
        assert [i.key for i in store.search(("notes",), query="standup")] == ["n1"]
    with Sovseal(tmp_path / "s", key=key, embedder=fake_embed) as mem:
        mem.store("user.editor", "helix")
        assert [m.path for m in mem.recall("helix", k=1)] == ["user.editor"]
