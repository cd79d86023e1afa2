"""The embedder is part of the store's identity (issue #22), with the real on-device model.

The fingerprint of the built-in embedder names the bytes it runs, so it is the same in every process
that loads the same files, from whatever directory; pointing ``SOVSEAL_MODEL_DIR`` at another model
refuses recall until ``sovseal rebuild-index`` (here ``rebuild_index``) switches the store.

"Another model" is the built model with one more protobuf field (a ``doc_string``) appended: other
bytes, so another sha256, and a graph onnxruntime runs just the same, without a second 50 MB build.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.crypto.keychain import export_key
from sovseal.embed import Embedder
from sovseal.embed.fingerprint import RECORD, fingerprint_of, same_model
from sovseal.embed.model_dir import MODEL, TOKENIZER, sha256, write_model_dir
from sovseal.errors import EmbedderMismatchError
from sovseal.sdk.maintenance import rebuild_index
from tests.embed.test_embed_resolve import link_model

FINGERPRINT = "import json; from sovseal.embed import Embedder; print(json.dumps(Embedder().fingerprint(), sort_keys=True))"


def recorded(store: Path) -> dict:
    return json.loads((store / "index" / RECORD).read_text())["fingerprint"]


@pytest.fixture(scope="module")
def variant_dir(built_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another model: the built graph plus ``doc_string`` (ModelProto field 6), with a manifest."""
    note = b"a variant for a model-switch test"
    model = (built_dir / MODEL).read_bytes() + bytes([6 << 3 | 2, len(note)]) + note
    dest = tmp_path_factory.mktemp("variant") / "model"
    write_model_dir(dest, {MODEL: model, TOKENIZER: (built_dir / TOKENIZER).read_bytes()}, origin="a test variant")
    return dest


def test_the_default_models_fingerprint_is_stable_across_processes(built_dir: Path, embedder: Embedder) -> None:
    env = {**os.environ, "SOVSEAL_HOME": str(built_dir.parent.parent)}
    env.pop("SOVSEAL_MODEL_DIR", None)
    runs = [
        json.loads(
            subprocess.run([sys.executable, "-c", FINGERPRINT], env=env, capture_output=True, text=True, check=True, timeout=300).stdout
        )
        for _ in range(2)
    ]
    assert runs[0] == runs[1] == json.loads(json.dumps(embedder.fingerprint()))
    assert runs[0]["model_sha256"] == sha256((built_dir / MODEL).read_bytes())  # the bytes that run
    assert runs[0]["tokenizer_sha256"] == sha256((built_dir / TOKENIZER).read_bytes())
    assert {k: runs[0][k] for k in ("model", "dim", "pooling", "normalize", "max_tokens")} == {
        "model": "all-MiniLM-L6-v2",
        "dim": 384,
        "pooling": "mean",
        "normalize": "l2",
        "max_tokens": 256,
    }


def test_the_same_files_from_another_directory_are_the_same_model(built_dir: Path, embedder: Embedder, tmp_path: Path, key: bytes) -> None:
    store = tmp_path / "store"
    with Sovseal(store, key=key, embedder=embedder) as mem:
        mem.store("user.city", "The user lives in Berlin.")
    elsewhere = Embedder(link_model(built_dir, tmp_path / "copy"))
    with Sovseal(store, key=key, embedder=elsewhere) as mem:
        assert [m.path for m in mem.recall("where does the user live?", k=1)] == ["user.city"]
    assert elsewhere.origin != embedder.origin and same_model(elsewhere.fingerprint(), embedder.fingerprint())


def test_a_model_switch_through_sovseal_model_dir(
    embedder: Embedder, variant_dir: Path, tmp_path: Path, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = tmp_path / "store"
    with Sovseal(store, key=key, embedder=embedder) as mem:
        mem.store("user.city", "The user lives in Berlin.")
        mem.store("user.food", "The user is allergic to peanuts.")
    old = recorded(store)
    assert old["model_sha256"] == embedder.model_sha256

    monkeypatch.setenv("SOVSEAL_MODEL_DIR", str(variant_dir))
    with Sovseal(store, key=key) as mem:  # the default embedder, which now reads the variant
        assert mem.get("user.city").payload == "The user lives in Berlin."  # type: ignore[union-attr]
        assert mem.verify().ok
        mem.store("user.pet", "The user has a cat.")  # durable, without a vector from the other model
        with pytest.raises(EmbedderMismatchError) as caught:
            mem.recall("where does the user live?")
    new_sha = sha256((variant_dir / MODEL).read_bytes())
    message = str(caught.value)
    assert f"from {embedder.origin} (sha256 {old['model_sha256'][:12]}, 384-d)" in message
    assert f"from {variant_dir} (sha256 {new_sha[:12]}, 384-d)" in message
    assert "sovseal rebuild-index" in message
    assert recorded(store) == old

    rebuild_index(store, key_text=export_key(key))  # what `sovseal rebuild-index` runs, with the variant
    assert recorded(store)["model_sha256"] == new_sha
    with Sovseal(store, key=key) as mem:
        assert [m.path for m in mem.recall("which pet does the user have?", k=1)] == ["user.pet"]
        assert [m.path for m in mem.recall("where does the user live?", k=1)] == ["user.city"]


def test_a_store_made_before_fingerprints_adopts_the_default_model(embedder: Embedder, tmp_path: Path, key: bytes) -> None:
    store = tmp_path / "store"
    with Sovseal(store, key=key, embedder=embedder) as mem:
        mem.store("user.city", "The user lives in Berlin.")
    (store / "index" / RECORD).unlink()
    with Sovseal(store, key=key, embedder=embedder) as mem:
        assert [m.path for m in mem.recall("where does the user live?", k=1)] == ["user.city"]
    assert recorded(store) == json.loads(json.dumps(fingerprint_of(embedder, 384)))
