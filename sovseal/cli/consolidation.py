"""``sovseal consolidate`` and its audit trail (``runs``, ``rollback``), with the model it loads."""

from __future__ import annotations

import os
import sys
from typing import Any

import click

from sovseal import settings
from sovseal.cli.app import main
from sovseal.cli.errors import _one_line
from sovseal.cli.interrupts import _will_write
from sovseal.cli.opening import _open
from sovseal.cli.options import json_option, store_options
from sovseal.cli.output import _compact, _count, _emit_json, _note, _short
from sovseal.errors import (
    InvalidInputError,
    ModelCallError,
)


def _load_model(spec: str) -> Any:
    """``package.module:factory`` -> a chat model: the attribute, called with no arguments unless it
    already is a model (has ``invoke``)."""
    import importlib

    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise InvalidInputError(f"--model must be package.module:factory (e.g. mymodels:chat); got {spec!r}")
    sys.path.insert(0, os.getcwd())  # like `python -m`: a module in the current directory can be named
    try:
        target = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise InvalidInputError(f"--model {spec}: cannot import it ({exc})") from None
    finally:
        sys.path.remove(os.getcwd())
    return target if callable(getattr(target, "invoke", None)) else target()


def _guard_model(model: Any) -> Any:
    """``model`` with every call's exception turned into a ModelCallError: one line and exit 6
    instead of a traceback, and not mistaken for the store's own disk errors (a refused connection
    is an OSError too). The wrapper keeps the model's class name, which the run's audit record names."""
    call = model.invoke if callable(getattr(model, "invoke", None)) else model

    def invoke(self: Any, prompt: str) -> Any:
        try:
            return call(prompt)
        except Exception as exc:
            kind = type(exc)
            name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
            detail = _one_line(str(exc)) or "(no message)"
            raise ModelCallError(
                f"the model failed: {name}: {detail}; check that its server is reachable (and the --model "
                "factory's address and credentials), then run `sovseal consolidate` again: nothing was written "
                "for the batch it was asked about, and the run resumes after the batches already finished"
            ) from exc

    return type(type(model).__name__, (), {"invoke": invoke})()


def _print_run(report: Any) -> None:
    if report.run is None:
        click.echo("nothing to do: every input is consolidated and every score is current (nothing was written)")
    else:
        verb = "resumed and finished" if report.resumed else "finished"
        click.echo(
            f"{verb} {report.run}: {_count(report.steps, 'step')}, {_count(report.writes, 'write')}; "
            f"HEAD {_short(report.head_before)} -> {_short(report.head_after)}"
        )
        for name, c in report.counts.items():
            shown = ", ".join(f"{k} {len(v) if isinstance(v, list) else v}" for k, v in c.items())
            click.echo(f"  {name:<10} {shown}")
    for name, why in report.skipped.items():
        _note(f"skipped {name}: {why} (pass --model package.module:factory)")


@main.group(invoke_without_command=True, short_help="Nightly passes: promotion, graph, digest, decay (audited, undoable).")
@click.option("--model", "model_spec", metavar="MODULE:FACTORY", envvar=settings.CONSOLIDATE_MODEL.name, default=None,
              help="Import path of a chat model or of a function returning one: any LangChain chat model works "
              "(e.g. mymodels:chat with `def chat(): return ChatOllama(model=\"llama3.1\")`). Without it only "
              "the passes that need no model run (decay).  [env: SOVSEAL_CONSOLIDATE_MODEL]")
@click.option("--passes", default=None, metavar="LIST",
              help="Comma-separated passes to run, of promotion, graph, digest, decay (default: all that can run).")
@click.option("--batch-size", type=click.IntRange(1, 64), default=8, show_default=True, help="Memories per model call.")
@click.option("--as-of", type=click.DateTime(["%Y-%m-%d"]), default=None, help="The day to digest and score at (default: today, UTC).")
@store_options
@json_option
@click.pass_context
def consolidate(
    ctx: click.Context, model_spec: str | None, passes: str | None, batch_size: int, as_of: Any,
    path: str | None, branch: str, key_file: str | None, as_json: bool,
) -> None:
    """Consolidate memory, as a nightly job: Sci's passes on this store.

    \b
      promotion  a chat model turns batches of episodic memories into semantic ones,
                 or reinforces the semantic memories they restate
      graph      a chat model links related semantic memories (Sovseal.related follows them)
      digest     a chat model summarises the day into the episodic memory digest.YYYY-MM-DD
      decay      an Ebbinghaus retention score for every memory (needs no model)

    Without --model only decay runs; the others are skipped and say so. Every write is an
    ordinary sealed, replicated snapshot, and each run leaves an audit record. Running again
    changes nothing; a run that died resumes where it stopped. Undo a run with
    `sovseal consolidate rollback RUN`.

    \b
      sovseal consolidate                               decay only
      sovseal consolidate --model mymodels:chat         every pass
      sovseal consolidate runs                          the audit trail
    """
    if ctx.invoked_subcommand is not None:
        return
    from sovseal.consolidate import consolidate as run_passes

    model = _guard_model(_load_model(model_spec)) if model_spec else None
    _will_write("part of the consolidation run")
    with _open(path, branch, key_file) as (mem, _):
        report = run_passes(
            mem, model, passes=passes, batch_size=batch_size, as_of=None if as_of is None else as_of.date(),
            progress=None if as_json else _note,
        )
    if as_json:
        _emit_json(report)
    else:
        _print_run(report)


@consolidate.command("runs", short_help="The audit trail: every run, its HEADs and counts.")
@store_options
@json_option
def consolidate_runs(path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """List every consolidation run (oldest first) with its status, HEAD before and after, and counts."""
    from sovseal.consolidate import runs

    with _open(path, branch, key_file) as (mem, _):
        found = runs(mem)
    if as_json:
        _emit_json([{k: v for k, v in vars(r).items() if k != "raw"} for r in found])
        return
    if not found:
        click.echo("no consolidation runs yet")
    for r in found:
        click.echo(
            f"{r.run}  {r.status:<11} as of {r.as_of}  HEAD {_short(r.head_before)} -> {_short(r.head_after)}  {_compact(r.counts, 100)}"
        )


@consolidate.command("rollback", short_help="Undo a run (appends; later writes are kept).")
@click.argument("run_id", metavar="RUN")
@store_options
@json_option
def consolidate_rollback(run_id: str, path: str | None, branch: str, key_file: str | None, as_json: bool) -> None:
    """Undo consolidation run RUN as a unit, by appending: each path it wrote goes back to its value
    before the run. Paths written again since (by you, an agent or a later run) are kept and listed
    as conflicts. Nothing is rewritten; `sovseal rollback HEAD_BEFORE` (see `runs`) moves HEAD instead.
    """
    from sovseal.consolidate import rollback_run

    _will_write("the run's rollback")
    with _open(path, branch, key_file) as (mem, _):
        report = rollback_run(mem, run_id)
    if as_json:
        _emit_json(report)
        return
    if report.already:
        click.echo(f"{run_id} was already rolled back: nothing to do")
        return
    click.echo(f"rolled back {run_id}: {_count(len(report.restored), 'path')} restored, {_count(len(report.conflicts), 'conflict')} kept")
    for p in report.conflicts:
        _note(f"  kept (written after the run): {p}")
