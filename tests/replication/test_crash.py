"""Crash safety of replication with real processes: SIGKILL a writer, reopen, and count at the server.

The outbox is the journal's unacknowledged frames, so a killed process loses no job; what must
be shown is the end-to-end property: after a restart every item reaches the server exactly
once, including items the server had already committed when the client died before its ack
(the ambiguous case: the client cannot know, so it resends byte-identical items and the server
deduplicates them).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from sovseal.crypto.primitives import project_blind_id
from sovseal.server import ServerThread
from tests.replication.conftest import open_mem, wait_for
from tests.replication.helpers import server_items
from tests.replication.proxy import Captured, FaultProxy

ROOT = Path(__file__).resolve().parents[2]

WRITER = textwrap.dedent(
    """
    import json, sys, time
    from sovseal import Sovseal
    from sovseal.replication import ReplicationConfig
    from tests.fakes import fake_embed
    path, key, endpoint, api_key = sys.argv[1], bytes.fromhex(sys.argv[2]), sys.argv[3], sys.argv[4]
    count, config = int(sys.argv[5]), json.loads(sys.argv[6])
    mem = Sovseal(path, key=key, embedder=fake_embed, endpoint=endpoint, api_key=api_key, replication_config=ReplicationConfig(**config))
    print("ready", flush=True)
    for i in range(count):
        result = mem.store(f"crash.{i}", {"i": i, "text": f"memory {i}"})
        print(result.snapshot_id, flush=True)  # acknowledged only after store returned
    print("done", flush=True)
    time.sleep(3600)
    """
)


def spawn(store: Path, key: bytes, endpoint: str, api_key: str, count: int, **config: object) -> subprocess.Popen[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("SOVSEAL_ENDPOINT", None)
    args = [str(store), key.hex(), endpoint, api_key, str(count), json.dumps(config)]
    return subprocess.Popen([sys.executable, "-c", WRITER, *args], stdout=subprocess.PIPE, text=True, env=env, cwd=ROOT)


def kill(child: subprocess.Popen[str]) -> list[str]:
    child.send_signal(signal.SIGKILL)
    child.wait()
    assert child.stdout is not None
    return child.stdout.read().split()


def test_killed_after_the_server_committed_but_before_the_ack(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    project = project_blind_id("default", key)
    api = server.storage.create_api_key()

    def plan(index: int, request: Captured) -> str:
        return "hang" if request.method == "POST" else "pass"  # forward, then never answer

    with FaultProxy(server.url, plan) as proxy:
        # One batch of all 51 items (the branch's creation + 50 stores): the server commits it, the client never hears back.
        child = spawn(tmp_path / "one", key, proxy.url, api, 50, linger=600.0, batch_items=51, request_timeout=600.0)
        assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        acked = [child.stdout.readline().strip() for _ in range(50)]
        assert child.stdout.readline().strip() == "done"
        wait_for(lambda: server.storage.counts(project)["items"] == 51, what="the server to commit the batch")
        kill(child)
        assert len(proxy.pushes()) == 1
    with open_mem(tmp_path / "one", key, "", None) as reopened:
        assert reopened.status().outbox_records == 51  # unacknowledged: still in the outbox after the kill
    with open_mem(tmp_path / "one", key, server.url, api) as reopened:
        assert reopened.replication is not None and reopened.replication.flush(20)  # resent and accepted as duplicates
        assert reopened.status().outbox_records == 0 and reopened.replication.rejected() == []
        log = [e.snapshot_id for e in reopened.log()]
    assert set(acked) <= set(log)
    assert server.storage.counts(project) == {"items": 51, "distinct": 51, "held": 0}


def test_killed_mid_burst_every_acknowledged_store_reaches_the_server_once(tmp_path: Path, key: bytes, server: ServerThread) -> None:
    project = project_blind_id("default", key)
    api = server.storage.create_api_key()
    child = spawn(tmp_path / "one", key, server.url, api, 100_000, linger=0.05)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    acked = [child.stdout.readline().strip() for _ in range(150)]
    wait_for(lambda: server.storage.counts(project)["items"] > 20, what="some replication before the kill")
    acked += [line for line in kill(child) if line.startswith("snap_")]
    with open_mem(tmp_path / "one", key, server.url, api) as reopened:
        assert reopened.replication is not None and reopened.replication.flush(30)
        log = [e.snapshot_id for e in reopened.log()]
        records = reopened.status().records
    assert set(acked) <= set(log)
    counts = server.storage.counts(project)
    assert counts["items"] == counts["distinct"] == records + 1 and counts["held"] == 0  # + the branch's creation
    assert len(server_items(server.url, api, project)) == records + 1
