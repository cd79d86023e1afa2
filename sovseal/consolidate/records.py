"""Consolidation's own records, and how a step's writes are planned and applied.

Every record lives under ``_sovseal/consolidation/`` (the paths: :mod:`.layout`) and is stored
with ``index=False``: sealed, in the lineage and replicated like any memory, but never embedded
and never ranked by recall.

A *step* is the unit of work and of crash safety (a promotion batch, a graph batch, the digest,
one retention shard). It is written twice: ``planned`` (the validated writes, each with the value
its path held before, *before* any of them is applied), then ``done`` (after all of them). A run
that dies between the two resumes by applying the plan again: a write whose path already holds
the planned value is skipped, so nothing is written twice and the model is not asked again. The
prior values in the plan are what :mod:`.rollback` restores.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from .layout import MARK, STEPS, is_system

if TYPE_CHECKING:
    from sovseal.sdk.client import Sovseal

    from ..models import Memory


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="microseconds")


@dataclass(frozen=True)
class Value:
    """One value a path can hold: what ``store`` is given (``index`` False for our own records)."""

    payload: Any
    metadata: dict[str, Any]
    type: str
    provenance: str
    index: bool = True

    @classmethod
    def of(cls, m: Memory) -> Value:
        return cls(m.payload, dict(m.metadata), m.type, m.provenance, not is_system(m.path))

    def json(self) -> dict[str, Any]:
        return {"payload": self.payload, "metadata": self.metadata, "type": self.type, "provenance": self.provenance, "index": self.index}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Value:
        return cls(raw["payload"], raw["metadata"], raw["type"], raw["provenance"], raw["index"])

    def held_by(self, m: Memory | None) -> bool:
        return m is not None and (m.payload, m.metadata, m.type, m.provenance) == (self.payload, self.metadata, self.type, self.provenance)


def put(mem: Sovseal, path: str, value: Value) -> str:
    """Store ``value`` at ``path`` through the SDK; returns the snapshot id."""
    kwargs: dict[str, Any] = {} if value.index else {"index": False}
    return mem.store(path, value.payload, metadata=value.metadata, type=value.type, provenance=value.provenance, **kwargs).snapshot_id


@dataclass(frozen=True)
class Write:
    """One planned write: ``op`` is store, reinforce or delete; ``prior`` the path's value before the run's step."""

    op: str
    path: str
    value: Value | None
    prior: Value | None

    def json(self) -> dict[str, Any]:
        return {
            "op": self.op,
            "path": self.path,
            "value": None if self.value is None else self.value.json(),
            "prior": None if self.prior is None else self.prior.json(),
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Write:
        value = None if raw["value"] is None else Value.from_json(raw["value"])
        prior = None if raw["prior"] is None else Value.from_json(raw["prior"])
        return cls(raw["op"], raw["path"], value, prior)


def plan_store(mem: Sovseal, path: str, value: Value) -> Write | None:
    """The write that makes ``path`` hold ``value``: none if it already does (storing again would
    reinforce, which a re-run must not do), a reinforcement is asked for explicitly."""
    current = mem.get(path)
    if value.held_by(current):
        return None
    return Write("store", path, value, None if current is None else Value.of(current))


def plan_reinforce(mem: Sovseal, path: str) -> Write | None:
    current = mem.get(path)
    return None if current is None else Write("reinforce", path, None, None)


@dataclass
class Step:
    """A unit of work of one run (see the module docstring)."""

    id: str
    run: str
    n: int  # order within the run
    kind: str
    sources: list[str]
    writes: list[Write]
    state: str = "planned"
    planned_at: str = ""
    info: dict[str, Any] | None = None

    @property
    def path(self) -> str:
        return STEPS + self.id

    def json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "run": self.run,
            "n": self.n,
            "kind": self.kind,
            "sources": self.sources,
            "writes": [w.json() for w in self.writes],
            "state": self.state,
            "planned_at": self.planned_at,
            "info": self.info or {},
        }

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> Step:
        return cls(
            raw["id"], raw["run"], raw["n"], raw["kind"], list(raw["sources"]), [Write.from_json(w) for w in raw["writes"]],
            raw["state"], raw["planned_at"], raw.get("info") or {},
        )


def system_value(payload: dict[str, Any], kind: str) -> Value:
    return Value(payload, {MARK: kind}, "procedural", "observed", index=False)


def save_step(mem: Sovseal, step: Step) -> None:
    put(mem, step.path, system_value(step.json(), "step"))


def apply_step(mem: Sovseal, step: Step) -> int:
    """Apply a planned step's writes (skipping those already applied) and mark it done; returns writes made."""
    if step.state == "planned" and not step.planned_at:
        step.planned_at = now_iso()
        save_step(mem, step)
    made = 0
    planned = datetime.fromisoformat(step.planned_at)
    for w in step.writes:
        current = mem.get(w.path)
        if w.op == "store":
            assert w.value is not None  # nosec B101 -- narrows the type for mypy; a None value is rejected by validation above
            if not w.value.held_by(current):
                put(mem, w.path, w.value)
                made += 1
        elif w.op == "delete":
            if current is not None and mem.delete(w.path) is not None:
                made += 1
        # Reinforcement is not a snapshot; a reinforcement later than the plan is this one, applied before a crash.
        elif w.op == "reinforce" and current is not None and (current.last_reinforced is None or current.last_reinforced < planned):
            mem.reinforce(w.path)
            made += 1
    step.state = "done"
    save_step(mem, step)
    return made


def system_records(mem: Sovseal, prefix: str) -> dict[str, Any]:
    """Payloads of the visible records under ``prefix`` (our records are small and few per run)."""
    return {p: v for p, v in mem.state().items() if p.startswith(prefix)}


def memories(mem: Sovseal) -> list[Memory]:
    """Every visible memory that is not one of consolidation's own records, oldest first."""
    out = [m for p in mem.state() if not is_system(p) and (m := mem.get(p)) is not None]
    out.sort(key=lambda m: (m.created_at, m.snapshot_id))
    return out


def steps(mem: Sovseal, *, run: str | None = None, kind: str | None = None) -> list[Step]:
    found = [Step.from_json(v) for v in system_records(mem, STEPS).values()]
    return sorted((s for s in found if (run is None or s.run == run) and (kind is None or s.kind == kind)), key=lambda s: (s.run, s.n))


def memory_text(m: Memory, limit: int = 1000) -> str:
    """A memory as a model reads it: a string payload as is, anything else as compact JSON."""
    text = m.payload if isinstance(m.payload, str) else json.dumps(m.payload, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= limit else text[: limit - 1] + "…"
