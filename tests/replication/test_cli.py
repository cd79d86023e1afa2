"""``sovseal serve`` and ``sovseal restore`` as a user runs them: separate processes, real HTTP."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from sovseal.crypto.keychain import export_key
from sovseal.replication.protocol import HEALTH_PATH
from tests.replication.conftest import open_mem
from tests.replication.helpers import history, snapshot_of

ROOT = Path(__file__).resolve().parents[2]
#: The CLI with the fake embedder, so the test measures replication rather than model loading.
CLI = "import sys, sovseal.cli as cli; from tests.fakes import fake_embed; cli.EMBEDDER = fake_embed; sys.argv[0] = 'sovseal'; cli.run()"


def sovseal(*args: str, env: dict[str, str] | None = None, **kwargs: object) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(  # type: ignore[call-overload, no-any-return]
        [sys.executable, "-c", CLI, *args], env=full, cwd=ROOT, capture_output=True, text=True, timeout=120, check=False, **kwargs
    )


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_serve_and_restore_from_the_command_line(tmp_path: Path, key: bytes) -> None:
    database = str(tmp_path / "server.sqlite3")
    created = sovseal("serve", "--database", database, "--create-key", "--label", "laptop")
    assert created.returncode == 0, created.stderr
    api = created.stdout.strip()
    assert api.startswith("sov_") and api not in Path(database).read_bytes().decode("latin-1")  # stored hashed

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    server = subprocess.Popen(
        [sys.executable, "-c", CLI, "serve", "--database", database, "--port", str(port), "--log-level", "warning"],
        env=env,
        cwd=ROOT,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                if httpx.get(url + HEALTH_PATH, timeout=1).json()["status"] == "ok":
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline and server.poll() is None, "sovseal serve did not come up"
            time.sleep(0.1)

        with open_mem(tmp_path / "one", key, url, api) as one:
            history(one)
            assert one.replication is not None and one.replication.flush(20)
            expected = snapshot_of(one)

        key_file = tmp_path / "key.txt"
        key_file.write_text(export_key(key))
        restored = sovseal(
            "restore", "--path", str(tmp_path / "two"), "--key-file", str(key_file), "--endpoint", url, "--json",
            env={"SOVSEAL_API_KEY": api},
        )
        assert restored.returncode == 0, restored.stderr
        report = json.loads(restored.stdout)
        assert report["verify_ok"] and report["pull"]["waiting"] == 0 and report["pull"]["new_records"] == 6
        assert report["branches"] == ["experiment", "main"]
        with open_mem(tmp_path / "two", key, "", None) as two:
            assert snapshot_of(two) == expected

        no_key = {"SOVSEAL_API_KEY": api, "SOVSEAL_KEY_FALLBACK": ""}
        wrong = sovseal("restore", "--path", str(tmp_path / "three"), "--endpoint", url, env=no_key)
        assert wrong.returncode != 0 and "key" in wrong.stderr  # never restores under a freshly made key
    finally:
        server.send_signal(signal.SIGTERM)
        assert server.wait(20) in (0, -signal.SIGTERM)  # uvicorn shuts down, then re-raises the signal it caught
