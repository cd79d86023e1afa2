"""`sovseal purge` and `sovseal compact` (issue #23), in-process through click's CliRunner with the fake
embedder, plus one run on a real terminal (a pty) for the confirmation question.

A purge is irreversible, so the checks are: what it erased is gone from get, recall and every branch,
the store still verifies (and counts the erased records), log lists them without a path, nothing is
erased without a confirmation, and a purge of nothing changes nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from sovseal.cli import writing
from sovseal.cli.reading import ERASED_PATH
from tests.cli.conftest import Run
from tests.cli.support import clean_env
from tests.cli.test_subprocess import sovseal_script

SECRET = "the launch code is 7351-alpha-quebec"


def _history(run: Run) -> None:
    """user.secret written three times on main and once on a branch; user.name beside it."""
    run("store", "user.name", "Ada")
    run("store", "user.secret", SECRET)
    run("fork", "--name", "experiment")
    run("store", "user.secret", SECRET + " (experiment)", "--branch", "experiment")
    run("store", "user.secret", SECRET + " (v2)")
    run("store", "user.secret", SECRET + " (v3)")


def _journal(run: Run) -> bytes:
    return (run.home / "journal.log").read_bytes()


def test_purge_erases_every_version_on_every_branch_and_the_store_still_verifies(store: Run) -> None:
    _history(store)
    assert store.json("verify")["erased"] == 0
    result = store("purge", "user.secret", "--reason", "stored by mistake", "--yes")
    lines = result.stdout.splitlines()
    assert lines[0] == "erased 4 snapshots (every version of 'user.secret') on every branch"
    assert lines[1].startswith("journal compacted: ") and lines[1].endswith("no sealed copy of it is left")
    assert "replication is off: only this store was erased" in result.stderr

    for branch in ("main", "experiment"):
        assert "no memory at path 'user.secret'" in store.fails(3, "get", "user.secret", "--branch", branch)
        assert store.json("get", "user.name", "--branch", branch)["payload"] == "Ada"
        assert all(m["path"] != "user.secret" for m in store.json("recall", "launch code", "-k", "10", "--branch", branch))

    verified = store("verify")
    assert verified.stdout.startswith("ok: 5 records, 2 branches, 4 of them erased by a purge")
    report = store.json("verify")
    assert report["ok"] is True and report["erased"] == 4 and report["problems"] == []

    # log: the erased snapshots keep their place in the lineage, with no path.
    entries = store.json("log")
    erased = [e for e in entries if e["op"] == "erased"]
    assert len(erased) == 3 and all(e["path"] == "" for e in erased)  # main's three versions
    human = store("log").stdout
    assert human.count(f"erased {ERASED_PATH}") == 3 and "user.name" in human
    graph = store("log", "--graph").stdout
    assert graph.count(f"erased {ERASED_PATH}") == 4  # every branch
    assert {e["op"] for e in store.json("log", "--graph")["snapshots"]} == {"store", "erased"}

    # The content is gone from the journal too, and a new write of the path is a new memory.
    assert b"7351" not in _journal(store)
    store("store", "user.secret", "a harmless value")
    assert store.json("get", "user.secret")["payload"] == "a harmless value"
    assert store.json("verify")["ok"] is True


def test_purge_json_reports_the_snapshots_erased(store: Run) -> None:
    _history(store)
    on_main = {e["snapshot_id"] for e in store.json("log")}
    data = store.json("purge", "user.secret", "--yes", "--reason", "gdpr request 17")
    assert set(data) == {"path", "prefix", "reason", "erased", "compacted", "bytes_reclaimed", "replication"}
    assert data["path"] == "user.secret" and data["prefix"] is None and data["reason"] == "gdpr request 17"
    assert len(data["erased"]) == 4 and all(re.fullmatch(r"snap_[0-9a-f]{64}", s) for s in data["erased"])
    assert len(set(data["erased"]) & on_main) == 3
    assert data["compacted"] is True and isinstance(data["bytes_reclaimed"], int) and data["replication"] is False
    again = store.json("purge", "user.secret", "--yes")  # already erased: nothing new, not an error
    assert again["erased"] == []
    assert "already erased" in store("purge", "user.secret", "--yes").stdout


def test_purge_run_again_finishes_an_erasure_left_in_the_journal(store: Run) -> None:
    """An erasure not yet compacted (a purge killed before its rewrite leaves the same journal as a
    deferred one): running the purge again has nothing new to erase, and compacts."""
    store("store", "bulk", "x" * 60_000)  # most of the journal: the erased part stays under close()'s threshold
    _history(store)
    deferred = store("purge", "user.secret", "--yes", "--no-compact").stdout
    assert deferred.startswith("erased 4 snapshots") and "not compacted yet" in deferred
    again = store("purge", "user.secret", "--yes").stdout.splitlines()
    assert again[0] == "nothing left to erase: every version of 'user.secret' was already erased"
    assert again[1].startswith("journal compacted now: ") and again[1].endswith("no sealed copy of it is left")
    assert store.json("purge", "user.secret", "--yes")["compacted"] is False  # nothing left in the journal now


def test_purge_by_prefix_run_again_finishes_an_erasure_left_in_the_journal(store: Run) -> None:
    """As by path (issue #36, item 6): the prefix lists no path any more, yet the rerun compacts
    instead of exiting 3 (it did on b67f551); a prefix nothing was ever under still exits 3."""
    store("store", "bulk", "x" * 60_000)  # the erased part stays under close()'s threshold
    store("store", "customer.42.card", "4111 1111 1111 1111")
    deferred = store("purge", "customer.42.", "--prefix", "--yes", "--no-compact").stdout
    assert deferred.startswith("erased 1 snapshot") and "not compacted yet" in deferred
    assert "no path under 'customer.4.'" in store.fails(3, "purge", "customer.4.", "--prefix", "--yes")
    again = store("purge", "customer.42.", "--prefix", "--yes").stdout.splitlines()
    assert again[0] == "nothing left to erase: every path under 'customer.42.' was already erased"
    assert again[1].startswith("journal compacted now: ") and again[1].endswith("no sealed copy of it is left")
    assert store.json("purge", "customer.42.", "--prefix", "--yes")["compacted"] is False
    assert store.json("verify")["ok"] is True


def test_purge_by_prefix(store: Run) -> None:
    store("store", "customer.42.name", "Grace")
    store("store", "customer.42.card", "4111 1111 1111 1111")
    store("delete", "customer.42.card")
    store("store", "customer.43.name", "Linus")
    store("store", "customerx", "not under the prefix")
    data = store.json("purge", "customer.42.", "--prefix", "--yes")
    assert data["prefix"] == "customer.42." and data["path"] is None and len(data["erased"]) == 3
    state = {m["path"] for m in store.json("recall", "name card", "-k", "10")}
    assert state == {"customer.43.name", "customerx"}
    store.fails(3, "get", "customer.42.name")
    assert store.json("get", "customer.43.name")["payload"] == "Linus"
    assert store.json("verify")["erased"] == 3
    assert b"4111" not in _journal(store)
    assert "no path under 'nobody.'" in store.fails(3, "purge", "nobody.", "--prefix", "--yes")


def test_purge_reads_the_path_from_stdin(store: Run) -> None:
    store("store", "user.health", "a private diagnosis")
    data = store.json("purge", "-", "--yes", input="user.health\n")
    assert data["path"] == "user.health" and len(data["erased"]) == 1
    store.fails(3, "get", "user.health")


def test_purge_without_yes_refuses_when_stdin_is_not_a_terminal(store: Run) -> None:
    _history(store)
    before = _journal(store)
    line = store.fails(2, "purge", "user.secret", input="y\n")  # even a "y" on a pipe is not a confirmation
    assert "cannot be undone" in line and "--yes" in line
    assert _journal(store) == before
    assert store.json("get", "user.secret")["payload"] == SECRET + " (v3)"
    assert store.json("verify")["erased"] == 0


def test_purge_asks_on_a_terminal(store: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    store("store", "user.secret", SECRET)
    monkeypatch.setattr(writing, "_stdin_is_tty", lambda: True)
    declined = store("purge", "user.secret", input="n\n", code=2)
    assert "Erase every version of 'user.secret' on every branch, for good?" in declined.stderr
    assert "nothing was purged" in declined.stderr and declined.stdout == ""
    assert store.json("get", "user.secret")["payload"] == SECRET
    accepted = store("purge", "user.secret", input="y\n")
    assert accepted.stdout.startswith("erased 1 snapshot ")
    store.fails(3, "get", "user.secret")


def test_an_unknown_path_exits_3_and_changes_nothing(store: Run) -> None:
    store("store", "a.b", "x")
    before = _journal(store)
    line = store.fails(3, "purge", "never.written", "--yes")
    assert line == "error: no version of 'never.written' exists on any branch; nothing was purged"
    assert _journal(store) == before
    assert "no sovseal store" in store.fails(3, "purge", "a.b", "--yes", "--path", str(store.home.parent / "nowhere"))
    store.fails(2, "purge", "", "--yes")


def test_no_compact_then_compact(store: Run) -> None:
    for i in range(20):
        store("store", f"bulk.{i}", "y" * 500)
    store("store", "user.secret", SECRET + " " + "z" * 4000)
    result = store("purge", "user.secret", "--no-compact", "--yes")
    assert "not compacted yet" in result.stdout and "sovseal compact" in result.stdout
    assert store.json("purge", "user.secret", "--no-compact", "--yes")["erased"] == []
    store.fails(3, "get", "user.secret")  # reads treat it as erased before compaction

    size = len(_journal(store))
    report = store.json("compact")
    assert set(report) == {"bytes_before", "bytes_after", "skeletons", "seconds", "paused", "reclaimed"}
    assert report["bytes_before"] == size and report["bytes_after"] == len(_journal(store))
    assert report["reclaimed"] == report["bytes_before"] - report["bytes_after"] > 3000
    assert report["skeletons"] == 1 and report["seconds"] >= report["paused"] >= 0
    human = store("compact").stdout.splitlines()  # nothing erased is left: nothing is rewritten
    assert human == [f"nothing to compact: no erased content is left in the journal ({human[0].rsplit('(', 1)[1]}"], human
    assert store.json("verify")["ok"] is True


def test_compact_on_a_store_with_nothing_erased(store: Run) -> None:
    store("store", "a.b", "x")
    report = store.json("compact")
    assert report["skeletons"] == 0 and report["reclaimed"] == 0
    assert store.json("get", "a.b")["payload"] == "x"


def test_purge_says_replication_sends_the_erasure(store: Run) -> None:
    store("store", "user.secret", SECRET)
    replicated = {"SOVSEAL_ENDPOINT": "http://127.0.0.1:9", "SOVSEAL_API_KEY": "sov_test", "SOVSEAL_PROJECT": "purge-test"}
    result = store("purge", "user.secret", "--yes", **replicated)
    assert "the erasure is queued for the server" in result.stderr and "next pull" in result.stderr
    assert store.json("purge", "user.secret", "--yes", **replicated)["replication"] is True


def test_purge_on_a_real_terminal(store: Run, tmp_path: Path) -> None:
    """The question on a real pty, answered as a person would; Ctrl-D (no answer) erases nothing."""
    pexpect = pytest.importorskip("pexpect")
    store("store", "user.secret", SECRET)
    store("store", "user.name", "Ada")
    env = clean_env(store.home)

    def spawn(*args: str) -> object:
        return pexpect.spawn(sovseal_script(), list(args), env=env, encoding="utf-8", timeout=60)

    child = spawn("purge", "user.secret")
    child.expect(r"Erase every version of 'user\.secret' on every branch, for good\? This cannot be undone \[y/N\]: ")
    child.sendline("y")
    child.expect(r"erased 1 snapshot")
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0

    child = spawn("purge", "user.name")
    child.expect(r"\[y/N\]: ")
    child.sendline("")  # the default is no
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2 and "nothing was purged" in str(child.before)
    assert store.json("get", "user.name")["payload"] == "Ada"
    store.fails(3, "get", "user.secret")
