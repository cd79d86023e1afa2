"""A consolidation run: the passes in order, its audit record, resume after a crash, rollback.

Order: promotion, graph, digest, decay. (Sci runs decay second; here it runs last so that it also
scores what the run itself wrote, and a second run on the same day finds every score unchanged.)
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from typing import TYPE_CHECKING, Any

from ..errors import InvalidInputError
from ..errors import UnknownRunError as UnknownRunError  # in the catalogue (sovseal.errors); still importable from here
from ..filelock import WriterLock
from . import decay, digest, graph_pass, promotion
from .context import Context
from .errors import ConsolidationError
from .layout import RUNS, is_system
from .model import check_model
from .records import Step, Value, apply_step, now_iso, put, steps, system_records, system_value

if TYPE_CHECKING:
    from sovseal.sdk.client import Sovseal

PASSES: dict[str, Callable[[Context], None]] = {
    "promotion": promotion.run,
    "graph": graph_pass.run,
    "digest": digest.run,
    "decay": decay.run,
}
#: The passes that ask a chat model; without one a run does the others and says it skipped these.
NEEDS_MODEL = ("promotion", "graph", "digest")
MAX_BATCH = 64
LOCK_FILE = "CONSOLIDATE.lock"


@dataclass(frozen=True)
class RunRecord:
    """A run as its audit record tells it."""

    run: str
    status: str  # running (in progress, or died: the next run resumes it), done, rolled_back
    as_of: str
    started_at: str
    head_before: str | None
    head_after: str | None
    passes: list[str]
    counts: dict[str, Any]
    raw: dict[str, Any] = field(repr=False)


@dataclass(frozen=True)
class RunReport:
    """What one call of :func:`consolidate` did. ``run`` is None when there was nothing to do."""

    run: str | None
    resumed: bool
    passes: list[str]
    skipped: dict[str, str]  # pass -> why it did not run
    steps: int
    writes: int  # writes its steps made (memories, edges, scores, reinforcements); step and audit records not counted
    counts: dict[str, Any]
    head_before: str | None
    head_after: str | None


@dataclass(frozen=True)
class RollbackReport:
    run: str
    restored: list[str]  # paths put back to their value before the run
    conflicts: list[str]  # memories written again after the run (by you, an agent, a later run): kept as they are
    superseded: list[str]  # consolidation's own records (scores, edges) a later run rewrote: kept, they are newer
    reinforcements: int  # reinforcements the run made (not in the lineage, so not undone)
    already: bool = False  # the run was rolled back before: nothing was done


def _record(raw: dict[str, Any]) -> RunRecord:
    return RunRecord(
        raw["run"], raw["status"], raw["as_of"], raw["started_at"], raw["head_before"], raw.get("head_after"),
        list(raw["passes"]), dict(raw.get("counts") or {}), raw,
    )


def runs(mem: Sovseal) -> list[RunRecord]:
    """Every run's audit record visible at HEAD, oldest first."""
    return sorted((_record(v) for v in system_records(mem, RUNS).values()), key=lambda r: (r.started_at, r.run))


def get_run(mem: Sovseal, run_id: str) -> RunRecord:
    found = mem.get(RUNS + run_id) if isinstance(run_id, str) and run_id else None
    if found is None:
        raise UnknownRunError(f"no consolidation run {run_id!r} in this store; list runs with `sovseal consolidate runs`")
    return _record(found.payload)


def _check(model: Any, passes: Sequence[str] | None, batch_size: int, as_of: date | None) -> list[str]:
    if model is not None:
        check_model(model)
    if not isinstance(batch_size, int) or isinstance(batch_size, bool) or not 1 <= batch_size <= MAX_BATCH:
        raise InvalidInputError(f"batch_size must be an integer from 1 to {MAX_BATCH}; got {batch_size!r}")
    if as_of is not None and (not isinstance(as_of, date) or isinstance(as_of, datetime)):
        raise InvalidInputError(f"as_of must be a datetime.date; got {as_of!r}")
    if passes is None:
        return list(PASSES)
    if isinstance(passes, str):
        passes = [p.strip() for p in passes.split(",") if p.strip()]
    unknown = [p for p in passes if p not in PASSES]
    if unknown or not passes:
        raise InvalidInputError(f"passes are {', '.join(PASSES)}; got {list(passes)!r}")
    if model is None and (asked := [p for p in passes if p in NEEDS_MODEL]):
        raise ConsolidationError(
            f"the {', '.join(asked)} pass(es) need a chat model:",
            advice="pass model= (CLI: --model package.module:factory)",
            cli_advice="pass --model package.module:factory",
        )
    return [p for p in PASSES if p in passes]  # always in the run's order


def consolidate(
    mem: Sovseal,
    model: Any = None,
    *,
    passes: Sequence[str] | str | None = None,
    batch_size: int = 8,
    as_of: date | None = None,
    progress: Callable[[str], None] | None = None,
) -> RunReport:
    """Run the consolidation passes over ``mem``'s current branch, or resume the run that died.

    ``model`` is any LangChain chat model (duck-typed: ``invoke(prompt)`` returning a message
    with ``.content``, or a str) or a callable ``prompt -> str``. Without one, only the passes
    that need no model run (decay) and the others are listed in ``RunReport.skipped``; asking
    for a model pass by name without a model raises ConsolidationError. ``as_of`` is the day the
    digest summarises and decay scores at (default: today, UTC).

    Every write goes through ``mem.store`` / ``mem.reinforce`` / ``mem.delete``: sealed, in the
    lineage, replicated. A run that finds nothing to do writes nothing. Raises ModelOutputError
    (writing nothing for that batch) when the model's answer is not the JSON asked for.
    """
    chosen = _check(model, passes, batch_size, as_of)
    with exclusive(mem):
        return _consolidate(mem, model, chosen, passes is None, batch_size, as_of, progress or (lambda _msg: None))


def _consolidate(
    mem: Sovseal, model: Any, chosen: list[str], by_default: bool, batch_size: int, as_of: date | None, say: Callable[[str], None]
) -> RunReport:
    skipped: dict[str, str] = {}
    if by_default and model is None:
        skipped = {p: "needs a chat model" for p in chosen if p in NEEDS_MODEL}
        chosen = [p for p in chosen if p not in NEEDS_MODEL]
    running = [r for r in runs(mem) if r.status == "running"]
    if running:
        last = running[-1]
        ctx = Context(
            mem, model, last.run, date.fromisoformat(last.as_of), batch_size, last.head_before, chosen, last.started_at, say, started=True
        )
        mine = steps(mem, run=last.run)
        ctx.next_n = max((s.n for s in mine), default=0)
        ctx.steps = [s for s in mine if s.state == "done"]
        for s in mine:
            if s.state == "planned":  # the run died inside this step: finish it from its plan, no model call
                say(f"resuming {last.run}: finishing step {s.id}")
                ctx.writes += apply_step(mem, s)
                ctx.steps.append(s)
    else:
        stamp = datetime.now(UTC)
        run_id = f"run-{stamp:%Y%m%dT%H%M%SZ}-{os.urandom(3).hex()}"
        ctx = Context(mem, model, run_id, as_of or stamp.date(), batch_size, mem.snapshot(), chosen, now_iso(), say)
    for name in chosen:
        say(f"{name} pass")
        PASSES[name](ctx)
    counts = _counts(ctx.steps)
    head_after = None
    if ctx.started:
        head_after = mem.snapshot()  # after the last step; the audit record's closing snapshot follows it
        ctx.audit("done", finished_at=now_iso(), head_after=head_after, counts=counts, steps=len(ctx.steps), writes=ctx.writes)
    return RunReport(
        ctx.run if ctx.started else None, bool(running), chosen, skipped, len(ctx.steps), ctx.writes, counts,
        ctx.head_before if ctx.started else None, head_after,
    )


@contextmanager
def exclusive(mem: Sovseal) -> Iterator[None]:
    """One consolidation (run or rollback) at a time per store, across processes: ``flock`` on an
    empty ``CONSOLIDATE.lock`` in the store directory (released by the kernel if the process dies)."""
    lock = WriterLock(mem.path / LOCK_FILE, timeout=0.0)
    try:
        if not lock.try_acquire():
            raise ConsolidationError(
                f"another consolidation is running on {mem.path}; wait for it to finish (a run that died "
                "releases the lock, and the next run resumes it)"
            )
        yield
    finally:
        lock.close()  # closing the descriptor releases the lock


def _counts(done: list[Step]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for s in done:
        c = out.setdefault(s.kind, {"steps": 0})
        c["steps"] += 1
        for key, value in (s.info or {}).items():
            if isinstance(value, list):
                c[key] = sorted(set(c.get(key, [])) | set(value))
            elif isinstance(value, int):
                c[key] = c.get(key, 0) + value
    return out


def rollback_run(mem: Sovseal, run_id: str) -> RollbackReport:
    """Undo a run by *appending* writes: every path it wrote goes back to its value before the run.

    Nothing is rewritten or hidden: the run's snapshots stay in the lineage, and the rollback is
    new snapshots after them. A memory written again after the run (by the user, an agent, or a
    later run) is left as it is and reported in ``conflicts``: a rollback never discards a write
    it did not make. Consolidation's own records that a later run rewrote (retention scores, graph
    edges) are kept too, in ``superseded``. Reinforcements are not snapshots and stay. The run's step records are deleted,
    so the next run consolidates those inputs again.
    """
    with exclusive(mem):
        return _rollback(mem, run_id)


def _rollback(mem: Sovseal, run_id: str) -> RollbackReport:
    record = get_run(mem, run_id)
    if record.status == "rolled_back":
        return RollbackReport(run_id, [], [], [], 0, already=True)
    mine = steps(mem, run=run_id)
    first: dict[str, Value | None] = {}
    last: dict[str, tuple[str, Value | None]] = {}
    reinforcements = 0
    for s in mine:
        for w in s.writes:
            if w.op == "reinforce":
                reinforcements += 1
                continue
            first.setdefault(w.path, w.prior)
            last[w.path] = (w.op, w.value)
    restored: list[str] = []
    conflicts: list[str] = []
    superseded: list[str] = []
    for path in sorted(last):
        op, value = last[path]
        current = mem.get(path)
        ours = current is None if op == "delete" else (value is not None and value.held_by(current))
        prior = first[path]
        if not ours:
            # Untouched: a planned write the run died before making (nothing to undo); else written again since (kept).
            untouched = current is None if prior is None else prior.held_by(current)
            if not untouched:
                (superseded if is_system(path) else conflicts).append(path)
            continue
        if prior is None:
            mem.delete(path)
        else:
            put(mem, path, prior)
        restored.append(path)
    for s in mine:
        mem.delete(s.path)
    raw = dict(record.raw)
    raw.update(
        status="rolled_back",
        rollback={"at": now_iso(), "restored": len(restored), "conflicts": conflicts, "superseded": len(superseded)},
    )
    put(mem, RUNS + run_id, system_value(raw, "run"))
    return RollbackReport(run_id, restored, conflicts, superseded, reinforcements)
