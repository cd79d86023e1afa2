"""Master-key custody: real keyring backends, real key files and permissions, export/import.

No mocks: the keychain path uses a real in-memory ``keyring.backend.KeyringBackend`` subclass
registered with ``keyring.set_keyring``; "no keychain" is keyring's own ``fail`` backend; the file
path creates real files and checks real modes.
"""

from __future__ import annotations

import json
import os
import re
import stat
from collections.abc import Iterator
from pathlib import Path

import keyring
import keyring.backend
import keyring.errors
import pytest
from keyring.backends import chainer, fail
from keyring.compat.properties import classproperty

from sovseal.crypto import keychain as keys
from sovseal.crypto.keychain import (
    FALLBACK_ENV,
    KEYRING_SERVICE,
    coerce_key,
    export_key,
    import_key,
    key_file_path,
    load_master_key,
    store_master_key,
    store_uuid,
)
from sovseal.errors import InvalidInputError, KeyUnavailableError

posix_only = pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")


class MemoryKeyring(keyring.backend.KeyringBackend):
    """A real, complete keyring backend that keeps secrets in a dict (stands in for an OS keychain).

    keyring registers every backend subclass for auto-discovery; a priority that raises makes it
    non-viable there, so it is only ever active where a test installs it with ``keyring.set_keyring``
    (and never leaks into other tests' default keyring).
    """

    @classproperty
    def priority(cls) -> float:
        raise RuntimeError("test backend: install it explicitly with keyring.set_keyring")

    def __init__(self) -> None:
        super().__init__()
        self.secrets: dict[tuple[str, str], str] = {}

    def get_password(self, service: str, username: str) -> str | None:
        return self.secrets.get((service, username))

    def set_password(self, service: str, username: str, password: str) -> None:
        self.secrets[(service, username)] = password

    def delete_password(self, service: str, username: str) -> None:
        try:
            del self.secrets[(service, username)]
        except KeyError:
            raise keyring.errors.PasswordDeleteError(username) from None


class LockedKeyring(MemoryKeyring):
    """A keychain that is present but locked, as Secret Service is before the user unlocks it."""

    def get_password(self, service: str, username: str) -> str | None:
        raise keyring.errors.KeyringLocked("the collection is locked")


class PlaintextKeyring(MemoryKeyring):
    """Named like keyrings.alt's plaintext backend: storage sovseal must not accept."""


@pytest.fixture(autouse=True)
def _isolated(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test starts with no fallback opt-in and the machine's keyring restored afterwards."""
    monkeypatch.delenv(FALLBACK_ENV, raising=False)
    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())  # never touch a developer's real keychain
    yield
    keyring.set_keyring(previous)


@pytest.fixture
def memory_keychain() -> MemoryKeyring:
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    return backend


@pytest.fixture
def file_fallback(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FALLBACK_ENV, "file")


# --- fail closed ----------------------------------------------------------------------------------


def test_no_keychain_no_fallback_fails_closed_naming_both_options(tmp_path: Path) -> None:
    store = tmp_path / "store"
    with pytest.raises(KeyUnavailableError) as info:
        load_master_key(store)
    message = str(info.value)
    assert "keychain" in message and "Secret Service" in message and "macOS Keychain" in message
    assert "Windows Credential Manager" in message
    assert "SOVSEAL_KEY_FALLBACK=file" in message
    assert "key=" in message
    assert not key_file_path(store).exists()


def test_fallback_needs_the_exact_opt_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FALLBACK_ENV, "1")
    with pytest.raises(KeyUnavailableError):
        load_master_key(tmp_path)


@pytest.mark.parametrize("backend", [fail.Keyring(), chainer.ChainerBackend(), PlaintextKeyring()])
def test_non_keychain_backends_are_not_used(tmp_path: Path, backend: keyring.backend.KeyringBackend) -> None:
    """fail, an empty chainer and plaintext backends count as "no keychain"."""
    if isinstance(backend, chainer.ChainerBackend) and any(
        keys._is_real_keychain(b) for b in chainer.ChainerBackend.backends
    ):
        pytest.skip("this machine has a real keychain, so the chainer is not empty")
    keyring.set_keyring(backend)
    with pytest.raises(KeyUnavailableError, match="SOVSEAL_KEY_FALLBACK=file"):
        load_master_key(tmp_path)
    if isinstance(backend, PlaintextKeyring):
        assert backend.secrets == {}


def test_keyrings_alt_modules_are_refused() -> None:
    alt = type("Keyring", (MemoryKeyring,), {"__module__": "keyrings.alt.file"})
    assert not keys._is_real_keychain(alt())
    assert keys._is_real_keychain(MemoryKeyring())


def test_create_false_finds_nothing_and_creates_nothing(tmp_path: Path, file_fallback: None) -> None:
    with pytest.raises(KeyUnavailableError, match="exported key"):
        load_master_key(tmp_path, create=False)
    assert list(tmp_path.iterdir()) == []


# --- key file fallback ----------------------------------------------------------------------------


@posix_only
def test_file_fallback_creates_private_key_file(tmp_path: Path, file_fallback: None) -> None:
    store = tmp_path / "store"
    old_umask = os.umask(0)  # even a permissive umask must not widen the modes
    try:
        master, backend = load_master_key(store)
    finally:
        os.umask(old_umask)
    path = key_file_path(store)
    assert len(master) == 32
    assert backend == f"file:{path}"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o700
    assert import_key(path.read_text()) == master  # stored in the checksummed export form
    assert [p.name for p in path.parent.iterdir()] == ["master.key"]  # no temp file left behind
    assert load_master_key(store) == (master, backend)  # stable across loads
    assert load_master_key(store, create=False) == (master, backend)


@posix_only
def test_key_file_creation_is_fsynced(tmp_path: Path, file_fallback: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The key and its directory entry are durable before the key is used to seal anything."""
    synced: list[str] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        synced.append(os.readlink(f"/proc/self/fd/{fd}") if os.path.exists("/proc/self/fd") else str(fd))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    load_master_key(tmp_path)
    if not os.path.exists("/proc/self/fd"):
        assert len(synced) >= 3
        return
    keys_dir = str(key_file_path(tmp_path).parent)
    assert any(p.startswith(keys_dir + "/.master.key.") for p in synced)  # file data, before publishing
    assert keys_dir in synced  # the new directory entry
    assert str(tmp_path) in synced  # the new keys/ directory itself


@posix_only
def test_key_file_with_wide_permissions_is_refused(tmp_path: Path, file_fallback: None) -> None:
    master, _ = load_master_key(tmp_path)
    path = key_file_path(tmp_path)
    path.chmod(0o644)
    with pytest.raises(KeyUnavailableError, match=re.escape(f"chmod 600 {path}")):
        load_master_key(tmp_path)
    path.chmod(0o600)
    path.parent.chmod(0o755)
    with pytest.raises(KeyUnavailableError, match=re.escape(f"chmod 700 {path.parent}")):
        load_master_key(tmp_path)
    path.parent.chmod(0o700)
    assert load_master_key(tmp_path)[0] == master


@posix_only
def test_symlinked_key_file_is_refused(tmp_path: Path, file_fallback: None) -> None:
    elsewhere = tmp_path / "elsewhere"
    _, _ = load_master_key(elsewhere)
    store = tmp_path / "store"
    key_file_path(store).parent.mkdir(parents=True, mode=0o700)
    key_file_path(store).parent.chmod(0o700)
    key_file_path(store).symlink_to(key_file_path(elsewhere))
    with pytest.raises(KeyUnavailableError, match="symlink"):
        load_master_key(store)


def test_existing_key_file_without_opt_in_is_not_replaced(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FALLBACK_ENV, "file")
    master, _ = load_master_key(tmp_path)
    monkeypatch.delenv(FALLBACK_ENV)
    with pytest.raises(KeyUnavailableError, match="SOVSEAL_KEY_FALLBACK=file"):
        load_master_key(tmp_path)
    monkeypatch.setenv(FALLBACK_ENV, "file")
    assert load_master_key(tmp_path)[0] == master


def test_corrupt_key_file_is_reported(tmp_path: Path, file_fallback: None) -> None:
    load_master_key(tmp_path)
    path = key_file_path(tmp_path)
    text = path.read_text()
    path.write_text(text[:20])
    with pytest.raises(KeyUnavailableError, match="corrupt"):
        load_master_key(tmp_path)


# --- keychain -------------------------------------------------------------------------------------


def test_keychain_creates_and_reloads(tmp_path: Path, memory_keychain: MemoryKeyring) -> None:
    store = tmp_path / "store"
    master, backend = load_master_key(store)
    assert backend.startswith("keyring:") and "MemoryKeyring" in backend
    uid = json.loads((store / "store.json").read_text())["store_uuid"]
    assert memory_keychain.secrets == {(KEYRING_SERVICE, uid): export_key(master)}
    assert load_master_key(store) == (master, backend)
    assert not key_file_path(store).exists()
    other, _ = load_master_key(tmp_path / "other")
    assert other != master  # one key per store


def test_keychain_key_follows_a_moved_store(tmp_path: Path, memory_keychain: MemoryKeyring) -> None:
    """The keychain username is the store_uuid, not the path, so moving the directory keeps the key."""
    master, _ = load_master_key(tmp_path / "a")
    (tmp_path / "a").rename(tmp_path / "b")
    assert load_master_key(tmp_path / "b", create=False)[0] == master


def test_keychain_is_preferred_over_file(tmp_path: Path, memory_keychain: MemoryKeyring, file_fallback: None) -> None:
    _, backend = load_master_key(tmp_path)
    assert backend.startswith("keyring:")
    assert not key_file_path(tmp_path).exists()


def test_existing_file_key_is_kept_when_a_keychain_appears(tmp_path: Path, file_fallback: None) -> None:
    """A keychain installed later must not get a second, different key for the same store."""
    master, _ = load_master_key(tmp_path)
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    assert load_master_key(tmp_path)[0] == master
    assert backend.secrets == {}


def test_locked_keychain_fails_closed(tmp_path: Path, file_fallback: None) -> None:
    store_uuid(tmp_path)
    keyring.set_keyring(LockedKeyring())
    with pytest.raises(KeyUnavailableError, match="unlock"):
        load_master_key(tmp_path)
    assert not key_file_path(tmp_path).exists()  # no second key made behind the locked one


def test_corrupt_keychain_entry(tmp_path: Path, memory_keychain: MemoryKeyring) -> None:
    load_master_key(tmp_path)
    (entry,) = memory_keychain.secrets
    memory_keychain.secrets[entry] = "garbage"
    with pytest.raises(KeyUnavailableError, match="corrupt"):
        load_master_key(tmp_path)


# --- store.json -----------------------------------------------------------------------------------


def test_store_uuid_is_created_once_and_keeps_other_fields(tmp_path: Path) -> None:
    assert store_uuid(tmp_path, create=False) is None
    first = store_uuid(tmp_path)
    assert first and store_uuid(tmp_path) == first
    (tmp_path / "store.json").write_text(json.dumps({"schema": 2}))
    added = store_uuid(tmp_path)
    assert json.loads((tmp_path / "store.json").read_text()) == {"schema": 2, "store_uuid": added}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store.json"]


def test_unreadable_store_json_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "store.json").write_text("{not json")
    with pytest.raises(KeyUnavailableError, match=r"store\.json"):
        store_uuid(tmp_path)


# --- export / import / injection ------------------------------------------------------------------


def test_export_import_round_trip() -> None:
    master = os.urandom(32)
    text = export_key(master)
    assert re.fullmatch(r"sovseal-key-v1:[A-Za-z0-9_-]{43}:[0-9a-f]{8}", text)
    assert import_key(text) == master
    assert import_key(f"  {text}\n") == master  # pasted with whitespace


def test_import_rejects_mistyped_keys() -> None:
    master = os.urandom(32)
    text = export_key(master)
    prefix, body, checksum = text.split(":")
    flipped_body = body[:10] + ("A" if body[10] != "A" else "B") + body[11:]
    flipped_sum = checksum[:-1] + ("0" if checksum[-1] != "0" else "1")
    for bad, reason in [
        (f"{prefix}:{flipped_body}:{checksum}", "checksum"),
        (f"{prefix}:{body}:{flipped_sum}", "checksum"),
        (f"{prefix}:{body[:-4]}:{checksum}", "bytes"),
        (f"sovseal-key-v2:{body}:{checksum}", "not an exported sovseal key"),
        (body, "not an exported sovseal key"),
        (f"{prefix}:{body}!:{checksum}", "base64"),
    ]:
        with pytest.raises(InvalidInputError, match=reason) as info:
            import_key(bad)
        assert body not in str(info.value)  # never echo key material


def test_coerce_key() -> None:
    master = os.urandom(32)
    assert coerce_key(master) == master
    assert coerce_key(bytearray(master)) == master
    assert coerce_key(export_key(master)) == master
    for bad in (master[:31], master + b"x", b""):
        with pytest.raises(InvalidInputError, match="32"):
            coerce_key(bad)
    with pytest.raises(InvalidInputError):
        coerce_key(42)  # type: ignore[arg-type]


def test_store_master_key_into_keychain(tmp_path: Path, memory_keychain: MemoryKeyring) -> None:
    master = import_key(export_key(os.urandom(32)))  # as it arrives from the first device
    backend = store_master_key(tmp_path, master)
    assert backend.startswith("keyring:")
    assert load_master_key(tmp_path, create=False) == (master, backend)
    assert store_master_key(tmp_path, master) == backend  # same key again: no-op
    with pytest.raises(InvalidInputError, match="different key"):
        store_master_key(tmp_path, os.urandom(32))
    assert load_master_key(tmp_path)[0] == master


def test_store_master_key_into_file_and_fail_closed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    master = os.urandom(32)
    with pytest.raises(KeyUnavailableError, match="SOVSEAL_KEY_FALLBACK=file"):
        store_master_key(tmp_path, master)
    monkeypatch.setenv(FALLBACK_ENV, "file")
    assert store_master_key(tmp_path, export_key(master)) == f"file:{key_file_path(tmp_path)}"  # type: ignore[arg-type]
    assert load_master_key(tmp_path) == (master, f"file:{key_file_path(tmp_path)}")


def test_import_never_shadows_a_key_file_left_without_opt_in(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A key file the loader cannot use right now is still a key: importing must not add a second one."""
    monkeypatch.setenv(FALLBACK_ENV, "file")
    load_master_key(tmp_path)
    monkeypatch.delenv(FALLBACK_ENV)
    backend = MemoryKeyring()
    keyring.set_keyring(backend)
    with pytest.raises(KeyUnavailableError, match="SOVSEAL_KEY_FALLBACK=file"):
        store_master_key(tmp_path, os.urandom(32))
    assert backend.secrets == {}
