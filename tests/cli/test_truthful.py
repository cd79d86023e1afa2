"""The command line never says something untrue (issue 35, item 4): each test drives the real CLI."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Run

# -- an empty payload is refused ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "stdin"),
    [(("x", ""), None), (("x", "-"), ""), (("x", "-"), "\n  \n"), (("x", '""'), None), (("x", "   "), None)],
)
def test_an_empty_payload_is_refused_and_nothing_is_stored(store: Run, args: tuple[str, str], stdin: str | None) -> None:
    line = store.fails(2, "store", *args, input=stdin)
    assert "PAYLOAD is empty" in line and "nothing was stored" in line and "sovseal delete PATH" in line
    assert store.json("status")["records"] == 0
    store.fails(3, "get", "x")


def test_a_payload_that_is_not_empty_is_still_stored(store: Run) -> None:
    store("store", "x", "-", input="  some text  ")
    assert store.json("get", "x")["payload"] == "  some text  "
    assert json.loads(store("get", "x", "--json").stdout)["path"] == "x"


# -- import says how many items were new -----------------------------------------------------------


def test_import_says_how_many_items_were_new(store: Run, tmp_path: Path) -> None:
    for i in range(3):
        store("store", f"user.fact{i}", f"fact number {i}")
    store("fork", "--name", "side")
    backup = tmp_path / "backup.sovseal"
    store("export", str(backup))
    total = store.json("import", str(backup))["items"]  # into the store it came from: nothing is new
    fresh = {"SOVSEAL_HOME": str(tmp_path / "fresh")}
    key = tmp_path / "key.txt"
    key.write_text(store("key", "export").stdout)
    store("key", "import", "-", input=key.read_text(), **fresh)
    first = store("import", str(backup), **fresh).stdout
    assert first.startswith(f"imported {total} new items into ") and "already" not in first
    again = store("import", str(backup), **fresh).stdout
    assert again.startswith(f"imported 0 new items ({total} already present) into "), again
    data = store.json("import", str(backup), **fresh)
    assert (data["items"], data["new"], data["present"]) == (total, 0, total)
    store("store", "user.fact9", "one more")  # the source moves on: a new backup has one new item
    store("export", str(backup), "--force")
    assert store("import", str(backup), **fresh).stdout.startswith(f"imported 1 new item ({total} already present) into ")


# -- Ctrl-C says whether the write was committed --------------------------------------------------


def interrupt(line: str, result: Any) -> None:
    assert result.exit_code == 130, (result.exit_code, result.stderr)
    assert result.stderr.strip().splitlines() == [line], result.stderr
    assert "Aborted" not in result.stderr and "Traceback" not in result.stderr


def test_ctrl_c_inside_store_before_the_append_says_nothing_was_committed(store: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    from sovseal.sdk.client import Sovseal

    def interrupted(self: Sovseal, *args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(Sovseal, "store", interrupted)
    interrupt("interrupted before anything was committed", store("store", "x", "a value", code=130))
    monkeypatch.undo()
    store.fails(3, "get", "x")


def test_ctrl_c_inside_store_after_the_append_says_it_was_committed(store: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """The SDK call never returned: what was committed is read from the store."""
    from sovseal.sdk.client import Sovseal

    real = Sovseal.store

    def interrupted(self: Sovseal, *args: Any, **kwargs: Any) -> Any:
        real(self, *args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(Sovseal, "store", interrupted)
    result = store("store", "x", "a value", code=130)
    monkeypatch.undo()
    held = store.json("get", "x")
    assert held["payload"] == "a value"
    interrupt(f"interrupted: the memory was committed (snapshot {held['snapshot_id'][:17]})", result)
    monkeypatch.setattr(Sovseal, "store", interrupted)  # the same value again: a reinforcement
    interrupt(
        f"interrupted: the memory was committed (reinforced, snapshot {held['snapshot_id'][:17]})",
        store("store", "x", "a value", code=130),
    )


def test_ctrl_c_while_the_store_closes_says_it_was_committed(store: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """After the SDK call returned (the store closing, replication draining): known without a check."""
    from sovseal.sdk.client import Sovseal

    real = Sovseal.close

    def interrupted(self: Sovseal) -> None:
        real(self)
        raise KeyboardInterrupt

    monkeypatch.setattr(Sovseal, "close", interrupted)
    result = store("store", "x", "a value", code=130)
    monkeypatch.undo()
    sid = store.json("get", "x")["snapshot_id"]
    interrupt(f"interrupted: the memory was committed (snapshot {sid[:17]})", result)


def test_ctrl_c_in_other_commands(store: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    from sovseal.sdk.client import Sovseal

    store("store", "x", "one")
    store("store", "y", "two")

    def after(name: str) -> None:
        real = getattr(Sovseal, name)

        def interrupted(self: Sovseal, *args: Any, **kwargs: Any) -> Any:
            real(self, *args, **kwargs)
            raise KeyboardInterrupt

        monkeypatch.setattr(Sovseal, name, interrupted)

    after("delete")
    line = store("delete", "x", code=130).stderr.strip()
    monkeypatch.undo()
    head = store.json("status")["head"]
    assert line == f"interrupted: the deletion was committed (snapshot {head[:17]})"
    store.fails(3, "get", "x")

    after("fork")
    line = store("fork", "--name", "side", code=130).stderr.strip()
    monkeypatch.undo()
    assert line == f"interrupted: the new branch was committed (branch side at {head[:17]})"

    after("purge")
    line = store("purge", "y", "--yes", code=130).stderr.strip()
    monkeypatch.undo()
    assert line.startswith("interrupted: the erasure was committed (") and "erased" in line, line

    def reading(self: Sovseal, *args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(Sovseal, "log", reading)
    interrupt("interrupted", store("log", code=130))


def test_sigint_at_varied_moments_of_a_real_store_tells_the_truth(tmp_path: Path) -> None:
    """A real process and a real SIGINT, at moments from start-up to close: whenever the command
    was interrupted, its one line agrees with what the store holds afterwards."""
    from tests.cli.test_subprocess import Shell

    sh = Shell(tmp_path / "home")
    sh("init")
    sh("store", "warm", "loads the model once")
    seen = set()
    for i, delay in enumerate([0.35, 0.5, 0.7, 0.9, 1.2, 1.5, 2.0, 2.5]):
        proc = subprocess.Popen(
            [sh.script, "store", f"p{i}", f"value {i}"], env=sh.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        time.sleep(delay)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
        if proc.returncode == 0:  # it finished first
            seen.add("finished")
            continue
        if proc.returncode == -signal.SIGINT:  # it came before the interpreter could catch it: the OS killed it, silently
            assert err == "", err
            seen.add("killed at start-up")
            continue
        assert proc.returncode == 130, (delay, proc.returncode, err)
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
        line = err.strip()
        got = subprocess.run([sh.script, "get", f"p{i}", "--json"], env=sh.env, capture_output=True, text=True, check=False)
        if line == "interrupted before anything was committed":
            assert got.returncode == 3, (line, got.stdout)
            seen.add("not committed")
        else:
            assert got.returncode == 0, (line, got.stderr)
            sid = json.loads(got.stdout)["snapshot_id"]
            assert line == f"interrupted: the memory was committed (snapshot {sid[:17]})", line
            seen.add("committed")
    assert seen - {"finished", "killed at start-up"}, f"no run was interrupted with the handler in place: {seen}"


# -- replication failing is said, by store and status ------------------------------------------------


def closed_port() -> int:
    """A port on 127.0.0.1 with nothing listening (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_store_warns_and_status_shows_when_replication_is_failing(store: Run) -> None:
    down = {"SOVSEAL_ENDPOINT": f"http://127.0.0.1:{closed_port()}", "SOVSEAL_API_KEY": "sk-test"}
    result = store("store", "x", "one", **down)
    assert result.stdout.startswith("stored x -> ")
    warning = result.stderr.strip().splitlines()
    assert len(warning) == 1 and warning[0].startswith("warning: replication to http://127.0.0.1:"), result.stderr
    assert "is failing (backoff)" in warning[0] and "ConnectError" in warning[0] and "queued since" in warning[0]
    status = store.json("status", **down)
    info = status["replication"]
    assert info["state"] == "backoff" and info["last_error"] and info["last_error_at"], info
    assert info["queued"] >= 1 and info["since"], info
    assert status["outbox_since"] == info["since"]  # the SDK's Status.outbox_since, as the CLI shows it
    human = store("status", **down).stdout
    assert "backoff -> http://127.0.0.1:" in human and "last error" in human and "queued" in human and "since" in human
    assert "sending" not in human
    assert store("store", "y", "two").stderr == ""  # replication off: nothing to warn about


def test_ctrl_c_in_compact_and_consolidate_says_what_holds(store: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    """A compaction is all or nothing; a consolidation run's frames are checked in the store."""
    from sovseal.sdk.client import Sovseal

    store("store", "x", "one")

    def interrupted(self: Sovseal, *args: Any, **kwargs: Any) -> Any:
        raise KeyboardInterrupt

    monkeypatch.setattr(Sovseal, "compact", interrupted)
    line = store("compact", code=130).stderr.strip()
    assert line.startswith("interrupted: a compaction is all or nothing") and "`sovseal compact`" in line
    monkeypatch.undo()
    import sovseal.consolidate as consolidation

    monkeypatch.setattr(consolidation, "consolidate", lambda *args, **kwargs: (_ for _ in ()).throw(KeyboardInterrupt()))
    interrupt("interrupted before anything was committed", store("consolidate", code=130))
