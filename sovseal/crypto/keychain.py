"""Master-key custody: OS keychain first, an opt-in 0600 key file second, otherwise fail closed.

Why it is shaped this way (docs/design.md, "Keys and crypto"):

- The key lives in the OS keychain through ``keyring``. On headless Linux ``keyring`` silently
  resolves to its ``fail`` backend, and the ``keyrings.alt`` file/plaintext backends are not
  recommended, so those count as "no keychain" rather than as a place to put a key.
- The key file fallback exists for servers and CI, only with ``SOVSEAL_KEY_FALLBACK=file``. Like
  OpenSSH with private keys, a key file (or its directory) readable by others, owned by someone
  else, or reached through a symlink is refused rather than used.
- A new key is created only when no key exists in *any* place for this store, and creation never
  overwrites (first writer wins, every caller returns what was stored): a second key for the same
  store would make its records unreadable. Callers should still create under the store's lock.
- Keys travel between devices as text with a checksum (:func:`export_key` / :func:`import_key`),
  and are stored in that same form so truncation or corruption is detected on load.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
import stat
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from sovseal import settings
from sovseal.durable import create_file, fsync_dir, make_dirs
from sovseal.errors import PASS_KEY_CLI, InvalidInputError, KeyUnavailableError

from .primitives import KEY_SIZE

if TYPE_CHECKING:  # keyring loads when a key is looked up: one given as --key-file or SOVSEAL_KEY never needs it
    import keyring.backend

__all__ = [
    "FALLBACK_ENV",
    "KEYRING_SERVICE",
    "coerce_key",
    "export_key",
    "import_key",
    "key_file_path",
    "load_master_key",
    "promote_staged_key",
    "resolve_key",
    "stage_next_key",
    "staged_key",
    "store_master_key",
    "store_uuid",
]

KEYRING_SERVICE = "sovseal"
FALLBACK_ENV = settings.KEY_FALLBACK.name
_EXPORT_PREFIX = "sovseal-key-v1"
_STORE_FILE = "store.json"
_POSIX = os.name == "posix"

_NO_KEYCHAIN_HELP = (
    "Either install and unlock an OS keychain (Secret Service such as GNOME Keyring or KWallet on "
    "Linux, macOS Keychain, Windows Credential Manager), or set SOVSEAL_KEY_FALLBACK=file to keep the "
    "key in a 0600 file inside the store, or pass key= explicitly (bytes or an exported key)."
)


# --- text form for moving a key between devices -----------------------------------------------------


def _checksum(master: bytes) -> str:
    """8 hex digits that catch typos and truncation when a key is copied by hand."""
    return hashlib.sha256(_EXPORT_PREFIX.encode() + b":" + master).hexdigest()[:8]


def export_key(master: bytes) -> str:
    """Text form of a master key: ``sovseal-key-v1:<base64url, no padding>:<8-hex checksum>``.

    Anyone holding this text can read every memory sealed with the key: keep it secret.
    """
    master = coerce_key(master)
    body = base64.urlsafe_b64encode(master).rstrip(b"=").decode("ascii")
    return f"{_EXPORT_PREFIX}:{body}:{_checksum(master)}"


def import_key(text: str) -> bytes:
    """Parse the output of :func:`export_key`; raises InvalidInputError if malformed or mistyped.

    Messages never echo the key material.
    """
    if not isinstance(text, str):
        raise InvalidInputError(f"an exported key is a str, not {type(text).__name__}")
    parts = text.strip().split(":")
    if len(parts) != 3 or parts[0] != _EXPORT_PREFIX:
        raise InvalidInputError(
            f"not an exported sovseal key: expected '{_EXPORT_PREFIX}:<key>:<checksum>' as printed by "
            "`sovseal key export`; copy the whole line"
        )
    _, body, checksum = parts
    try:
        master = base64.urlsafe_b64decode(body + "=" * (-len(body) % 4))
    except (binascii.Error, ValueError):
        raise InvalidInputError("the exported key is not valid base64url; copy it again exactly") from None
    if len(master) != KEY_SIZE:
        raise InvalidInputError(
            f"the exported key decodes to {len(master)} bytes, not {KEY_SIZE}; it is truncated or "
            "padded, copy it again exactly"
        )
    if not hmac.compare_digest(checksum.lower(), _checksum(master)):
        raise InvalidInputError("the exported key's checksum does not match: it was mistyped or altered; copy it again")
    return master


def coerce_key(key: bytes | bytearray | memoryview | str) -> bytes:
    """Turn an explicitly passed key (32 raw bytes, or exported text) into the 32-byte master key."""
    if isinstance(key, str):
        return import_key(key)
    if isinstance(key, (bytes, bytearray, memoryview)):
        raw = bytes(key)
        if len(raw) != KEY_SIZE:
            raise InvalidInputError(
                f"key= must be {KEY_SIZE} raw bytes or an exported key string, got {len(raw)} bytes; "
                "generate one with os.urandom(32)"
            )
        return raw
    raise InvalidInputError(f"key= must be bytes or an exported key string, not {type(key).__name__}")


# --- store identity ----------------------------------------------------------------------------------


def store_uuid(store_dir: Path, *, create: bool = True) -> str | None:
    """The store's stable identifier from ``store_dir/store.json`` (``{"store_uuid": ...}``).

    Used as the keychain username, so a store keeps its key when its directory moves. With
    ``create``, a missing file is created (first writer wins) and a file without the field gets it
    added, keeping its other fields. Returns None when absent and ``create`` is False.
    """
    path = Path(store_dir) / _STORE_FILE
    data: dict[str, object] = {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        pass
    except (OSError, ValueError) as exc:
        raise KeyUnavailableError(
            f"cannot read {path} ({exc}), which names this store's key; restore it from a backup"
        ) from None
    if not isinstance(data, dict):
        raise KeyUnavailableError(f"{path} is not a JSON object; restore it from a backup")
    found = data.get("store_uuid")
    if isinstance(found, str) and found:
        return found
    if not create:
        return None
    make_dirs(path.parent)
    data["store_uuid"] = uuid.uuid4().hex
    text = (json.dumps(data, indent=2, sort_keys=True) + "\n").encode("utf-8")
    if path.exists():
        create_file(path, text, 0o600, replace=True)
    elif not create_file(path, text, 0o600):
        return store_uuid(store_dir, create=False)  # another process created it first: use theirs
    return str(data["store_uuid"])


# --- keychain -------------------------------------------------------------------------------------


def _is_real_keychain(backend: keyring.backend.KeyringBackend) -> bool:
    """False for backends that are not a protected keychain: fail, null, chainer, keyrings.alt, plaintext."""
    from keyring.backends import chainer, fail

    module = type(backend).__module__
    if isinstance(backend, (fail.Keyring, chainer.ChainerBackend)):
        return False
    if module == "keyring.backends.null" or module.startswith("keyrings.alt"):
        return False
    return "plaintext" not in type(backend).__name__.lower()


def _usable_keychain() -> keyring.backend.KeyringBackend | None:
    """The first real keychain backend ``keyring`` would use (looking inside a chainer), or None."""
    import keyring
    from keyring.backends import chainer

    active = keyring.get_keyring()
    candidates = chainer.ChainerBackend.backends if isinstance(active, chainer.ChainerBackend) else [active]
    for backend in candidates:
        if _is_real_keychain(backend):
            return backend
    return None


def _describe(backend: keyring.backend.KeyringBackend) -> str:
    """Short backend name such as ``keyring:SecretService`` or ``keyring:macOS``."""
    cls = type(backend)
    if cls.__module__.startswith("keyring.backends."):
        return f"keyring:{cls.__module__.rsplit('.', 1)[-1]}"
    return f"keyring:{cls.__module__}.{cls.__qualname__}"


def _keychain_get(backend: keyring.backend.KeyringBackend, username: str) -> bytes | None:
    """Read the store's key from the keychain; a locked or broken keychain fails closed."""
    try:
        text = backend.get_password(KEYRING_SERVICE, username)
    except Exception as exc:  # a keychain boundary: locked, D-Bus down, ... all fail closed
        raise KeyUnavailableError(
            f"the OS keychain ({_describe(backend)}) refused to give the key ({exc}); unlock it and retry"
        ) from exc
    if text is None:
        return None
    try:
        return import_key(text)
    except InvalidInputError:
        raise KeyUnavailableError(
            f"the key stored in {_describe(backend)} for sovseal store {username} is corrupt",
            advice="re-import it from an export with sovseal.crypto.keychain.store_master_key",
            cli_advice=PASS_KEY_CLI,
        ) from None


def _keychain_put(backend: keyring.backend.KeyringBackend, username: str, master: bytes) -> bytes:
    """Store the key, then read it back so every racing creator returns the same stored key."""
    try:
        backend.set_password(KEYRING_SERVICE, username, export_key(master))
    except Exception as exc:  # a keychain boundary: locked, D-Bus down, ... all fail closed
        raise KeyUnavailableError(
            f"the OS keychain ({_describe(backend)}) refused to store the key ({exc}); unlock it and retry"
        ) from exc
    stored = _keychain_get(backend, username)
    if stored is None:
        raise KeyUnavailableError(
            f"the OS keychain ({_describe(backend)}) did not keep the key", advice=_NO_KEYCHAIN_HELP, cli_advice=PASS_KEY_CLI
        )
    return stored


# --- key file -------------------------------------------------------------------------------------


def key_file_path(store_dir: Path) -> Path:
    """Where the ``SOVSEAL_KEY_FALLBACK=file`` key lives: ``store_dir/keys/master.key``."""
    return Path(store_dir) / "keys" / "master.key"


def _check_private(path: Path, *, directory: bool) -> None:
    """Refuse a key file/dir that is a symlink, of the wrong kind, owned by another user or too open."""
    st = os.lstat(path)
    kind, fix = ("directory", "chmod 700") if directory else ("file", "chmod 600")
    if stat.S_ISLNK(st.st_mode):
        raise KeyUnavailableError(f"refusing key {kind} {path}: it is a symlink; replace it with a real {kind}")
    if (directory and not stat.S_ISDIR(st.st_mode)) or (not directory and not stat.S_ISREG(st.st_mode)):
        raise KeyUnavailableError(f"refusing key {kind} {path}: it is not a regular {kind}")
    if not _POSIX:
        return
    if st.st_uid != os.getuid():
        raise KeyUnavailableError(
            f"refusing key {kind} {path}: it is owned by uid {st.st_uid}, not you (uid {os.getuid()}); "
            f"chown it to yourself"
        )
    if st.st_mode & 0o077:
        raise KeyUnavailableError(
            f"refusing key {kind} {path}: its permissions {stat.S_IMODE(st.st_mode):04o} let other users "
            f"access it; run `{fix} {path}` if no one else has read it, otherwise treat the key as leaked"
        )


def _read_key_file(path: Path) -> bytes:
    """Read the key file after checking it and its directory are private."""
    _check_private(path.parent, directory=True)
    _check_private(path, directory=False)
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    try:
        text = os.read(fd, 4096).decode("ascii", errors="replace")
    finally:
        os.close(fd)
    try:
        return import_key(text)
    except InvalidInputError:
        raise KeyUnavailableError(
            f"the key file {path} is corrupt",
            advice="restore it from a backup or an export (sovseal.crypto.keychain.store_master_key)",
            cli_advice=PASS_KEY_CLI,
        ) from None


def _write_key_file(path: Path, master: bytes) -> bytes:
    """Create the 0700 directory and 0600 key file; never overwrite; return the key that is stored."""
    make_dirs(path.parent)
    _check_private(path.parent, directory=True)
    create_file(path, (export_key(master) + "\n").encode("ascii"), 0o600)
    return _read_key_file(path)


def _fallback_enabled() -> bool:
    """True only for the explicit opt-in ``SOVSEAL_KEY_FALLBACK=file``."""
    return settings.KEY_FALLBACK.get()


# --- public entry points --------------------------------------------------------------------------


def load_master_key(store_dir: Path, *, create: bool = True) -> tuple[bytes, str]:
    """Load (or with ``create``, make) the store's 32-byte master key; returns (key, backend description).

    Order: the OS keychain (service ``sovseal``, username = the store's ``store_uuid``); then, only with
    ``SOVSEAL_KEY_FALLBACK=file``, ``store_dir/keys/master.key``. A new key is made only if neither
    holds one. Raises KeyUnavailableError naming every option when no key can be had.
    """
    store_dir = Path(store_dir).absolute()
    keychain = _usable_keychain()
    found = _find_key(store_dir, keychain)
    if found is not None:
        return found
    if not create:
        where = "the OS keychain" if keychain is not None else "any key store"
        raise KeyUnavailableError(
            f"no key for the sovseal store at {store_dir} was found in {where}.",
            advice=f"If it was made on another device, import that device's exported key (or pass key=). {_NO_KEYCHAIN_HELP}",
            cli_advice=PASS_KEY_CLI,
        )
    return _save(store_dir, os.urandom(KEY_SIZE), keychain)


def resolve_key(store_dir: Path, *, key_text: str | None = None, create: bool = False) -> tuple[bytes, str]:
    """The store's master key as every front end finds it; returns (key, where it came from).

    Order: ``key_text`` (an exported key, e.g. read from ``--key-file``: backend ``explicit``), then
    ``$SOVSEAL_KEY`` (``env:SOVSEAL_KEY``; a malformed one raises InvalidInputError naming the variable,
    never its value), then :func:`load_master_key` (which makes a key only with ``create``). A key
    given as text is used and saved nowhere.
    """
    if key_text is not None:
        return import_key(key_text), "explicit"
    given = settings.KEY.read(import_key)
    if given is not None:
        return given, f"env:{settings.KEY.name}"
    return load_master_key(store_dir, create=create)


def store_master_key(store_dir: Path, master: bytes | str) -> str:
    """Save an imported key for ``store_dir`` in the backend :func:`load_master_key` would use.

    Refuses to replace a different key already held for the store (its records would become
    unreadable); saving the same key again is a no-op. Returns the backend description.
    """
    master = coerce_key(master)
    store_dir = Path(store_dir).absolute()
    keychain = _usable_keychain()
    existing = _find_key(store_dir, keychain)
    if existing is None:
        existing = _save(store_dir, master, keychain)  # may lose a race to another process: checked below
    key, backend = existing
    if not hmac.compare_digest(key, master):
        raise InvalidInputError(
            f"the store at {store_dir} already has a different key ({backend}); importing would make its "
            "records unreadable. Import into a new, empty store directory instead"
        )
    return backend


def _find_key(store_dir: Path, keychain: keyring.backend.KeyringBackend | None) -> tuple[bytes, str] | None:
    """The store's existing key and where it is, or None if no place holds one.

    Any other problem (locked keychain, unsafe or corrupt key file, key file without the opt-in)
    raises KeyUnavailableError: it must never look like "no key yet", or a second key would be made.
    """
    if keychain is not None:
        uid = store_uuid(store_dir, create=False)
        if uid is not None:
            key = _keychain_get(keychain, uid)
            if key is not None:
                return key, _describe(keychain)
    key_file = key_file_path(store_dir)
    if not os.path.lexists(key_file):
        return None
    if not _fallback_enabled():
        raise KeyUnavailableError(
            f"this store's key is in the key file {key_file}, but the file fallback is off",
            advice=f"set {FALLBACK_ENV}=file to use it, or import the key into an OS keychain (sovseal.crypto.keychain.store_master_key)",
            cli_advice=PASS_KEY_CLI,
        )
    return _read_key_file(key_file), f"file:{key_file}"


def _save(store_dir: Path, master: bytes, keychain: keyring.backend.KeyringBackend | None) -> tuple[bytes, str]:
    """Put a key in the keychain if there is one, else in the key file if allowed, else fail closed."""
    if keychain is not None:
        uid = store_uuid(store_dir, create=True)
        if uid is None:  # pragma: no cover - create=True always yields an id
            raise KeyUnavailableError(f"could not create {store_dir / _STORE_FILE}")
        return _keychain_put(keychain, uid, master), _describe(keychain)
    if _fallback_enabled():
        key_file = key_file_path(store_dir)
        return _write_key_file(key_file, master), f"file:{key_file}"
    import keyring

    raise KeyUnavailableError(
        f"no usable OS keychain for the sovseal store at {store_dir} (keyring offers only "
        f"{type(keyring.get_keyring()).__module__}.{type(keyring.get_keyring()).__name__}, which is not a "
        "protected keychain), and the key file fallback is off.",
        advice=_NO_KEYCHAIN_HELP,
        cli_advice=PASS_KEY_CLI,
    )


# --- rotation: the next key, staged beside the current one ------------------------------------------

_STAGED_SUFFIX = ".next"


def _staged_file(store_dir: Path) -> Path:
    return key_file_path(store_dir).with_name("master.next.key")


def stage_next_key(store_dir: Path, master: bytes) -> str:
    """Keep ``master`` as the store's *next* key (docs/design.md, "Key rotation"), where its key is kept.

    Staged before the journal is rewritten under it, so a crash never loses the key the store is
    about to need. Staging the same key again is a no-op; another key already staged is refused.
    """
    store_dir = Path(store_dir).absolute()
    staged = staged_key(store_dir)
    if staged is not None:
        if not hmac.compare_digest(staged, master):
            raise InvalidInputError(
                f"another new key is already staged for the store at {store_dir} by an unfinished rotation; run "
                "`sovseal key rotate` without --new-key to finish that rotation first"
            )
        return "staged"
    keychain = _usable_keychain()
    uid = store_uuid(store_dir, create=False)
    if keychain is not None and uid is not None and _keychain_get(keychain, uid) is not None:
        _keychain_put(keychain, uid + _STAGED_SUFFIX, master)
        return _describe(keychain)
    path = _staged_file(store_dir)
    make_dirs(path.parent)
    create_file(path, (export_key(master) + "\n").encode("ascii"), 0o600)
    return f"file:{path}"


def staged_key(store_dir: Path) -> bytes | None:
    """The next key an unfinished rotation staged, or None."""
    store_dir = Path(store_dir).absolute()
    path = _staged_file(store_dir)
    if os.path.lexists(path):
        return _read_key_file(path)
    uid = store_uuid(store_dir, create=False)
    keychain = _usable_keychain() if uid is not None else None
    if keychain is not None and uid is not None:
        return _keychain_get(keychain, uid + _STAGED_SUFFIX)
    return None


def promote_staged_key(store_dir: Path) -> None:
    """The staged key becomes the store's key, where the store's key was kept; the old one is gone.

    Called once the journal is under the staged key. Idempotent: with nothing staged it does nothing.
    """
    store_dir = Path(store_dir).absolute()
    master = staged_key(store_dir)
    if master is None:
        return
    path = _staged_file(store_dir)
    uid = store_uuid(store_dir, create=False)
    keychain = _usable_keychain() if uid is not None else None
    if keychain is not None and uid is not None and _keychain_get(keychain, uid) is not None:
        _keychain_put(keychain, uid, master)
    if os.path.lexists(key_file_path(store_dir)):
        create_file(key_file_path(store_dir), (export_key(master) + "\n").encode("ascii"), 0o600, replace=True)
    if os.path.lexists(path):
        path.unlink()
        fsync_dir(path.parent)
    elif keychain is not None and uid is not None:
        try:
            keychain.delete_password(KEYRING_SERVICE, uid + _STAGED_SUFFIX)
        except Exception as exc:  # a keychain boundary: the staged copy equals the key now
            raise KeyUnavailableError(f"the OS keychain kept the staged key ({exc}); it is the store's key now, remove it by hand") from exc
