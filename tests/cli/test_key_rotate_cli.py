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
    from sovseal.keys import export_key

    old, new = tmp_path / "old.key", tmp_path / "new.key"
    old.write_text(export_key(bytes(range(32))))
    new.write_text(export_key(bytes(range(1, 33))))
    run("init", "--key-file", str(old))
    run("store", "a", "1", "--key-file", str(old))
    assert "--new-key-file" in run.fails(2, "key", "rotate", "--key-file", str(old))
    assert run.json("key", "rotate", "--key-file", str(old), "--new-key-file", str(new))["verified"] is True
    assert run.json("get", "a", "--key-file", str(new))["payload"] == "1"
