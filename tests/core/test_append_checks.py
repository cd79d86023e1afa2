"""What each append checks after it writes: the journal it wrote to is still the store's file.

The window these tests open is the one between the writer's catch-up (which checks the journal
before anything is sealed) and the acknowledgement: a journal deleted or replaced while the record
is being sealed and written must make that store fail, never return a snapshot id for a record
that went into a file nobody will read.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.errors import LockTimeoutError, StorageError
from tests.fakes import fake_embed


def _during_next_seal(mem: Sovseal, action: Callable[[], None]) -> None:
    """Run ``action`` once, while the next record is being sealed (after the writer caught up)."""
    sealing = mem._store.sealing
    real = sealing.seal

    def seal(plaintext: bytes, aad: bytes) -> bytes:
        del sealing.seal  # once: back to the class's method
        action()
        return real(plaintext, aad)

    sealing.seal = seal  # type: ignore[method-assign]


def test_a_journal_replaced_during_an_append_is_not_acknowledged(tmp_path: Path, key: bytes) -> None:
    journal = tmp_path / "s" / "journal.log"

    def replace() -> None:  # what a compaction in another process does: a new file renamed over it
        shutil.copy(journal, tmp_path / "copy")
        os.replace(tmp_path / "copy", journal)

    with Sovseal(tmp_path / "s", key=key, embedder=fake_embed) as mem:
        mem.store("a", "one")
        _during_next_seal(mem, replace)
        with pytest.raises(StorageError, match="deleted or replaced"):
            mem.store("b", "went into the old file")
        assert mem.get("a").payload == "one"  # the handle reads the new file
        mem.store("c", "three")  # and appends to it
    with Sovseal(tmp_path / "s", key=key, embedder=fake_embed) as again:
        assert again.state() == {"a": "one", "c": "three"}


def test_a_journal_deleted_during_an_append_is_not_acknowledged(tmp_path: Path, key: bytes) -> None:
    journal = tmp_path / "s" / "journal.log"
    with Sovseal(tmp_path / "s", key=key, embedder=fake_embed) as mem:
        mem.store("a", "one")
        _during_next_seal(mem, journal.unlink)
        with pytest.raises(StorageError, match="deleted or replaced"):
            mem.store("b", "went into an unlinked file")
        with pytest.raises(StorageError, match="deleted or moved"):
            mem.store("c", "nowhere to go")


def test_a_journal_moved_away_and_back_keeps_its_handle(tmp_path: Path, key: bytes) -> None:
    """The same file under its name again (a rename there and back) is the store's file: appends go on."""
    journal = tmp_path / "s" / "journal.log"

    def away_and_back() -> None:
        os.replace(journal, tmp_path / "elsewhere")
        os.replace(tmp_path / "elsewhere", journal)

    with Sovseal(tmp_path / "s", key=key, embedder=fake_embed) as mem:
        mem.store("a", "one")
        _during_next_seal(mem, away_and_back)
        assert not mem.store("b", "two").reinforced
    with Sovseal(tmp_path / "s", key=key, embedder=fake_embed) as again:
        assert again.state() == {"a": "one", "b": "two"}


def _store_from_another_thread(mem: Sovseal, path: str) -> bool:
    """Store from a new thread; False if it did not finish (the handle's mutex was left held)."""
    done: list[object] = []
    worker = threading.Thread(target=lambda: done.append(mem.store(path, "from another thread")), daemon=True)
    worker.start()
    worker.join(10)
    return bool(done)


def test_a_write_that_cannot_start_leaves_nothing_held(tmp_path: Path, key: bytes) -> None:
    """A lock timeout, or a catch-up that fails, releases the mutex and the writer lock it took."""
    with (
        Sovseal(tmp_path / "s", key=key, embedder=fake_embed, lock_timeout=0.2) as mem,
        Sovseal(tmp_path / "s", key=key, embedder=fake_embed, lock_timeout=0.2) as other,
    ):
        lock = other._store._flock  # the writer lock of another handle (flock excludes it too)
        assert lock is not None
        lock.acquire()
        with pytest.raises(LockTimeoutError):
            mem.store("a", "blocked")
        lock.release()
        assert _store_from_another_thread(mem, "b")

        store = mem._store

        def failing_catch_up(*, owner: bool) -> None:
            del store._catch_up  # once
            raise StorageError("the catch-up failed")

        store._catch_up = failing_catch_up  # type: ignore[method-assign]
        with pytest.raises(StorageError, match="catch-up failed"):
            mem.store("c", "never written")
        other.store("d", "the other handle takes the writer lock")
        assert _store_from_another_thread(mem, "e")
        assert mem.state() == {"b": "from another thread", "d": "the other handle takes the writer lock", "e": "from another thread"}
