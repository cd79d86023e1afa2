"""SovsealByteStore beyond the standard suites: its own store, namespaces, durability, lineage."""

from __future__ import annotations

from pathlib import Path

import pytest
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_sovseal import SovsealByteStore

from sovseal import Sovseal


def _embed() -> DeterministicFakeEmbedding:
    return DeterministicFakeEmbedding(size=8)


def test_own_store_is_durable_and_needs_the_key(store_dir: Path, key: bytes) -> None:
    with SovsealByteStore(path=store_dir, key=key, embedder=_embed().embed_documents) as kv:
        kv.mset([("doc:1", b"\x00binary\xff"), ("doc:2", b""), ("other", b"x" * 100_000)])
    with SovsealByteStore(path=store_dir, key=key, embedder=_embed().embed_documents) as kv:
        assert kv.mget(["doc:1", "doc:2", "other", "nope"]) == [b"\x00binary\xff", b"", b"x" * 100_000, None]
        assert sorted(kv.yield_keys(prefix="doc:")) == ["doc:1", "doc:2"]


def test_namespaces_and_other_records_do_not_mix(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=_embed().embed_documents) as mem:
        a = SovsealByteStore(mem, namespace="a")
        b = SovsealByteStore(mem, namespace="b")
        mem.store("user.note", "not a byte store value")
        a.mset([("k", b"from a")])
        b.mset([("k", b"from b"), ("k2", b"2")])
        assert a.mget(["k", "k2"]) == [b"from a", None]
        assert sorted(b.yield_keys()) == ["k", "k2"] and list(a.yield_keys()) == ["k"]
        a.mdelete(["k"])
        assert b.mget(["k"]) == [b"from b"] and mem.get("user.note") is not None


def test_overwrites_and_deletes_are_in_the_lineage(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=_embed().embed_documents) as mem:
        kv = SovsealByteStore(mem)
        kv.mset([("k", b"v1")])
        first = mem.snapshot()
        kv.mset([("k", b"v2")])
        kv.mdelete(["k"])
        assert kv.mget(["k"]) == [None]
        assert first is not None
        mem.rollback(first)
        assert kv.mget(["k"]) == [b"v1"]


def test_bad_input(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=_embed().embed_documents) as mem:
        kv = SovsealByteStore(mem)
        with pytest.raises(TypeError):
            kv.mset([("k", "a str, not bytes")])  # type: ignore[list-item]
        with pytest.raises(ValueError):
            kv.mset([("bad\x00key", b"v")])
        with pytest.raises(ValueError):
            SovsealByteStore(mem, namespace="a/b")
        assert list(kv.yield_keys()) == []  # nothing was half-written


class ListingSovseal(Sovseal):
    """A sovseal with the listing method the adapter asks the SDK for (``paths(prefix)``)."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.listed: list[str] = []

    def paths(self, prefix: str) -> list[str]:
        self.listed.append(prefix)
        return [p for p in self.state() if p.startswith(prefix)]


def test_listing_uses_sovseal_paths_when_the_sdk_has_it(store_dir: Path, key: bytes) -> None:
    with ListingSovseal(store_dir, key=key, embedder=_embed().embed_documents) as mem:
        kv = SovsealByteStore(mem, namespace="n")
        kv.mset([("a1", b"1"), ("a2", b"2"), ("b", b"3")])
        assert sorted(kv.yield_keys(prefix="a")) == ["a1", "a2"]
        assert mem.listed == ["langchain-kv/n/a"]
