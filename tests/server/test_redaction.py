"""Redactions on the replication server (docs/design.md, "Redaction skeletons", paragraph Replication).

The real server over loopback HTTP, on SQLite and on the real PostgreSQL of the session fixture
(``tests/replication/conftest.py``). Records are real (a store's outbox); the redactions are made
here, with random sealed bodies and skeleton seals: the server cannot open either, it swaps bytes.
What is checked: the bodies a redaction names (accepted, other versions, held) become skeletons in
place; a record pushed for an erased id later is stored as its skeleton or dropped, never with its
content; the erased ids outlive a restart; the replaced bytes are gone from the database's files;
on PostgreSQL the writer role may update bodies but still delete nothing.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from psycopg import errors

from sovseal import Sovseal
from sovseal.replication.protocol import PROJECT_HEADER, PUSH_PATH, encode_push
from sovseal.server import Limits, ServerThread
from sovseal.server.validate import MAX_ERASED_PER_PUSH, TooManyItems, parse_push
from sovseal.storage.frames import MAX_ERASED, REDACTED
from sovseal.storage.wire import WireItem
from tests.fakes import fake_embed
from tests.replication.conftest import database, postgres_url, wait_for  # noqa: F401 - the fixtures, shared with tests/replication
from tests.replication.helpers import server_items
from tests.replication.test_roles import Deployment, deployment  # noqa: F401 - the least-privilege fixture

PROJECT = "a" * 64


@pytest.fixture
def srv(database: str) -> Iterator[ServerThread]:  # noqa: F811 - the imported fixture
    with ServerThread(database, limits=Limits(max_body=1024 * 1024, max_items=64)) as s:
        yield s


def http(srv: ServerThread, api_key: str) -> httpx.Client:
    return httpx.Client(base_url=srv.url, headers={PROJECT_HEADER: PROJECT, "Authorization": f"Bearer {api_key}"}, timeout=10)


def push(client: httpx.Client, items: list[WireItem], after: str = "") -> httpx.Response:
    return client.post(PUSH_PATH, content=encode_push(items, after), headers={"Content-Type": "application/json"})


def source(tmp_path: Path, key: bytes) -> list[WireItem]:
    """A store's outbox: small records, and one of 20 kB (a body SQLite keeps on overflow pages, PostgreSQL in TOAST)."""
    with Sovseal(tmp_path / "source", key=key, embedder=fake_embed, endpoint="") as mem:
        mem.store("user.editor", "vim")
        mem.store("user.secret", os.urandom(15_000).hex())
        mem.store("user.pager", "less")
        mem.store("user.shell", {"name": "fish"})
        mem.store("user.editor", "neovim")
        mem.store("user.notes", "remember the milk")
        mem.store("user.pager", "most")
        mem.store("user.shell", {"name": "zsh"})
        mem.store("user.notes", "and the bread")
        mem.store("user.editor", "helix")
        mem.store("user.pager", "bat")
        return mem._store.outbox(1000)


def redaction(*records: WireItem, sealed: bytes | None = None) -> tuple[WireItem, dict[str, bytes]]:
    """A redaction naming ``records``, and the skeleton seal it carries for each."""
    seals = {r.id: os.urandom(80) for r in records}
    sealed = sealed or os.urandom(200)
    item = WireItem(
        "redaction", hashlib.sha256(sealed).hexdigest(), "", "", "", sealed, time.time(), erased=tuple(seals.items())
    )
    return item, seals


def skeleton_json(record: WireItem, seal: bytes) -> dict[str, Any]:
    """What a device pushes for the skeleton of ``record``, and what the server must serve for it."""
    return dataclasses.replace(record, sealed=seal, flags=record.flags | REDACTED).to_json()


def served(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{k: v for k, v in r.items() if k != "seq"} for r in rows]


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def fragments(sealed: bytes) -> list[bytes]:
    """Pieces of a body's ``sealed`` text as stored (base64), every 16 characters: any surviving
    stretch of 48 characters or more contains one of them."""
    text = b64(sealed).encode()
    return [text[i : i + 32] for i in range(0, len(text) - 32, 16)]


def bytes_left(database: str, sealed: list[bytes]) -> list[int]:  # noqa: F811 - the fixture's value
    """Which of ``sealed`` (by index) still has a fragment anywhere in the database's files."""
    if database.startswith("postgresql"):
        blob = postgres_files(database)
    else:
        blob = b"".join(p.read_bytes() for p in Path(database).parent.glob(Path(database).name + "*"))
    return [n for n, s in enumerate(sealed) if any(f in blob for f in fragments(s))]


def postgres_files(url: str) -> bytes:
    """The on-disk pages of the items and held tables (heap and TOAST), dead tuples included, after a CHECKPOINT."""
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CHECKPOINT")
        data = Path(str(conn.execute("SHOW data_directory").fetchone()[0]))  # type: ignore[index]
        paths = []
        for table in ("items", "held"):
            query = "SELECT pg_relation_filepath(%s::regclass), reltoastrelid FROM pg_class WHERE oid = %s::regclass"
            rel = conn.execute(query, (table, table)).fetchone()
            assert rel is not None
            paths.append(rel[0])
            paths.append(conn.execute("SELECT pg_relation_filepath(%s::oid::regclass)", (rel[1],)).fetchone()[0])  # type: ignore[index]
    blob = b""
    for path in paths:
        for segment in sorted(data.glob(f"{path}*")):  # the main fork and its 1 GB segments (not _fsm/_vm)
            if segment.name == Path(path).name or segment.name.startswith(Path(path).name + "."):
                blob += segment.read_bytes()
    return blob


def assert_gone_from_files(srv: ServerThread, database: str, gone: list[bytes]) -> None:  # noqa: F811
    """No fragment of ``gone`` is left in the database's files.

    SQLite: by what the server did itself (secure_delete, then the WAL checkpointed and truncated).
    PostgreSQL: the server (here the tables' owner) ran a plain VACUUM in the background, which
    removes the dead row versions but does not promise to overwrite their bytes; VACUUM FULL, what
    docs/replication.md tells an operator to run for that guarantee, rewrites the files.
    """
    if database.startswith("postgresql"):
        wait_for(lambda: srv.storage.db._vacuum_thread is None, what="the server's VACUUM")  # type: ignore[attr-defined]
        with psycopg.connect(database, autocommit=True) as conn:
            count = conn.execute(
                "SELECT vacuum_count FROM pg_stat_user_tables WHERE relname = 'items' AND schemaname = current_schema()"
            ).fetchone()
            assert count is not None and count[0] >= 1
            conn.execute("VACUUM FULL items, held")
    assert bytes_left(database, gone) == []


def all_bodies(srv: ServerThread) -> str:
    """Every body the database holds in items and held, as SQL sees them."""
    with srv.storage.reads.reader() as tx:
        rows = tx.execute("SELECT body FROM items UNION ALL SELECT body FROM held")
    return "\n".join(str(r[0]) for r in rows)


def test_a_redaction_replaces_accepted_held_and_version_bodies_with_skeletons(
    srv: ServerThread, database: str, tmp_path: Path, key: bytes  # noqa: F811
) -> None:
    items = source(tmp_path, key)
    records = [i for i in items if i.kind == "record"]
    big = max(records, key=lambda r: len(r.sealed))
    accepted = next(r for r in records if r is not big and items.index(r) < 6)
    assert items.index(big) < 6
    held = next(r for r in records if items.index(r) > 8)
    version = dataclasses.replace(accepted, sealed=os.urandom(len(accepted.sealed)), created_at=accepted.created_at + 1)
    api = srv.storage.create_api_key(PROJECT)
    with http(srv, api) as client:
        assert push(client, items[:6]).status_code == 200
        assert push(client, [version], items[5].id).json()["accepted"] == 1  # stored as <id>.<digest16>
        assert push(client, items[8:], items[7].id).json()["held"] == [i.id for i in items[8:]]  # items[6:8] not sent yet
        before = served(server_items(srv.url, api, PROJECT))
        item, seals = redaction(big, accepted, held)
        reply = push(client, [item]).raise_for_status().json()
        assert reply["accepted"] == 1 and reply["erased"] == 4  # big, accepted and its version, held
        again = push(client, [item]).raise_for_status().json()  # idempotent: a duplicate, applied once
        assert again["duplicates"] == 1 and again["accepted"] == 0 and again["erased"] == 0
        assert srv.storage.counts(PROJECT)["held"] == len(items) - 8
        assert push(client, items[6:8], items[5].id).json()["released"] == len(items) - 8
    after = served(server_items(srv.url, api, PROJECT))
    # Same items in the same places, the redaction after them; the named bodies are skeletons.
    assert [r["id"] for r in after] == [r["id"] for r in before] + [item.id] + [i.id for i in items[6:]]
    expected = {
        big.id: [skeleton_json(big, seals[big.id])],
        accepted.id: [skeleton_json(accepted, seals[accepted.id]), skeleton_json(version, seals[accepted.id])],
        held.id: [skeleton_json(held, seals[held.id])],
    }
    for wire, skeletons in expected.items():
        assert [r for r in after if r["id"] == wire] == skeletons
        assert all(r["flags"] & REDACTED for r in skeletons)
    untouched = [r for r in after if r["id"] not in expected and r["id"] != item.id]
    assert untouched == [i.to_json() for i in items if i.id not in expected]
    assert after[len(before)] == item.to_json()
    assert WireItem.from_json(after[len(before)]).erased == item.erased
    # The replaced bytes are nowhere: not in what SQL sees, not in the database's files.
    gone = [big.sealed, accepted.sealed, version.sealed, held.sealed]
    text = all_bodies(srv)
    assert not any(b64(s) in text for s in gone)
    assert_gone_from_files(srv, database, gone)
    kept = [i.sealed for i in items if i.id not in expected]
    assert bytes_left(database, kept) == list(range(len(kept)))  # the scan does find what is there


def test_a_record_pushed_after_its_redaction_is_stored_as_its_skeleton_or_dropped(
    srv: ServerThread, database: str, tmp_path: Path, key: bytes  # noqa: F811
) -> None:
    """A device that has not pulled the redaction still drains its outbox: 200, and no content stored."""
    items = source(tmp_path, key)
    records = [i for i in items if i.kind == "record"]
    known = next(r for r in records if items.index(r) < 6)
    unseen = next(r for r in records if items.index(r) > 6)  # the server has never had it
    api = srv.storage.create_api_key(PROJECT)
    item, seals = redaction(known, unseen)
    with http(srv, api) as client:
        assert push(client, items[:6]).status_code == 200
        assert push(client, [item], items[5].id).json()["erased"] == 1  # only `known` was stored
        # A device replays its whole outbox: `known` again (content), a new version of it, and `unseen`.
        twin = dataclasses.replace(known, sealed=os.urandom(len(known.sealed)), created_at=known.created_at + 2)
        reply = push(client, [*items[:6], twin, *items[6:]]).raise_for_status().json()
        assert reply["accepted"] == len(items) - 6 and reply["held"] == []  # `unseen` (its skeleton) and all after it
        assert reply["dropped"] == 1 and reply["duplicates"] == 6  # the twin dropped; `known` matched its skeleton
        assert push(client, [twin]).json()["dropped"] == 1  # and again, alone
        assert push(client, [skeleton_json_item(known, seals[known.id])]).json()["duplicates"] == 1  # a device pushing the skeleton
    rows = served(server_items(srv.url, api, PROJECT))
    assert [r["id"] for r in rows] == [*(i.id for i in items[:6]), item.id, *(i.id for i in items[6:])]
    assert [r for r in rows if r["id"] == unseen.id] == [skeleton_json(unseen, seals[unseen.id])]
    assert [r for r in rows if r["id"] == known.id] == [skeleton_json(known, seals[known.id])]
    gone = [known.sealed, unseen.sealed, twin.sealed]
    assert not any(b64(s) in all_bodies(srv) for s in gone)
    assert srv.storage.counts(PROJECT)["held"] == 0
    assert_gone_from_files(srv, database, gone)


def skeleton_json_item(record: WireItem, seal: bytes) -> WireItem:
    return WireItem.from_json(skeleton_json(record, seal))


def test_erased_ids_outlive_a_restart(database: str, tmp_path: Path, key: bytes) -> None:  # noqa: F811
    items = source(tmp_path, key)
    record = next(i for i in items if i.kind == "record")
    item, seals = redaction(record)
    with ServerThread(database) as first:
        api = first.storage.create_api_key(PROJECT)
        with http(first, api) as client:
            assert push(client, [item]).json()["erased"] == 0  # names a record the server has never seen
    with ServerThread(database) as second, http(second, api) as client:
        reply = push(client, items).raise_for_status().json()
        assert reply["accepted"] == len(items) and reply["dropped"] == 0
        twin = dataclasses.replace(record, sealed=os.urandom(len(record.sealed)), created_at=record.created_at + 1)
        assert push(client, [twin]).json()["dropped"] == 1
        rows = served(server_items(second.url, api, PROJECT))
        assert [r for r in rows if r["id"] == record.id] == [skeleton_json(record, seals[record.id])]
        assert b64(record.sealed) not in all_bodies(second)
        with second.storage.reads.reader() as tx:
            assert tx.execute("SELECT id, redaction FROM erased") == [(record.id, item.id)]


def test_a_malformed_redaction_gets_a_400_naming_what_is_wrong(srv: ServerThread) -> None:
    api = srv.storage.create_api_key(PROJECT)
    wire = "c" * 64
    good, _ = redaction(dataclasses.replace(WireItem("record", wire, "", "d" * 32, "e" * 64, b"x" * 40, 0.0), flags=0))
    base = good.to_json()
    seal = b64(os.urandom(60))

    def variant(**changes: object) -> dict[str, object]:
        return {k: v for k, v in {**base, **changes}.items() if v is not None}

    cases: list[tuple[dict[str, object], str]] = [
        (variant(format=None, flags=None, after=None, parents=None), "format-3"),
        (variant(erased=[]), "erased must be a list of 1 to"),
        (variant(erased="x"), "erased must be a list of 1 to"),
        (variant(erased=[[wire, seal]] * 2), "each erased record once"),
        (variant(erased=[[f"{n:064x}", seal] for n in range(MAX_ERASED + 1)]), f"1 to {MAX_ERASED}"),
        (variant(erased=[[wire.upper(), seal]]), "erased[0] must be [wire id"),
        (variant(erased=[[wire]]), "erased[0] must be [wire id"),
        (variant(erased=[[wire, seal, seal]]), "erased[0] must be [wire id"),
        (variant(erased=[[wire, 5]]), "erased[0] must be [wire id"),
        (variant(erased=[[wire, "not base64!"]]), "not valid base64"),
        (variant(erased=[[wire, b64(b"short")]]), "skeleton seal is 5 bytes"),
        (variant(erased=[[wire, b64(os.urandom(5000))]]), "at most 4096 bytes"),
        (variant(parent=wire), "no parent, branch, path_hash or reason"),
        (variant(branch="d" * 32), "no parent, branch, path_hash or reason"),
        (variant(id="0" * 64), "sha256 of its sealed bytes"),
        (variant(parents=[wire]), "only a record has parents"),
        ({**WireItem("record", wire, "", "d" * 32, "e" * 64, b"x" * 40, 0.0).to_json(), "erased": [[wire, seal]]}, "only a redaction"),
    ]
    with http(srv, api) as client:
        for raw, message in cases:
            reply = client.post(PUSH_PATH, content=json.dumps({"records": [raw]}).encode())
            assert reply.status_code == 400, (message, reply.text)
            assert reply.json()["error"] == "invalid_item" and message in reply.json()["message"], reply.text
        assert push(client, [good]).status_code == 200  # the unchanged one is fine
    assert srv.storage.counts(PROJECT) == {"items": 1, "distinct": 1, "held": 0}


def test_a_push_names_a_bounded_number_of_erased_records() -> None:
    """All redactions of one push together: past the bound the push is too large (413, bisected by the client)."""
    records = []
    for n in range(MAX_ERASED_PER_PUSH // MAX_ERASED + 1):
        sealed = os.urandom(40)
        pairs = [[f"{n:08x}{m:056x}", b64(bytes(40))] for m in range(MAX_ERASED)]
        item = WireItem("redaction", hashlib.sha256(sealed).hexdigest(), "", "", "", sealed, 1.0).to_json() | {"erased": pairs}
        records.append(item)
    assert len(parse_push({"records": records[:-1]}, 64)[0]) == len(records) - 1
    with pytest.raises(TooManyItems, match="erased records"):
        parse_push({"records": records}, 64)


# -- PostgreSQL least privilege ---------------------------------------------------------------------


@pytest.fixture
def role_server(deployment: Deployment) -> Iterator[ServerThread]:  # noqa: F811
    with ServerThread(deployment.owner, writer=deployment.writer, reader=deployment.reader) as srv:
        yield srv


def test_the_writer_role_applies_a_redaction_and_still_cannot_delete(
    role_server: ServerThread, deployment: Deployment, tmp_path: Path, key: bytes  # noqa: F811
) -> None:
    items = source(tmp_path, key)
    record = next(i for i in items if i.kind == "record")
    api = role_server.storage.create_api_key(PROJECT)
    item, seals = redaction(record)
    with http(role_server, api) as client:
        assert push(client, items).status_code == 200
        assert push(client, [item], items[-1].id).json()["erased"] == 1  # through the writer role
    rows = served(server_items(role_server.url, api, PROJECT))
    assert [r for r in rows if r["id"] == record.id] == [skeleton_json(record, seals[record.id])]
    with role_server.storage.db.reader() as tx:
        assert tx.execute("SELECT current_user")[0][0] == deployment.writer_role
    wait_for(lambda: role_server.storage.db._vacuum_thread is None, what="the VACUUM attempt")  # type: ignore[attr-defined]
    assert role_server.storage.db._may_vacuum is False  # type: ignore[attr-defined] # not the owner: left to autovacuum
    writes = role_server.storage.db
    with writes.transaction() as tx:  # exactly what a redaction needs
        tx.execute("UPDATE items SET body = body, digest = digest WHERE project = ?", (PROJECT,))
        tx.execute("UPDATE held SET body = body, digest = digest, body_bytes = body_bytes WHERE project = ?", (PROJECT,))
        tx.execute("INSERT INTO erased (project, id, seal, redaction, erased_at) VALUES ('p', 'i', 's', 'r', 0)")
    for statement in (
        "DELETE FROM items",
        "DELETE FROM held",
        "DELETE FROM erased",
        "TRUNCATE items",
        "TRUNCATE erased",
        "UPDATE items SET id = 'x'",
        "UPDATE items SET seq = seq + 1",
        "UPDATE items SET kind = 'x'",
        "UPDATE held SET id = 'x'",
        "UPDATE erased SET seal = 'x'",
        "UPDATE erased SET id = 'x'",
    ):
        with pytest.raises((errors.InsufficientPrivilege, errors.ActiveSqlTransaction)), writes.transaction() as tx:
            tx.execute(statement)
    with role_server.storage.reads.reader() as tx:
        for statement in ("UPDATE items SET body = '{}'", "INSERT INTO erased VALUES ('p', 'j', 's', 'r', 0)"):
            with pytest.raises(errors.InsufficientPrivilege):
                tx.execute(statement)


# -- end to end: real devices ------------------------------------------------------------------------


def test_a_purge_on_one_device_reaches_the_server_and_a_device_restored_afterwards(
    srv: ServerThread, database: str, tmp_path: Path, key: bytes  # noqa: F811
) -> None:
    """Device one stores a secret and replicates it, device two pulls it; one purges it. The server
    then holds only skeletons, two erases it on its next pull, and a device restored afterwards never
    sees it. Nothing of the secret's sealed item is left in the server's database."""
    from sovseal.crypto.primitives import project_blind_id
    from tests.replication.conftest import open_mem

    project = project_blind_id("default", key)
    api = srv.storage.create_api_key(project)
    with open_mem(tmp_path / "one", key, srv.url, api) as one, open_mem(tmp_path / "two", key, srv.url, api) as two:
        one.store("user.editor", "vim")
        one.store("user.secret", "correct horse battery staple")
        one.store("user.secret", "correct horse battery staple, v2")
        one.store("user.pager", "less")
        assert one.replication is not None and one.replication.flush(30)
        secret_items = [WireItem.from_json(r) for r in served(server_items(srv.url, api, project)) if r["kind"] == "record"]
        assert two.pull().waiting == 0 and two.get("user.secret") is not None
        result = one.purge("user.secret", reason="stored by mistake")
        assert len(result.erased) == 2
        assert one.replication.flush(30)
        rows = served(server_items(srv.url, api, project))
        redactions = [r for r in rows if r["kind"] == "redaction"]
        assert len(redactions) == 1 and len(redactions[0]["erased"]) == 2
        erased = {wire for wire, _ in redactions[0]["erased"]}
        skeletons = [r for r in rows if r["id"] in erased]
        assert len(skeletons) == 2 and all(r["flags"] & REDACTED for r in skeletons)
        gone = [i.sealed for i in secret_items if i.id in erased]
        assert len(gone) == 2 and not any(b64(s) in all_bodies(srv) for s in gone)
        assert two.pull().waiting == 0
        assert two.get("user.secret") is None and two.get("user.editor") is not None
        assert two.verify().ok
        one.store("user.secret", "a new value, after the purge")  # a later write is a new record, kept
        assert one.replication.flush(30)
    with open_mem(tmp_path / "three", key, srv.url, api) as three:
        assert three.pull().waiting == 0
        assert three.get("user.secret") is not None and three.get("user.secret").payload == "a new value, after the purge"  # type: ignore[union-attr]
        assert three.verify().ok
    assert_gone_from_files(srv, database, gone)


def test_an_sqlite_database_from_before_secure_delete_is_rewritten_once_on_upgrade(tmp_path: Path) -> None:
    """Schema 3 freed pages without zeroing them: a released held body could still sit in one.
    The upgrade to 4 adds ``erased`` and rewrites the file, so none does."""
    import sqlite3

    from sovseal.server import open_storage
    from sovseal.server.schema import SCHEMA_VERSION

    path = tmp_path / "old.sqlite3"
    open_storage(path).close()  # today's schema; made to look like version 3 below
    leftover = b64(os.urandom(3000))  # bigger than a page: overflow pages, freed whole
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA secure_delete=OFF")
        conn.execute("DROP TABLE erased")
        conn.execute("UPDATE sovseal_meta SET value = '3' WHERE name = 'schema'")
        conn.execute(
            "INSERT INTO held (project, hseq, id, after_id, kind, parent, branch, digest, body, received_at) "
            "VALUES ('p', 1, 'i', '', 'record', '', 'b', 'd', ?, 0)",
            (leftover,),
        )
        conn.commit()
        conn.execute("UPDATE held SET released = 1, body = '' WHERE id = 'i'")  # what a release did
        conn.commit()
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    assert leftover[1000:1100].encode() in path.read_bytes()  # still in a freed page
    storage = open_storage(path)
    try:
        with storage.reads.reader() as tx:
            assert tx.execute("SELECT value FROM sovseal_meta WHERE name = 'schema'")[0][0] == str(SCHEMA_VERSION)
            assert tx.execute("SELECT COUNT(*) FROM erased")[0][0] == 0
            assert tx.execute("PRAGMA secure_delete")[0][0] == 1
    finally:
        storage.close()
    blob = b"".join(p.read_bytes() for p in tmp_path.glob("old.sqlite3*"))
    assert leftover[1000:1100].encode() not in blob


def test_the_skeleton_of_a_format_2_record_says_redacted_and_validates() -> None:
    """A format-2 item has no flags: its skeleton carries ``"redacted": true``, as a device sends it."""
    from sovseal.server.storage import skeleton_body

    legacy = {"kind": "record", "id": "ab" * 32, "parent": "", "branch": "cd" * 16, "path_hash": "ef" * 32,
              "sealed": base64.b64encode(os.urandom(60)).decode(), "created_at": 1.7e9, "reason": ""}
    seal = base64.b64encode(os.urandom(80)).decode()
    body = json.loads(skeleton_body(json.dumps(legacy), seal))
    assert body["redacted"] is True and body["sealed"] == seal and "flags" not in body
    item = WireItem.from_json(body)
    assert item.flags & REDACTED
    items, _ = parse_push(json.loads(encode_push([item], "")), 10)
    assert json.loads(items[0].body) == body  # the server stores what a device pushes


def test_a_key_rotation_retires_the_old_project_and_replicates_to_a_new_one(
    srv: ServerThread, database: str, tmp_path: Path, key: bytes  # noqa: F811
) -> None:
    """Device one rotates its store to a new key. The old server project keeps only skeletons; the
    store replicates whole to the new key's project (with its own API key) and a device restored
    there sees everything; device two, still on the old key, erases what it holds on its next pull
    and is told how to move."""
    from sovseal.crypto.keychain import export_key
    from sovseal.crypto.primitives import project_blind_id
    from sovseal.errors import KeyRotatedError
    from sovseal.sdk.keyrotation import rotate_key
    from tests.replication.conftest import open_mem

    old_project, new_key = project_blind_id("default", key), os.urandom(32)
    new_project = project_blind_id("default", new_key)
    api_old, api_new = srv.storage.create_api_key(old_project), srv.storage.create_api_key(new_project)
    with open_mem(tmp_path / "one", key, srv.url, api_old) as one, open_mem(tmp_path / "two", key, srv.url, api_old) as two:
        one.store("user.editor", "helix")
        one.fork(branch="draft")
        one.store("user.secret", "correct horse battery staple")
        assert one.replication is not None and one.replication.flush(30)
        assert two.pull().waiting == 0
        before = {name: one.view(name).state() for name in one.branches()}
    old_bodies = [WireItem.from_json(r).sealed for r in served(server_items(srv.url, api_old, old_project)) if r["kind"] == "record"]
    result = rotate_key(tmp_path / "one", key_text=export_key(key), new_key=new_key, endpoint=srv.url, api_key=api_old)
    assert result.verified and result.retired
    rows = served(server_items(srv.url, api_old, old_project))
    assert all(r["flags"] & REDACTED for r in rows if r["kind"] == "record")
    assert not any(b64(s) in all_bodies(srv) for s in old_bodies)
    with open_mem(tmp_path / "one", new_key, srv.url, api_new) as one:
        assert one.replication is not None and one.replication.flush(30)
    with open_mem(tmp_path / "three", new_key, srv.url, api_new) as three:
        assert three.pull().waiting == 0
        assert {name: three.view(name).state() for name in three.branches()} == before
        assert three.verify().ok
    with open_mem(tmp_path / "two", key, srv.url, api_old) as two:
        with pytest.raises(KeyRotatedError) as raised:
            two.pull()
        assert raised.value.new_key_id == result.new_key_id
        assert two.state() == {} and two.verify().ok
    assert_gone_from_files(srv, database, old_bodies)
