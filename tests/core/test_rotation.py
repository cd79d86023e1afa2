"""Key rotation (docs/design.md, "Key rotation"): the store sealed again under a new master key.

Every id a user holds (snapshot ids) survives; the old key opens nothing any more; a crash at any
point is finished by running the rotation again; a device still on the old key that receives the
retirement erases what it holds and is told how to move.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.crypto.keychain import export_key, key_file_path, load_master_key, staged_key
from sovseal.crypto.sealing import Sealing
from sovseal.errors import InvalidInputError, KeyRotatedError, KeyUnavailableError
from sovseal.sdk.keyrotation import rotate_key
from sovseal.storage import frames as fr
from sovseal.storage.rotation import retirement
from tests.fakes import fake_embed

ROOT = str(Path(__file__).resolve().parents[2])


@pytest.fixture(autouse=True)
def _key_file(monkeypatch: pytest.MonkeyPatch) -> None:
    """The store's key lives in its 0600 key file (this machine has no OS keychain)."""
    monkeypatch.setenv("SOVSEAL_KEY_FALLBACK", "file")
    monkeypatch.delenv("SOVSEAL_KEY", raising=False)


def _history(mem: Sovseal) -> None:
    mem.store("user.name", "Ada")
    mem.store("user.editor", {"name": "helix"}, metadata={"topic": "tools"})
    mem.fork(branch="experiment")
    mem.store("user.editor", "vim")
    mem.checkout("main")
    mem.delete("user.name")
    mem.store("user.secret", "to be purged")
    mem.purge("user.secret")
    mem.store("user.city", "Paris")
    mem.reinforce("user.city")


def _observed(directory: Path) -> dict[str, object]:
    with Sovseal(directory, embedder=fake_embed) as mem:
        out: dict[str, object] = {"heads": mem.heads(), "branches": {}}
        for name in mem.branches():
            mem.checkout(name)
            out["branches"][name] = (mem.state(), [(e.snapshot_id, e.op, e.path, e.seq) for e in mem.log()])  # type: ignore[index]
        report = mem.verify()
        assert report.ok, report.problems
        out["erased"] = report.erased
        out["reinforced"] = mem.get("user.city").reinforce_count if "main" in mem.branches() else None  # type: ignore[union-attr]
        return out


def test_rotation_keeps_every_snapshot_id_and_the_old_key_opens_nothing(tmp_path: Path) -> None:
    directory = tmp_path / "s"
    with Sovseal(directory, embedder=fake_embed) as mem:
        _history(mem)
        mem.store_many([{"path": f"bulk.{i}", "payload": f"note {i}"} for i in range(50)])
        sealed_before = [i.sealed for i in mem.export_items()]
    before = _observed(directory)
    old, _ = load_master_key(directory, create=False)
    result = rotate_key(directory)
    assert result.verified and result.old_key_id != result.new_key_id and result.index_kept
    assert result.new_key is None  # it is in the store's key file, in place of the old one
    new, _ = load_master_key(directory, create=False)
    assert new != old and Sealing(new).key_id == result.new_key_id and staged_key(directory) is None
    assert _observed(directory) == before
    with pytest.raises(KeyUnavailableError, match=r"created with key id|rotated"):
        Sovseal(directory, key=old, embedder=fake_embed)
    with Sovseal(directory, embedder=fake_embed) as mem:
        assert mem.status().key_id == result.new_key_id
        assert mem.recall("note 7", k=1)[0].path == "bulk.7"
        mem.store("after.rotation", "works")
    files = b"".join(p.read_bytes() for p in directory.rglob("*") if p.is_file())
    assert not any(s in files for s in sealed_before)  # nothing sealed under the old key is left


def test_an_explicit_key_needs_an_explicit_new_key(tmp_path: Path) -> None:
    key = os.urandom(32)
    with Sovseal(tmp_path / "s", key=key, embedder=fake_embed) as mem:
        mem.store("a", 1)
    with pytest.raises(InvalidInputError, match="new key"):
        rotate_key(tmp_path / "s", key_text=export_key(key))
    new = os.urandom(32)
    result = rotate_key(tmp_path / "s", key_text=export_key(key), new_key=new)
    assert result.new_key == new and result.verified
    assert not key_file_path(tmp_path / "s").exists()  # sovseal never kept this store's key
    with Sovseal(tmp_path / "s", key=new, embedder=fake_embed) as mem:
        assert mem.get("a").payload == 1


CRASHER = """
import os, signal, sys, threading
from pathlib import Path
sys.path.insert(0, sys.argv[3])
os.environ["SOVSEAL_KEY_FALLBACK"] = "file"
from sovseal.sdk.keyrotation import rotate_key

threading.Timer(float(sys.argv[2]), lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
rotate_key(Path(sys.argv[1]))
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_sigkill_at_random_points_of_a_rotation_is_finished_by_running_it_again(tmp_path: Path) -> None:
    template = tmp_path / "template"
    with Sovseal(template, embedder=fake_embed) as mem:
        _history(mem)
        mem.store_many([{"path": f"bulk.{i}", "payload": "r" * 2000} for i in range(2500)])
    before = _observed(template)
    old, _ = load_master_key(template, create=False)
    rng = random.Random(7)
    for round_ in range(8):
        directory = tmp_path / f"r{round_}"
        subprocess.run(["cp", "-a", str(template), str(directory)], check=True)
        done = subprocess.run([sys.executable, "-c", CRASHER, str(directory), str(rng.uniform(0.0, 2.5)), ROOT], check=False, timeout=180)
        assert done.returncode == -signal.SIGKILL
        result = rotate_key(directory)  # finishes (or starts over with the staged key)
        assert result.verified
        new, _ = load_master_key(directory, create=False)
        assert new != old and staged_key(directory) is None
        assert _observed(directory) == before


def test_a_device_on_the_old_key_erases_what_it_holds_and_is_told_how_to_move(tmp_path: Path) -> None:
    key = os.urandom(32)
    with Sovseal(tmp_path / "a", key=key, embedder=fake_embed) as a:
        _history(a)
        items = a.export_items()
        secret = [i.sealed for i in items if i.kind == "record" and not i.flags & fr.REDACTED]
        retire = retirement(a._store, "0123456789abcdef")  # what rotate_key pushes to the old project
    with Sovseal(tmp_path / "b", key=key, embedder=fake_embed) as b:
        b.import_items(items)
        assert b.get("user.city").payload == "Paris"
        with pytest.raises(KeyRotatedError, match="0123456789abcdef") as raised:
            b.import_items(retire)
        assert raised.value.new_key_id == "0123456789abcdef"
        assert b.state() == {} and b.verify().ok
    data = b"".join(p.read_bytes() for p in (tmp_path / "b").rglob("*") if p.is_file())
    assert not any(s in data for s in secret)
