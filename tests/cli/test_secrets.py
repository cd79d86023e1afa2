"""Secrets stay off the command line (issue #20): what the CLI reads from stdin never shows in the
process list, and an API key typed on the command line draws a warning.

Every argument of a process is readable by every local user in /proc/<pid>/cmdline. These tests run
the CLI as a real child process, read that file while the child is still waiting for its stdin, and
only then hand it the secret.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sovseal.crypto.keychain import export_key

ROOT = Path(__file__).resolve().parents[2]
#: The CLI with the fake embedder: these tests are about argv and stdin, not about the model.
CLI = "import sys, sovseal.cli as cli; from tests.fakes import fake_embed; cli.EMBEDDER = fake_embed; sys.argv[0] = 'sovseal'; cli.run()"
PROC = Path("/proc")

SECRET_PAYLOAD = "The user's diagnosis is confidential-4711."
SECRET_QUERY = "what is the user's diagnosis?"
SECRET_PATH = "user.health.diagnosis"


class Child:
    """Runs ``sovseal ARGS`` as a child process against the store at ``home``, with a clean environment."""

    def __init__(self, home: Path) -> None:
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SOVSEAL_")}  # no developer's store, key or server
        self.env.update(SOVSEAL_HOME=str(home), SOVSEAL_KEY_FALLBACK="file", LANCEDB_LOG="error", PYTHONPATH=str(ROOT))

    def __call__(self, *args: str, stdin: str = "", code: int = 0, **env: str) -> tuple[subprocess.CompletedProcess[str], bytes]:
        """Run it, giving ``stdin`` only once its command line has been read from /proc; return the
        result and that command line (empty where there is no /proc)."""
        argv = [sys.executable, "-c", CLI, *args]
        child = subprocess.Popen(
            argv, env={**self.env, **env}, cwd=ROOT, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        cmdline = shown_cmdline(child)
        out, err = child.communicate(stdin, timeout=120)
        result = subprocess.CompletedProcess(argv, child.returncode, out, err)
        assert "Traceback" not in err, err
        assert child.returncode == code, f"sovseal {' '.join(args)}: exit {child.returncode}\n{out}\n{err}"
        return result, cmdline


def shown_cmdline(child: subprocess.Popen[str]) -> bytes:
    """What the OS shows every local user as ``child``'s command line (empty without /proc, or
    when the child did not wait for its stdin and is gone already).

    For a moment after exec the file is still empty, until the kernel has set up the new program's
    arguments, so it is read until it is not.
    """
    deadline = time.monotonic() + 30
    while PROC.is_dir() and child.poll() is None and time.monotonic() < deadline:
        if cmdline := (PROC / str(child.pid) / "cmdline").read_bytes():
            return cmdline
        time.sleep(0.01)
    return b""


@pytest.fixture
def sovseal(tmp_path: Path) -> Child:
    child = Child(tmp_path / "home")
    child("init")
    return child


def assert_hidden(secret: str, args: tuple[str, ...], cmdline: bytes) -> None:
    """``secret`` is neither in the arguments passed nor in what the OS shows other users as the child's."""
    assert not any(secret in arg for arg in args)
    if PROC.is_dir():
        assert cmdline.split(b"\0")[1:3] == [b"-c", CLI.encode()], cmdline  # it really was the child's
        assert secret.encode() not in cmdline


def test_payload_and_path_on_stdin_are_stored_and_stay_off_the_process_list(sovseal: Child) -> None:
    args = ("store", "-", "-", "--json")
    stored, cmdline = sovseal(*args, stdin=f"{SECRET_PATH}\n{SECRET_PAYLOAD}")
    assert json.loads(stored.stdout)["path"] == SECRET_PATH
    assert_hidden(SECRET_PATH, args, cmdline)
    assert_hidden(SECRET_PAYLOAD, args, cmdline)

    got, cmdline = sovseal("get", "-", "--json", stdin=SECRET_PATH + "\n")
    assert json.loads(got.stdout)["payload"] == SECRET_PAYLOAD
    assert_hidden(SECRET_PATH, ("get", "-", "--json"), cmdline)


def test_a_payload_on_stdin_is_stored_as_given(sovseal: Child) -> None:
    sovseal("store", "notes.today", "-", stdin='{"mood": "private"}')
    got, _ = sovseal("get", "notes.today", "--json")
    assert json.loads(got.stdout)["payload"] == {"mood": "private"}  # read as JSON, as the inline form would be


def test_query_on_stdin_recalls_and_stays_off_the_process_list(sovseal: Child) -> None:
    sovseal("store", SECRET_PATH, SECRET_QUERY)  # the fake embedder ranks an identical text first
    sovseal("store", "user.editor", "The user edits code in neovim.")
    args = ("recall", "-", "-k", "1", "--json")
    found, cmdline = sovseal(*args, stdin=SECRET_QUERY + "\n")
    assert [m["path"] for m in json.loads(found.stdout)] == [SECRET_PATH]
    assert_hidden(SECRET_QUERY, args, cmdline)
    found, _ = sovseal(*args, stdin="The user edits code in neovim.")
    assert [m["path"] for m in json.loads(found.stdout)] == ["user.editor"]


def test_delete_reads_its_path_from_stdin(sovseal: Child) -> None:
    sovseal("store", SECRET_PATH, SECRET_PAYLOAD)
    deleted, cmdline = sovseal("delete", "-", "--json", stdin=SECRET_PATH + "\n")
    assert json.loads(deleted.stdout)["deleted"] is True
    assert_hidden(SECRET_PATH, ("delete", "-", "--json"), cmdline)
    sovseal("get", SECRET_PATH, code=3)


def test_the_key_comes_first_on_stdin_then_path_then_payload(tmp_path: Path) -> None:
    key_line = export_key(os.urandom(32))
    child = Child(tmp_path / "home")
    child("init", "--key-file", "-", stdin=key_line + "\n")  # a key given is saved nowhere: only stdin opens the store
    args = ("store", "-", "-", "--key-file", "-", "--json")
    stored, cmdline = child(*args, stdin=f"{key_line}\n{SECRET_PATH}\n{SECRET_PAYLOAD}")
    assert json.loads(stored.stdout)["path"] == SECRET_PATH
    assert_hidden(key_line, args, cmdline)
    assert_hidden(SECRET_PAYLOAD, args, cmdline)
    got, _ = child("get", SECRET_PATH, "--key-file", "-", "--json", stdin=key_line + "\n")
    assert json.loads(got.stdout)["payload"] == SECRET_PAYLOAD
    child("status", code=4)  # no key was saved anywhere


def test_an_empty_path_on_stdin_is_bad_input(sovseal: Child) -> None:
    failed, _ = sovseal("get", "-", stdin="", code=2)
    assert failed.stderr.startswith("error: path must be a non-empty string")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


WARNING = "the API key given with --api-key is visible to other local users in the process list; set SOVSEAL_API_KEY instead"


def test_restore_warns_when_the_api_key_is_on_the_command_line(sovseal: Child, tmp_path: Path) -> None:
    endpoint = f"http://127.0.0.1:{free_port()}"  # nothing listens: restore fails after its checks, exit 6
    inline, _ = sovseal("restore", "--endpoint", endpoint, "--api-key", "sov_inline", code=6)
    assert f"warning: {WARNING}" in inline.stderr.splitlines()

    from_env, _ = sovseal("restore", "--endpoint", endpoint, code=6, SOVSEAL_API_KEY="sov_from_env")
    assert "warning" not in from_env.stderr and "process list" not in from_env.stderr


def test_revoke_key_warns_inline_and_reads_the_key_from_stdin(tmp_path: Path) -> None:
    child = Child(tmp_path / "home")
    database = str(tmp_path / "server.sqlite3")
    created, _ = child("serve", "--database", database, "--create-key")
    api = created.stdout.strip()
    inline, _ = child("serve", "--database", database, "--revoke-key", "sov_not_a_key", code=3)  # not found
    assert "visible to other local users in the process list; pass `--revoke-key -`" in inline.stderr
    assert inline.stderr.strip().splitlines()[-1].startswith("error: no such API key on this server (nothing was revoked)")
    args = ("serve", "--database", database, "--revoke-key", "-")
    revoked, cmdline = child(*args, stdin=api + "\n")
    assert revoked.stderr.strip() == "revoked"  # no warning: the key never was an argument
    assert_hidden(api, args, cmdline)


def test_a_password_in_the_database_url_draws_a_warning(tmp_path: Path) -> None:
    """Checked without a server: the warning comes before any connection (which then fails)."""
    from click.testing import CliRunner

    from sovseal.cli import main
    from sovseal.cli.replication import _has_password

    assert _has_password("postgresql://owner:hunter2@db/sovseal")
    assert not _has_password("postgresql://owner@db/sovseal") and not _has_password(str(tmp_path / "x.sqlite3"))
    assert not _has_password("postgresql://[broken")
    result = CliRunner().invoke(main, ["serve", "--database", "postgresql://u:pw@127.0.0.1:1/db", "--create-key"])
    assert "the password in --database is visible to other local users in the process list" in result.stderr
    from_env = CliRunner().invoke(main, ["serve", "--create-key"], env={"SOVSEAL_SERVER_DATABASE": "postgresql://u:pw@127.0.0.1:1/db"})
    assert "process list" not in from_env.stderr


def test_mcp_refuses_a_key_on_stdin(tmp_path: Path) -> None:
    failed, _ = Child(tmp_path / "home")("mcp", "--key-file", "-", code=2)
    assert failed.stderr.startswith("error: mcp speaks to its client on stdin")
