"""The ``sovseal`` command line: a thin shell over the same ``Sovseal`` API the library exposes."""

from __future__ import annotations

import os
import sys
import tempfile
import time
from pathlib import Path

import click

from .client import Sovseal, default_home
from .errors import SovsealError


@click.group()
@click.version_option(package_name="sovseal")
def main() -> None:
    """sovseal: local-first, encrypted, lineage-tracked memory for LLM agents."""


@main.command()
@click.option("--path", type=click.Path(file_okay=False), help="Store directory (default: a new temporary one).")
def demo(path: str | None) -> None:
    """A scripted tour: store, get, recall, fork, rollback, delete, verify, reopen."""
    directory = Path(path) if path else Path(tempfile.mkdtemp(prefix="sovseal-demo-"))
    key = os.urandom(32)  # a real app keeps its key in the OS keychain; the demo uses a throwaway one
    say = click.echo

    say(f"sovseal demo — store at {directory}")
    say("  (a throwaway key for this demo; apps keep theirs in the OS keychain)\n")
    t0 = time.perf_counter()
    with Sovseal(directory, key=key) as mem:
        mem.ready()
        say(f"1. Loaded the on-device embedder in {time.perf_counter() - t0:.2f} s (all-MiniLM-L6-v2, ONNX Runtime).")

        facts = [
            ("user.editor", "The user edits code in neovim with a dark theme.", "semantic"),
            ("user.preferences.testing", {"framework": "vitest", "reason": "ESM-native, fast cold start"}, "semantic"),
            ("user.pets", "The user has a golden retriever named Biscuit.", "semantic"),
            ("project.deploy", "Deploys go through GitHub Actions, then a manual approval.", "procedural"),
            ("chat.2026-05-21", "We talked about a trip to Lisbon in October.", "episodic"),
        ]
        say("\n2. Storing five memories (each canonicalized, embedded, sealed, fsynced):")
        first = None
        for path_, payload, kind in facts:
            t = time.perf_counter()
            result = mem.store(path_, payload, type=kind)
            first = first or result.snapshot_id
            say(f"   {path_:<26} -> {result.snapshot_id[:17]}…  ({(time.perf_counter() - t) * 1000:.1f} ms)")
        before_edit = mem.snapshot()

        say("\n3. get('user.editor'):")
        say(f"   {mem.get('user.editor').payload}")

        query = "what does the user write code with?"
        say(f"\n4. recall({query!r}, k=2) — similarity search, offline:")
        for m in mem.recall(query, k=2):
            say(f"   {m.score:.3f}  {m.path}: {m.payload}")

        say("\n5. Storing the same fact again reinforces it instead of adding a snapshot:")
        again = mem.store("user.pets", "The user has a golden retriever named Biscuit.")
        say(f"   reinforced={again.reinforced}, reinforce_count={mem.get('user.pets').reinforce_count}")

        say("\n6. Overwrite user.editor, then fork the previous snapshot into branch 'experiment':")
        mem.store("user.editor", "The user switched to Helix.")
        say(f"   main:       user.editor = {mem.get('user.editor').payload!r}")
        mem.fork(before_edit, branch="experiment")
        say(f"   experiment: user.editor = {mem.get('user.editor').payload!r}")
        mem.checkout("main")

        say("\n7. Roll main back to before the edit (non-destructive: nothing is deleted):")
        head = mem.snapshot()
        mem.rollback(before_edit)
        say(f"   main:       user.editor = {mem.get('user.editor').payload!r}")
        mem.rollback(head)
        say(f"   and forward again:        {mem.get('user.editor').payload!r}")

        say("\n8. delete('chat.2026-05-21') appends a tombstone; the path disappears from state:")
        mem.delete("chat.2026-05-21")
        say(f"   visible paths: {sorted(mem.state())}")

        report = mem.verify()
        say(f"\n9. verify(): ok={report.ok}, {report.records} records opened and their snapshot ids re-derived")
        state_before = mem.state()
        log_before = [e.snapshot_id for e in mem.log()]

    with Sovseal(directory, key=key) as mem:
        same = mem.state() == state_before and [e.snapshot_id for e in mem.log()] == log_before
        report = mem.verify()
        say(f"\n10. Closed and reopened: state and log byte-equal: {same}; verify ok={report.ok}")
        say("\n    The lineage of main, newest first:")
        for entry in mem.log():
            say(f"    #{entry.seq:<2} {entry.op:<6} {entry.path:<26} {entry.snapshot_id[:17]}…")
    on_disk = sorted(p.name for p in directory.iterdir())
    say(f"\nOn disk: {', '.join(on_disk)} — no path or payload in the clear. Done.")
    if not (same and report.ok):
        sys.exit(1)


@main.command()
@click.option("--path", type=click.Path(file_okay=False), default=None, help="Store directory.")
def verify(path: str | None) -> None:
    """Open every record and re-derive every snapshot id."""
    with Sovseal(path) as mem:
        report = mem.verify()
    click.echo(f"{'ok' if report.ok else 'FAILED'}: {report.records} records, {report.branches} branches")
    for problem in report.problems:
        click.echo(f"  {problem}")
    sys.exit(0 if report.ok else 1)


@main.command()
@click.option("--path", type=click.Path(file_okay=False), default=None, help="Store directory.")
@click.option("--branch", default="main", show_default=True)
@click.option("--limit", type=int, default=None)
def log(path: str | None, branch: str, limit: int | None) -> None:
    """The snapshots of a branch, newest first."""
    with Sovseal(path or default_home(), branch=branch) as mem:
        for entry in mem.log(limit=limit):
            click.echo(f"{entry.snapshot_id}  #{entry.seq:<4} {entry.created_at:%Y-%m-%d %H:%M:%S}  {entry.op:<6} {entry.path}")


def run() -> None:
    try:
        main(standalone_mode=True)
    except SovsealError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(2)
