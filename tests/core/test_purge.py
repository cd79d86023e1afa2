"""Erasure (docs/design.md, "Redaction skeletons" and "Compaction"): purge, skeletons, compaction.

The central check is a scan: every byte the store directory holds (and every export) is searched
for what a purge erased, both the sealed bytes as they were on disk and, after decrypting
everything the key still opens, the plaintext. The lineage must stay verifiable end to end.
"""

from __future__ import annotations

import dataclasses
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from sovseal import Sovseal
from sovseal.errors import ErasedError, IntegrityError, InvalidInputError, UnknownPathError
from sovseal.storage import frames as fr
from sovseal.storage.store import CHECKPOINT
from sovseal.storage.wire import WireItem
from tests.erasure_scan import every_file, plaintexts
from tests.fakes import fake_embed

ROOT = str(Path(__file__).resolve().parents[2])
SECRET = "the launch code is 7351-alpha-quebec"
LATEST_TEXT = f"user secret: {SECRET} again"  # what was embedded for its last version (sovseal.storage.entries.memory_text)


def _open(directory: Path, key: bytes) -> Sovseal:
    return Sovseal(directory, key=key, embedder=fake_embed)


def _sealed_entries(mem: Sovseal, path: str) -> list[bytes]:
    """The sealed entry bytes of every version of ``path``, as its journal holds them now."""
    store = mem._store
    out = []
    with store.reading() as lineage:
        for idx in lineage.nodes.with_paths({store.path_hash(path)}):
            frame = store.decode(store.recheck(idx))
            assert isinstance(frame, fr.RecordFrame)
            out.append(frame.sealed_entry)
    return out


def _vector_bytes(text: str) -> bytes:
    vector = fake_embed([text])[0]
    return (vector / np.linalg.norm(vector)).astype(np.float32).tobytes()


def _history(mem: Sovseal) -> None:
    mem.store("user.name", "Ada")
    mem.store("user.secret", SECRET, metadata={"topic": "codes"})
    mem.store("user.secret", SECRET + " (rotated)")
    mem.fork(branch="experiment")
    mem.store("user.secret", SECRET + " on a branch")
    mem.checkout("main")
    mem.delete("user.secret")
    mem.store("user.secret", SECRET + " again")
    mem.store("user.city", "Paris")


def test_purge_erases_every_version_on_every_branch_and_the_lineage_still_verifies(tmp_path: Path, key: bytes) -> None:
    with _open(tmp_path / "s", key) as mem:
        _history(mem)
        assert mem.recall("launch code", k=10)[0].path == "user.secret"
        sealed = _sealed_entries(mem, "user.secret")
        assert len(sealed) == 5  # four stores and the tombstone
        result = mem.purge("user.secret", reason="stored by mistake")
        assert len(result.erased) == 5 and result.compacted
        assert mem.get("user.secret") is None
        assert "user.secret" not in mem.state()
        assert all(m.path != "user.secret" for m in mem.recall("launch code", k=10))
        mem.checkout("experiment")
        assert mem.get("user.secret") is None
        assert mem.get("user.name").payload == "Ada"
        mem.checkout("main")
        log = mem.log()
        assert [e.op for e in log].count("erased") == 4  # main's history: three stores and the tombstone
        assert all(e.path == "" for e in log if e.op == "erased")
        assert mem.get("user.city").payload == "Paris"  # written on top of erased records: still verifies
        report = mem.verify()
        assert report.ok, report.problems
        assert report.erased == 5
        with pytest.raises(ErasedError):
            mem._store.open(mem._store.resolve(result.erased[0]))
    data = every_file(tmp_path / "s")
    assert not any(s in data for s in sealed)
    assert _vector_bytes(f"user secret: {SECRET}") not in data  # the first version's vector (sovseal.storage.entries.memory_text)
    assert b"7351" not in plaintexts(tmp_path / "s", key)
    with _open(tmp_path / "s", key) as again:  # restart: the same state, from the journal and the checkpoint
        assert again.get("user.secret") is None and again.verify().ok
        assert again.verify().erased == 5


def test_a_write_after_the_purge_is_a_new_record_and_stays(tmp_path: Path, key: bytes) -> None:
    with _open(tmp_path / "s", key) as mem:
        _history(mem)
        mem.purge("user.secret")
        mem.store("user.secret", "a harmless value")
        assert mem.get("user.secret").payload == "a harmless value"
        assert mem.recall("harmless value", k=1)[0].path == "user.secret"
        assert mem.verify().ok


def test_purge_by_prefix_erases_every_path_under_it(tmp_path: Path, key: bytes) -> None:
    with _open(tmp_path / "s", key) as mem:
        mem.store("customer.42.name", "Grace")
        mem.store("customer.42.card", "4111 1111 1111 1111")
        mem.delete("customer.42.card")
        mem.store("customer.43.name", "Linus")
        mem.store("customerx", "not under the prefix")
        result = mem.purge(prefix="customer.42.")
        assert len(result.erased) == 3
        assert mem.get("customer.42.name") is None and mem.get("customer.43.name").payload == "Linus"
        assert mem.get("customerx").payload == "not under the prefix"
        assert mem.verify().ok
    assert b"4111" not in plaintexts(tmp_path / "s", key)


def test_bad_purges_are_refused_and_change_nothing(tmp_path: Path, key: bytes) -> None:
    with _open(tmp_path / "s", key) as mem:
        mem.store("a", 1)
        size = mem._store.journal_size()
        with pytest.raises(UnknownPathError, match="nothing was purged"):
            mem.purge("never.written")
        with pytest.raises(InvalidInputError):
            mem.purge()
        with pytest.raises(InvalidInputError):
            mem.purge("a", prefix=[""])  # a path and prefixes together are one purge, but each must be valid
        with pytest.raises(InvalidInputError):
            mem.purge(prefix="")
        assert mem._store.journal_size() == size
        mem.purge("a")
        again = mem.purge("a")  # already erased: nothing new, no error
        assert again.erased == []


def test_deferred_compaction_keeps_the_content_out_of_reads_until_compact(tmp_path: Path, key: bytes) -> None:
    with _open(tmp_path / "s", key) as mem:
        mem.store_many([{"path": f"bulk.{i}", "payload": "y" * 2000} for i in range(50)])  # under the auto threshold
        _history(mem)
        sealed = _sealed_entries(mem, "user.secret")
        result = mem.purge("user.secret", compact=False)
        assert not result.compacted
        assert mem.get("user.secret") is None  # reads treat it as erased at once
        assert all(m.path != "user.secret" for m in mem.recall("launch code", k=10))
        assert any(s in every_file(tmp_path / "s") for s in sealed)  # the bytes wait for compaction
        for item in mem.export_items():  # ... but never leave: exports carry skeletons
            assert item.sealed not in sealed
        assert mem.verify().ok
        report = mem.compact()
        assert report.skeletons == 5 and report.reclaimed > 0
    assert not any(s in every_file(tmp_path / "s") for s in sealed)


def test_deferred_erasure_past_the_threshold_is_compacted_when_the_handle_closes(tmp_path: Path, key: bytes) -> None:
    with _open(tmp_path / "s", key) as mem:
        mem.store("small", 1)
        mem.store("big", "x" * 50_000)  # most of the journal
        sealed = _sealed_entries(mem, "big")
        result = mem.purge("big", compact=False)
        assert not result.compacted and mem.erasures() == 1
        assert any(s in (tmp_path / "s" / "journal.log").read_bytes() for s in sealed)
    assert not any(s in (tmp_path / "s" / "journal.log").read_bytes() for s in sealed)  # over a quarter: close compacted


def test_a_list_of_paths_is_one_purge(tmp_path: Path, key: bytes) -> None:
    with _open(tmp_path / "s", key) as mem:
        for i in range(5):
            mem.store(f"doc.{i}", f"document {i}")
        result = mem.purge(["doc.1", "doc.3", "never.written"])
        assert len(result.erased) == 2 and mem.erasures() == 2
        assert mem.get("doc.1") is None and mem.get("doc.2").payload == "document 2"
        with pytest.raises(UnknownPathError):
            mem.purge(["never.a", "never.b"])
        with pytest.raises(InvalidInputError):
            mem.purge([])


def test_compact_unreachable_erases_what_no_branch_reaches(tmp_path: Path, key: bytes) -> None:
    with _open(tmp_path / "s", key) as mem:
        mem.store("kept", "on the branch")
        base = mem.snapshot()
        mem.store("undone", "rolled back")
        sealed = _sealed_entries(mem, "undone")
        mem.rollback(base)
        mem.purge(unreachable=True)
        assert mem.erasures() == 1 and mem.get("kept").payload == "on the branch"
        assert mem.verify().ok and mem.verify().erased == 1
    assert not any(s in every_file(tmp_path / "s") for s in sealed)


def test_export_after_a_purge_restores_skeletons_only(tmp_path: Path, key: bytes) -> None:
    with _open(tmp_path / "a", key) as a:
        _history(a)
        sealed = _sealed_entries(a, "user.secret")
        a.purge("user.secret")
        items = a.export_items()
    assert [i.kind for i in items].count("redaction") == 1
    assert not any(i.sealed in sealed for i in items)
    with _open(tmp_path / "b", key) as b:
        assert b.import_items(items) == []
        assert b.get("user.secret") is None and b.get("user.city").payload == "Paris"
        report = b.verify()
        assert report.ok and report.erased == 5
    assert b"7351" not in plaintexts(tmp_path / "b", key)


def test_a_device_holding_the_content_erases_it_when_the_redaction_arrives(tmp_path: Path, key: bytes) -> None:
    with _open(tmp_path / "a", key) as a:
        _history(a)
        before = a.export_items()
    with _open(tmp_path / "b", key) as b:  # the second device has everything, content included
        b.import_items(before)
        assert b.get("user.secret").payload == SECRET + " again"
    with _open(tmp_path / "a", key) as a:
        sealed = _sealed_entries(a, "user.secret")
        a.purge("user.secret")
        after = a.export_items()
    with _open(tmp_path / "b", key) as b:
        b.import_items(after)
        assert b.get("user.secret") is None
        assert b.verify().ok
        b.import_items(before)  # an old backup replayed: the erased content is never taken back
        assert b.get("user.secret") is None
    assert not any(s in every_file(tmp_path / "b") for s in sealed)
    assert _vector_bytes(LATEST_TEXT) not in every_file(tmp_path / "b")


def test_a_tampered_redaction_or_skeleton_is_refused(tmp_path: Path, key: bytes) -> None:
    with _open(tmp_path / "a", key) as a:
        _history(a)
        a.purge("user.secret")
        items = a.export_items()
    redaction = next(i for i in items if i.kind == "redaction")
    skeleton = next(i for i in items if i.kind == "record" and i.flags & fr.REDACTED)
    other = next(i for i in items if i.kind == "record" and not i.flags & fr.REDACTED)
    forged = [
        dataclasses.replace(redaction, erased=redaction.erased[:-1]),  # one record kept back
        dataclasses.replace(redaction, erased=((other.id, redaction.erased[0][1]), *redaction.erased[1:])),  # another record erased
        dataclasses.replace(redaction, created_at=redaction.created_at + 1),
    ]
    for bad in forged:
        with _open(tmp_path / "b", key) as b:
            b.import_items([i for i in items if i.kind != "redaction"])
            with pytest.raises(IntegrityError):
                b.import_items([bad])
    moved = dataclasses.replace(skeleton, path_hash=other.path_hash)  # a skeleton moved onto another path
    with _open(tmp_path / "c", key) as c:
        position = items.index(skeleton)
        with pytest.raises(IntegrityError):
            c.import_items([*items[:position], moved])


def test_a_restored_checkpoint_knows_what_was_erased(tmp_path: Path, key: bytes) -> None:
    with _open(tmp_path / "s", key) as mem:
        mem.store_many([{"path": f"note.{i}", "payload": f"note number {i}"} for i in range(1200)])
        mem.store("user.secret", SECRET)
        mem.recall("note", k=1)
        mem.purge("user.secret")
    assert (tmp_path / "s" / CHECKPOINT).exists()
    with _open(tmp_path / "s", key) as mem:
        assert mem._store.restored is not None
        assert mem.get("user.secret") is None
        assert all(m.path != "user.secret" for m in mem.recall("launch code", k=5))
        assert mem.verify().erased == 1
    assert b"7351" not in plaintexts(tmp_path / "s", key)


WRITER = """
import sys, time
from pathlib import Path
sys.path.insert(0, sys.argv[3])
from sovseal import Sovseal
from tests.fakes import fake_embed

directory, key = Path(sys.argv[1]), bytes.fromhex(sys.argv[2])
with Sovseal(directory, key=key, embedder=fake_embed, lock_timeout=60) as mem, open(directory / "acked", "a") as acked:
    i = 0
    while not (directory / "stop").exists():
        mem.store(f"live.{i}", {"i": i})
        acked.write(f"live.{i}\\n"); acked.flush()
        assert mem.get(f"live.{max(0, i - 5)}") is not None
        i += 1
"""


def test_writers_and_readers_in_other_processes_keep_going_during_compaction(tmp_path: Path, key: bytes) -> None:
    directory = tmp_path / "s"
    with _open(directory, key) as mem:
        mem.store_many([{"path": f"bulk.{i}", "payload": "y" * 2000} for i in range(2000)])
        for n in range(3):
            mem.store(f"user.secret.{n}", SECRET)
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(directory), key.hex(), ROOT])
    try:
        deadline = time.time() + 60
        while not (directory / "acked").exists() or len((directory / "acked").read_text().split()) < 20:
            assert time.time() < deadline and writer.poll() is None
            time.sleep(0.05)
        with _open(directory, key) as mem:
            for n in range(3):
                mem.purge(f"user.secret.{n}", compact=False)
                report = mem.compact()
                assert report.skeletons == n + 1 and report.paused < report.seconds  # every skeleton in the journal
            assert mem.compact().seconds == 0.0  # nothing erased is left: no rewrite
            assert writer.poll() is None  # still writing
    finally:
        (directory / "stop").touch()
        assert writer.wait(timeout=60) == 0
    acked = (directory / "acked").read_text().split()
    with _open(directory, key) as mem:
        assert all(mem.get(path) is not None for path in acked)
        assert all(mem.get(f"user.secret.{n}") is None for n in range(3))
        assert mem.verify().ok


CRASHER = """
import os, random, signal, sys, threading, time
from pathlib import Path
sys.path.insert(0, sys.argv[4])
from sovseal import Sovseal
from tests.fakes import fake_embed

directory, key, delay = Path(sys.argv[1]), bytes.fromhex(sys.argv[2]), float(sys.argv[3])
with Sovseal(directory, key=key, embedder=fake_embed) as mem:
    mem.store("late.write", {"v": 1})
    mem.purge("user.secret", compact=False)
    threading.Timer(delay, lambda: os.kill(os.getpid(), signal.SIGKILL)).start()
    mem.compact()
    os.kill(os.getpid(), signal.SIGKILL)
"""


def test_sigkill_at_random_points_of_compaction_loses_nothing_acknowledged(tmp_path: Path, key: bytes) -> None:
    template = tmp_path / "template"
    with _open(template, key) as mem:
        mem.store_many([{"path": f"bulk.{i}", "payload": "z" * 3000} for i in range(3000)])
        mem.store("user.secret", SECRET)
        sealed = _sealed_entries(mem, "user.secret")
    rng = random.Random(23)
    outcomes = set()
    for round_ in range(8):
        directory = tmp_path / f"r{round_}"
        subprocess.run(["cp", "-a", str(template), str(directory)], check=True)
        delay = rng.uniform(0.0, 1.2)
        done = subprocess.run([sys.executable, "-c", CRASHER, str(directory), key.hex(), str(delay), ROOT], check=False, timeout=120)
        assert done.returncode == -signal.SIGKILL
        compacted = not any(s in (directory / "journal.log").read_bytes() for s in sealed)
        outcomes.add(compacted)
        with _open(directory, key) as mem:
            assert mem.get("late.write").payload == {"v": 1}
            assert mem.get("user.secret") is None  # the redaction was acknowledged before the kill
            assert mem.get("bulk.2999") is not None
            report = mem.verify()
            assert report.ok, report.problems
            mem.compact()  # whatever the kill left, the next compaction finishes the job
        assert not any(s in (directory / "journal.log").read_bytes() for s in sealed)
    assert outcomes  # (which rounds finished before the kill depends on the machine: both are correct)


KILLED_BEFORE_REWRITE = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, sys.argv[3])
import sovseal.storage.compaction
from sovseal import Sovseal
from tests.fakes import fake_embed

sovseal.storage.compaction.compact = lambda store: os.kill(os.getpid(), signal.SIGKILL)  # crash: after the redaction, before the rewrite
with Sovseal(Path(sys.argv[1]), key=bytes.fromhex(sys.argv[2]), embedder=fake_embed) as mem:
    mem.purge("user.secret")
"""


def test_running_a_purge_again_finishes_one_a_crash_cut_short(tmp_path: Path, key: bytes) -> None:
    """Killed between its redaction and its rewrite, a purge left the sealed entries (and the
    vector) on disk; running it again has nothing new to erase, yet rewrites the journal."""
    directory = tmp_path / "s"
    with _open(directory, key) as mem:
        mem.store_many([{"path": f"bulk.{i}", "payload": "y" * 2000} for i in range(50)])  # under the auto threshold
        _history(mem)
        sealed = _sealed_entries(mem, "user.secret")
    done = subprocess.run([sys.executable, "-c", KILLED_BEFORE_REWRITE, str(directory), key.hex(), ROOT], check=False, timeout=120)
    assert done.returncode == -signal.SIGKILL
    with _open(directory, key) as mem:
        assert mem.get("user.secret") is None  # erased for reads: the redaction was durable
        assert any(s in every_file(directory) for s in sealed)  # ... but not yet from the disk
        assert _vector_bytes(LATEST_TEXT) in every_file(directory)  # and its vector
        again = mem.purge("user.secret")
        assert again.erased == [] and again.compacted and again.bytes_reclaimed > 0
        assert mem.verify().ok
    assert not any(s in every_file(directory) for s in sealed)
    assert _vector_bytes(LATEST_TEXT) not in every_file(directory)
    assert b"7351" not in plaintexts(directory, key)


def test_compaction_refuses_a_damaged_journal_and_changes_nothing(tmp_path: Path, key: bytes) -> None:
    directory = tmp_path / "s"
    with _open(directory, key) as mem:
        mem.store("a", "first")
        mem.store("b", "second")
        mem.purge("a", compact=False)
    journal = directory / "journal.log"
    data = bytearray(journal.read_bytes())
    data[120] ^= 1  # inside the first frames
    journal.write_bytes(bytes(data))
    with _open(directory, key) as mem, pytest.raises(Exception, match=r"damage|authentication"):
        mem.compact()
    assert journal.read_bytes() == bytes(data)


def test_records_written_in_journal_format_2_are_erased_on_every_device_too(tmp_path: Path) -> None:
    """A store from the previous release keeps its records' format-2 sealed bytes (flag LEGACY): their
    skeletons are bound to what the format-2 item names, and travel with ``"redacted": true``."""
    import shutil

    key = bytes(range(32))
    shutil.copytree(Path(__file__).parent / "data" / "format2" / "plain", tmp_path / "a")
    with _open(tmp_path / "a", key) as a:
        before = a.export_items()
        assert any(i.flags & fr.LEGACY for i in before)
        sealed = _sealed_entries(a, "user.editor")
        a.purge("user.editor")
        after = a.export_items()
        assert a.verify().ok and a.get("user.editor") is None
    skeletons = [i for i in after if i.flags & fr.REDACTED]
    assert skeletons and all(i.flags & fr.LEGACY for i in skeletons)
    for item in skeletons:  # on the wire: "redacted": true, the format-2 layout otherwise
        assert item.to_json()["redacted"] is True and "format" not in item.to_json()
        assert WireItem.from_json(item.to_json()).flags == fr.LEGACY | fr.REDACTED
    with _open(tmp_path / "b", key) as b:  # a device that had everything
        b.import_items(before)
        b.import_items(after)
        assert b.get("user.editor") is None and b.get("user.os").payload == "linux"
        assert b.verify().ok
    with _open(tmp_path / "c", key) as c:  # a device restored afterwards
        c.import_items(after)
        assert c.get("user.editor") is None and c.verify().ok
    for directory in ("a", "b", "c"):
        assert not any(s in every_file(tmp_path / directory) for s in sealed)


def test_a_write_on_an_offline_device_before_it_saw_the_purge_survives_it(tmp_path: Path, key: bytes) -> None:
    """Documented outcome (docs/design.md, "Purge and concurrent writes"): a purge erases the versions
    its device held; a write of the path made elsewhere before the purge arrived is concurrent with it."""
    with _open(tmp_path / "a", key) as a:
        a.store("user.secret", SECRET)
        shared = a.export_items()
    with _open(tmp_path / "b", key) as b:
        b.import_items(shared)
        b.store("user.secret", "written offline, after the purge on the other device")
        offline = b.export_items()
    with _open(tmp_path / "a", key) as a:
        a.purge("user.secret")
        purged = a.export_items()
        a.import_items(offline)  # the offline write arrives after the purge
        assert a.get("user.secret").payload == "written offline, after the purge on the other device"
    with _open(tmp_path / "b", key) as b:
        b.import_items(purged)  # the purge arrives: the version both devices had goes, the offline one stays
        assert b.get("user.secret").payload == "written offline, after the purge on the other device"
        assert b.verify().ok and b.verify().erased == 1
        assert all(SECRET not in str(m.payload) for m in b.recall("launch code", k=5))


def test_a_backup_file_written_after_a_purge_holds_no_erased_content(tmp_path: Path, key: bytes) -> None:
    """`sovseal export` after a purge: the file, opened with the key and every item in it decrypted,
    holds skeletons only (a backup written *before* the purge is out of reach, as docs/security.md says)."""
    import io

    from sovseal.sdk.backup import export_backup, import_backup
    with _open(tmp_path / "s", key) as mem:
        _history(mem)
        sealed = _sealed_entries(mem, "user.secret")
        mem.purge("user.secret")
        backup = io.BytesIO()
        export_backup(mem, key, backup)
    with _open(tmp_path / "restored", key) as restored:
        import_backup(restored, key, io.BytesIO(backup.getvalue()))
        assert restored.get("user.secret") is None and restored.verify().ok
        assert all(i.sealed not in sealed for i in restored.export_items())
    assert not any(s in every_file(tmp_path / "restored") for s in sealed)
    assert b"7351" not in plaintexts(tmp_path / "restored", key)


def test_a_purge_erases_what_another_handle_acknowledged_before_it_and_keeps_what_comes_after(tmp_path: Path, key: bytes) -> None:
    """Documented outcome of a purge racing a write (docs/design.md, "Purge and concurrent writes"):
    the purge catches up under the writer lock, so a write acknowledged before it is erased with the
    rest, and one acknowledged after it is a new record."""
    with _open(tmp_path / "s", key) as a, _open(tmp_path / "s", key) as b:
        a.store("user.secret", SECRET)
        b.store("user.secret", SECRET + " (from the other handle)")  # acknowledged before the purge
        result = a.purge("user.secret")
        assert len(result.erased) == 2
        assert b.get("user.secret") is None  # the other handle reads the erasure at once
        b.store("user.secret", "after the purge")
        assert a.get("user.secret").payload == "after the purge"
        assert a.verify().ok and b.verify().erased == 2
