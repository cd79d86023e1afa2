"""Decay: an Ebbinghaus-style retention score for every memory (Sci's ``runDecayPass``).

    R = exp(-t / S),   S = half_life[type] / ln 2 × (1 + ln(1 + reinforce_count))

``t`` is the age in days at the end of the run's day (``as_of``) since the memory was stored or
last reinforced; the half-lives are recall's (episodic 14 d, semantic 90 d, procedural 180 d), so an
unreinforced memory's score is exactly recall's ``0.5 ** (age / half_life)``, and every
reinforcement makes it fade more slowly (the spacing effect).

Recall already decays at query time from the same timestamps; this pass *stores* the score, as Sci
does, so it can be read (:func:`retention`), listed (the fading memories of a run) and replicated.
Scores live in 64 shard records (``_sovseal/consolidation/retention/NN``, a path's shard from its
hash): a run rewrites only the shards whose scores changed, so a second run on the same day writes
nothing; one step carries as many shards as fit in 96 KiB (all of them, for a small store). A shard
holds about 1,800 memories within the 256 KiB record limit, so the pass serves
stores of up to about 100,000 memories.
"""

from __future__ import annotations

import hashlib
import json
import math
from datetime import UTC, date, datetime, time, timedelta
from typing import TYPE_CHECKING

from ..models import Memory
from ..recall.params import RecallParams
from .context import Context
from .layout import RETENTION
from .records import Step, Write, memories, plan_store, system_value

if TYPE_CHECKING:
    from sovseal.sdk.client import Sovseal

NAME = "decay"
SHARDS = 64
#: A memory whose retention is below this is reported as fading.
FADING = 0.1
#: Planned writes (new scores and their priors) per step: well inside the 256 KiB record limit.
STEP_BYTES = 96 * 1024
_DAY = 86400.0


def end_of(day: date) -> datetime:
    return datetime.combine(day + timedelta(days=1), time(), UTC)


def score(type_: str, reinforce_count: int, age_days: float, params: RecallParams | None = None) -> float:
    """The retention of a memory of ``type_`` reinforced ``reinforce_count`` times, ``age_days`` old."""
    half = (params or RecallParams()).half_life_days.get(type_, 90.0)
    stability = half / math.log(2) * (1.0 + math.log1p(max(0, reinforce_count)))
    return math.exp(-max(0.0, age_days) / stability)


def retention_of(m: Memory, as_of: date, params: RecallParams | None = None) -> float:
    last = m.last_reinforced or m.created_at
    age = (end_of(as_of) - last).total_seconds() / _DAY
    return round(score(m.type, m.reinforce_count, age, params), 6)


def shard_of(path: str) -> str:
    return f"{hashlib.sha256(path.encode()).digest()[0] % SHARDS:02d}"


def retention(mem: Sovseal, path: str) -> float | None:
    """The retention score the last decay pass stored for ``path`` (None if it has none)."""
    found = mem.get(RETENTION + shard_of(path))
    return None if found is None else found.payload["scores"].get(path)


def run(ctx: Context) -> None:
    day = ctx.as_of.isoformat()
    params = ctx.mem.recall_params
    shards: dict[str, dict[str, float]] = {}
    for m in memories(ctx.mem):
        shards.setdefault(shard_of(m.path), {})[m.path] = retention_of(m, ctx.as_of, params)
    step: list[Write] = []
    size = 0
    fading: list[str] = []
    for shard in (f"{i:02d}" for i in range(SHARDS)):
        scores = dict(sorted(shards.get(shard, {}).items()))
        path = RETENTION + shard
        if not scores and ctx.mem.get(path) is None:
            continue
        write = plan_store(ctx.mem, path, system_value({"as_of": day, "scores": scores}, NAME))
        if write is None:
            continue
        weight = len(json.dumps(write.json()))
        if step and size + weight > STEP_BYTES:
            _flush(ctx, step, fading)
            step, size, fading = [], 0, []
        step.append(write)
        size += weight
        fading += [p for p, r in scores.items() if r < FADING]
    if step:
        _flush(ctx, step, fading)


def _flush(ctx: Context, writes: list[Write], fading: list[str]) -> None:
    """One step for several shards (as many as fit well inside the record limit, with their priors)."""
    first = writes[0].path.rsplit("/", 1)[1]
    scored = sum(len(w.value.payload["scores"]) for w in writes if w.value is not None)
    ctx.run_step(Step(f"{NAME}-{ctx.run}-{first}", ctx.run, 0, NAME, [], writes, info={"scored": scored, "fading": sorted(fading)}))
