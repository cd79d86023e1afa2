"""Purging a snapshot held in two versions (docs/design.md, "Versions of an erased snapshot"), over
the real server on loopback.

Two devices store the same entry on the same parent: one snapshot id, two versions (each with its
own clock). One device purges it. The other device must accept the redaction, erase its own
version too, and keep syncing; a device restoring the project afterwards must accept the skeletons
the server made of both versions. Before the fix, the skeleton seal was bound to the purging
device's version (its clock), so neither the other version nor the server's skeleton of it opened.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.crypto.primitives import project_blind_id
from sovseal.errors import IntegrityError
from sovseal.server import ServerThread
from sovseal.storage import frames as fr
from sovseal.storage.wire import WireItem
from tests.erasure_scan import every_file
from tests.replication.conftest import open_mem
from tests.replication.helpers import server_items

SECRET = "the vault combination is 31-07-59"


def _flush(*devices: Sovseal) -> None:
    for mem in devices:
        assert mem.replication is not None and mem.replication.flush(20), mem.status().replication


def _sync(*devices: Sovseal) -> None:
    for _ in range(2):
        for mem in devices:
            _flush(mem)
            mem.pull()


def _sealed_entries(mem: Sovseal, path: str) -> list[bytes]:
    """The sealed entry bytes of every record frame (every version) of ``path`` this device holds."""
    store = mem._store
    wanted = store.path_hash(path)
    out = []
    for item in mem.export_items():
        if item.kind == "record" and bytes.fromhex(item.path_hash) == wanted and not item.flags & fr.REDACTED:
            out.append(bytes(item.sealed))
    scan = store._journal.scan(0)
    for frame in scan.frames:
        body = frame.body
        if body[0] == fr.Kind.RECORD:
            record = fr.RecordFrame.decode(body)
            if record.path_hash == wanted and not record.redacted:
                out.append(record.sealed_entry)
    return out


def _two_devices_on_one_base(tmp_path: Path, key: bytes, server: ServerThread) -> tuple[str, Sovseal, Sovseal]:
    """(api key, device a, device b), both holding one record ``base``: the parent of what comes next."""
    api = server.storage.create_api_key()
    a = open_mem(tmp_path / "a", key, server.url, api)
    b = open_mem(tmp_path / "b", key, server.url, api)
    a.store("base", "0")
    _sync(a, b)
    return api, a, b


@pytest.mark.parametrize("purger", ["first", "second"])
def test_purging_a_snapshot_two_devices_wrote_erases_both_versions_everywhere(
    tmp_path: Path, key: bytes, server: ServerThread, purger: str
) -> None:
    api, a, b = _two_devices_on_one_base(tmp_path, key, server)
    try:
        first = a.store("user.secret", SECRET).snapshot_id  # the same entry on the same parent:
        second = b.store("user.secret", SECRET).snapshot_id  # one snapshot, two versions
        assert first == second
        _sync(a, b)
        versions = {s for mem in (a, b) for s in _sealed_entries(mem, "user.secret")}
        assert len(versions) == 2  # both devices hold both versions
        stored = [i["id"] for i in server_items(server.url, api, project_blind_id("default", key))]
        assert sum(i.split(".")[0] == a._store.wire_id(first).hex() for i in stored) == 2, stored  # both versions, on the server too

        eraser, other = (a, b) if purger == "first" else (b, a)
        assert eraser.purge("user.secret").erased == [first]  # the one snapshot, both versions
        _flush(eraser)
        other.pull()  # failed with IntegrityError before the fix
        assert other.get("user.secret") is None and eraser.get("user.secret") is None
        assert other.status().replication.pull_error is None

        eraser.store("later", "written after the purge")
        _flush(eraser)
        other.pull()
        assert other.get("later").payload == "written after the purge"
        other.store("later.too", "and the other way")
        _sync(other, eraser)
        assert eraser.get("later.too").payload == "and the other way"

        for mem in (a, b):
            report = mem.verify()
            assert report.ok and report.erased == 1, report
            assert all(SECRET not in str(m.payload) for m in mem.recall("vault combination", k=5))
    finally:
        a.close()
        b.close()

    c = open_mem(tmp_path / "c", key, server.url, api)  # a device restoring the project afterwards
    try:
        c.pull()  # failed with IntegrityError before the fix (the server's skeleton of the other version)
        assert c.get("user.secret") is None
        assert c.get("later").payload == "written after the purge" and c.get("later.too").payload == "and the other way"
        report = c.verify()
        assert report.ok and report.erased == 1, report
    finally:
        c.close()

    for name in ("a", "b", "c"):  # no sealed copy of either version is left anywhere
        files = every_file(tmp_path / name)
        assert not any(sealed in files for sealed in versions), name
    assert not any(sealed in every_file(tmp_path) for sealed in versions)  # the server's database too


def test_a_purge_of_a_version_the_purger_never_saw_still_erases_the_other(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    """The purging device holds only its own version; the other device's version reaches the server
    after the purge (acknowledged and dropped there), and the redaction must still erase it."""
    api, a, b = _two_devices_on_one_base(tmp_path, key, server)
    try:
        a.store("user.secret", SECRET)
        _flush(a)
        b.store("user.secret", SECRET)  # b's own version: it has not pulled a's
        own = _sealed_entries(b, "user.secret")
        a.purge("user.secret")
        _flush(a)
        _flush(b)
        b.pull()
        assert b.get("user.secret") is None and b.status().replication.pull_error is None
        b.store("later", "b keeps working")
        _flush(b)
        a.pull()
        assert a.get("later").payload == "b keeps working"
        assert a.verify().ok and b.verify().ok
    finally:
        a.close()
        b.close()
    assert not any(sealed in every_file(tmp_path / "b") for sealed in own)
    c = open_mem(tmp_path / "c", key, server.url, api)
    try:
        c.pull()
        assert c.get("user.secret") is None and c.get("later").payload == "b keeps working" and c.verify().ok
    finally:
        c.close()


def test_a_shared_skeleton_seal_still_refuses_a_skeleton_moved_or_a_redaction_forged(tmp_path: Path, key: bytes) -> None:
    """The seal fits every version of its snapshot, and nothing else: another path, other parents or
    another snapshot's id fail, and a redaction whose pairs were changed does not open."""
    with open_mem(tmp_path / "a", key, None, None) as a:
        a.store("base", "0")
        a.store("user.secret", SECRET)
        a.store("user.other", "kept")
        a.purge("user.secret")
        items = a.export_items()
    redaction = next(i for i in items if i.kind == "redaction")
    skeleton = next(i for i in items if i.kind == "record" and i.flags & fr.REDACTED)
    other = next(i for i in items if i.kind == "record" and i.path_hash != skeleton.path_hash and i.parent == skeleton.id)
    base = next(i for i in items if i.kind == "record" and not i.parent)
    position = items.index(skeleton)
    tampered: list[WireItem] = [
        dataclasses.replace(skeleton, path_hash=other.path_hash),  # moved onto another path
        dataclasses.replace(skeleton, parent="", parents=()),  # cut from its parent
        dataclasses.replace(skeleton, id=other.id),  # the seal put on another snapshot
        dataclasses.replace(other, sealed=skeleton.sealed, flags=skeleton.flags, parent=base.id, parents=(base.id,)),
    ]
    for n, bad in enumerate(tampered):
        with open_mem(tmp_path / f"c{n}", key, None, None) as c, pytest.raises(IntegrityError):
            c.import_items([*items[:position], bad])
    forged = [
        dataclasses.replace(redaction, erased=((other.id, redaction.erased[0][1]),)),
        dataclasses.replace(redaction, erased=((skeleton.id, bytes(redaction.erased[0][1])[:-1] + b"\0"),)),
    ]
    for n, bad in enumerate(forged):
        with open_mem(tmp_path / f"f{n}", key, None, None) as f:
            f.import_items([i for i in items if i.kind != "redaction"])
            with pytest.raises(IntegrityError):
                f.import_items([bad])


def test_a_skeleton_seal_made_before_versions_shared_one_still_opens(tmp_path: Path, key: bytes) -> None:
    """Seals already on servers and in journals were bound to the purging version's clear fields."""
    from sovseal.canonical import canonicalize

    with open_mem(tmp_path / "a", key, None, None) as a:
        sid = a.store("user.secret", SECRET).snapshot_id
        store = a._store
        with store.reading() as lineage:
            record = store.decode(store.recheck(lineage.by_wire[store.wire_id(sid)]))
        assert isinstance(record, fr.RecordFrame)
        body = canonicalize({"sid": sid, "op": "store", "redacted": True})
        old = store.sealing.seal(body, store.sealing._version_skeleton_aad(record))
        assert store.sealing.open_skeleton(record, old)["sid"] == sid
        with pytest.raises(IntegrityError):  # bound to that version: another clock does not open it
            store.sealing.open_skeleton(dataclasses.replace(record, hlc=record.hlc + 1), old)
