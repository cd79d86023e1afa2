"""``sovseal verify``, ``sovseal compact`` and ``sovseal rebuild-index``."""

from __future__ import annotations

import sys

import click

from sovseal.cli import hooks
from sovseal.cli.app import main
from sovseal.cli.errors import _one_line
from sovseal.cli.interrupts import _all_or_nothing
from sovseal.cli.opening import _open
from sovseal.cli.options import _key_text, json_option, key_option, path_option
from sovseal.cli.output import _count, _emit_json, _progress, _reclaimed, _size
from sovseal.errors import (
    EXIT_INTEGRITY,
    EXIT_OK,
    RUN_VERIFY,
)
from sovseal.sdk import maintenance
from sovseal.sdk.views import jsonable


def _verify_problem(problem: str) -> str:
    """A problem ``verify`` found, without the core's advice to run verify (this is verify)."""
    return _one_line(problem).removesuffix(f"; {RUN_VERIFY}")


@main.command(short_help="Decrypt every record, re-derive every snapshot id.")
@path_option
@key_option
@json_option
def verify(path: str | None, key_file: str | None, as_json: bool) -> None:
    """Open every record and re-derive every snapshot id, on every branch.

    A record erased by `sovseal purge` is checked as its skeleton, named by an authentic redaction,
    and counted as erased. Exits 0 when everything authenticates, 1 when anything does not (the
    problems are listed).
    """
    with _open(path, key_file=key_file) as (mem, _), _progress("verifying") as progress:
        report = mem.verify(progress=progress)
    if as_json:
        _emit_json(report)
    else:
        erased = f", {report.erased} of them erased by a purge (skeletons checked)" if report.erased else ""
        click.echo(
            f"{'ok' if report.ok else 'FAILED'}: {_count(report.records, 'record')}, "
            f"{_count(report.branches, 'branch', 'branches')}{erased}"
        )
        for problem in report.problems:  # without the core's advice to run verify: this is verify
            click.echo(f"  {_verify_problem(problem)}")
        for repair in report.repairs:
            click.echo(f"  repaired on open: {repair}")
    sys.exit(EXIT_OK if report.ok else EXIT_INTEGRITY)


@main.command(short_help="Rewrite the journal without erased content.")
@path_option
@key_option
@json_option
def compact(path: str | None, key_file: str | None, as_json: bool) -> None:
    """Rewrite the journal without the content `sovseal purge --no-compact` (or a pull) erased.

    Crash-safe (a new file, fsynced, renamed over the old one). Other processes keep reading and
    writing meanwhile; writers wait only while the new journal takes the old one's place (the
    pause printed). Purge compacts by itself, and so does a store whose erased bytes pass the
    threshold, so this is needed only after `purge --no-compact`.

    \b
      sovseal compact
      sovseal compact --json | jq .reclaimed
    """
    _all_or_nothing(
        "a compaction is all or nothing (a new journal renamed over the old one), so the store holds the same "
        "memories either way; `sovseal compact` finishes it"
    )
    with _open(path, key_file=key_file) as (mem, _):
        report = mem.compact()
    if as_json:
        _emit_json({**jsonable(report), "reclaimed": report.reclaimed})
        return
    if report.seconds == 0.0:
        click.echo(f"nothing to compact: no erased content is left in the journal ({_size(report.bytes_before)})")
        return
    click.echo(
        f"compacted the journal: {_size(report.bytes_before)} -> {_size(report.bytes_after)}, {_reclaimed(report.reclaimed)}, "
        f"{_count(report.skeletons, 'skeleton')} written"
    )
    click.echo(f"took {report.seconds:.2f} s; writers paused {report.paused * 1000:.1f} ms")


@main.command("rebuild-index", short_help="Re-embed everything into a fresh vector index.")
@path_option
@key_option
@json_option
def rebuild_index(path: str | None, key_file: str | None, as_json: bool) -> None:
    """Drop the vector index and re-embed every visible memory on every branch.

    The index is derived data: the sealed journal is the source of truth, so nothing is lost.
    Run it after changing the embedding model. Stop other processes using the store first.
    """
    with _open(path, key_file=key_file):
        pass  # a missing store or a key that does not open it fails here, before the index is dropped
    with _progress("re-embedding (branches)") as progress:
        count = maintenance.rebuild_index(path, key_text=_key_text(key_file), embedder=hooks.embedder(), progress=progress)
    if as_json:
        _emit_json({"branches": count})
    else:
        click.echo(f"rebuilt the vector index for {_count(count, 'branch', 'branches')}")
