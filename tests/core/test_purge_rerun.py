"""Rerunning an interrupted purge by prefix finishes it (issue #36, failure 6; docs/design.md,
"Purge and concurrent writes").

A purge commits its redaction, then rewrites the journal (compaction). Cut between the two (an
ENOSPC in the rewrite, a SIGKILL, or ``compact=False``), the records are erased for reads and the
catalogue, yet their sealed entries are still in the journal. Running the same purge again must
finish the rewrite. By path this always worked (a path's keyed hash stays on its skeletons); by
prefix the rerun raised ``UnknownPathError`` on fcf94c8 (and b67f551), because the prefix no longer
matched any catalogued path, so the erased ciphertext stayed on disk.
"""

from __future__ import annotations

import errno
import signal
import subprocess
import sys
from pathlib import Path

import pytest

import sovseal.storage.compaction
from sovseal import Sovseal
from sovseal.errors import UnknownPathError
from sovseal.storage import frames as fr
from tests.erasure_scan import every_file, plaintexts, sealed_under
from tests.fakes import fake_embed

ROOT = str(Path(__file__).resolve().parents[2])
CANARY = "canary 4111-1111-1111-1111 card number"


def _open(directory: Path, key: bytes) -> Sovseal:
    return Sovseal(directory, key=key, embedder=fake_embed)


def _fill(directory: Path, key: bytes) -> list[bytes]:
    """A store with two records (three versions) under ``card.`` and others beside them; the sealed
    entry bytes of everything under the prefix, as the journal holds them."""
    with _open(directory, key) as mem:
        mem.store_many([{"path": f"bulk.{i}", "payload": "y" * 2000} for i in range(50)])  # under close()'s threshold
        mem.store("card.number", CANARY)
        mem.store("card.number", CANARY + " (renewed)")
        mem.store("card.holder", "Grace " + CANARY)
        mem.store("cardigan", "not under the prefix")
        return [s for versions in sealed_under(mem, "card.").values() for s in versions]


def _assert_interrupted(mem: Sovseal, directory: Path, sealed: list[bytes], erased: int = 3) -> None:
    """Erased for reads (the redaction is durable), but the rewrite never ran."""
    assert mem.get("card.number") is None and mem.get("card.holder") is None
    assert mem.erasures() == erased
    with mem._store.reading() as lineage:
        assert lineage.uncompacted > 0
    assert all(s in every_file(directory) for s in sealed)


def _assert_finished(mem: Sovseal, directory: Path, sealed: list[bytes]) -> None:
    """Nothing of the erased records is left but their skeletons, and the lineage verifies."""
    store = mem._store
    with store.reading() as lineage:
        assert lineage.uncompacted == 0
        erased = [n.idx for n in lineage.nodes if n.redacted]
        assert len(erased) == 3
        for idx in erased:
            frame = store.decode(store.recheck(idx))
            assert isinstance(frame, fr.RecordFrame) and frame.redacted  # a skeleton on disk, not the record
    journal = (directory / "journal.log").read_bytes()
    assert not any(s in journal for s in sealed)
    assert not any(s in every_file(directory) for s in sealed)
    report = mem.verify()
    assert report.ok, report.problems
    assert mem.get("cardigan").payload == "not under the prefix"


def test_a_purge_by_prefix_cut_short_by_enospc_is_finished_by_running_it_again(
    tmp_path: Path, key: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = tmp_path / "s"
    sealed = _fill(directory, key)

    def full_disk(store: object) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with _open(directory, key) as mem:
        with monkeypatch.context() as patched:
            patched.setattr(sovseal.storage.compaction, "compact", full_disk)
            with pytest.raises(OSError) as failed:
                mem.purge(prefix="card.")
            assert failed.value.errno == errno.ENOSPC
        _assert_interrupted(mem, directory, sealed)
        again = mem.purge(prefix="card.")  # the disk has room again: the same purge, as the docs say
        assert again.erased == [] and again.compacted and again.bytes_reclaimed > 0
        _assert_finished(mem, directory, sealed)
        done = mem.purge(prefix="card.")  # finished: nothing new, nothing left to rewrite, still no error
        assert done.erased == [] and not done.compacted
    assert CANARY.split()[1].encode() not in plaintexts(directory, key)


KILLED_IN_COMPACTION = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
import sovseal.storage.compaction
from sovseal import Sovseal
from tests.fakes import fake_embed

sovseal.storage.compaction.compact = lambda store: os.kill(os.getpid(), signal.SIGKILL)  # after the redaction, before the rewrite
with Sovseal(Path(sys.argv[1]), key=bytes.fromhex(sys.argv[2]), embedder=fake_embed) as mem:
    mem.purge(prefix=["card.", "nothing.here."])
"""


def test_a_purge_by_prefix_killed_before_its_rewrite_is_finished_by_running_it_again(tmp_path: Path, key: bytes) -> None:
    directory = tmp_path / "s"
    sealed = _fill(directory, key)
    done = subprocess.run([sys.executable, "-c", KILLED_IN_COMPACTION, str(directory), key.hex(), ROOT], check=False, timeout=120)
    assert done.returncode == -signal.SIGKILL
    with _open(directory, key) as mem:
        _assert_interrupted(mem, directory, sealed)
        again = mem.purge(prefix=["card.", "nothing.here."])
        assert again.erased == [] and again.compacted and again.bytes_reclaimed > 0
        _assert_finished(mem, directory, sealed)
    assert CANARY.split()[1].encode() not in plaintexts(directory, key)


def test_a_broader_prefix_or_a_deferred_purge_is_finished_too_and_a_prefix_that_never_matched_still_fails(
    tmp_path: Path, key: bytes
) -> None:
    """The rerun may name a prefix that holds the one purged (``car`` for ``card.``); a prefix that
    matched nothing ever is still UnknownPathError, and does not compact what waits in the journal."""
    directory = tmp_path / "s"
    sealed = _fill(directory, key)
    with _open(directory, key) as mem:
        mem.purge("cardigan")
        deferred = mem.purge(prefix="card.", compact=False)
        assert len(deferred.erased) == 3 and not deferred.compacted
        _assert_interrupted(mem, directory, sealed, erased=4)
        with pytest.raises(UnknownPathError, match="nothing was purged"):
            mem.purge(prefix="nobody.")
        with pytest.raises(UnknownPathError):
            mem.purge(prefix="card.number.")  # under the purged prefix, but no path was ever under it
        with mem._store.reading() as lineage:
            assert lineage.uncompacted > 0  # a failed purge rewrote nothing
        again = mem.purge(prefix="card")  # "card.", and "cardigan" by path: all already erased
        assert again.erased == [] and again.compacted
        with mem._store.reading() as lineage:
            assert lineage.uncompacted == 0
        assert not any(s in every_file(directory) for s in sealed)
        assert mem.verify().ok
