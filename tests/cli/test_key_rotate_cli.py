"""`sovseal key rotate` (issue #23): the store re-sealed under a new key from the command line.

The fixture's store keeps its key in the 0600 key file: the rotation replaces it there; a store
whose key is passed with --key-file needs the new key passed too, and keeps working with it only.
"""

from __future__ import annotations

from pathlib import Path

from tests.cli.conftest import Run


def test_key_rotate_keeps_the_store_and_replaces_the_key(store: Run, tmp_path: Path) -> None:
    store("store", "user.editor", "helix")
    before = store.json("get", "user.editor")["snapshot_id"]
    old = store("key", "export").stdout.strip()
    report = store.json("key", "rotate")
    assert report["verified"] is True and report["old_key_id"] != report["new_key_id"] and report["retired"] is None
    assert store.json("get", "user.editor")["snapshot_id"] == before  # ids survive; the key store has the new key
    assert store("key", "export").stdout.strip() != old
    (tmp_path / "old.key").write_text(old)
    refused = store("get", "user.editor", "--key-file", str(tmp_path / "old.key"), code=None)
    assert refused.exit_code != 0 and "key id" in refused.stderr  # the old key opens nothing any more


def test_an_explicit_key_needs_the_new_key_file(run: Run, tmp_path: Path) -> None:
    from sovseal.crypto.keychain import export_key

    old, new = tmp_path / "old.key", tmp_path / "new.key"
    old.write_text(export_key(bytes(range(32))))
    new.write_text(export_key(bytes(range(1, 33))))
    run("init", "--key-file", str(old))
    run("store", "a", "1", "--key-file", str(old))
    assert "--new-key-file" in run.fails(2, "key", "rotate", "--key-file", str(old))
    assert run.json("key", "rotate", "--key-file", str(old), "--new-key-file", str(new))["verified"] is True
    assert run.json("get", "a", "--key-file", str(new))["payload"] == "1"


def test_rotate_says_that_older_backups_need_the_old_key(store: Run, tmp_path: Path) -> None:
    store("store", "user.editor", "helix")
    backup = tmp_path / "before.sovseal"
    store("export", str(backup))
    old = store("key", "export").stdout
    notes = store("key", "rotate").stderr
    assert "backups" in notes and "old key" in notes and "sovseal export" in notes
    assert "opens nothing" not in notes  # it still opens those backups
    fresh = str(tmp_path / "fresh")  # the advice holds: the old backup imports with the old key
    store("key", "import", "--path", fresh, input=old)
    store("import", str(backup), "--path", fresh)
    assert store.json("get", "user.editor", "--path", fresh)["payload"] == "helix"


def test_rotate_to_the_current_key_is_refused_and_changes_nothing(run: Run, tmp_path: Path) -> None:
    from sovseal.crypto.keychain import export_key

    key = tmp_path / "k.txt"
    key.write_text(export_key(bytes(range(32))))
    run("init", "--key-file", str(key))
    before = run.json("store", "a", "1", "--key-file", str(key))["snapshot_id"]
    line = run.fails(2, "key", "rotate", "--key-file", str(key), "--new-key-file", str(key))
    assert "current key" in line and "nothing was changed" in line and "different key" in line
    assert run.json("get", "a", "--key-file", str(key))["snapshot_id"] == before
    assert run.json("status", "--key-file", str(key))["key_id"] == run.json("init", "--key-file", str(key))["key_id"]


def test_rotate_to_the_key_store_s_own_key_is_refused(store: Run, tmp_path: Path) -> None:
    current = tmp_path / "current.key"
    current.write_text(store("key", "export").stdout)
    line = store.fails(2, "key", "rotate", "--new-key-file", str(current))
    assert "nothing was changed" in line and "leave --new-key-file out" in line
    assert store("key", "export").stdout == current.read_text()


def test_init_with_an_explicit_key_advises_keeping_that_file(run: Run, tmp_path: Path) -> None:
    from sovseal.crypto.keychain import export_key

    key = tmp_path / "k.txt"
    key.write_text(export_key(bytes(range(32))))
    notes = run("init", "--key-file", str(key)).stderr
    assert f"--key-file {key}" in notes and "keep a copy" in notes and "sovseal key export" not in notes
    notes = run("init", "--path", str(tmp_path / "env"), SOVSEAL_KEY=key.read_text()).stderr
    assert "SOVSEAL_KEY" in notes and "keep a copy" in notes
    assert "sovseal key export" in run("init", "--path", str(tmp_path / "kept")).stderr  # a key sovseal keeps
