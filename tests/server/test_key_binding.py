"""API keys made without a project (``sovseal serve --create-key``) bind on first use, only to a new project.

The real server over loopback HTTP, on SQLite and on the real PostgreSQL of the session fixture
(``tests/replication/conftest.py``). docs/security.md: a key for project A can neither read nor
write project B (403). A fresh unbound key sent with another tenant's blind project id must not
join that project; a key made for it (``--project``) and the devices sharing the first key still work.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from sovseal import Sovseal
from sovseal.replication.protocol import PROJECT_HEADER, PULL_PATH, PUSH_PATH, encode_push
from sovseal.server import ServerThread
from tests.fakes import fake_embed
from tests.replication.conftest import database, postgres_url  # noqa: F401 - the fixtures, shared with tests/replication

PROJECT = "a" * 64
OTHER = "b" * 64


@pytest.fixture
def srv(database: str) -> Iterator[ServerThread]:  # noqa: F811 - the imported fixture
    with ServerThread(database) as s:
        yield s


def client(srv: ServerThread, api_key: str, project: str = PROJECT) -> httpx.Client:
    return httpx.Client(base_url=srv.url, headers={PROJECT_HEADER: project, "Authorization": f"Bearer {api_key}"}, timeout=10)


def outbox(tmp_path: Path) -> bytes:
    with Sovseal(tmp_path / "source", key=os.urandom(32), embedder=fake_embed, endpoint="") as mem:
        mem.store("user.editor", "vim")
        mem.store("user.pager", "less")
        return encode_push(mem._store.outbox(100), "")


def test_a_second_unbound_key_cannot_join_a_project_another_key_uses(srv: ServerThread, tmp_path: Path) -> None:
    first, second = srv.storage.create_api_key(), srv.storage.create_api_key()
    body = outbox(tmp_path)
    with client(srv, first) as c:
        pushed = c.post(PUSH_PATH, content=body).raise_for_status().json()
        assert pushed["accepted"] > 0
    stored = srv.storage.counts(PROJECT)
    with client(srv, second) as c:
        pulled = c.get(PULL_PATH)
        assert pulled.status_code == 403 and "records" not in pulled.json()
        assert "--project" in pulled.json()["message"]
        junk = outbox(tmp_path / "junk")
        refused = c.post(PUSH_PATH, content=junk)
        assert refused.status_code == 403
    assert srv.storage.counts(PROJECT) == stored  # nothing stored
    with client(srv, first) as c:  # the first key keeps working, for reads and writes (a retry is a duplicate)
        assert len(c.get(PULL_PATH).raise_for_status().json()["records"]) == stored["items"]
        assert c.post(PUSH_PATH, content=body).raise_for_status().json()["duplicates"] > 0
    with client(srv, second, OTHER) as c:  # the refused key stayed unbound: it still binds to a new project
        assert c.get(PULL_PATH).raise_for_status().json()["records"] == []
    with client(srv, second) as c:  # ... and is now that project's only
        assert c.get(PULL_PATH).status_code == 403


def test_a_key_made_for_a_project_joins_it_and_devices_share_one_key(srv: ServerThread, tmp_path: Path) -> None:
    first = srv.storage.create_api_key()
    with client(srv, first) as c:
        c.post(PUSH_PATH, content=outbox(tmp_path)).raise_for_status()
    made = srv.storage.create_api_key(PROJECT)  # sovseal serve --create-key --project <id>
    with client(srv, made) as c, client(srv, first) as again:
        assert c.get(PULL_PATH).raise_for_status().json()["records"]
        assert again.get(PULL_PATH).raise_for_status().json()["records"]  # a second device with the first key


def test_a_revoked_key_still_owns_its_project(srv: ServerThread, tmp_path: Path) -> None:
    first = srv.storage.create_api_key()
    with client(srv, first) as c:
        c.post(PUSH_PATH, content=outbox(tmp_path)).raise_for_status()
    srv.storage.revoke_api_key(first)
    with client(srv, srv.storage.create_api_key()) as c:
        assert c.get(PULL_PATH).status_code == 403


def test_two_unbound_keys_racing_for_a_new_project_bind_one(srv: ServerThread) -> None:
    keys = [srv.storage.create_api_key() for _ in range(8)]
    with ThreadPoolExecutor(8) as pool:
        verdicts = list(pool.map(lambda k: srv.storage.authorize(k, PROJECT), keys))
    assert sorted(verdicts) == ["ok"] + ["taken"] * 7
