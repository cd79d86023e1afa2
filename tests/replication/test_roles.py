"""Least privilege on PostgreSQL: a reader role for pulls, a writer role for pushes, no DELETE for either.

Everything runs against the real PostgreSQL of the session fixture. Each test makes its own
schema and its own pair of roles (roles are cluster-wide), migrates as the owner (the cluster's
superuser), then runs the real server with ``writer=`` and ``reader=`` URLs that log in as the
two roles. What the roles may do is checked twice: in the catalog (``has_table_privilege``) and
by trying it on the very connections the server uses.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg import errors

from sovseal.crypto.primitives import project_blind_id
from sovseal.replication.protocol import PROJECT_HEADER, PULL_PATH, PUSH_PATH, encode_push
from sovseal.server import ServerThread, open_storage
from sovseal.server.schema import SCHEMA_VERSION
from sovseal.storage.wire import WireItem
from tests.replication.conftest import drop_postgres_database, fresh_postgres_database, open_mem
from tests.replication.helpers import history, server_items, snapshot_of

TABLES = ("sovseal_meta", "api_keys", "projects", "items", "branches", "held", "held_waits", "erased")


@dataclass
class Deployment:
    owner: str  # the owner's URL (the fixture's superuser, in this test's schema)
    writer: str
    reader: str
    writer_role: str
    reader_role: str


def as_role(owner_url: str, role: str, password: str | None = None) -> str:
    """The owner's URL (same host, database and search_path) logging in as ``role``."""
    scheme, rest = owner_url.split("://", 1)
    login = f"{role}:{password}" if password else role
    return f"{scheme}://{login}@{rest.split('@', 1)[1]}"


@pytest.fixture
def deployment(postgres_url: str) -> Iterator[Deployment]:
    owner = fresh_postgres_database(postgres_url)
    suffix = os.urandom(4).hex()
    reader_role, writer_role = f"sovseal_reader_{suffix}", f"sovseal_writer_{suffix}"
    try:
        yield Deployment(owner, as_role(owner, writer_role), as_role(owner, reader_role), writer_role, reader_role)
    finally:
        drop_postgres_database(owner)
        with psycopg.connect(f"{postgres_url}/postgres", autocommit=True) as conn:
            for role in (reader_role, writer_role):
                conn.execute(f'DROP ROLE IF EXISTS "{role}"')


@pytest.fixture
def server(deployment: Deployment) -> Iterator[ServerThread]:
    with ServerThread(deployment.owner, writer=deployment.writer, reader=deployment.reader) as srv:
        yield srv


def privileges(owner_url: str, role: str) -> dict[str, set[str]]:
    kinds = ("SELECT", "INSERT", "UPDATE", "DELETE", "TRUNCATE", "REFERENCES", "TRIGGER")
    out: dict[str, set[str]] = {}
    with psycopg.connect(owner_url, autocommit=True) as conn:
        for table in TABLES:
            # UPDATE granted on some columns only counts too: has_any_column_privilege sees it.
            column_kinds = {"SELECT", "INSERT", "UPDATE", "REFERENCES"}
            out[table] = {
                kind
                for kind in kinds
                if conn.execute("SELECT has_table_privilege(%s, %s, %s)", (role, table, kind)).fetchone()[0]  # type: ignore[index]
                or (kind in column_kinds and conn.execute("SELECT has_any_column_privilege(%s, %s, %s)", (role, table, kind)).fetchone()[0])  # type: ignore[index]
            }
    return out


def test_the_migration_grants_exactly_select_to_the_reader_and_no_delete_to_the_writer(
    server: ServerThread, deployment: Deployment
) -> None:
    assert privileges(deployment.owner, deployment.reader_role) == {t: {"SELECT"} for t in TABLES}
    assert privileges(deployment.owner, deployment.writer_role) == {
        "sovseal_meta": {"SELECT"},
        "api_keys": {"SELECT", "INSERT", "UPDATE"},
        "projects": {"SELECT", "INSERT", "UPDATE"},
        "items": {"SELECT", "INSERT", "UPDATE"},  # UPDATE (body, digest): a redaction's skeletons
        "branches": {"SELECT", "INSERT"},
        "held": {"SELECT", "INSERT", "UPDATE"},
        "held_waits": {"SELECT", "INSERT"},
        "erased": {"SELECT", "INSERT"},
    }
    with psycopg.connect(deployment.owner, autocommit=True) as conn:
        updatable = conn.execute(
            "SELECT table_name, column_name FROM information_schema.column_privileges "
            "WHERE grantee = %s AND privilege_type = 'UPDATE' AND table_schema = current_schema() ORDER BY 1, 2",
            (deployment.writer_role,),
        ).fetchall()
    assert updatable == [
        ("api_keys", "project"),
        ("api_keys", "revoked"),
        ("held", "body"),
        ("held", "body_bytes"),
        ("held", "digest"),
        ("held", "released"),
        ("items", "body"),
        ("items", "digest"),
        ("projects", "held_count"),
        ("projects", "next_hold"),
        ("projects", "next_seq"),
        ("projects", "project"),
    ]


def test_no_role_but_the_owner_holds_delete_or_truncate(server: ServerThread, deployment: Deployment) -> None:
    with psycopg.connect(deployment.owner, autocommit=True) as conn:
        holders = conn.execute(
            "SELECT DISTINCT c.relname, g.rolname, a.privilege_type "
            "FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace, aclexplode(c.relacl) a "
            "JOIN pg_roles g ON g.oid = a.grantee "
            "WHERE n.nspname = current_schema() AND a.privilege_type IN ('DELETE', 'TRUNCATE') AND a.grantee <> c.relowner"
        ).fetchall()
    assert holders == []


def test_the_pull_connection_cannot_write_and_the_push_connection_cannot_delete(server: ServerThread, deployment: Deployment) -> None:
    api = server.storage.create_api_key("a" * 64)  # through the writer: a real row to aim at
    assert api
    reads, writes = server.storage.reads, server.storage.db
    assert reads is not writes
    with reads.reader() as tx:
        assert tx.execute("SELECT current_user")[0][0] == deployment.reader_role
        assert tx.execute("SELECT COUNT(*) FROM api_keys")[0][0] == 1
    for statement in (
        "INSERT INTO items (project, seq, id, kind, digest, body, received_at) VALUES ('p', 1, 'i', 'record', 'd', '{}', 0)",
        "INSERT INTO api_keys (key_hash, project, label, created_at) VALUES ('h', NULL, '', 0)",
        "UPDATE api_keys SET revoked = 1",
        "UPDATE projects SET next_seq = 1",
        "DELETE FROM api_keys",
        "TRUNCATE items",
        "CREATE TABLE intruder (x INTEGER)",
    ):
        with pytest.raises(errors.InsufficientPrivilege), reads.transaction() as tx:
            tx.execute(statement)
    with writes.reader() as tx:
        assert tx.execute("SELECT current_user")[0][0] == deployment.writer_role
    for table in TABLES:
        for statement in (f"DELETE FROM {table}", f"TRUNCATE {table}"):
            with pytest.raises(errors.InsufficientPrivilege), writes.transaction() as tx:
                tx.execute(statement)
    for statement in (
        "UPDATE items SET id = 'x'",
        "UPDATE items SET seq = 0",
        "UPDATE api_keys SET key_hash = 'x'",
        "UPDATE sovseal_meta SET value = '9'",
    ):
        with pytest.raises(errors.InsufficientPrivilege), writes.transaction() as tx:
            tx.execute(statement)
    with reads.reader() as tx:
        assert tx.execute("SELECT COUNT(*) FROM api_keys")[0][0] == 1  # nothing changed


def test_the_whole_server_works_under_the_two_roles(server: ServerThread, deployment: Deployment, tmp_path: Path, key: bytes) -> None:
    project = project_blind_id("default", key)
    api = server.storage.create_api_key()  # unbound: binding on first use is a writer UPDATE
    with open_mem(tmp_path / "one", key, server.url, api) as one:
        for tag in ("", ".2", ".3"):
            history(one, tag=tag)
        assert one.replication is not None and one.replication.flush(30)
        assert one.status().outbox_records == 0  # every push acknowledged
        expected = snapshot_of(one)
    counts = server.storage.counts(project)
    assert counts["items"] == counts["distinct"] > 0 and counts["held"] == 0
    raw = server_items(server.url, api, project)
    with open_mem(tmp_path / "two", key, server.url, api) as two:  # a second device pulls through the reader
        assert two.pull().waiting == 0
        assert snapshot_of(two) == expected and two.verify().ok
    # Held items are released by an UPDATE now: push a later batch first, then the one before it.
    other = server.storage.create_api_key("c" * 64)
    headers = {"Authorization": f"Bearer {other}", PROJECT_HEADER: "c" * 64, "Content-Type": "application/json"}
    first, second = raw[:5], raw[5:10]

    def body(rows: list[dict[str, object]], after: str) -> bytes:
        return encode_push([WireItem.from_json({k: v for k, v in r.items() if k != "seq"}) for r in rows], after)

    with httpx.Client(base_url=server.url, headers=headers, timeout=10) as client:
        early = client.post(PUSH_PATH, content=body(second, str(first[-1]["id"]))).raise_for_status().json()
        assert len(early["held"]) == len(second) and server.storage.counts("c" * 64)["held"] == len(second)
        late = client.post(PUSH_PATH, content=body(first, "")).raise_for_status().json()
        assert late["released"] == len(second)
        pulled = client.get(PULL_PATH).raise_for_status().json()
    assert [r["id"] for r in pulled["records"]] == [r["id"] for r in raw[:10]]
    assert server.storage.counts("c" * 64) == {"items": 10, "distinct": 10, "held": 0}
    # Revocation is an UPDATE through the writer; the reader then refuses the key.
    assert server.storage.revoke_api_key(api)
    with httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {api}", PROJECT_HEADER: project}) as client:
        assert client.get(PULL_PATH).status_code == 401


def test_a_server_without_the_owner_url_runs_on_a_migrated_schema_and_refuses_an_unmigrated_one(
    deployment: Deployment, postgres_url: str
) -> None:
    with psycopg.connect(deployment.owner, autocommit=True) as conn:  # an administrator made the roles, nothing more
        for role in (deployment.reader_role, deployment.writer_role):
            conn.execute(f'CREATE ROLE "{role}" LOGIN')
    with pytest.raises(RuntimeError, match="owner's URL"):
        ServerThread(None, writer=deployment.writer, reader=deployment.reader)  # the schema is not migrated yet
    open_storage(deployment.owner, writer=deployment.writer, reader=deployment.reader).close()  # migrate as owner
    with ServerThread(None, writer=deployment.writer, reader=deployment.reader) as srv:
        assert httpx.get(srv.url + "/v2/health").json() == {"status": "ok", "backend": "postgresql"}


def test_role_urls_come_from_the_environment_and_passwords_are_set_hashed(deployment: Deployment, monkeypatch: pytest.MonkeyPatch) -> None:
    writer = as_role(deployment.owner, deployment.writer_role, "s3cret-w")
    reader = as_role(deployment.owner, deployment.reader_role, "s3cret-r")
    monkeypatch.setenv("SOVSEAL_SERVER_DATABASE", deployment.owner)
    monkeypatch.setenv("SOVSEAL_SERVER_WRITER_URL", writer)
    monkeypatch.setenv("SOVSEAL_SERVER_READER_URL", reader)
    storage = open_storage()  # what `sovseal serve` does
    try:
        assert not storage.owner and storage.reads is not storage.db
        with storage.reads.reader() as tx:
            assert tx.execute("SELECT current_user")[0][0] == deployment.reader_role
    finally:
        storage.close()
    with psycopg.connect(deployment.owner, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT rolname, rolpassword FROM pg_authid WHERE rolname IN (%s, %s)", (deployment.writer_role, deployment.reader_role)
        ).fetchall()
    assert len(rows) == 2 and all(str(pw).startswith("SCRAM-SHA-256$") and "s3cret" not in str(pw) for _, pw in rows)
    monkeypatch.delenv("SOVSEAL_SERVER_READER_URL")
    with pytest.raises(ValueError, match="both roles"):
        open_storage()


def test_a_version_1_database_is_upgraded_and_nothing_is_deleted_on_release(tmp_path: Path) -> None:
    """Schema 1 deleted released held items; the upgrade adds the ``released`` mark and keeps old rows."""
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as conn:
        conn.executescript(
            """
            CREATE TABLE sovseal_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL);
            INSERT INTO sovseal_meta VALUES ('schema', '1');
            CREATE TABLE held (
                project TEXT NOT NULL, hseq BIGINT NOT NULL, id TEXT NOT NULL, after_id TEXT NOT NULL,
                kind TEXT NOT NULL, parent TEXT NOT NULL, branch TEXT NOT NULL, digest TEXT NOT NULL,
                body TEXT NOT NULL, received_at DOUBLE PRECISION NOT NULL,
                PRIMARY KEY (project, hseq), UNIQUE (project, id));
            INSERT INTO held VALUES ('p', 1, 'i', '', 'record', '', 'b', 'd', '{}', 0);
            """
        )
    storage = open_storage(path)
    try:
        with storage.reads.reader() as tx:
            assert tx.execute("SELECT value FROM sovseal_meta")[0][0] == str(SCHEMA_VERSION)
            assert tx.execute("SELECT id, released FROM held")[0] == ("i", 0)
        assert storage.counts("p")["held"] == 1
    finally:
        storage.close()
