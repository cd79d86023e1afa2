"""Two devices purging the same path while offline, then syncing (issue 36, failure 5).

Each device erases the record with a redaction of its own (its own event id and its own skeleton
seal) and compacts, so each journal holds the skeleton its own redaction made. Once they sync, each
also holds the other's redaction of the same record. Before the fix the lineage kept one redaction
per record (the last applied), so on every device the skeleton was "not the one its redaction
made" and ``verify()`` failed for good; a device restoring from the server failed the same way.
Fails on b67f551.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from sovseal import Sovseal
from sovseal.errors import ErasedError
from sovseal.server import ServerThread
from sovseal.storage import frames as fr
from tests.erasure_scan import every_file, plaintexts
from tests.replication.conftest import open_mem
from tests.replication.helpers import snapshot_of

SECRET = "the launch code is 0451-TANGO"


def _sync(*devices: Sovseal) -> None:
    """Push and pull both ways, twice."""
    for _ in range(2):
        for mem in devices:
            assert mem.replication is not None and mem.replication.flush(20), mem.status().replication
            mem.pull()


def _exchange(*devices: Sovseal) -> None:
    """The same, with export/import as the wire (no server)."""
    for _ in range(2):
        for giver in devices:
            items = giver.export_items()
            for taker in devices:
                if taker is not giver:
                    assert taker.import_items(items) == []


def _purge_offline(path: Path, key: bytes) -> bytes:
    """Purge ``user.secret`` on the device at ``path`` without a server; the skeleton seal it wrote."""
    with open_mem(path, key, None, None) as mem:
        assert mem.get("user.secret") is not None
        assert len(mem.purge("user.secret", reason=f"by {path.name}").erased) == 1
        skeletons = [i for i in mem.export_items() if i.kind == "record" and i.flags & fr.REDACTED]
        assert len(skeletons) == 1
        with mem._store.reading() as lineage:
            assert lineage.uncompacted == 0  # compacted: the journal holds this device's own skeleton
        return bytes(skeletons[0].sealed)


def _sealed_secret(mem: Sovseal) -> bytes:
    (item,) = [i for i in mem.export_items() if i.kind == "record" and i.path_hash == mem._store.path_hash("user.secret").hex()]
    return bytes(item.sealed)


def _check(mem: Sovseal, sealed: bytes, directory: Path, key: bytes) -> dict[str, Any]:
    report = mem.verify()
    assert report.ok and report.erased == 1, report
    assert mem.get("user.secret") is None
    assert "user.secret" not in mem.state()
    assert mem.get("user.kept").payload == "still here"
    assert all(SECRET not in str(m.payload) for m in mem.recall("launch code", k=5))
    with mem._store.reading() as lineage:
        (idx,) = [n.idx for n in lineage.nodes if n.redacted]
        with pytest.raises(ErasedError):  # erased content opens on no device
            mem._store.open(idx)
    assert sealed not in every_file(directory)
    assert SECRET.encode() not in plaintexts(directory, key)
    return snapshot_of(mem)


def test_two_devices_purging_one_path_offline_verify_everywhere(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    api = server.storage.create_api_key()
    with open_mem(tmp_path / "a", key, server.url, api) as a, open_mem(tmp_path / "b", key, server.url, api) as b:
        a.store("user.kept", "still here")
        a.store("user.secret", SECRET)
        _sync(a, b)
        assert b.get("user.secret").payload == SECRET
        sealed = _sealed_secret(b)

    seals = {_purge_offline(tmp_path / name, key) for name in ("a", "b")}
    assert len(seals) == 2  # each device wrote the skeleton its own redaction made

    with open_mem(tmp_path / "a", key, server.url, api) as a, open_mem(tmp_path / "b", key, server.url, api) as b:
        _sync(a, b)
        for mem in (a, b):
            assert mem.status().replication.pull_error is None
            assert sum(i.kind == "redaction" for i in mem.export_items()) == 2
        states = [_check(mem, sealed, tmp_path / name, key) for mem, name in ((a, "a"), (b, "b"))]
        assert states[0] == states[1]
        assert [r.erased for r in (a.verify(), b.verify())] == [1, 1]
        a.store("later", "written after both purges")
        _sync(a, b)
        assert b.get("later").payload == "written after both purges"
        assert snapshot_of(a) == snapshot_of(b)

    for name in ("a", "b"):  # reopened from its checkpoint: the same
        with open_mem(tmp_path / name, key, None, None) as mem:
            _check(mem, sealed, tmp_path / name, key)

    with open_mem(tmp_path / "c", key, server.url, api) as c:  # a device restored from the server
        c.pull()
        assert c.status().replication.pull_error is None
        assert c.get("later").payload == "written after both purges"
        assert _check(c, sealed, tmp_path / "c", key) == states_after(tmp_path, key)
    assert sealed not in every_file(tmp_path)  # the server's database too


def states_after(tmp_path: Path, key: bytes) -> dict[str, Any]:
    with open_mem(tmp_path / "a", key, None, None) as a:
        return snapshot_of(a)


def test_two_devices_purging_one_path_verify_after_export_import(tmp_path: Path, key: bytes) -> None:
    """The same without a server: export/import is the wire."""
    with open_mem(tmp_path / "a", key, None, None) as a, open_mem(tmp_path / "b", key, None, None) as b:
        a.store("user.kept", "still here")
        a.store("user.secret", SECRET)
        _exchange(a, b)
        sealed = _sealed_secret(b)
    seals = {_purge_offline(tmp_path / name, key) for name in ("a", "b")}
    assert len(seals) == 2
    with open_mem(tmp_path / "a", key, None, None) as a, open_mem(tmp_path / "b", key, None, None) as b:
        _exchange(a, b)
        assert _check(a, sealed, tmp_path / "a", key) == _check(b, sealed, tmp_path / "b", key)
        with open_mem(tmp_path / "c", key, None, None) as c:  # a new device from either one's export
            assert c.import_items(b.export_items()) == []
            assert c.import_items(a.export_items()) == []
            assert _check(c, sealed, tmp_path / "c", key) == snapshot_of(a)


def test_a_prefix_purge_run_again_finds_a_concurrent_purge_that_named_it_second(tmp_path: Path, key: bytes) -> None:
    """Running a purge by prefix again finds what it erased through the redaction bodies; the one
    that named this prefix may be the second redaction of the record here, not the first."""
    with open_mem(tmp_path / "a", key, None, None) as a, open_mem(tmp_path / "b", key, None, None) as b:
        a.store("user.kept", "still here")
        a.store("user.secret", SECRET)
        _exchange(a, b)
        assert len(a.purge(prefix="user.", compact=False).erased) == 2  # a's names "user."
        assert len(b.purge(prefix="user.secret").erased) == 1  # b's names "user.secret"
        _exchange(a, b)
        assert a.purge(prefix="user.secret").erased == []  # no UnknownPathError: b's purge named it
        assert b.purge(prefix="user.").erased == [] and b.get("user.kept") is None
        for mem in (a, b):
            report = mem.verify()
            assert report.ok and report.erased == 2, report
