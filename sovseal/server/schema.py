"""The server's schema, its migrations, and (on PostgreSQL) its two least-privilege roles.

Migration runs as the database owner. On PostgreSQL it also creates two login roles and grants
them exactly what the server needs, as Sci's write-safety rule asks ("SELECT only for reads,
INSERT/UPDATE on specific tables for writes, no DELETE for either role"):

- the *reader* (pulls, authorization look-ups, health): ``SELECT`` on every table, nothing else;
- the *writer* (pushes, API-key binding, key creation and revocation): ``SELECT``, ``INSERT`` on
  the tables it appends to, and ``UPDATE`` of the few columns it changes. No ``DELETE`` or
  ``TRUNCATE`` anywhere: the server never removes a row (a revoked key is flagged, a released held
  item is marked released), so a stolen writer password cannot erase a project's history. The
  one change to what a row holds is a redaction's (docs/design.md, "Redaction skeletons"): the
  body of each erased record, and its digest, become its skeleton (``UPDATE (body, digest)``); the
  row, its id and its place in the pull order stay.

Grants are reset on every migration (``REVOKE ALL`` then the list below), so what the roles can
do is always exactly this list, whatever was granted by hand before.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from .db import Database, PostgresDatabase, SqliteDatabase, Tx

log = logging.getLogger("sovseal.server")

SCHEMA_VERSION = 4

_TABLES = ("sovseal_meta", "api_keys", "projects", "items", "branches", "held", "held_waits", "erased")

# The records a redaction erased, remembered for good: an item pushed for one later (by a device
# that has not pulled the redaction yet) is stored as its skeleton (this seal) or dropped, never
# stored with its content. ``redaction`` is the id of the redaction that named it first.
_ERASED = """CREATE TABLE IF NOT EXISTS erased (
        project TEXT NOT NULL, id TEXT NOT NULL, seal TEXT NOT NULL, redaction TEXT NOT NULL,
        erased_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (project, id))"""

_CREATE = [
    "CREATE TABLE IF NOT EXISTS sovseal_meta (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
    """CREATE TABLE IF NOT EXISTS api_keys (
        key_hash TEXT PRIMARY KEY, project TEXT, label TEXT NOT NULL,
        created_at DOUBLE PRECISION NOT NULL, revoked INTEGER NOT NULL DEFAULT 0)""",
    """CREATE TABLE IF NOT EXISTS projects (
        project TEXT PRIMARY KEY, next_seq BIGINT NOT NULL, next_hold BIGINT NOT NULL, held_count BIGINT NOT NULL)""",
    """CREATE TABLE IF NOT EXISTS items (
        project TEXT NOT NULL, seq BIGINT NOT NULL, id TEXT NOT NULL, kind TEXT NOT NULL,
        digest TEXT NOT NULL, body TEXT NOT NULL, received_at DOUBLE PRECISION NOT NULL,
        PRIMARY KEY (project, seq), UNIQUE (project, id))""",
    "CREATE TABLE IF NOT EXISTS branches (project TEXT NOT NULL, branch TEXT NOT NULL, PRIMARY KEY (project, branch))",
    """CREATE TABLE IF NOT EXISTS held (
        project TEXT NOT NULL, hseq BIGINT NOT NULL, id TEXT NOT NULL, after_id TEXT NOT NULL,
        kind TEXT NOT NULL, parent TEXT NOT NULL, branch TEXT NOT NULL, digest TEXT NOT NULL,
        body TEXT NOT NULL, received_at DOUBLE PRECISION NOT NULL, released INTEGER NOT NULL DEFAULT 0,
        body_bytes BIGINT NOT NULL DEFAULT 0, PRIMARY KEY (project, hseq), UNIQUE (project, id))""",
    # What each held item waits for: the ids (and, for a record, the branch) not yet accepted when
    # it arrived. A release looks up the waiters of what it just accepted, so it loads only held
    # items that may have become ready, never every held body. A row per missing id, so an item
    # may wait on several (a merge naming two parents needs no schema change).
    """CREATE TABLE IF NOT EXISTS held_waits (
        project TEXT NOT NULL, item_id TEXT NOT NULL, waits_for TEXT NOT NULL,
        PRIMARY KEY (project, item_id, waits_for))""",
    _ERASED,
]

#: The dependencies of a held row that are not accepted yet, as (project, item_id, waits_for).
_MISSING = """
    SELECT project, id, after_id FROM held h WHERE released = 0 AND after_id <> ''
        AND NOT EXISTS (SELECT 1 FROM items i WHERE i.project = h.project AND i.id = h.after_id)
    UNION SELECT project, id, parent FROM held h WHERE released = 0 AND parent <> ''
        AND NOT EXISTS (SELECT 1 FROM items i WHERE i.project = h.project AND i.id = h.parent)
    UNION SELECT project, id, branch FROM held h WHERE released = 0 AND kind = 'record'
        AND NOT EXISTS (SELECT 1 FROM branches b WHERE b.project = h.project AND b.branch = h.branch)"""

#: A row that holds another version of a record: its id is ``<64 hex>.<digest16>``.
VERSION_ROW = "length(id) > 64"

#: Version 1 deleted a held item once released; version 2 marks it (no role may delete).
#: Version 3 indexes held items by what they wait for, and keeps their size for the quota.
#: Version 4 remembers erased records (redactions) and indexes the versions of a record.
_UPGRADES = {
    1: ["ALTER TABLE held ADD COLUMN released INTEGER NOT NULL DEFAULT 0"],
    2: [
        "ALTER TABLE held ADD COLUMN body_bytes BIGINT NOT NULL DEFAULT 0",
        "UPDATE held SET body_bytes = LENGTH(body) WHERE released = 0",
        "DROP INDEX IF EXISTS held_waiting",
        f"INSERT INTO held_waits (project, item_id, waits_for) {_MISSING}",
    ],
    3: [_ERASED],
}

_AFTER = [
    "CREATE INDEX IF NOT EXISTS held_unreleased ON held (project, body_bytes) WHERE released = 0",
    "CREATE INDEX IF NOT EXISTS held_waits_for ON held_waits (project, waits_for)",
    # The other versions of a record (``<id>.<digest16>``, rare) by project: what a redaction looks
    # up besides the exact ids it names, without scanning the project's items.
    f"CREATE INDEX IF NOT EXISTS items_versions ON items (project, id) WHERE {VERSION_ROW}",
    f"CREATE INDEX IF NOT EXISTS held_versions ON held (project, id) WHERE {VERSION_ROW}",
]

#: What the writer may change, column by column (everything else it can only read or append).
_WRITER_UPDATES = {
    "api_keys": "project, revoked",  # bind an unbound key on first use; revoke
    "projects": "project, next_seq, next_hold, held_count",  # the per-project counters (and the upsert's lock)
    "items": "body, digest",  # a redaction replaces an erased record's body with its skeleton
    "held": "released, body, digest, body_bytes",  # mark released, dropping the copy now in items; a redaction
}
_WRITER_INSERTS = ("api_keys", "projects", "items", "branches", "held", "held_waits", "erased")

_ROLE_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}\Z")
#: What libpq's PQencryptPasswordConn returns: SCRAM-SHA-256$<iter>:<salt>$<key>:<key> in base64.
_SCRAM = re.compile(r"SCRAM-SHA-256\$[0-9]+:[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+\Z")


@dataclass(frozen=True, slots=True)
class Role:
    """A login role; ``password`` (optional) is set by the migration, hashed on the client first."""

    name: str
    password: str | None = None

    def __post_init__(self) -> None:
        if not _ROLE_NAME.match(self.name):
            raise ValueError(f"role name {self.name!r}: use lowercase letters, digits and '_' (at most 63)")


@dataclass(frozen=True, slots=True)
class Roles:
    reader: Role = Role("sovseal_reader")
    writer: Role = Role("sovseal_writer")

    def __post_init__(self) -> None:
        if self.reader.name == self.writer.name:
            raise ValueError("the reader and writer roles must be different roles")


def migrate(db: Database, roles: Roles | None = None) -> None:
    """Create or upgrade the schema (as the owner); on PostgreSQL also (re)grant the two roles.

    With ``roles`` given (a least-privilege deployment) they must exist or be creatable, else this
    fails. Without, the default roles are created and granted when the owner may create roles, so
    a deployment can switch to them later; an owner without CREATEROLE only gets a log line.
    """
    with db.transaction() as tx:
        for statement in _CREATE:
            tx.execute(statement)
        rows = tx.execute("SELECT value FROM sovseal_meta WHERE name = 'schema'")
        version = int(rows[0][0]) if rows else SCHEMA_VERSION
        if version > SCHEMA_VERSION:
            raise RuntimeError(f"the database has schema version {version}; this sovseal knows up to {SCHEMA_VERSION}: upgrade sovseal")
        for old in range(version, SCHEMA_VERSION):
            for statement in _UPGRADES[old]:
                tx.execute(statement)
        for statement in _AFTER:
            tx.execute(statement)
        if rows:
            tx.execute("UPDATE sovseal_meta SET value = ? WHERE name = 'schema'", (str(SCHEMA_VERSION),))
        else:
            tx.execute("INSERT INTO sovseal_meta (name, value) VALUES ('schema', ?)", (str(SCHEMA_VERSION),))
        if isinstance(db, PostgresDatabase):
            _grant(db, tx, roles or Roles(), required=roles is not None)
    if rows and version < 4 and isinstance(db, SqliteDatabase):
        # Made before the server set secure_delete: pages freed until now were not zeroed, and one
        # may still hold a body a redaction will replace. Rewrite the file once, now.
        log.info("rewriting the SQLite database once (VACUUM) so that freed pages hold no old bodies")
        db.vacuum()


def check(db: Database) -> None:
    """For a server that may not migrate (it runs as the reader/writer roles): is the schema current?"""
    with db.reader() as tx:
        try:
            rows = tx.execute("SELECT value FROM sovseal_meta WHERE name = 'schema'")
        except Exception as exc:  # no table, or no right to read it: one clear message
            raise RuntimeError(
                "the server database has no sovseal schema the reader role can read: run `sovseal serve` once "
                "with --database set to the owner's URL to migrate and grant the roles"
            ) from exc
    version = int(rows[0][0]) if rows else 0
    if version != SCHEMA_VERSION:
        raise RuntimeError(
            f"the server database has schema version {version}, this sovseal needs {SCHEMA_VERSION}: run `sovseal serve` "
            "once with --database set to the owner's URL to migrate"
        )


def _grant(db: PostgresDatabase, tx: Tx, roles: Roles, *, required: bool) -> None:
    names = [roles.reader.name, roles.writer.name]
    existing = {str(r[0]) for r in tx.execute("SELECT rolname FROM pg_roles WHERE rolname IN (?, ?)", names)}
    may_create = bool(tx.execute("SELECT rolsuper OR rolcreaterole FROM pg_roles WHERE rolname = current_user")[0][0])
    missing = [n for n in names if n not in existing]
    if missing and not may_create:
        message = (
            f"the roles {missing} do not exist and {'this owner' if required else 'the owner'} may not create them: "
            f"have an administrator run CREATE ROLE <name> LOGIN for each, or grant the owner CREATEROLE"
        )
        if required:
            raise RuntimeError(message)
        log.info("least-privilege roles not set up: %s", message)
        return
    for role in (roles.reader, roles.writer):
        if role.name not in existing:
            # Two servers migrating at once must not fail on the role the other just created.
            tx.execute(f'DO $$ BEGIN CREATE ROLE "{role.name}" LOGIN; EXCEPTION WHEN duplicate_object THEN NULL; END $$')
        if role.password is not None:
            hashed = db.encrypt_password(role.name, role.password)
            if not _SCRAM.match(hashed):
                raise RuntimeError("libpq returned an unexpected password hash; set the role's password by hand")
            tx.execute(f"ALTER ROLE \"{role.name}\" LOGIN PASSWORD '{hashed}'")
    reader, writer = f'"{roles.reader.name}"', f'"{roles.writer.name}"'
    tables = ", ".join(_TABLES)
    schema = tx.execute("SELECT quote_ident(current_schema())")[0][0]
    statements = [
        f"REVOKE ALL ON {tables} FROM {reader}, {writer}",
        f"GRANT USAGE ON SCHEMA {schema} TO {reader}, {writer}",
        f"GRANT SELECT ON {tables} TO {reader}, {writer}",
        f"GRANT INSERT ON {', '.join(_WRITER_INSERTS)} TO {writer}",
        *(f"GRANT UPDATE ({columns}) ON {table} TO {writer}" for table, columns in _WRITER_UPDATES.items()),
    ]
    for statement in statements:
        tx.execute(statement)
