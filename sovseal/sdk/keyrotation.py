"""Key rotation as a user runs it: a new key staged, the store re-sealed, the key promoted, the old
server project retired (docs/design.md, "Key rotation")."""

from __future__ import annotations

import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sovseal import settings
from sovseal.errors import InvalidInputError, KeyUnavailableError, StoreNotFoundError
from sovseal.paths import store_dir, store_exists

from .opening import resolve_key

log = logging.getLogger(__name__)

RETIRE_FILE = Path("rotation") / "retire.json"


@dataclass(frozen=True, slots=True)
class RotationResult:
    old_key_id: str
    new_key_id: str
    records: int
    seconds: float
    verified: bool  # verify() opened every record under the new key
    retired: bool | None  # the old server project was retired; None: no replication configured
    new_key: bytes | None  # the new key, when the caller passes keys explicitly (else it is in the key store)
    index_kept: bool


def rotate_key(
    path: str | os.PathLike[str] | None = None,
    *,
    key_text: str | None = None,
    new_key: bytes | None = None,
    endpoint: str | None = None,
    api_key: str | None = None,
    project: str | None = None,
) -> RotationResult:
    """Re-seal the store under a new master key, and retire its old server project.

    Without ``key_text`` (and ``$SOVSEAL_KEY``) the store's key comes from its key store (keychain or
    key file): the new key is made (or ``new_key`` used), staged there first and kept there in place
    of the old one at the end. With an explicit key, ``new_key`` is required and the caller keeps it.
    Running it again after a crash finishes the same rotation (with the staged key). Stop every other
    process that has the store open first. With replication configured (arguments or environment),
    the old server project's bodies are replaced by skeletons; if the server cannot be reached the
    retirement waits in ``rotation/retire.json`` (:func:`retire_old_project` sends it later). The new
    key's replica goes to a new server project, which needs its own API key.
    """
    from sovseal.crypto.keychain import promote_staged_key, stage_next_key, staged_key
    from sovseal.crypto.primitives import project_blind_id
    from sovseal.replication.config import resolve_target
    from sovseal.storage.rotation import retirement, rotate
    from sovseal.storage.store import LocalStore

    directory = store_dir(path)
    if not store_exists(directory):
        raise StoreNotFoundError.at(directory)
    explicit = key_text is not None or settings.KEY.is_set()
    if explicit and new_key is None:
        raise InvalidInputError(
            "this store's key is passed explicitly (--key-file or SOVSEAL_KEY), so sovseal does not keep it: pass the "
            "new key too (--new-key-file), and keep it where you keep the old one"
        )
    old, _ = resolve_key(directory, key_text=key_text)
    staged = None if explicit else staged_key(directory)
    if new_key is not None and staged is not None and new_key != staged:
        raise InvalidInputError("another new key is staged by an unfinished rotation; run without a new key to finish it first")
    new = new_key or staged or os.urandom(32)
    if not explicit:
        stage_next_key(directory, new)
    target = resolve_target(endpoint, api_key, project)
    try:
        store = LocalStore(directory, old) if old != new else None  # equal: a crash while promoting the staged key
    except KeyUnavailableError:  # the journal is already under the new key: a crash after the switch
        store = None
    if store is None:
        LocalStore(directory, new).close()  # opening under it finishes the switch (store.json)
        report = None
    else:
        try:
            from sovseal.crypto.sealing import Sealing

            if target is not None and not (directory / RETIRE_FILE).exists():
                items = retirement(store, Sealing(new).key_id)
                _write_retirement(directory, target.endpoint, project_blind_id(target.project, old), items)
            report = rotate(store, new)
        finally:
            store.close()
    if not explicit:
        promote_staged_key(directory)
    from .client import Sovseal

    with Sovseal(directory, key=new) as mem:
        verified = mem.verify()
        records = verified.records
    retired = retire_old_project(directory, api_key=target.api_key) if target is not None else None
    from sovseal.crypto.sealing import Sealing

    new_id = Sealing(new).key_id
    return RotationResult(
        report.old_key_id if report else Sealing(old).key_id,
        new_id,
        records,
        report.seconds if report else 0.0,
        verified.ok,
        retired,
        new if explicit else None,
        report.index_kept if report else True,
    )


def _write_retirement(directory: Path, endpoint: str, project_blind: str, items: list[Any]) -> None:
    from sovseal.durable import atomic_write, make_dirs

    make_dirs(directory / RETIRE_FILE.parent)
    data = {"endpoint": endpoint, "project": project_blind, "items": [item.to_json() for item in items]}
    atomic_write(directory / RETIRE_FILE, json.dumps(data).encode())


def retire_old_project(path: str | os.PathLike[str] | None = None, *, api_key: str | None = None) -> bool:
    """Push a rotation's pending retirement to the old server project; True when none is left.

    The items are redactions sealed under the old key (ciphertext and keyed ids only); the API key is
    the one bound to the old project (default ``$SOVSEAL_API_KEY``).
    """
    from sovseal.replication.config import ReplicationConfig, Target
    from sovseal.replication.http import Transport
    from sovseal.replication.protocol import encode_push
    from sovseal.storage.wire import WireItem

    directory = store_dir(path)
    pending = directory / RETIRE_FILE
    if not pending.exists():
        return True
    data = json.loads(pending.read_text())
    key = api_key if api_key is not None else settings.API_KEY.get() or ""
    transport = Transport(Target(data["endpoint"], key, "retired"), data["project"], ReplicationConfig())
    try:
        for raw in data["items"]:
            outcome = transport.push(encode_push([WireItem.from_json(raw)], ""))
            if outcome.verdict != "ok":
                log.warning(
                    "retiring the old server project failed (%s %s); `sovseal key rotate --retire` retries", outcome.code, outcome.message
                )
                return False
    finally:
        transport.close()
    pending.unlink()
    return True
