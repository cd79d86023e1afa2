"""A store that cannot be written (a read-only volume, a mounted backup, another user's files) opens
read-only: reads, recall, verify and export work, writes raise ReadOnlyStoreError, and nothing in
the directory changes. Before, get/recall/verify/export failed with a bare OSError.
"""

from __future__ import annotations

import hashlib
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.errors import ReadOnlyStoreError
from tests.fakes import fake_embed


def _snapshot(directory: Path) -> dict[str, str]:
    return {str(p.relative_to(directory)): hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.rglob("*")) if p.is_file()}


def _make(directory: Path, key: bytes) -> str:
    with Sovseal(directory, key=key, embedder=fake_embed) as mem:
        mem.store("user.editor", "neovim")
        first = mem.store("user.shell", "fish").snapshot_id
        mem.store("user.shell", "zsh")
        mem.recall("editor")  # the index exists on disk too
    return first


def test_read_only_true_reads_recalls_verifies_and_exports_and_refuses_writes(tmp_path: Path, key: bytes) -> None:
    store = tmp_path / "s"
    first = _make(store, key)
    before = _snapshot(store)
    with Sovseal(store, key=key, embedder=fake_embed, read_only=True) as mem:
        assert mem.get("user.shell").payload == "zsh"
        assert [m.path for m in mem.recall("editor", k=1)] == ["user.editor"]
        assert mem.verify().ok
        assert len(mem.export_items()) >= 4
        assert [e.path for e in mem.log()] == ["user.shell", "user.shell", "user.editor"]
        for write in (
            lambda: mem.store("x", "y"),
            lambda: mem.delete("user.editor"),
            lambda: mem.rollback(first),
            lambda: mem.fork(first, branch="b"),
        ):
            with pytest.raises(ReadOnlyStoreError, match="read-only"):
                write()
        assert mem.get("user.shell").payload == "zsh"
    assert _snapshot(store) == before


def test_a_store_on_a_read_only_volume_opens_read_only_by_itself(tmp_path: Path, key: bytes) -> None:
    """The store is bind-mounted read-only (in a mount namespace of its own, so nothing outlives the
    test) and opened there with no option: as a user would open a mounted backup."""
    store, view = tmp_path / "s", tmp_path / "ro"
    _make(store, key)
    view.mkdir()
    before = _snapshot(store)
    script = textwrap.dedent(
        f"""
        from sovseal import Sovseal
        from sovseal.errors import ReadOnlyStoreError
        from tests.fakes import fake_embed
        with Sovseal({str(view)!r}, key=bytes.fromhex({key.hex()!r}), embedder=fake_embed) as mem:
            assert mem._store.read_only
            assert mem.get("user.shell").payload == "zsh"
            assert [m.path for m in mem.recall("editor", k=1)] == ["user.editor"]
            assert mem.verify().ok and mem.export_items()
            try:
                mem.store("x", "y")
            except ReadOnlyStoreError as exc:
                print("refused:", exc)
        """
    )
    root = Path(__file__).resolve().parents[2]
    mount = f'mount --bind {store} {view} && mount -o remount,ro,bind {view} && exec {sys.executable} -c "$0"'
    done = subprocess.run(["unshare", "-m", "sh", "-c", mount, script], cwd=root, capture_output=True, text=True, check=False, timeout=120)
    if "mount" in done.stderr and done.returncode != 0 and "Traceback" not in done.stderr:
        pytest.skip(f"a read-only bind mount was refused here ({done.stderr.strip()}); read_only=True covers the same code")
    assert done.returncode == 0, done.stderr
    assert "refused:" in done.stdout and "read-only" in done.stdout
    assert _snapshot(store) == before


def test_verify_reports_what_recovery_did_on_open(tmp_path: Path, key: bytes) -> None:
    store = tmp_path / "s"
    _make(store, key)
    with (store / "journal.log").open("ab") as journal:
        journal.write(b"\x00\x00\x01\x00torn")  # an append that never finished
    with Sovseal(store, key=key, embedder=fake_embed) as mem:
        report = mem.verify()
        assert report.ok
        assert any("torn tail" in r for r in report.repairs)
