"""``store(..., index=False)``: a sealed record recall never ranks, that everything else still sees."""

from __future__ import annotations

from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.errors import InvalidInputError
from tests.fakes import fake_embed


def recalled(mem: Sovseal, query: str) -> set[str]:
    return {m.path for m in mem.recall(query, k=50)}


def test_unindexed_records_are_stored_but_never_recalled(mem: Sovseal) -> None:
    mem.store("note.editor", "the user edits with neovim")
    mem.store("kv.editor", "the user edits with neovim", index=False)
    assert recalled(mem, "the user edits with neovim") == {"note.editor"}
    assert mem.get("kv.editor").payload == "the user edits with neovim"  # type: ignore[union-attr]
    assert set(mem.state()) == {"note.editor", "kv.editor"}
    assert mem.verify().ok


def test_an_unindexed_version_hides_the_indexed_one_it_shadows(mem: Sovseal) -> None:
    mem.store("user.shell", "zsh is the shell")
    mem.store("user.shell", "fish is the shell", index=False)
    assert recalled(mem, "zsh is the shell") == set()  # HEAD shows the unindexed version only
    mem.store("user.shell", "nushell is the shell")
    assert recalled(mem, "nushell is the shell") == {"user.shell"}


def test_reopened_store_still_leaves_unindexed_records_out(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        mem.store("a", "alpha memory")
        mem.store("b", "alpha memory", index=False)
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        assert recalled(mem, "alpha memory") == {"a"}  # the catalog was rebuilt from the sealed records
        hits = mem.recall_by_vector(fake_embed(["alpha memory"])[0], k=10)
        assert {m.path for m in hits} == {"a"}


def test_unindexed_records_are_never_embedded(store_dir: Path, key: bytes) -> None:
    seen: list[str] = []

    def counting(texts: list[str]):  # type: ignore[no-untyped-def]
        seen.extend(texts)
        return fake_embed(texts)

    with Sovseal(store_dir, key=key, embedder=counting) as mem:
        mem.store("kv.1", {"blob": "checkpoint bytes"}, index=False)
        mem.recall("checkpoint bytes", k=5)  # recall embeds missing vectors of visible records
    assert "checkpoint bytes" in seen  # the query was embedded...
    assert not any("blob" in text for text in seen)  # ...and nothing of the record (its text names the key)


def test_index_false_with_text_is_refused(mem: Sovseal) -> None:
    with pytest.raises(InvalidInputError, match="index=False"):
        mem.store("a", "x", text="y", index=False)
    with pytest.raises(InvalidInputError, match="index must be"):
        mem.store("a", "x", index="no")  # type: ignore[arg-type]
    assert mem.state() == {}
