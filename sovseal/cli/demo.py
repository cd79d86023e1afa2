"""``sovseal demo``: a scripted tour of the engine on a throwaway store."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import click

from sovseal.cli.app import main
from sovseal.cli.output import _count, _note
from sovseal.errors import IntegrityError

if TYPE_CHECKING:  # the store and the keychain load when a command opens one, so `--help` is quick
    from sovseal.models import Memory
    from sovseal.sdk.client import Sovseal


@main.command(short_help="A scripted tour of the engine on a throwaway store.")
@click.option(
    "--path",
    type=click.Path(file_okay=False),
    help="Store directory, kept afterwards (default: a new temporary one, removed at the end).",
)
def demo(path: str | None) -> None:
    """A scripted tour: store, get, recall, fork, rollback, delete, verify, reopen.

    The store lives in a new temporary directory that is removed at the end, also when the tour
    fails halfway, so running it again and again leaves nothing behind; with --path it stays.
    """
    temporary = not path
    directory = Path(path) if path else Path(tempfile.mkdtemp(prefix="sovseal-demo-"))
    try:
        ok = _tour(directory)
    finally:
        if temporary:
            shutil.rmtree(directory, ignore_errors=True)  # a failure here must not hide the tour's own error
            if directory.exists():
                _note(f"warning: could not remove the demo store {directory}; delete it by hand")
    if temporary and not directory.exists():
        click.echo("Removed the temporary store.")
    if not ok:
        sys.exit(1)


def _written(mem: Sovseal, path: str) -> Memory:
    """A memory the tour has just written; gone, the store is damaged, and the tour says so."""
    memory = mem.get(path)
    if memory is None:
        raise IntegrityError(f"the demo wrote {path} and could not read it back")
    return memory


def _head(mem: Sovseal) -> str:
    """The HEAD snapshot of the tour's branch, which its writes have just made."""
    head = mem.snapshot()
    if head is None:
        raise IntegrityError("the demo's writes left its branch without a snapshot")
    return head


def _tour(directory: Path) -> bool:
    """The demo's script on a store at ``directory``: True when every check it prints passed."""
    from sovseal.sdk.client import Sovseal

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
        before_edit = _head(mem)

        say("\n3. get('user.editor'):")
        say(f"   {_written(mem, 'user.editor').payload}")

        query = "what does the user write code with?"
        say(f"\n4. recall({query!r}, k=2) — similarity search, offline:")
        for m in mem.recall(query, k=2):
            say(f"   {m.score:.3f}  {m.path}: {m.payload}")

        say("\n5. Storing the same fact again reinforces it instead of adding a snapshot:")
        again = mem.store("user.pets", "The user has a golden retriever named Biscuit.")
        say(f"   reinforced={again.reinforced}, reinforce_count={_written(mem, 'user.pets').reinforce_count}")

        say("\n6. Overwrite user.editor, then fork the previous snapshot into branch 'experiment':")
        mem.store("user.editor", "The user switched to Helix.")
        say(f"   main:       user.editor = {_written(mem, 'user.editor').payload!r}")
        mem.fork(before_edit, branch="experiment")
        say(f"   experiment: user.editor = {_written(mem, 'user.editor').payload!r}")
        mem.checkout("main")

        say("\n7. Roll main back to before the edit (non-destructive: nothing is deleted):")
        head = _head(mem)
        mem.rollback(before_edit)
        say(f"   main:       user.editor = {_written(mem, 'user.editor').payload!r}")
        mem.rollback(head)
        say(f"   and forward again:        {_written(mem, 'user.editor').payload!r}")

        say("\n8. delete('chat.2026-05-21') appends a tombstone; the path disappears from state:")
        mem.delete("chat.2026-05-21")
        say(f"   visible paths: {sorted(mem.state())}")

        report = mem.verify()
        say(f"\n9. verify(): ok={report.ok}, {_count(report.records, 'record')} opened and their snapshot ids re-derived")
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
    return same and report.ok
