"""`sovseal export FILE --force` writes a backup file, and only a file: a symlink is followed (the
link's target is replaced, atomically, next to itself) and a FIFO or other special file is refused,
left as it was (tests use a FIFO from mkfifo; never a real device node)."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from tests.cli.conftest import Run


def _imports_into_a_fresh_store(run: Run, backup: Path, tmp_path: Path) -> bool:
    key = run("key", "export").stdout
    fresh = str(tmp_path / "fresh")
    run("key", "import", "--path", fresh, input=key)
    run("import", str(backup), "--path", fresh)
    return bool(run.json("get", "a", "--path", fresh)["payload"] == "b")


def test_export_force_writes_through_a_symlink(store: Run, tmp_path: Path) -> None:
    store("store", "a", "b")
    backups = tmp_path / "backups"
    backups.mkdir()
    target = backups / "2026-11-26.bak"
    target.write_text("old backup")
    link = tmp_path / "latest.bak"
    link.symlink_to(target)
    assert "--force" in store.fails(2, "export", str(link))
    assert target.read_text() == "old backup"
    store("export", str(link), "--force")
    assert link.is_symlink() and os.readlink(link) == str(target)  # the link stays a link
    assert target.read_bytes() != b"old backup" and _imports_into_a_fresh_store(store, link, tmp_path)
    assert sorted(p.name for p in backups.iterdir()) == ["2026-11-26.bak"]  # no temporary file left


def test_export_through_a_dangling_symlink_creates_its_target(store: Run, tmp_path: Path) -> None:
    store("store", "a", "b")
    target = tmp_path / "new.bak"
    link = tmp_path / "link.bak"
    link.symlink_to(target)
    store("export", str(link))
    assert link.is_symlink() and target.is_file() and _imports_into_a_fresh_store(store, target, tmp_path)


def test_export_refuses_a_fifo_and_leaves_it(store: Run, tmp_path: Path) -> None:
    store("store", "a", "b")
    fifo = tmp_path / "pipe.bak"
    os.mkfifo(fifo)
    for args in ((), ("--force",)):
        line = store.fails(2, "export", str(fifo), *args)
        assert "not a regular file" in line and "FIFO" in line
        assert stat.S_ISFIFO(fifo.lstat().st_mode)
    link = tmp_path / "to-pipe.bak"
    link.symlink_to(fifo)
    assert "not a regular file" in store.fails(2, "export", str(link), "--force")
    assert link.is_symlink() and stat.S_ISFIFO(fifo.lstat().st_mode)
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp")) == []
