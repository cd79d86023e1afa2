"""Key custody end to end: fail closed without a key store, refuse a loose key file, enforce the seal budget.

tests/core/test_keys.py tests ``load_master_key`` function by function. This scenario drives the
public ``Sovseal`` the way a user does, in fresh processes where it matters (the keyring backend
is chosen from the environment at import), and checks what must *not* happen: no key silently
created for an existing store, nothing written to a store opened without its key, no journal
byte appended once a key's budget is spent.

The budget: AES-GCM with random 96-bit nonces allows 2^32 encryptions per key (NIST SP 800-38D
§8.3); sovseal refuses at 2^31 (crypto.DEFAULT_SEAL_LIMIT). The count is not a separate counter
file that could be lost or rolled back: it is recounted from the journal's durable frames (one
k_sync seal per record, branch and reinforce frame, one k_rest seal per record), so it survives
kill -9, is shared by every process and includes records imported from other devices. The tests
lower the limit (the real ``Sealer`` with ``limit=`` set, patched where sovseal.crypto.sealing builds it)
instead of sealing 2^31 times.
"""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import keyring
import pytest
from keyring.backends import fail

from sovseal import Sovseal
from sovseal.crypto import sealing as sealing_module
from sovseal.crypto.keychain import FALLBACK_ENV, key_file_path
from sovseal.crypto.primitives import Sealer
from sovseal.errors import KeyExhaustedError, KeyUnavailableError
from tests.fakes import fake_embed

ROOT = Path(__file__).resolve().parents[2]

OPEN_WITHOUT_KEY = textwrap.dedent(
    """
    import sys
    from sovseal import Sovseal
    from sovseal.errors import KeyUnavailableError
    from tests.fakes import fake_embed
    try:
        Sovseal(sys.argv[1], embedder=fake_embed).close()
    except KeyUnavailableError as exc:
        print("KeyUnavailableError:", exc)
        sys.exit(3)
    print("opened")
    """
)


def open_in_fresh_process(store: Path, *, fallback: bool) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHON_KEYRING_BACKEND": "keyring.backends.fail.Keyring"}
    env.pop(FALLBACK_ENV, None)
    if fallback:
        env[FALLBACK_ENV] = "file"
    return subprocess.run(
        [sys.executable, "-c", OPEN_WITHOUT_KEY, str(store)], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120, check=False
    )


def snapshot(directory: Path) -> dict[str, bytes]:
    """Every file under ``directory`` (but the rebuildable index) and its bytes."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file() and "index" not in p.relative_to(directory).parts
    }


@pytest.fixture(autouse=True)
def _no_keychain(monkeypatch: pytest.MonkeyPatch) -> object:
    """In this process too: keyring's own ``fail`` backend, no fallback opt-in."""
    monkeypatch.delenv(FALLBACK_ENV, raising=False)
    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    yield
    keyring.set_keyring(previous)


def test_no_keychain_and_no_fallback_fails_closed_and_writes_nothing(tmp_path: Path, key: bytes) -> None:
    """Proves: in a fresh process with no usable keychain and no fallback opt-in, opening a new
    store raises KeyUnavailableError and creates no key and no journal; opening an existing store
    (made with an explicit key) raises too and leaves every byte of it as it was."""
    new = tmp_path / "new"
    done = open_in_fresh_process(new, fallback=False)
    assert done.returncode == 3, done.stdout + done.stderr
    assert "SOVSEAL_KEY_FALLBACK=file" in done.stdout
    assert not (new / "journal.log").exists() and not key_file_path(new).exists()

    existing = tmp_path / "existing"
    with Sovseal(existing, key=key, embedder=fake_embed) as mem:
        mem.store("kept", "value")
    before = snapshot(existing)
    done = open_in_fresh_process(existing, fallback=False)
    assert done.returncode == 3, done.stdout + done.stderr
    done = open_in_fresh_process(existing, fallback=True)  # the opt-in must not mint a new key for it
    assert done.returncode == 3, done.stdout + done.stderr
    assert snapshot(existing) == before and not key_file_path(existing).exists()


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
@pytest.mark.parametrize(("target", "mode"), [("file", 0o644), ("file", 0o604), ("dir", 0o755), ("dir", 0o701)])
def test_a_fallback_key_file_with_wide_permissions_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, mode: int
) -> None:
    """Proves: a store whose fallback key file (or its directory) is readable by others is refused
    with KeyUnavailableError naming the fix; nothing is read or replaced; fixing the mode opens it."""
    monkeypatch.setenv(FALLBACK_ENV, "file")
    store = tmp_path / "store"
    with Sovseal(store, embedder=fake_embed) as mem:  # creates the 0600 key file in a 0700 directory
        assert mem.key_backend.startswith("file:")
        mem.store("kept", "value")
    path = key_file_path(store) if target == "file" else key_file_path(store).parent
    good = path.stat().st_mode & 0o777
    path.chmod(mode)
    before = snapshot(store)
    with pytest.raises(KeyUnavailableError, match="chmod"):
        Sovseal(store, embedder=fake_embed)
    assert snapshot(store) == before
    path.chmod(good)
    with Sovseal(store, embedder=fake_embed) as mem:
        assert mem.get("kept").payload == "value" and mem.verify().ok


def lower_budget(monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    monkeypatch.setattr(sealing_module, "Sealer", functools.partial(Sealer, limit=limit))


def test_the_seal_budget_is_enforced_persisted_and_shared(
    tmp_path: Path, key: bytes, monkeypatch: pytest.MonkeyPatch, figures: dict[str, object]
) -> None:
    """Proves: once a key has sealed its limit, store, delete, fork and reinforcement refuse with
    KeyExhaustedError saying to rotate the key, append nothing, and reads and verify() go on; the
    count is rebuilt from the journal, so reopening, another process and imported records all
    count against the same budget."""
    limit = 12
    lower_budget(monkeypatch, limit)
    store = tmp_path / "store"
    with Sovseal(store, key=key, embedder=fake_embed) as mem:
        for i in range(4):  # main's creation + 4 records: 5 k_sync seals, 4 k_rest seals
            mem.store(f"fact.{i}", i)
        assert mem.status().seals == {"k_sync": 5, "k_rest": 4}
    # Another process stores 3 more (it counts from the journal, not from zero).
    writer = textwrap.dedent(
        """
        import functools, sys
        import sovseal.crypto.sealing as s
        from sovseal.crypto.primitives import Sealer
        s.Sealer = functools.partial(Sealer, limit=int(sys.argv[3]))
        from sovseal import Sovseal
        from tests.fakes import fake_embed
        with Sovseal(sys.argv[1], key=bytes.fromhex(sys.argv[2]), embedder=fake_embed) as mem:
            for i in range(3):
                mem.store(f"other.{i}", i)
            print(mem.status().seals["k_sync"])
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", writer, str(store), key.hex(), str(limit)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split()[-1] == "8"
    # A record sealed on a second device (restored from this one) counts here once imported.
    with Sovseal(store, key=key, embedder=fake_embed) as mem:
        history = mem.export_items()
    with Sovseal(tmp_path / "device2", key=key, embedder=fake_embed) as other:
        other.import_items(history)
        other.store("from.device2", "x")
        items = other.export_items()
    with Sovseal(store, key=key, embedder=fake_embed) as mem:
        assert mem.status().seals["k_sync"] == 8
        mem.import_items(items)
        seals = mem.status().seals["k_sync"]
        assert seals == 10 and mem.get("from.device2").payload == "x"  # device2 sealed its main creation and a record
        while seals < limit:
            mem.store(f"fill.{seals}", seals)
            seals = mem.status().seals["k_sync"]
        journal = (store / "journal.log").read_bytes()
        refused = 0
        for name, call in [
            ("store", lambda: mem.store("one.more", 1)),
            ("reinforce", lambda: mem.store("fact.0", 0)),
            ("delete", lambda: mem.delete("fact.1")),
            ("fork", lambda: mem.fork(branch="new")),
        ]:
            with pytest.raises(KeyExhaustedError, match="rotate the key"):
                call()
            refused += 1
            assert (store / "journal.log").read_bytes() == journal, name
        assert mem.get("fact.2").payload == 2 and mem.verify().ok
        assert "new" not in mem.branches()
    with Sovseal(store, key=key, embedder=fake_embed) as mem:  # reopening does not reset the count
        with pytest.raises(KeyExhaustedError):
            mem.store("after.reopen", 1)
        assert mem.status().seals["k_sync"] == limit
    figures.update(limit=limit, refused_calls=refused + 1)
