"""A push's answer is bounded in bytes, encoding and time, as a pull page is, whatever the server sends.

A hostile (or broken) server answers the background worker's pushes with a gzip bomb, a body of
hundreds of MiB, a body dripped one byte at a time, or an HTML page with 200. Each test points a
device at the hostile harness (tests/replication/hostile.py: real HTTP on loopback) and checks
that the worker reports a typed error (also in ``status().replication.last_error``) without
reading what it must not, that nothing is taken for an acknowledgement, that ``store`` keeps
returning at once meanwhile, and that the same URL, once honest, receives everything.
"""

from __future__ import annotations

import dataclasses
import gzip
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sovseal import Sovseal
from sovseal.crypto.primitives import project_blind_id
from sovseal.errors import ReplicationError, ServerMisbehaviourError
from sovseal.replication import ReplicationConfig
from sovseal.server import ServerThread
from tests.replication.conftest import FAST, open_mem, wait_for
from tests.replication.hostile import Behaviour, Forward, HostileServer, MiB, Reply, Request

#: 256 MiB of spaces, gzipped: about 250 KB on the wire.
BOMB = gzip.compress(b" " * (256 * MiB), 6)


class PushAnswers(Behaviour):
    """The real server takes each push (so the batch may well have landed), then the answer is ``reply()``."""

    def __init__(self, upstream: str, reply: Reply) -> None:
        self.forward = Forward(upstream)
        self.reply = reply

    def pull(self, request: Request) -> Reply:
        return self.forward.pull(request)

    def push(self, request: Request) -> Reply:
        self.forward.push(request)
        return dataclasses.replace(self.reply)


def huge_body(size: int) -> Iterator[bytes]:
    chunk = b" " * MiB
    for _ in range(size // MiB):
        yield chunk


@pytest.fixture
def harness(server: ServerThread) -> Iterator[HostileServer]:
    with HostileServer(Forward(server.url)) as h:
        yield h


def device(tmp_path: Path, key: bytes, server: ServerThread, harness: HostileServer, config: ReplicationConfig) -> Sovseal:
    api = server.storage.create_api_key(project_blind_id("default", key))
    return open_mem(tmp_path / "device", key, harness.url, api, replication_config=config)


def hostile_push(mem: Sovseal, code: str, within: float) -> ReplicationError:
    """Store one memory; the first replication error, which must come within ``within`` seconds, with ``code``."""
    errors: list[ReplicationError] = []
    mem.on("replication-error", errors.append)
    started = time.monotonic()
    mem.store("user.editor", "vim")
    wait_for(lambda: errors, within, f"a replication error with code {code}")
    assert time.monotonic() - started < within
    error = errors[0]
    assert error.code == code and error.retryable, (error.code, str(error))
    status = mem.status().replication
    assert status is not None and status.last_error is not None and f"({code})" in status.last_error
    assert status.state in ("backoff", "sending")  # retrying (FAST backs off 50 to 400 ms)
    return error


def stores_are_fast(mem: Sovseal, count: int = 10) -> None:
    for i in range(count):
        started = time.monotonic()
        mem.store(f"user.note{i}", f"n{i}")
        assert time.monotonic() - started < 1.0


def recovers(mem: Sovseal, harness: HostileServer, server: ServerThread) -> None:
    """Nothing was acknowledged on a hostile answer: once the URL is honest, every write goes up."""
    assert mem.replication is not None and mem.status().replication.replicated == 0  # type: ignore[union-attr]
    harness.behaviour = Forward(server.url)
    mem.replication.retry()
    assert mem.replication.flush(20)


def test_a_gzip_bomb_answer_is_refused_unread(tmp_path: Path, key: bytes, server: ServerThread, harness: HostileServer) -> None:
    harness.behaviour = PushAnswers(server.url, Reply(body=[BOMB], length=len(BOMB), headers={"Content-Encoding": "gzip"}))
    with device(tmp_path, key, server, harness, FAST) as mem:
        error = hostile_push(mem, "content_encoding", 10)
        assert isinstance(error, ServerMisbehaviourError) and "identity" in str(error)
        push = next(r for r in harness.requests if r.method == "POST")
        assert push.headers.get("Accept-Encoding") == "identity"
        stores_are_fast(mem)
        recovers(mem, harness, server)


@pytest.mark.parametrize("declare_length", [False, True], ids=["streamed", "declared"])
def test_an_oversized_answer_is_cut_at_the_cap(
    tmp_path: Path, key: bytes, server: ServerThread, harness: HostileServer, declare_length: bool
) -> None:
    size = 600 * MiB
    reply = Reply(body=huge_body(size), length=size if declare_length else None)
    harness.behaviour = PushAnswers(server.url, reply)
    with device(tmp_path, key, server, harness, FAST) as mem:
        error = hostile_push(mem, "too_large", 10)
        assert isinstance(error, ServerMisbehaviourError)
        stores_are_fast(mem)
        # the device hung up after 64 KiB: what the harness got out is that plus the sockets' buffers
        wait_for(lambda: harness.sent > 0, 5, "the harness to write")
        assert harness.sent < 16 * MiB, harness.sent
        recovers(mem, harness, server)


def test_a_dripped_answer_is_cut_at_the_whole_request_deadline(
    tmp_path: Path, key: bytes, server: ServerThread, harness: HostileServer
) -> None:
    """One byte every 0.2 s: never idle long enough for the per-read timeout (5 s), yet cut at 1.5 s."""
    harness.behaviour = PushAnswers(server.url, Reply(body=[b'{"accepted":1}' + b" " * 1000], drip=0.2, drip_headers=True))
    config = dataclasses.replace(FAST, request_timeout=5.0, pull_deadline=1.5)
    with device(tmp_path, key, server, harness, config) as mem:
        error = hostile_push(mem, "deadline", 6)
        assert type(error) is ReplicationError and "pull_deadline" in str(error)
        assert harness.sent < 100
        stores_are_fast(mem)
        started = time.monotonic()
        recovers(mem, harness, server)
    assert time.monotonic() - started < 20


def test_a_200_that_is_not_json_is_no_acknowledgement(
    tmp_path: Path, key: bytes, server: ServerThread, harness: HostileServer
) -> None:
    """A login page or captive portal answering 200 must not make the device drop items from its outbox."""
    page = b"<html><body>Please sign in</body></html>"
    harness.behaviour = PushAnswers(server.url, Reply(content_type="text/html", body=[page], length=len(page)))
    with device(tmp_path, key, server, harness, FAST) as mem:
        error = hostile_push(mem, "content_type", 10)
        assert isinstance(error, ServerMisbehaviourError)
        assert mem.status().outbox_records > 0
        recovers(mem, harness, server)
