"""``sovseal init`` and ``sovseal status``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from sovseal.cli.app import main
from sovseal.cli.errors import _KeyOrigin
from sovseal.cli.opening import _open, replication_state
from sovseal.cli.options import json_option, key_option, path_option, store_options
from sovseal.cli.output import _count, _emit_json, _fields, _human, _note, _short
from sovseal.paths import store_dir, store_exists
from sovseal.sdk.views import jsonable

if TYPE_CHECKING:  # the store and the keychain load when a command opens one, so `--help` is quick
    from sovseal.sdk.client import Sovseal


@main.command(short_help="Create a store and its master key.")
@path_option
@key_option
@json_option
def init(path: str | None, key_file: str | None, as_json: bool) -> None:
    """Create a store and its master key (safe to run again on an existing store).

    The key goes to the OS keychain, or with SOVSEAL_KEY_FALLBACK=file to a 0600 file inside the
    store. With --key-file / SOVSEAL_KEY the given key is used and saved nowhere: pass it every
    time, or save it with `sovseal key import`. Back the key up: without it nothing can be read.

    \b
      sovseal init --path ./memories
    """
    directory = store_dir(path or None)
    existed = store_exists(directory)
    with _open(str(directory), key_file=key_file, create=True) as (mem, origin):
        status = mem.status()
    data = {"path": str(directory.absolute()), "created": not existed, "key_backend": origin.backend, "key_id": status.key_id}
    if as_json:
        _emit_json(data)
        return
    verb = "Reinitialised existing" if existed else "Initialised empty"
    click.echo(f"{verb} sovseal store in {directory.absolute()}")
    click.echo(f"key: {origin.shown()} (key id {status.key_id})")
    if not existed:
        _note(_key_backup_advice(origin, directory))


def _key_backup_advice(origin: _KeyOrigin, directory: Path) -> str:
    """What to do about the new store's key: back up the key sovseal keeps, or, for a key passed with
    --key-file or SOVSEAL_KEY (saved nowhere, so `sovseal key export` cannot find it), keep that."""
    if origin.given is None:
        return f"Back up the key now (anyone holding it can read the store): sovseal key export --path {directory} > sovseal-key.txt"
    return (
        f"The key from {origin.given} is saved nowhere: keep a copy of it (without it nothing can be read, and sovseal keeps "
        f"none); pass it every time, or save it for this store with `sovseal key import --path {directory}`"
    )


@main.command(short_help="Store, branch, HEAD, counts, key backend, replication.")
@store_options
@json_option
def status(path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """Store, branch, HEAD, counts, key backend, and replication with its outbox.

    The outbox (what is not yet replicated) is shown when replication is on; --json always has it.

    \b
      sovseal status --json | jq .outbox_records
    """
    with _open(path, branch, key_file) as (mem, origin):
        replicating = replication_state(mem)
        info = jsonable(mem.status())
        if replicating is not None:
            info["replication"] = replicating
        info["conflicts"] = jsonable([c for name in mem.branches() for c in mem.conflicts(branch=name)])
    info["key_backend"] = origin.backend
    if as_json:
        _emit_json(info)
        return
    labels = {
        "path": "store",
        "head": "HEAD",
        "records": "snapshots (all branches)",
        "visible": "memories visible at HEAD",
        "outbox_records": "outbox (not yet replicated)",
        "seals": "encryptions per subkey",
        "index_pending": "vectors not yet written to the index",
        "recovery": "recovery on open",
    }
    replication = info.pop("replication", None)
    # The queue's age is the replication section's "since"; without replication nothing waits to be sent.
    hidden = {"outbox_bytes", "outbox_since"} if replication is not None else {"outbox_records", "outbox_bytes", "outbox_since"}
    rows: list[tuple[str, str]] = []
    for name, value in info.items():
        if name in hidden or (value in (None, [], {}) and name != "head") or (name == "index_pending" and not value):
            continue
        if name == "key_backend":
            shown = origin.shown()
        elif name == "heads":
            shown = ", ".join(
                f"{b}: {_count(len(h), 'head')}" + (" (the next write merges them)" if len(h) > 1 else "") for b, h in value.items()
            )
        elif name == "conflicts":
            shown = "; ".join(
                f"{c['path']} on {c['branch']} ({_count(len(c['versions']), 'version')}, showing {_short(c['chosen'])})" for c in value
            )
        elif name == "outbox_records":
            shown = f"{_count(value, 'item')}, {_count(info['outbox_bytes'], 'byte')}"
        else:
            shown = _human(value)
        rows.append((labels.get(name, name.replace("_", " ")), shown))
    if replication is None:
        rows.append(("replication", "off (set SOVSEAL_ENDPOINT and SOVSEAL_API_KEY to replicate)"))
    else:
        rows.append(("replication", f"{replication.get('state')} -> {replication.get('endpoint')}"))
        rows += [
            (f"  {name.replace('_', ' ')}", _human(value))
            for name, value in replication.items()
            if name not in ("state", "endpoint") and value not in (None, 0, "", [], {})
        ]
    _fields(rows, label_style={"bold": True})


def _replication_note(mem: Sovseal) -> str:
    """Where else an erasure goes: the server and the other devices, or (replication off) nowhere."""
    if mem.replication is not None:
        return (
            "replication: the erasure is queued for the server, which drops the sealed bodies; every other "
            "device erases them on its next pull"
        )
    return "replication is off: only this store was erased; backups made with `sovseal export` before now still hold it"
