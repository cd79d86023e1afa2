"""Every adapter that opens a store by path follows the one path rule (issue #21): ``~`` and
``$VARS`` expanded, every file of the store under the one resolved directory, none in ``./~``."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.fakes import fake_embed


def _saver(path: str, key: bytes) -> Any:
    from langgraph.checkpoint.sovseal import SovsealSaver

    with SovsealSaver.open(path, key=key) as saver:
        config = {"configurable": {"thread_id": "t", "checkpoint_ns": ""}}
        from langgraph.checkpoint.base import empty_checkpoint

        saver.put(config, empty_checkpoint(), {"source": "input", "step": -1, "parents": {}}, {})


def _store(path: str, key: bytes) -> Any:
    from langgraph.store.sovseal import SovsealStore

    with SovsealStore.open(path, key=key) as store:
        store.put(("users", "u1"), "prefs", {"editor": "helix"})


def _llama(path: str, key: bytes) -> Any:
    from llama_index.core.schema import TextNode
    from llama_index.vector_stores.sovseal import SovsealVectorStore

    store = SovsealVectorStore(path=path, key=key, embedder=fake_embed)
    try:
        store.add([TextNode(id_="n1", text="hello", embedding=[0.1] * 32)])
    finally:
        store.client.close()


def _langchain(path: str, key: bytes) -> Any:
    from langchain_core.embeddings import DeterministicFakeEmbedding
    from langchain_sovseal import SovsealVectorStore

    store = SovsealVectorStore(DeterministicFakeEmbedding(size=32), path=path, key=key)
    try:
        store.add_texts(["hello"])
    finally:
        store.client.close()


@pytest.mark.parametrize(
    "open_one", [_saver, _store, _llama, _langchain], ids=["SovsealSaver.open", "SovsealStore.open", "llama_index path=", "langchain path="]
)
def test_an_adapter_given_a_tilde_path_keeps_the_whole_store_under_the_real_home(
    open_one: Callable[[str, bytes], Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("MEMROOT", "~/stores")
    monkeypatch.chdir(cwd)
    open_one("$MEMROOT/mem", os.urandom(32))
    assert list(cwd.iterdir()) == []  # no ./~ and no ./$MEMROOT
    store = home / "stores" / "mem"
    assert {"journal.log", "store.json", "LOCK"} <= {p.name for p in store.iterdir()}
