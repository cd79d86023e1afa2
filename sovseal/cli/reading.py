"""The commands that read: ``recall``, ``get``, ``log``, ``branches`` and ``mind``."""

from __future__ import annotations

import json
from typing import Any

import click

from sovseal.cli.app import main
from sovseal.cli.graph import draw_graph
from sovseal.cli.interrupts import _will_write
from sovseal.cli.opening import _model_loading, _open
from sovseal.cli.options import _from_stdin, json_option, store_options
from sovseal.cli.output import _compact, _console, _count, _emit_json, _fields, _note, _parse_object, _short, _visible, _when
from sovseal.sdk.views import (
    GraphNode,
    branch_heads,
    branch_table,
    recurring_patterns,
    require_memory,
    snapshot_graph,
)


def _memory_table(memories: list[Any], *, scores: bool) -> Any:
    from rich.table import Table
    from rich.text import Text

    table = Table(show_lines=False, pad_edge=False, box=None, header_style="bold")
    if scores:
        table.add_column("score", justify="right")
    table.add_column("path", overflow="fold")
    table.add_column("type")
    table.add_column("payload", overflow="fold", ratio=1)
    table.add_column("snapshot", no_wrap=True)
    for m in memories:
        kind = m.type + (f" x{m.reinforce_count + 1}" if m.reinforce_count else "")
        row = [Text(_visible(m.path)), Text(kind), Text(_visible(_compact(m.payload), text=True)), Text(_short(m.snapshot_id))]
        if scores:
            row.insert(0, Text("-" if m.score is None else f"{m.score:.3f}"))
        table.add_row(*row)
    return table


def _check_filter(filter_: dict[str, Any] | None) -> None:
    """Refuse a malformed ``--filter`` (exit 2) before the model starts loading for nothing."""
    from sovseal.recall.filters import parse

    parse(filter_)


@main.command(short_help="Find the memories that best match a query.")
@click.argument("query")
@click.option("-k", "k", type=click.IntRange(1, 1000), default=5, show_default=True, help="How many memories to return.")
@click.option(
    "--filter",
    "filter_json",
    default=None,
    help="A JSON filter passed to recall: path prefix, type, provenance, metadata (see docs/cli.md).",
)
@store_options
@json_option
def recall(query: str, k: int, filter_json: str | None, path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """The K memories visible on the branch that best match QUERY (on-device, offline).

    `-` reads QUERY from stdin, which keeps it off the process list that every local user can read.

    \b
      sovseal recall "what does the user write code with?" -k 3
      sovseal recall "deploy steps" --json | jq '.[0].payload'
      sovseal recall - < question.txt
    """
    query = _from_stdin(query, key_file, "QUERY").strip()
    filter_ = _parse_object(filter_json, "--filter", '{"type": "procedural"}')
    _check_filter(filter_)
    with _model_loading() as embedder, _open(path, branch, key_file, embedder=embedder) as (mem, _):
        found = mem.recall(query, k=k, filter=filter_)
    if as_json:
        _emit_json(found)
    elif not found:
        _note(f"no memories on branch {branch!r} match")
    else:
        _console().print(_memory_table(found, scores=True))


@main.command(short_help="Show the memory stored at a path.")
@click.argument("memory_path", metavar="PATH")
@store_options
@json_option
def get(memory_path: str, path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """The memory stored at PATH on the branch (exits 3 if there is none).

    `-` reads PATH from stdin, off the process list that every local user can read.

    \b
      sovseal get user.editor
      sovseal get user.testing --json | jq .payload
      echo user.health | sovseal get -
    """
    memory_path = _from_stdin(memory_path, key_file, "PATH", line=True)
    with _open(path, branch, key_file) as (mem, _):
        found = require_memory(mem, memory_path)
    if as_json:
        _emit_json(found)
        return
    shown = found.payload if isinstance(found.payload, str) else json.dumps(found.payload, indent=2, ensure_ascii=False)
    click.echo(_visible(shown, text=True))
    reinforced = f"{_count(found.reinforce_count, 'time')}, last {_when(found.last_reinforced)}"
    rows = [
        ("path", found.path),
        ("type", found.type),
        ("provenance", found.provenance),
        ("metadata", json.dumps(found.metadata, ensure_ascii=False) if found.metadata else None),
        ("snapshot", _short(found.snapshot_id)),
        ("stored", _when(found.created_at)),
        ("reinforced", reinforced if found.reinforce_count else None),
    ]
    _fields([(name, value) for name, value in rows if value is not None], label_style={"dim": True})


@main.command(short_help="Snapshots newest first; --graph draws the DAG.")
@click.option("--limit", type=click.IntRange(min=1), default=None, help="Show at most this many snapshots.")
@click.option("--graph", is_flag=True, help="Draw the snapshot DAG of every branch, like `git log --graph --all`.")
@store_options
@json_option
def log(limit: int | None, graph: bool, path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """The snapshots of the branch, newest first (with --graph: all branches as a DAG).

    \b
      sovseal log --limit 10
      sovseal log --graph
    """
    with _open(path, branch, key_file) as (mem, _):
        if not graph:
            entries = mem.log(limit=limit, damaged="mark")
        else:
            nodes = snapshot_graph(mem)
            heads = branch_heads(mem)
    _warn_damaged(sum(1 for e in (entries if not graph else nodes) if e.op == "damaged"))
    if not graph:
        if as_json:
            _emit_json(entries)
            return
        for entry in entries:
            click.echo(
                f"{_short(entry.snapshot_id)}  #{entry.seq:<4} {_when(entry.created_at)}  {entry.op:<6} {_log_path(entry.op, entry.path)}"
            )
        return
    if limit is not None:
        nodes = nodes[:limit]
    if as_json:
        _emit_json({"current": branch, "branches": heads, "snapshots": nodes})
        return
    _draw_graph(nodes, branch)


#: What ``log`` shows in place of the path of a snapshot a purge erased (its path is gone with it).
ERASED_PATH = "(purged)"


def _log_path(op: str, path: str) -> str:
    if op == "damaged":
        return f"{_visible(path)} {DAMAGED_NOTE}" if path else DAMAGED_NOTE
    return ERASED_PATH if op == "erased" else _visible(path)


#: What ``log`` shows beside a record that fails authentication (its path, when another version names it).
DAMAGED_NOTE = "(fails authentication)"


def _warn_damaged(count: int) -> None:
    """One line on stderr when the history shown holds damaged records, with the way out."""
    if count:
        click.echo(
            f"warning: {_count(count, 'record')} in this history failed authentication (marked damaged): "
            "`sovseal delete PATH` hides a damaged memory from HEAD, a replica or backup brings its content back, "
            "and `sovseal verify` lists every damaged record",
            err=True,
        )


_LANE_COLORS = ("red", "green", "yellow", "blue", "magenta", "cyan")


def _draw_graph(nodes: list[GraphNode], current: str) -> None:
    for prefix, node in draw_graph(nodes):
        lanes = "".join(
            click.style(c, fg=_LANE_COLORS[((i + 1) // 2) % len(_LANE_COLORS)]) if c != " " else c for i, c in enumerate(prefix)
        )
        if node is None:
            click.echo(lanes)
            continue
        line = [lanes, " " * (1 + max(0, 8 - len(prefix))), click.style(_short(node.snapshot_id), fg="yellow")]
        if node.branches:
            labels = ", ".join(f"HEAD -> {_visible(b)}" if b == current else _visible(b) for b in node.branches)
            line += [" (", click.style(labels, fg="green", bold=True), ")"]
        line += [f" {node.op} {_log_path(node.op, node.path)}  ", click.style(_when(node.created_at), dim=True)]
        click.echo("".join(line))


@main.command(short_help="List branches with their HEADs; --delete removes one.")
@click.option(
    "--delete",
    "delete_name",
    metavar="NAME",
    help="Delete branch NAME first (not --branch, not main); its snapshots stay in the lineage.",
)
@store_options
@json_option
def branches(delete_name: str | None, path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """Every branch with its HEAD and memory count; * marks --branch.

    With --delete NAME, the branch NAME is deleted first (a journaled, replicated event: a write
    another device made to it meanwhile brings it back), then the remaining branches are listed.
    """
    write = _will_write("the branch deletion") if delete_name is not None else None
    with _open(path, branch, key_file) as (mem, _):
        if delete_name is not None:
            mem.delete_branch(delete_name)
            if write is not None:
                write.committed(f"branch {delete_name} deleted")
            if not as_json:
                click.echo(f"deleted branch {delete_name}", err=True)
        rows = branch_table(mem)
    if as_json:
        _emit_json(rows)
        return
    for row in rows:
        mark = "*" if row["current"] else " "
        click.echo(f"{mark} {_visible(row['name']):<24} {_short(row['head'])}  {_count(row['visible'], 'memory', 'memories')}")


#: sovseal.consolidate.layout.RESERVED, written out: importing sovseal.consolidate loads the recall
#: stack (numpy, the index), which a reading command like `mind` must not (tests/cli/test_startup.py).
_RESERVED = "_sovseal/"


@main.command(short_help="Recurring Patterns: reinforced memories by type.")
@click.option("--min", "min_count", type=click.IntRange(min=0), default=1, show_default=True, help="Least reinforce count shown.")
@click.option("--all", "show_all", is_flag=True, help="Show every memory, reinforced or not (same as --min 0).")
@store_options
@json_option
def mind(min_count: int, show_all: bool, path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """Recurring Patterns: the memories stored again and again, grouped by type.

    Storing a fact a path already holds reinforces it instead of adding a snapshot; reinforced
    memories rank higher in recall. This shows what the store holds most strongly. sovseal's own
    records (under _sovseal/, e.g. consolidation's audit trail) are not listed.
    """
    with _open(path, branch, key_file) as (mem, _):
        groups = recurring_patterns(mem, min_count=0 if show_all else min_count)
    # sovseal's own records (consolidation's runs, steps, retention scores) are not the user's
    # memories: recall leaves them out, and so does mind.
    groups = {kind: [m for m in items if not m.path.startswith(_RESERVED)] for kind, items in groups.items()}
    if as_json:
        _emit_json({"branch": branch, "recurring_patterns": groups})
        return
    from rich.text import Text

    console = _console()
    title = "Memories" if show_all or min_count == 0 else "Recurring Patterns"
    console.print(Text(f"{title} on {_visible(branch)}", style="bold"))
    if not any(groups.values()):
        console.print(Text("  nothing reinforced yet: storing the same fact again reinforces it", style="dim"))
        return
    for kind, items in groups.items():
        if not items:
            continue
        console.print(Text(f"\n{kind.capitalize()} ({len(items)})", style="bold cyan"))
        for m in items:
            line = Text(f"  x{m.reinforce_count + 1:<3} ", style="green")
            line.append(_visible(m.path), style="bold")
            line.append(f"  {_visible(_compact(m.payload, 100), text=True)}")
            console.print(line)
