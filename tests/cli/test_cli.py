"""The `sovseal` command line, in-process through click's CliRunner, with the fast fake embedder.

Every failing command must print one line on stderr and exit with its documented code (see
``sovseal.cli.EXIT_CODES``); the runner re-raises any exception that escapes, so a traceback fails
the test.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

import sovseal.cli as cli
from tests.cli.conftest import Run

ALL_COMMANDS = {
    "init", "status", "store", "recall", "get", "delete", "purge", "log", "branches", "fork", "rollback", "verify",
    "compact", "mind", "export", "import", "key", "rebuild-index", "mcp", "demo",
}


def test_help_lists_every_command_and_teaches_by_example(run: Run) -> None:
    top = run("--help").stdout
    for name in ALL_COMMANDS:
        assert f"  {name} " in top, name
    assert "Exit codes" in top and "SOVSEAL_HOME" in top and "SOVSEAL_KEY_FALLBACK=file" in top
    with_examples = ALL_COMMANDS - {"branches", "mind", "verify", "rebuild-index", "demo", "key"}
    for name in ALL_COMMANDS:
        text = run(name, "--help").stdout
        assert text.startswith("Usage: ") and len(text.splitlines()) > 4, name
        if name in with_examples:
            assert re.search(r"^ +(sovseal |\{\"mcpServers)", text, re.M), f"{name} --help shows no example"
    assert "sovseal key import --path" in run("key", "import", "--help").stdout
    assert set(cli.EXIT_CODES) == {0, 1, 2, 3, 4, 5, 6}


def test_commands_need_an_initialised_store(run: Run) -> None:
    line = run.fails(3, "status")
    assert "no sovseal store" in line and "sovseal init" in line
    run.fails(3, "store", "a.b", "text")
    assert not run.home.exists()  # nothing, and above all no key, was created as a side effect


def test_init_creates_the_store_and_a_private_key_file(run: Run) -> None:
    data = run.json("init")
    assert data["created"] is True and data["key_backend"].startswith("file:")
    key_file = run.home / "keys" / "master.key"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    again = run.json("init")
    assert again["created"] is False and again["key_id"] == data["key_id"]
    assert "Reinitialised" in run("init").stdout


def test_init_without_keychain_or_fallback_fails_closed(run: Run) -> None:
    line = run.fails(4, "init", SOVSEAL_KEY_FALLBACK=None)
    assert "SOVSEAL_KEY_FALLBACK=file" in line


def test_store_get_recall_round_trip(store: Run, real_model: None) -> None:
    stored = store.json("store", "user.editor", "The user edits code in neovim")
    assert stored["snapshot_id"].startswith("snap_") and stored["replicated"] is False and stored["branch"] == "main"
    store("store", "user.testing", '{"framework": "vitest", "n": 2}', "-m", '{"source": "chat"}', "-t", "procedural")
    store("store", "user.quote", '"quoted json string"')
    store("store", "user.brace", "{not json}", "--as", "text")
    store("store", "user.number", "42", "--as", "json")
    store("store", "user.stdin", "-", input="from stdin\n")

    got = store.json("get", "user.testing")
    assert got["payload"] == {"framework": "vitest", "n": 2}
    assert got["metadata"] == {"source": "chat"} and got["type"] == "procedural"
    assert store.json("get", "user.quote")["payload"] == "quoted json string"
    assert store.json("get", "user.brace")["payload"] == "{not json}"
    assert store.json("get", "user.number")["payload"] == 42
    assert store.json("get", "user.stdin")["payload"] == "from stdin\n"
    assert "vitest" in store("get", "user.testing").stdout

    found = store.json("recall", "which text editor does the user use?", "-k", "2")
    assert len(found) == 2 and found[0]["path"] == "user.editor" and found[0]["score"] is not None
    human = store("recall", "The user edits code in neovim").stdout
    assert "user.editor" in human and "score" in human


def test_bad_input_is_one_line_and_exit_2(store: Run) -> None:
    assert "not valid JSON" in store.fails(2, "store", "a.b", '{"a": }')
    assert "JSON object" in store.fails(2, "store", "a.b", "x", "--metadata", "[1]")
    assert "path must be" in store.fails(2, "store", " ", "x")
    assert "not valid JSON" in store.fails(2, "recall", "q", "--filter", "{")
    store("store", "a.b", "x", "--type", "nonsense", code=2)  # click's own usage error
    store("recall", "q", "-k", "0", code=2)


def test_unknown_things_exit_3(store: Run) -> None:
    store("store", "a.b", "x")
    assert "no memory at path 'nope'" in store.fails(3, "get", "nope")
    assert "nothing was deleted" in store.fails(3, "delete", "nope")
    assert "no branch named" in store.fails(3, "log", "--branch", "ghost")
    assert "no snapshot" in store.fails(3, "rollback", "snap_" + "0" * 64)
    assert "no snapshot starting with" in store.fails(3, "fork", "snap_0000")
    assert "looks like" in store.fails(2, "rollback", "not-a-snapshot")


def test_reinforcement_and_mind_groups_recurring_patterns_by_type(store: Run) -> None:
    store("store", "user.pets", "A golden retriever named Biscuit", "-t", "episodic")
    assert "nothing reinforced yet" in store("mind").stdout
    for _ in range(3):
        assert store.json("store", "user.pets", "A golden retriever named Biscuit", "-t", "episodic")["reinforced"]
    store("store", "user.editor", "neovim")
    store("store", "user.editor", "neovim")
    store("store", "once", "only once")
    data = store.json("mind")["recurring_patterns"]
    assert [m["path"] for m in data["episodic"]] == ["user.pets"] and data["episodic"][0]["reinforce_count"] == 3
    assert [m["path"] for m in data["semantic"]] == ["user.editor"]
    human = store("mind").stdout
    assert "Recurring Patterns" in human and "Episodic (1)" in human and "user.pets" in human and "once" not in human
    assert "once" in store("mind", "--all").stdout


def test_branches_delete_removes_a_branch_and_refuses_what_it_must(store: Run) -> None:
    store("store", "user.editor", "vim")
    store("fork", "--name", "scratch")
    store("store", "--branch", "scratch", "user.editor", "helix")
    assert {r["name"] for r in store.json("branches", "--delete", "scratch")} == {"main"}
    assert "default branch" in store.fails(2, "branches", "--delete", "main")  # the default branch stays
    assert "scratch" in store.fails(3, "branches", "--delete", "scratch")  # gone already
    assert store.json("get", "user.editor")["payload"] == "vim"
    store("fork", "--name", "scratch")  # the name can be used again
    assert store.json("get", "user.editor", "-b", "scratch")["payload"] == "vim"


def test_fork_rollback_branches_and_log_graph(store: Run) -> None:
    first = store.json("store", "user.editor", "vim")["snapshot_id"]
    base = store.json("store", "user.pets", "dog")["snapshot_id"]
    assert store("fork", "--name", "experiment").stdout.strip() == "experiment"
    generated = store("fork", first[:12]).stdout.strip()  # a unique prefix works
    assert generated.startswith("fork-")
    store("store", "--branch", "experiment", "user.editor", "helix")
    store("store", "user.editor", "emacs", SOVSEAL_BRANCH=generated)
    store("store", "user.editor", "nano")

    assert store.json("get", "user.editor")["payload"] == "nano"
    assert store.json("get", "user.editor", "-b", "experiment")["payload"] == "helix"
    assert store.json("get", "user.editor", "-b", generated)["payload"] == "emacs"
    rows = {r["name"]: r for r in store.json("branches")}
    assert set(rows) == {"main", "experiment", generated} and rows["main"]["current"]
    assert "* main" in store("branches").stdout

    graph = store.json("log", "--graph")
    assert graph["current"] == "main" and set(graph["branches"]) == set(rows)
    by_id = {n["snapshot_id"]: n for n in graph["snapshots"]}
    assert by_id[base]["parent_id"] == first and len(by_id) == 5
    drawn = store("log", "--graph").stdout
    assert "HEAD -> main" in drawn and "experiment" in drawn and "|/" in drawn
    assert drawn.splitlines()[-1].startswith("*") and "user.editor" in drawn.splitlines()[-1]

    rolled = store.json("rollback", base[:14])
    assert rolled["head"] == base and rolled["branch"] == "main"
    assert store.json("get", "user.editor")["payload"] == "vim"
    assert [e["snapshot_id"] for e in store.json("log")] == [base, first]
    store("rollback", rolled["previous_head"])
    assert store.json("get", "user.editor")["payload"] == "nano"
    assert "name" in store.fails(2, "fork", "--name", "experiment")  # the name is taken


def test_delete_appends_a_tombstone(store: Run) -> None:
    store("store", "chat.today", "lisbon trip")
    before = store.json("status")["head"]
    deleted = store.json("delete", "chat.today")
    assert deleted["deleted"] and deleted["snapshot_id"] != before
    store.fails(3, "get", "chat.today")
    store("rollback", before)
    assert store.json("get", "chat.today")["payload"] == "lisbon trip"


def test_status_reports_store_branch_head_counts_outbox_and_key(store: Run) -> None:
    store("store", "a", "1")
    info = store.json("status")
    assert info["branch"] == "main" and info["head"].startswith("snap_") and info["visible"] == 1
    assert info["outbox_records"] >= 1 and info["key_backend"].startswith("file:") and info["key_id"]
    human = store("status").stdout
    assert "HEAD" in human and "key backend" in human and "replication" in human  # the outbox: test_words


def test_key_problems_exit_4_without_creating_a_new_key(store: Run) -> None:
    store("store", "a", "1")
    key_file = store.home / "keys" / "master.key"
    original = key_file.read_bytes()
    line = store.fails(4, "status", SOVSEAL_KEY_FALLBACK=None)
    assert "SOVSEAL_KEY_FALLBACK=file" in line and "--key-file FILE" in line
    from sovseal.crypto.keychain import export_key

    store.fails(4, "get", "a", SOVSEAL_KEY=export_key(os.urandom(32)))
    store.fails(2, "get", "a", SOVSEAL_KEY="garbage")
    assert key_file.read_bytes() == original


def test_key_export_then_key_file_and_env_work(store: Run, tmp_path: Path) -> None:
    store("store", "a", "1")
    exported = store("key", "export").stdout.strip()
    assert exported.startswith("sovseal-key-v1:")
    key_path = tmp_path / "key.txt"
    key_path.write_text(exported + "\n")
    no_fallback = {"SOVSEAL_KEY_FALLBACK": None}
    assert store.json("get", "a", "--key-file", str(key_path), **no_fallback)["payload"] == "1"
    assert store.json("get", "a", SOVSEAL_KEY=exported, **no_fallback)["payload"] == "1"


def test_verify_ok_then_tampering_exits_1(store: Run) -> None:
    for i in range(3):
        store("store", f"k{i}", f"value {i}")
    report = store.json("verify")
    assert report["ok"] and report["records"] == 3
    assert store("verify").stdout.startswith("ok: 3 records")
    journal = store.home / "journal.log"
    data = bytearray(journal.read_bytes())
    data[len(data) // 2] ^= 0x01
    journal.write_bytes(bytes(data))
    result = store("verify", code=1)
    assert result.stdout.startswith("FAILED") and "Traceback" not in result.stderr


def test_export_import_into_a_fresh_home(store: Run, tmp_path: Path, real_model: None) -> None:
    store("store", "user.editor", "vim")
    store("store", "user.pets", "dog", "-t", "episodic")
    store("store", "user.pets", "dog", "-t", "episodic")  # reinforced: travels with the backup
    store("fork", "--name", "exp")
    store("store", "-b", "exp", "exp.idea", '{"try": "helix"}')
    store("delete", "user.editor")
    backup = tmp_path / "backup.sovseal"
    info = store.json("export", str(backup))
    assert info["items"] > 0 and sorted(info["source_branches"]) == ["exp", "main"]
    assert b"user.pets" not in backup.read_bytes() and b"helix" not in backup.read_bytes()
    assert "exists" in store.fails(2, "export", str(backup))
    store("export", str(backup), "--force")
    exported_key = store("key", "export").stdout.strip()

    fresh = {"SOVSEAL_HOME": str(tmp_path / "fresh")}
    assert "key" in store.fails(4, "import", str(backup), **fresh)  # no key there yet
    store("key", "import", input=exported_key + "\n", **fresh)
    imported = store.json("import", str(backup), **fresh)
    assert set(imported["branches"]) == {"main", "exp"}
    for branch in ("main", "exp"):
        assert store.json("log", "-b", branch, **fresh) == store.json("log", "-b", branch)
    assert store.json("get", "user.pets", **fresh)["reinforce_count"] == 1
    assert store.json("verify", **fresh)["ok"]
    assert store.json("recall", "dog", "-k", "1", **fresh)[0]["path"] == "user.pets"
    store("import", str(backup), **fresh)  # importing again changes nothing
    assert store.json("status", **fresh)["records"] == store.json("status")["records"]


def test_import_rejects_damaged_truncated_and_foreign_files(store: Run, tmp_path: Path) -> None:
    store("store", "a", "1")
    backup = tmp_path / "b.sovseal"
    store("export", str(backup))
    good = backup.read_bytes()

    flipped = bytearray(good)
    flipped[-5] ^= 0x01
    (tmp_path / "flipped").write_bytes(bytes(flipped))
    assert "failed authentication" in store.fails(1, "import", str(tmp_path / "flipped"))
    (tmp_path / "short").write_bytes(good[:-3])
    store.fails(1, "import", str(tmp_path / "short"))
    (tmp_path / "cut").write_bytes(good[: good.index(b"\n", 20) + 1])
    assert "truncated" in store.fails(1, "import", str(tmp_path / "cut"))
    (tmp_path / "foreign").write_bytes(b"hello")
    assert "not a sovseal backup" in store.fails(2, "import", str(tmp_path / "foreign"))

    other = {"SOVSEAL_HOME": str(tmp_path / "other")}
    store("init", **other)
    assert "key id" in store.fails(4, "import", str(backup), **other)


def test_rebuild_index_keeps_recall_working(store: Run, real_model: None) -> None:
    store("store", "user.editor", "The user edits code in neovim")
    store("store", "user.pets", "The user has a dog")
    store("fork", "--name", "b2")
    assert store.json("rebuild-index")["branches"] == 2
    assert store.json("recall", "which editor?", "-k", "1")[0]["path"] == "user.editor"
    assert store.json("recall", "pets", "-k", "1", "-b", "b2")[0]["path"] == "user.pets"


def test_recall_filter_is_passed_only_when_given(store: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    from sovseal import Sovseal

    seen: list[dict[str, object]] = []

    def spy(self: Sovseal, query: str, *, k: int = 5, filter: dict[str, object] | None = None) -> list[object]:
        seen.append({"k": k, "filter": filter})
        return []

    monkeypatch.setattr(Sovseal, "recall", spy)
    store("recall", "q", "-k", "3")
    assert seen[-1] == {"k": 3, "filter": None}
    store("recall", "q", "--filter", '{"type": "semantic"}')
    assert seen[-1] == {"k": 5, "filter": {"type": "semantic"}}

