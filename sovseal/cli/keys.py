"""``sovseal key export``, ``key import`` and ``key rotate``."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from sovseal import settings
from sovseal.cli.app import main
from sovseal.cli.errors import _ORIGIN, _cli_message, _KeyOrigin
from sovseal.cli.opening import _store_key
from sovseal.cli.options import _key_text, json_option, key_option, path_option
from sovseal.cli.output import _emit_json, _note
from sovseal.errors import (
    InvalidInputError,
    KeyUnavailableError,
    StoreNotFoundError,
)
from sovseal.paths import store_dir, store_exists
from sovseal.sdk.keyrotation import retire_old_project, rotate_key
from sovseal.sdk.opening import resolve_key
from sovseal.sdk.views import jsonable


@main.group(short_help="Export or import the store's master key.")
def key() -> None:
    """Export the store's master key, or import one (a second device, a restore)."""


@key.command("export", short_help="Print the master key as one line of text.")
@path_option
def key_export(path: str | None) -> None:
    """Print the store's master key as one line of text (with a checksum).

    Anyone holding it can read every memory: keep it offline. Without it, nothing can be read.

    \b
      sovseal key export > sovseal-key.txt && chmod 600 sovseal-key.txt
    """
    from sovseal.crypto.keychain import export_key

    directory = store_dir(path or None)
    master, origin = _store_key(directory, None)
    click.echo(export_key(master))
    _note(f"this is the master key of {directory} (from {origin.shown()}); anyone holding it can read the store")


@key.command("import", short_help="Save an exported key for a store.")
@click.argument("exported", required=False, default="-")
@path_option
def key_import(exported: str, path: str | None) -> None:
    """Save an exported key for the store at --path (EXPORTED, or `-` to read it from stdin).

    Reading from stdin keeps the key out of your shell history. Refuses a key that does not
    open an existing store, or that would replace a different key already held for it.

    \b
      sovseal key import --path /new/home < sovseal-key.txt
    """
    from sovseal.crypto.keychain import import_key, store_master_key
    from sovseal.sdk.client import Sovseal

    directory = store_dir(path or None)
    if exported == "-":
        exported = click.prompt("exported key", hide_input=True) if sys.stdin.isatty() else sys.stdin.read()
    master = import_key(exported)
    if store_exists(directory):
        try:
            Sovseal(directory, key=master, endpoint="").close()
        except KeyUnavailableError as exc:
            advice = "import the key exported from this store, or import this one into a new, empty directory"
            raise KeyUnavailableError(_cli_message(exc, advice)) from None
    click.get_current_context().meta[_ORIGIN] = _KeyOrigin(directory, None, create=True)  # for errors saving it
    backend = store_master_key(directory, master)
    from sovseal.crypto.primitives import derive_subkeys

    click.echo(f"imported key {derive_subkeys(master).key_id} for {directory} into {backend}")


@key.command("rotate", short_help="Re-seal the store under a new master key.")
@path_option
@key_option
@click.option(
    "--new-key-file",
    type=click.Path(dir_okay=False, exists=True),
    default=None,
    help="The new key (as `sovseal key export` prints one). Required when the store's key is passed with "
    "--key-file or SOVSEAL_KEY; otherwise a new key is made and kept where the old one was.",
)
@click.option(
    "--retire", "retire_only", is_flag=True, help="Only send a retirement of the old server project that could not be sent before."
)
@json_option
def key_rotate(path: str | None, key_file: str | None, new_key_file: str | None, retire_only: bool, as_json: bool) -> None:
    """Re-seal every record, branch move and erasure under a new master key (docs/operations.md).

    Snapshot ids do not change. Stop every other process using the store first. After a crash, run
    it again: it finishes the same rotation. With replication configured (SOVSEAL_ENDPOINT and
    SOVSEAL_API_KEY), the old server project is retired (its bodies replaced by skeletons) and the
    store replicates to a new project, which needs its own API key.

    Backups made with `sovseal export` before the rotation open only with the old key: export
    the old key first and keep it with them, or export a new backup afterwards.

    \b
      sovseal key export > old-key.txt     # for the backups made so far
      sovseal key rotate && sovseal key export > sovseal-key.txt && sovseal export backup.sovseal --force
    """
    from sovseal.crypto.keychain import import_key

    directory = store_dir(path or None)
    if retire_only:
        done = retire_old_project(directory)
        if as_json:
            _emit_json({"retired": done})
        else:
            click.echo("old server project retired" if done else "the server could not be reached; run it again later")
        if not done:
            raise SystemExit(1)
        return
    key_text = _key_text(key_file)
    if key_text is None:
        key_text = settings.KEY.raw()
    new_key = import_key(Path(new_key_file).read_text(encoding="utf-8").strip()) if new_key_file else None
    if new_key is not None:
        _refuse_the_current_key(directory, key_text, new_key)
    result = rotate_key(directory, key_text=key_text, new_key=new_key)
    if as_json:
        _emit_json({k: v for k, v in jsonable(result).items() if k != "new_key"})
        return
    click.echo(
        f"rotated {directory} from key {result.old_key_id} to key {result.new_key_id}: {result.records} records "
        f"re-sealed in {result.seconds:.2f} s, verify {'ok' if result.verified else 'FAILED'}"
    )
    if result.new_key is None:
        _note(f"the new key replaced the old one in the store's key store; back it up now: sovseal key export --path {directory}")
        _note(
            "backups made with `sovseal export` before now open only with the old key, which the key store no longer holds: "
            f"export a new backup now (sovseal export FILE --path {directory}), or keep the old key if you exported it before"
        )
    else:
        _note("keep the new key (the one in --new-key-file) where you keep the old one: the old key no longer opens this store")
        _note(
            "backups made with `sovseal export` before now open only with the old key: keep it as long as you keep them, "
            f"or export a new backup now (sovseal export FILE --path {directory} --key-file NEW)"
        )
    if result.retired is None:
        _note("no replication configured: nothing was sent to a server")
    elif result.retired:
        _note("the old server project was retired; give the devices an API key for the new key's project")
    else:
        _note("the old server project could not be reached: `sovseal key rotate --retire` sends its retirement later")
    if not result.index_kept:
        _note("records changed places: the vector index was dropped and recall re-embeds what it needs")


def _refuse_the_current_key(directory: Path, key_text: str | None, new_key: bytes) -> None:
    """Refuse a --new-key-file that holds the store's current key (exit 2, nothing changed).

    ``rotate_key`` takes "old key == new key" for a rotation that crashed while its staged key
    was being promoted, and just finishes it: given on purpose, the same key would be reported as a
    rotation. While a rotation is unfinished (a staged key), rotate_key is left to decide.
    """
    from sovseal.crypto.keychain import staged_key
    from sovseal.crypto.primitives import derive_subkeys

    if not store_exists(directory):
        raise StoreNotFoundError.at(directory)
    if key_text is None and staged_key(directory) is not None:
        return
    current, _ = resolve_key(directory, key_text=key_text)
    if current == new_key:
        instead = "pass a different key with --new-key-file" if key_text is not None else "leave --new-key-file out to have a new key made"
        raise InvalidInputError(
            f"--new-key-file holds the store's current key (key id {derive_subkeys(current).key_id}); nothing was changed: {instead}"
        )
