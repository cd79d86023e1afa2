"""Replication from the command line: ``serve`` (the blind server), ``sync`` and ``restore``."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

from sovseal import settings
from sovseal.cli import hooks
from sovseal.cli.app import main
from sovseal.cli.interrupts import _will_write
from sovseal.cli.opening import _open, _store_key
from sovseal.cli.options import STDIN, _warn_inline, json_option, key_option, path_option, store_options
from sovseal.cli.output import _count, _emit_json, _note, _progress, _short, _visible
from sovseal.errors import (
    EXIT_INTEGRITY,
    EXIT_NOT_FOUND,
    InvalidInputError,
    ReplicationError,
)
from sovseal.paths import store_dir
from sovseal.sdk.views import jsonable

if TYPE_CHECKING:  # the store and the keychain load when a command opens one, so `--help` is quick
    from sovseal.replication.status import ReplicationStatus


def _has_password(database: str) -> bool:
    """Whether ``--database`` is a URL with a password in it (a malformed one is left for the server to report)."""
    from urllib.parse import urlsplit

    try:
        return bool(urlsplit(database).password)
    except ValueError:
        return False


@main.command(short_help="Run the replication server (blind: never sees keys or plaintext).")
@click.option(
    "--host", envvar=settings.SERVER_HOST.name, default=settings.SERVER_HOST.default, show_default=True, help="Address to listen on."
)
@click.option(
    "--port", envvar=settings.SERVER_PORT.name, type=int, default=settings.SERVER_PORT.default, show_default=True, help="Port to listen on."
)
@click.option(
    "--database",
    envvar=settings.SERVER_DATABASE.name,
    default=None,
    help="SQLite file (default ~/.sovseal-server/replication.sqlite3) or a postgresql:// URL; with the role URLs set, "
    "the owner's URL, used only to migrate and grant.  [env: SOVSEAL_SERVER_DATABASE]",
)
@click.option("--max-body", type=int, default=16 * 1024 * 1024, show_default=True, help="Largest push body accepted, in bytes.")
@click.option("--create-key", is_flag=True, help="Create an API key, print it once, and exit (it is stored hashed).")
@click.option(
    "--project",
    default=None,
    help="With --create-key: the server-blind project id (64 hex) to bind the key to; "
    "by default it binds to the first project it is used with.",
)
@click.option("--label", default="", help="With --create-key: a note stored beside the key.")
@click.option(
    "--revoke-key",
    default=None,
    metavar="KEY",
    help="Revoke an API key and exit; `-` reads KEY from stdin, off the process list (given here, a warning says so).",
)
@click.option("--log-level", default="info", show_default=True, type=click.Choice(["critical", "error", "warning", "info", "debug"]))
def serve(
    host: str, port: int, database: str | None, max_body: int, create_key: bool, project: str | None, label: str, revoke_key: str | None,
    log_level: str,
) -> None:
    """Serve replication (push, pull, health) over HTTP with uvicorn.

    Put TLS in front of it (a reverse proxy) for anything but loopback: clients refuse plain http
    to other hosts. Keys are per project:

    \b
      sovseal serve --create-key              # prints sov_...; give it to the devices of one project
      sovseal serve --revoke-key - < key.txt  # stdin keeps the key off the process list
      SOVSEAL_ENDPOINT=http://127.0.0.1:8765 SOVSEAL_API_KEY=sov_... python agent.py
      sovseal serve --database postgresql://user@db/sovseal --host 0.0.0.0

    On PostgreSQL, least privilege: set SOVSEAL_SERVER_WRITER_URL and SOVSEAL_SERVER_READER_URL
    (both, or neither) to postgresql://ROLE[:password]@host/db. Pushes then connect as the writer
    (no DELETE), pulls as the reader (SELECT only); --database is the owner's URL, used only to
    migrate and grant the two roles at start-up. See docs/operations.md.

    \b
      SOVSEAL_SERVER_WRITER_URL=postgresql://sovseal_writer@db/sovseal \\
      SOVSEAL_SERVER_READER_URL=postgresql://sovseal_reader@db/sovseal \\
      sovseal serve --database postgresql://owner@db/sovseal --host 0.0.0.0
    """
    from sovseal.server import Limits, open_storage
    from sovseal.server import serve as run_server

    if project is not None and not (len(project) == 64 and all(c in "0123456789abcdef" for c in project)):
        raise InvalidInputError("--project must be a server-blind project id: 64 lowercase hex digits")
    if database is not None and _has_password(database):
        _warn_inline("database", "the password in --database", "set SOVSEAL_SERVER_DATABASE instead")
    if revoke_key == STDIN:
        revoke_key = (click.prompt("API key", hide_input=True) if sys.stdin.isatty() else sys.stdin.readline()).strip()
    elif revoke_key is not None:
        _warn_inline("revoke_key", "the API key given with --revoke-key", "pass `--revoke-key -` and the key on stdin instead")
    if create_key or revoke_key:
        storage = open_storage(database)
        found = True
        try:
            if create_key:
                click.echo(storage.create_api_key(project, label))
            if revoke_key:
                found = storage.revoke_api_key(revoke_key)
                if found:
                    _note("revoked")
        finally:
            storage.close()
        if revoke_key and not found:
            click.echo(
                "error: no such API key on this server (nothing was revoked); check the key and --database "
                "(or SOVSEAL_SERVER_DATABASE), then run the command again",
                err=True,
            )
            sys.exit(EXIT_NOT_FOUND)
        return
    run_server(database, host, port, Limits(max_body=max_body), log_level=log_level)


@main.command(short_help="Push what is not replicated yet, then pull what other devices wrote.")
@store_options
@json_option
def sync(path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """Push the outbox, then pull: one round of two-way sync with the replication server.

    Needs replication on (SOVSEAL_ENDPOINT and SOVSEAL_API_KEY). A branch written on two devices
    shows two heads afterwards, merged by the next write on it; concurrent writes to one path are
    listed with the value every device chose (`sovseal status` shows them too).
    """
    _will_write("part of what the pull brought")
    with _open(path, branch, key_file) as (mem, _):
        if mem.replication is None:
            raise InvalidInputError("sync needs replication: set SOVSEAL_ENDPOINT and SOVSEAL_API_KEY")
        pushed = mem.status().outbox_records
        if not mem.replication.flush(60, stop_on_failure=True):
            raise ReplicationError(_push_failure(mem.replication.status()))
        with _progress("pulling") as update:
            result = mem.pull(progress=update)
        heads = mem.status().heads
        conflicts = [c for name in mem.branches() for c in mem.conflicts(branch=name)]
    if as_json:
        _emit_json({"pushed": pushed, "pull": result, "heads": heads, "conflicts": conflicts})
        return
    click.echo(f"pushed {_count(pushed, 'item')}, pulled {_count(result.received, 'item')} ({_count(result.new_records, 'new snapshot')})")
    for name, sids in heads.items():
        if len(sids) > 1:
            click.echo(f"  {_visible(name)}: {len(sids)} heads ({', '.join(_short(s) for s in sids)}); the next write on it merges them")
    for conflict in conflicts:
        click.echo(
            f"  conflict on {_visible(conflict.branch)}: {_visible(conflict.path)} written on {len(conflict.versions)} devices "
            f"at once; showing {_short(conflict.chosen)}"
        )


def _push_failure(state: ReplicationStatus) -> str:
    """Why ``sync`` could not send the outbox: the server's or the connection's own words."""
    if state.last_error is None:
        return "the outbox was not sent within 60 s (no error reported: the server is slow, or another process is sending)"
    advice = "check SOVSEAL_API_KEY and SOVSEAL_PROJECT" if state.state == "paused" else f"check that {state.endpoint} is reachable"
    return f"the outbox was not sent: {_visible(state.last_error)}; {advice}, then run sync again (the outbox keeps everything)"


@main.command(short_help="Pull a project from the replication server into this store.")
@path_option
@key_option
@click.option("--endpoint", envvar=settings.ENDPOINT.name, required=True, help="The server's base URL.  [env: SOVSEAL_ENDPOINT]")
@click.option(
    "--api-key",
    envvar=settings.API_KEY.name,
    required=True,
    help="The project's API key. Set the variable instead: given here, other local users can read it in the "
    "process list (a warning says so).  [env: SOVSEAL_API_KEY]",
)
@click.option(
    "--project",
    envvar=settings.PROJECT.name,
    default=settings.PROJECT.default,
    show_default=True,
    help="Project name.  [env: SOVSEAL_PROJECT]",
)
@json_option
def restore(path: str | None, key_file: str | None, endpoint: str, api_key: str, project: str, as_json: bool) -> None:
    """Restore on a second device: pull, verify every record, rebuild lineage, branches and index.

    The store's key must be the source's: pass --key-file (or SOVSEAL_KEY), or import it first
    with `sovseal key import`. Pulling again later fetches only what is new.
    """
    from sovseal.sdk.client import Sovseal

    _warn_inline("api_key", "the API key given with --api-key", "set SOVSEAL_API_KEY instead")
    directory = store_dir(path or None)
    key, _ = _store_key(directory, key_file)
    with Sovseal(directory, key=key, embedder=hooks.embedder(), endpoint=endpoint, api_key=api_key, project=project) as mem:
        with _progress("pulling") as update:
            result = mem.pull(progress=update)
        report = mem.verify()
        info = {"pull": jsonable(result), "verify_ok": report.ok, "records": report.records, "branches": mem.branches()}
    if as_json:
        _emit_json(info)
    else:
        click.echo(
            f"pulled {_count(result.received, 'item')} ({_count(result.new_records, 'new snapshot')}, {result.waiting} waiting "
            f"for a parent); verify {'ok' if report.ok else 'FAILED'}: {_count(report.records, 'record')}, "
            f"branches {', '.join(info['branches'])}"
        )
    if not report.ok:
        sys.exit(EXIT_INTEGRITY)
