"""``sovseal export`` and ``sovseal import``: encrypted backup files (docs/design.md, "Chunked sealed files")."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import click

from sovseal.cli import hooks
from sovseal.cli.app import main
from sovseal.cli.interrupts import _watch, _will_write
from sovseal.cli.opening import _open, _store_key
from sovseal.cli.options import json_option, key_option, path_option
from sovseal.cli.output import _count, _emit_json, _note, _progress
from sovseal.durable import replacing
from sovseal.errors import InvalidInputError
from sovseal.paths import store_dir
from sovseal.sdk.backup import export_backup, import_backup, read_backup_header
from sovseal.sdk.opening import open_store
from sovseal.sdk.views import (
    branch_heads,
    jsonable,
)

_FILE_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
               (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


def _export_target(file: str, force: bool) -> Path:
    """The regular file a backup replaces: ``file``, or what a symlink ``file`` points to (so the
    link stays a link). Anything else that is there (a FIFO, a device, a directory) is refused and
    left alone: the backup is written beside it and renamed over it, which would replace it."""
    target = Path(os.path.realpath(file))
    try:
        mode = target.stat().st_mode
    except FileNotFoundError:
        return target
    if not stat.S_ISREG(mode):
        kind = next((name for test, name in _FILE_KINDS if test(mode)), "a special file")
        raise InvalidInputError(
            f"{file} is {kind}, not a regular file: export writes a backup file only; pass another FILE, or `-` for stdout"
        )
    if not force:
        raise InvalidInputError(f"{file} exists; pass --force to overwrite it")
    return target


@main.command("export", short_help="Write an encrypted backup file of the whole store.")
@click.argument("file", type=click.Path(dir_okay=False, allow_dash=True))
@click.option("--force", is_flag=True, help="Replace FILE if it exists (through a symlink: the file it points to).")
@path_option
@key_option
@json_option
def export_(file: str, force: bool, path: str | None, key_file: str | None, as_json: bool) -> None:
    """Write an encrypted backup of the whole store (every branch and snapshot) to FILE.

    Restoring needs the store's key too: keep `sovseal key export` somewhere safe, apart from
    the backup. `-` writes to stdout.

    \b
      sovseal export backup.sovseal
      sovseal import backup.sovseal --path /new/home    (after `sovseal key import` there)
    """
    directory = store_dir(path or None)
    with _open(str(directory), key_file=key_file) as (mem, _), _progress("exporting") as progress:
        master, _ = _store_key(directory, key_file)
        if file == "-":
            info = export_backup(mem, master, sys.stdout.buffer, progress=progress)
        else:
            target = _export_target(file, force)
            with replacing(target) as out:
                info = export_backup(mem, master, out, progress=progress)
    if file == "-":
        return
    if as_json:
        _emit_json({"file": str(Path(file).absolute()), **jsonable(info)})
        return
    click.echo(f"exported {_count(info.items, 'item')} ({_count(len(info.source_branches), 'branch', 'branches')}) to {file}")
    if info.skipped_damaged:
        _note(f"warning: left out {_count(info.skipped_damaged, 'damaged frame')}; run `sovseal verify`")


@main.command("import", short_help="Import an encrypted backup file.")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@path_option
@key_option
@json_option
def import_(file: str, path: str | None, key_file: str | None, as_json: bool) -> None:
    """Import a backup written by `sovseal export` (into a fresh store, usually).

    The store at --path needs the source store's key first (`sovseal key import`, --key-file or
    SOVSEAL_KEY); the store is created if it does not exist. Every record is authenticated and
    its snapshot id re-derived; items already present are skipped.

    \b
      sovseal key import --path /new/home < sovseal-key.txt
      sovseal import backup.sovseal --path /new/home && sovseal verify --path /new/home
    """
    write = _will_write("part of the import")
    directory = store_dir(path or None)
    with open(file, "rb") as src:
        read_backup_header(src)  # a file that is not a backup is refused before the key is looked up
        master, _ = _store_key(directory, key_file)  # never a new key: it must be the source store's
        src.seek(0)
        mem, _ = open_store(directory, key=master, create=True, embedder=hooks.embedder())
        with mem, _progress("importing") as progress:
            _watch(mem, directory, master)
            held = len(mem.export_items())  # counted in the store itself: the backup cannot say what is new here
            info = import_backup(mem, master, src, progress=progress)
            new = len(mem.export_items()) - held
            write.what = "the import"
            write.committed(f"{_count(new, 'new item')}")
            heads = branch_heads(mem)
    present = info.items - new
    if as_json:
        _emit_json({"path": str(directory.absolute()), "items": info.items, "new": new, "present": present, "branches": heads})
    else:
        already = f" ({present} already present)" if present else ""
        click.echo(f"imported {_count(new, 'new item')}{already} into {directory}: branches {', '.join(sorted(heads))}")
