"""Durability audit: what each call fsyncs, traced byte by byte, and a simulated power loss.

tests/core/test_durability.py checks the *order* of write and fsync events on the journal. This
scenario checks the *bytes*: a tracer wraps ``os.write``/``os.fsync`` in the process and keeps a
model of the durable disk, by inode: a file's durable content is what it held at its last fsync,
a directory's durable entries are what it listed at its last fsync (a new or renamed entry is not
durable before its directory is fsynced). After every call returns,
every byte written to every file of the store and every entry of its directories must be durable.

What is traced: everything sovseal writes through Python's ``os`` module (the journal, store.json,
the store directories). What is not: ``index/``, the LanceDB table, written by Rust and by design
not fsynced; docs/design.md makes the journal the source of truth and the index rebuildable, so
the power-loss image drops it entirely and the reopened store must rebuild it.

The power loss: build a copy of the store holding only the durable model (unsynced bytes
dropped, undurable entries gone) and open it: every acknowledged operation must be there. The
same run with fsyncs deliberately dropped must lose data, which proves the simulation can fail.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sovseal import Sovseal
from tests.fakes import fake_embed

pytestmark = pytest.mark.skipif(not Path("/proc/self/fd").exists(), reason="names file descriptors through /proc")


def fd_path(fd: int) -> str:
    return os.readlink(f"/proc/self/fd/{fd}")


@dataclass
class DurableModel:
    """What survives a power cut: file bytes as of their last fsync, directory entries likewise."""

    data: dict[int, bytes] = field(default_factory=dict)  # inode -> content at its last fsync
    entries: dict[str, dict[str, int]] = field(default_factory=dict)  # dir path -> {name: inode} at its last fsync
    written: dict[int, int] = field(default_factory=dict)  # inode -> bytes written through os.write
    synced_bytes: int = 0
    file_fsyncs: int = 0
    dir_fsyncs: int = 0
    dropped: int = 0

    def baseline(self, directory: Path) -> None:
        """Treat what already exists above the store as durable (it predates the trace)."""
        self.entries[str(directory)] = {e.name: e.inode() for e in os.scandir(directory)}


class Tracer:
    """Wraps os.write and os.fsync; ``drop(path, is_dir)`` makes chosen fsyncs no-ops (the control)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, drop: Callable[[str, bool], bool]) -> None:
        self.model = DurableModel()
        real_write, real_fsync = os.write, os.fsync
        model = self.model

        def write(fd: int, data: Any) -> int:
            n = real_write(fd, data)
            ino = os.fstat(fd).st_ino
            model.written[ino] = model.written.get(ino, 0) + n
            return n

        def fsync(fd: int) -> None:
            st = os.fstat(fd)
            path = fd_path(fd)
            is_dir = stat.S_ISDIR(st.st_mode)
            if drop(path, is_dir):
                model.dropped += 1
                return
            real_fsync(fd)
            if is_dir:
                model.dir_fsyncs += 1
                model.entries[path] = {e.name: e.inode() for e in os.scandir(path)}
            else:
                model.file_fsyncs += 1
                with open(f"/proc/self/fd/{fd}", "rb") as f:  # works for O_WRONLY descriptors too
                    model.data[st.st_ino] = f.read()
                model.synced_bytes += len(model.data[st.st_ino])

        monkeypatch.setattr(os, "write", write)
        monkeypatch.setattr(os, "fsync", fsync)

    def undurable(self, store: Path) -> list[str]:
        """Every byte or entry of the store (outside index/) that a power cut now would lose."""
        problems: list[str] = []
        for dirpath, dirnames, filenames in os.walk(store):
            dirnames[:] = [d for d in dirnames if not (Path(dirpath) == store and d == "index")]
            parent = str(Path(dirpath).parent)
            if self.model.entries.get(parent, {}).get(Path(dirpath).name) != os.stat(dirpath).st_ino:
                problems.append(f"directory entry of {dirpath} not durable")
            durable = self.model.entries.get(dirpath, {})
            for name in filenames:
                path = Path(dirpath, name)
                st = os.stat(path)
                if durable.get(name) != st.st_ino:
                    problems.append(f"entry {path} not durable")
                if name != "LOCK" and self.model.data.get(st.st_ino) != path.read_bytes():
                    problems.append(f"content of {path} not durable")
        return problems

    def power_loss_image(self, store: Path, image: Path) -> None:
        """Materialise the durable model of ``store`` at ``image``: only fsynced bytes and entries."""
        parent = self.model.entries.get(str(store.parent), {})
        if store.name not in parent:
            return  # the store directory itself never became durable: nothing survives
        self._copy(store, image)

    def _copy(self, src: Path, dst: Path) -> None:
        dst.mkdir(mode=0o700)
        for name, ino in self.model.entries.get(str(src), {}).items():
            if name == "index":
                continue  # the rebuildable LanceDB index: not traced, dropped whole
            source = src / name
            if source.is_dir() and os.stat(source).st_ino == ino:
                self._copy(source, dst / name)
            else:
                (dst / name).write_bytes(self.model.data.get(ino, b""))  # entry durable, data maybe not


def workload(mem: Sovseal, other: Path, key: bytes) -> list[tuple[str, Callable[[], Any]]]:
    """Every kind of write the store makes, as (name, call)."""
    steps: list[tuple[str, Callable[[], Any]]] = []
    for i in range(12):
        steps.append((f"store {i}", lambda i=i: mem.store(f"fact.{i}", {"n": i, "text": f"fact number {i}"})))
    steps += [
        ("reinforce", lambda: mem.store("fact.3", {"n": 3, "text": "fact number 3"})),
        ("delete", lambda: mem.delete("fact.4")),
        ("fork", lambda: mem.fork(branch="side")),
        ("store on fork", lambda: mem.store("side.only", "x")),
        ("checkout", lambda: mem.checkout("main")),
        ("rollback", lambda: mem.rollback(mem.log()[2].snapshot_id)),
        ("store after rollback", lambda: mem.store("fact.after", "y")),
        ("replication ack", lambda: mem._store.ack([i.id for i in mem._store.outbox(5)])),
    ]
    return steps


def run(tmp_path: Path, key: bytes, monkeypatch: pytest.MonkeyPatch, drop: Callable[[str, bool], bool]) -> dict[str, Any]:
    """Trace the workload and an import into a second store; then the power cut. Returns the findings."""
    store, other = tmp_path / "live" / "store", tmp_path / "live" / "copy"
    (tmp_path / "live").mkdir()
    tracer = Tracer(monkeypatch, drop)
    tracer.model.baseline(tmp_path / "live")
    problems: dict[str, list[str]] = {}
    with Sovseal(store, key=key, embedder=fake_embed) as mem:
        problems["open"] = tracer.undurable(store)
        for name, call in workload(mem, other, key):
            call()
            problems[name] = tracer.undurable(store)  # checked the moment the call returned
        expected = {"heads": mem.heads(), "main": mem.state(), "acked_outbox": len(mem._store.outbox(10**9))}
        items = mem.export_items()
        with Sovseal(other, key=key, embedder=fake_embed) as copy:
            copy.import_items(items)  # appends without fsync per frame, one fsync per batch
            problems["import"] = tracer.undurable(other)
            expected["copy_heads"] = copy.heads()
    monkeypatch.undo()  # the image and the reopen are not part of the trace
    lost: list[str] = []
    for name, live in (("store", store), ("copy", other)):
        image = tmp_path / f"image-{name}"
        tracer.power_loss_image(live, image)
        if not (image / "journal.log").exists():
            lost.append(f"{name}: the store did not survive at all")
            continue
        with Sovseal(image, key=key, embedder=fake_embed) as mem:
            heads = mem.heads()
            want = expected["heads" if name == "store" else "copy_heads"]
            if heads != want:
                lost.append(f"{name}: heads {heads} != {want}")
            elif name == "store":
                if mem.state() != expected["main"]:
                    lost.append("store: state differs")
                if len(mem._store.outbox(10**9)) != expected["acked_outbox"]:
                    lost.append("store: replication acks lost")
                assert [m.path for m in mem.recall("fact number 7", k=1)] == ["fact.7"]  # index rebuilt
            if not mem.verify().ok:
                lost.append(f"{name}: verify failed")
    m = tracer.model
    return {
        "undurable": {k: v for k, v in problems.items() if v},
        "lost": lost,
        "calls_audited": len(problems),
        "bytes_written": sum(m.written.values()),
        "file_fsyncs": m.file_fsyncs,
        "dir_fsyncs": m.dir_fsyncs,
        "fsyncs_dropped": m.dropped,
    }


def test_every_call_leaves_its_bytes_and_entries_durable_and_survives_power_loss(
    tmp_path: Path, key: bytes, monkeypatch: pytest.MonkeyPatch, figures: dict[str, Any]
) -> None:
    """Proves: after each store/delete/fork/rollback/ack/import returns, every byte it wrote and
    every directory entry it made are fsynced; a power cut then loses nothing acknowledged."""
    found = run(tmp_path, key, monkeypatch, drop=lambda path, is_dir: False)
    figures.update({k: v for k, v in found.items() if k not in ("undurable", "lost")})
    assert found["undurable"] == {}
    assert found["lost"] == []


@pytest.mark.parametrize(
    "control",
    ["journal file fsyncs", "directory fsyncs", "all fsyncs"],
)
def test_with_fsyncs_dropped_the_audit_fails_and_power_loss_loses_data(
    tmp_path: Path, key: bytes, monkeypatch: pytest.MonkeyPatch, control: str, figures: dict[str, Any]
) -> None:
    """Proves the audit can fail: with fsyncs deliberately disabled, both the per-call check and the
    power-loss image report the loss (a test that cannot fail proves nothing)."""
    drop = {
        "journal file fsyncs": lambda path, is_dir: path.endswith("journal.log"),
        "directory fsyncs": lambda path, is_dir: is_dir,
        "all fsyncs": lambda path, is_dir: True,
    }[control]
    found = run(tmp_path, key, monkeypatch, drop=drop)
    figures.update(lost=len(found["lost"]), calls_flagged=len(found["undurable"]), fsyncs_dropped=found["fsyncs_dropped"])
    assert found["fsyncs_dropped"] > 0
    assert found["undurable"], "the per-call audit missed the dropped fsyncs"
    assert found["lost"], "the simulated power loss lost nothing although fsyncs were dropped"
