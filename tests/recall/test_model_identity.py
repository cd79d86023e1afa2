"""The embedder is part of the store's identity (issue #22): a model switch, with fake embedders.

A store records its embedder's fingerprint in ``index/model.json`` when its index is created.
Reopened with another embedder, reads and writes work but recall raises EmbedderMismatchError
naming both models and the fix; ``rebuild_index`` re-embeds with the new model and records it.
The real on-device model is exercised by tests/embed/test_model_identity_real.py.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from sovseal import Sovseal
from sovseal.crypto.keychain import export_key
from sovseal.embed.fingerprint import RECORD, fingerprint_of, identity, qualified_name
from sovseal.errors import EmbedderMismatchError, InvalidInputError
from sovseal.sdk.maintenance import rebuild_index
from tests.fakes import FAKE_DIM, fake_embed

OTHER_DIM = 16
ROOT = str(Path(__file__).resolve().parents[2])


def other_embed(texts: Sequence[str]) -> np.ndarray:
    """Another model: 16 dimensions, other vectors."""
    out = np.empty((len(texts), OTHER_DIM), dtype=np.float32)
    for i, text in enumerate(texts):
        seed = int.from_bytes(hashlib.sha256(b"other:" + text.encode()).digest()[:8], "little")
        out[i] = np.random.default_rng(seed).standard_normal(OTHER_DIM)
    return out


class Declared:
    """A custom embedder that says which model it runs (fake_embed's vectors, whatever the name)."""

    def __init__(self, fingerprint: Any, calls: list[int] | None = None) -> None:
        self.fingerprint = fingerprint
        self.calls = calls if calls is not None else []

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        return fake_embed(texts)


class Renamed(Declared):
    """The same declared model behind another class: not a different model."""


def recorded(store: Path) -> dict[str, Any]:
    return json.loads((store / "index" / RECORD).read_text())["fingerprint"]


def fill(store: Path, key: bytes, embedder: Any = fake_embed) -> None:
    with Sovseal(store, key=key, embedder=embedder) as mem:
        mem.store("user.city", "the user lives in Berlin")
        mem.store("user.food", "allergic to peanuts")
        mem.fork(branch="side")
        mem.store("side.note", "a note on the side branch")


def test_the_fingerprint_is_recorded_when_the_index_is_created(store_dir: Path, key: bytes) -> None:
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        mem.store("a", "alpha")
        assert (store_dir / "index" / RECORD).exists()  # written when the index is created
    assert recorded(store_dir) == {"embedder": "tests.fakes.fake_embed", "callable": "tests.fakes.fake_embed", "dim": FAKE_DIM}
    raw = (store_dir / "index" / RECORD).read_bytes()
    assert b"alpha" not in raw  # no plaintext of any memory


def test_a_model_switch(store_dir: Path, key: bytes) -> None:
    fill(store_dir, key)
    before = (store_dir / "index" / RECORD).read_bytes()
    with Sovseal(store_dir, key=key, embedder=other_embed) as mem:
        mem.ready()  # warming up does not fail: reads and writes must keep working
        # Reads work.
        assert mem.get("user.city").payload == "the user lives in Berlin"  # type: ignore[union-attr]
        assert mem.state() == {"user.city": "the user lives in Berlin", "user.food": "allergic to peanuts"}
        assert len(mem.log()) == 2
        assert mem.verify().ok
        assert len(mem.export_items()) > 0
        # Recall is refused, with both models and the fix named.
        with pytest.raises(EmbedderMismatchError) as caught:
            mem.recall("where does the user live?")
        message = str(caught.value)
        assert "tests.fakes.fake_embed (32-d)" in message
        assert f"{qualified_name(other_embed)} (16-d)" in message
        assert "sovseal rebuild-index" in message and "sovseal.rebuild_index(path" in message
        assert caught.value.recorded is not None and caught.value.recorded["callable"] == "tests.fakes.fake_embed"
        assert caught.value.current is not None and caught.value.current["dim"] == OTHER_DIM
        with pytest.raises(EmbedderMismatchError):
            mem.recall_by_vector(other_embed(["Berlin"])[0])
        with pytest.raises(EmbedderMismatchError):  # a view shares the store's index, and its refusal
            mem.view("side").recall("note")
    assert (store_dir / "index" / RECORD).read_bytes() == before  # nothing recorded over the old model

    # One command switches the store to the new model.
    done: list[tuple[int, int]] = []
    assert rebuild_index(store_dir, key_text=export_key(key), embedder=other_embed, progress=lambda d, t: done.append((d, t))) == 2
    assert done[-1] == (2, 2)
    assert recorded(store_dir)["callable"] == qualified_name(other_embed) and recorded(store_dir)["dim"] == OTHER_DIM
    with Sovseal(store_dir, key=key, embedder=other_embed) as mem:
        assert [m.path for m in mem.recall("the user lives in Berlin", k=1)] == ["user.city"]
        assert [m.path for m in mem.recall_by_vector(other_embed(["user.food: allergic to peanuts"])[0], k=1)] == ["user.food"]
        assert [m.path for m in mem.view("side").recall("a note on the side branch", k=1)] == ["side.note"]
    # ...and now the old model is the one refused.
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem, pytest.raises(EmbedderMismatchError, match="16-d"):
        mem.recall("Berlin")


def shifted_embed(texts: Sequence[str]) -> np.ndarray:
    """Another model of the same dimension: a vector of it ranks nothing right among fake_embed's."""
    return fake_embed([f"shifted:{text}" for text in texts])


KILLED_WHILE_DISCARDING = """
import os, signal, sys
sys.path.insert(0, sys.argv[3])
from sovseal.sdk.maintenance import rebuild_index
from tests.recall.test_model_identity import shifted_embed

real = os.unlink
def unlink(name, *args, **kwargs):  # the crash: as the old index's model.json is deleted
    real(name, *args, **kwargs)
    if str(name).endswith("model.json"):
        os.kill(os.getpid(), signal.SIGKILL)
os.unlink = unlink
rebuild_index(sys.argv[1], key_text=sys.argv[2], embedder=shifted_embed)
"""


def test_a_rebuild_killed_while_discarding_the_old_index_leaves_no_vectors_without_their_model(store_dir: Path, key: bytes) -> None:
    """The old index goes in one rename: after the kill there is the whole old index or none, never
    the old model's vectors without the model.json that names it (adopted as the new model's)."""
    fill(store_dir, key)
    done = subprocess.run([sys.executable, "-c", KILLED_WHILE_DISCARDING, str(store_dir), export_key(key), ROOT], check=False, timeout=120)
    assert done.returncode == -signal.SIGKILL
    assert not (store_dir / "index").exists() or (store_dir / "index" / RECORD).exists()
    with Sovseal(store_dir, key=key, embedder=shifted_embed) as mem:
        assert [m.path for m in mem.recall("user.food: allergic to peanuts", k=1)] == ["user.food"]
    assert recorded(store_dir)["callable"] == qualified_name(shifted_embed)
    assert not list(store_dir.glob("index.discarded-*"))  # what the crash left aside is gone
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem, pytest.raises(EmbedderMismatchError):
        mem.recall("peanuts")


REBUILD = """
import sys
sys.path.insert(0, sys.argv[3])
from sovseal.sdk.maintenance import rebuild_index
from tests.recall.test_model_identity import shifted_embed
rebuild_index(sys.argv[1], key_text=sys.argv[2], embedder=shifted_embed)
"""


def test_a_process_that_had_the_store_open_does_not_undo_a_rebuild(store_dir: Path, key: bytes) -> None:
    """Its index was replaced under it: it keeps its own vectors in memory and writes none of
    them (another model's) into the rebuilt index; the new model embeds its records when asked."""
    fill(store_dir, key)
    with Sovseal(store_dir, key=key, embedder=fake_embed) as old:
        assert old.recall("Berlin", k=1)  # its index is open
        subprocess.run([sys.executable, "-c", REBUILD, str(store_dir), export_key(key), ROOT], check=True, timeout=120)
        old.store_many([{"path": f"late.{i}", "payload": f"written after the rebuild {i}"} for i in range(10)])
        assert old._vector_index().retired()
    with Sovseal(store_dir, key=key, embedder=shifted_embed) as mem:
        for i in range(10):
            assert [m.path for m in mem.recall(f"late {i}: written after the rebuild {i}", k=1)] == [f"late.{i}"]
        assert [m.path for m in mem.recall("user.city: the user lives in Berlin", k=1)] == ["user.city"]


def test_store_on_a_mismatched_index_is_durable_and_adds_no_vector(store_dir: Path, key: bytes) -> None:
    fill(store_dir, key)
    with Sovseal(store_dir, key=key, embedder=other_embed) as mem:
        result = mem.store("user.pet", "the user has a cat")
        [many] = mem.store_many([{"path": "user.car", "payload": "no car"}], vectors=other_embed(["no car"]))
        assert mem.get("user.pet").snapshot_id == result.snapshot_id  # type: ignore[union-attr]
        assert mem.status().index_pending == 0  # no index was opened: no vector of this model went anywhere
        with pytest.raises(EmbedderMismatchError):
            mem.recall("cat")
    assert recorded(store_dir)["dim"] == FAKE_DIM
    # Back with the store's own model: both records are there, with no vector until recall embeds them.
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        assert {"user.pet", "user.car"} <= set(mem.state())
        assert mem.log()[0].snapshot_id == many.snapshot_id
        assert [m.path for m in mem.recall("user.pet: the user has a cat", k=1)] == ["user.pet"]
        assert [m.path for m in mem.recall("user.car: no car", k=1)] == ["user.car"]


def test_the_records_stored_meanwhile_are_embedded_by_the_rebuild(store_dir: Path, key: bytes) -> None:
    fill(store_dir, key)
    with Sovseal(store_dir, key=key, embedder=other_embed) as mem:
        mem.store("user.pet", "the user has a cat")
    rebuild_index(store_dir, key_text=export_key(key), embedder=other_embed)
    with Sovseal(store_dir, key=key, embedder=other_embed) as mem:
        assert [m.path for m in mem.recall("user.pet: the user has a cat", k=1)] == ["user.pet"]


def test_the_same_dimension_with_another_declared_model_is_refused(store_dir: Path, key: bytes) -> None:
    fill(store_dir, key, Declared("acme-embed-v1"))
    assert recorded(store_dir)["fingerprint"] == "acme-embed-v1"
    with (
        Sovseal(store_dir, key=key, embedder=Declared("acme-embed-v2")) as mem,
        pytest.raises(EmbedderMismatchError, match=r"acme-embed-v1.*acme-embed-v2"),
    ):
        mem.recall("Berlin")


def test_a_custom_embedder_is_not_refused_spuriously(store_dir: Path, key: bytes) -> None:
    """A declared fingerprint is what counts: another class, object or origin is the same model."""
    fill(store_dir, key, Declared({"model": "acme-embed-v1", "origin": "/models/a"}))
    calls: list[int] = []
    with Sovseal(store_dir, key=key, embedder=Renamed(lambda: {"model": "acme-embed-v1", "origin": "/elsewhere"}, calls)) as mem:
        assert [m.path for m in mem.recall("the user lives in Berlin", k=1)] == ["user.city"]
    assert calls == [1]  # the query only: the vectors on disk were kept


def test_the_fake_embedder_reopens_every_time_without_re_embedding(store_dir: Path, key: bytes) -> None:
    fill(store_dir, key)
    for _ in range(2):
        with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
            assert [m.path for m in mem.recall("the user lives in Berlin", k=1)] == ["user.city"]
    assert recorded(store_dir)["callable"] == "tests.fakes.fake_embed"


def test_a_store_made_before_fingerprints_adopts_the_current_model(store_dir: Path, key: bytes) -> None:
    fill(store_dir, key)
    (store_dir / "index" / RECORD).unlink()  # as a store written by an earlier version
    calls: list[int] = []
    with Sovseal(store_dir, key=key, embedder=Declared(None, calls)) as mem:
        assert [m.path for m in mem.recall("the user lives in Berlin", k=1)] == ["user.city"]
    assert calls == [1]  # adopted as it is: its vectors are kept, nothing is re-embedded
    assert recorded(store_dir) == {
        "embedder": qualified_name(Declared(None)),
        "callable": qualified_name(Declared(None)),
        "dim": FAKE_DIM,
    }
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem, pytest.raises(EmbedderMismatchError):
        mem.recall("Berlin")  # from now on the adopted model is the store's


def test_a_read_only_store_compares_and_adopts_without_writing(store_dir: Path, key: bytes) -> None:
    fill(store_dir, key)
    with Sovseal(store_dir, key=key, embedder=other_embed, read_only=True) as mem:
        assert mem.get("user.city") is not None
        with pytest.raises(EmbedderMismatchError):
            mem.recall("Berlin")
    (store_dir / "index" / RECORD).unlink()
    with Sovseal(store_dir, key=key, embedder=fake_embed, read_only=True) as mem:
        assert [m.path for m in mem.recall("the user lives in Berlin", k=1)] == ["user.city"]
    assert not (store_dir / "index" / RECORD).exists()


def test_an_unreadable_record_refuses_recall_until_rebuilt(store_dir: Path, key: bytes) -> None:
    fill(store_dir, key)
    (store_dir / "index" / RECORD).write_text("{not json")
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        assert mem.get("user.city") is not None
        with pytest.raises(EmbedderMismatchError, match="unreadable"):
            mem.recall("Berlin")
    rebuild_index(store_dir, key_text=export_key(key), embedder=fake_embed)
    with Sovseal(store_dir, key=key, embedder=fake_embed) as mem:
        assert [m.path for m in mem.recall("the user lives in Berlin", k=1)] == ["user.city"]


def test_rebuilding_an_empty_store_records_the_model(store_dir: Path, key: bytes) -> None:
    Sovseal(store_dir, key=key, embedder=fake_embed).close()
    rebuild_index(store_dir, key_text=export_key(key), embedder=other_embed)
    assert recorded(store_dir)["dim"] == OTHER_DIM


def test_what_a_fingerprint_holds_and_what_is_compared() -> None:
    assert fingerprint_of(fake_embed, 32) == {"embedder": "tests.fakes.fake_embed", "callable": "tests.fakes.fake_embed", "dim": 32}
    declared = fingerprint_of(Declared("acme-v1"), 8)
    assert declared == {"embedder": qualified_name(Declared(None)), "fingerprint": "acme-v1", "dim": 8}
    assert identity(declared) == {"fingerprint": "acme-v1", "dim": 8}  # the name of the wrapper is not compared
    mapping = fingerprint_of(Declared(lambda: {"model": "m", "origin": "/a", "dim": 3}), 8)
    assert mapping["dim"] == 8  # what the embedder returned wins over what it says
    assert identity(mapping) == {"model": "m", "dim": 8}  # origin is not compared
    assert qualified_name(Declared(None).__call__) == f"{__name__}.Declared.__call__"  # a bound method: its function
    assert qualified_name(Declared(None)) == f"{__name__}.Declared"
    with pytest.raises(InvalidInputError, match="str or a mapping"):
        fingerprint_of(Declared(42), 8)
    with pytest.raises(InvalidInputError, match="JSON"):
        fingerprint_of(Declared({"model": object()}), 8)


def test_keys_are_never_in_the_record(store_dir: Path) -> None:
    key = os.urandom(32)
    fill(store_dir, key)
    raw = (store_dir / "index" / RECORD).read_bytes()
    assert key.hex().encode() not in raw and export_key(key).encode() not in raw
