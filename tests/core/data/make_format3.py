"""Write the golden format-3 store under ``tests/core/data/format3`` (run from the repository root).

    python tests/core/data/make_format3.py

Every later release must read this store as the release that wrote it did
(tests/core/test_format3_golden.py). Do not run this again to "update" it: a golden store is
written once per journal format, and a new format gets a new directory and a new generator.

The key is ``bytes(range(32))`` and the embedder is the fake one of ``tests/fakes.py``. The clock
and ``os.urandom`` are replaced by fixed sequences while it runs, so a run writes the same bytes
(nonces stay unique: the stream never repeats); nothing else about the store is special.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
OUT = Path(__file__).resolve().parent / "format3"
KEY = bytes(range(32))
#: 2025-06-01T00:00:00Z, then one second per call: a past date on any machine that runs the suite.
EPOCH = 1_748_736_000.0

sys.path.insert(0, str(ROOT))


class _Clock:
    """A clock that moves one second each time it is read."""

    def __init__(self) -> None:
        self.now = EPOCH

    def __call__(self) -> float:
        self.now += 1.0
        return self.now


class _Random:
    """Bytes from SHAKE-256 over a counter: fixed, and never the same twice."""

    def __init__(self) -> None:
        self.counter = 0

    def __call__(self, n: int) -> bytes:
        self.counter += 1
        return hashlib.shake_256(b"sovseal format3 golden %d" % self.counter).digest(n)


def write(directory: Path) -> dict[str, object]:
    """Write the store into ``directory`` and return what the writing release reads from it."""
    from sovseal import Sovseal
    from tests.fakes import fake_embed

    with Sovseal(directory, key=KEY, embedder=fake_embed) as mem:
        first = mem.store("user.editor", {"value": "neovim"}, type="semantic").snapshot_id
        mem.store("user.shell", {"name": "fish"}, type="semantic")
        os_snapshot = mem.store("user.os", "linux").snapshot_id
        mem.store_many([{"path": "notes.a", "payload": "the cat sat on the mat"}, {"path": "notes.b", "payload": "quarterly report"}])
        mem.store("kv.cursor", {"n": 3}, index=False)
        mem.reinforce("user.shell")
        mem.store("user.os", "linux")  # the value HEAD shows: a second reinforcement
        mem.delete("notes.b")  # a tombstone
        mem.create_branch("draft", at=os_snapshot)  # a branch at an older snapshot
        mem.fork(first, branch="try")  # a fork from the first snapshot; the handle moves to it
        mem.store("try.note", "on the fork")
        mem.store("user.editor", {"value": "helix"})
        mem.checkout("main")
        mem.store("user.editor", {"value": "emacs"})
        assert mem.verify().ok
        return observe(mem)


def observe(mem: object) -> dict[str, object]:
    """What a release reads from the store: each branch's state, log and reinforcement counts, and recall."""
    from sovseal import Sovseal

    assert isinstance(mem, Sovseal)
    out: dict[str, object] = {}
    for branch in mem.branches():
        view = mem.view(branch)
        state = view.state()
        out[branch] = {
            "state": state,
            "log": [[e.snapshot_id, e.parent_id, e.seq, e.op, e.path] for e in view.log()],
            "reinforced": {p: view.get(p).reinforce_count for p in sorted(state)},
        }
    return {
        "branches": out,
        # The best match of each query (the order below it also weighs age, which moves with "now"),
        # and every path recall can return on main (neither the deleted nor the unindexed one).
        "recall": {query: mem.recall(query, k=1)[0].path for query in ("linux", "fish", "cat mat")},
        "recallable": sorted(m.path for m in mem.recall("anything", k=20)),
    }


def main() -> None:
    clock, random = _Clock(), _Random()
    time.time, os.urandom = clock, random  # type: ignore[assignment]
    if OUT.exists():
        shutil.rmtree(OUT)
    expected = write(OUT / "store")
    for lock in OUT.rglob("*"):  # empty lock files: made again by whoever opens a copy
        if lock.is_file() and lock.stat().st_size == 0 and "lock" in lock.name.lower():
            lock.unlink()
    (OUT / "expected.json").write_text(json.dumps(expected, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    size = sum(p.stat().st_size for p in OUT.rglob("*") if p.is_file())
    print(f"wrote {OUT} ({size} bytes)")


if __name__ == "__main__":
    main()
