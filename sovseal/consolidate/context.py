"""What the passes of one run share: the store, the model, the run's identity and its counters."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date
from typing import TYPE_CHECKING, Any

from .errors import ConsolidationError
from .layout import RUNS
from .records import Step, apply_step, put, system_value

if TYPE_CHECKING:
    from sovseal.sdk.client import Sovseal


@dataclass
class Context:
    mem: Sovseal
    model: Any | None
    run: str
    as_of: date
    batch_size: int
    head_before: str | None
    passes: list[str]
    started_at: str
    progress: Callable[[str], None]
    #: True once the run's audit record exists (written just before its first step).
    started: bool = False
    next_n: int = 0
    writes: int = 0
    steps: list[Step] = field(default_factory=list)

    def need_model(self, pass_name: str) -> Any:
        if self.model is None:
            raise ConsolidationError(
                f"the {pass_name} pass needs a chat model:",
                advice="pass model= (CLI: --model package.module:factory)",
                cli_advice="pass --model package.module:factory",
            )
        return self.model

    def audit(self, status: str, **extra: Any) -> None:
        record = {
            "run": self.run,
            "status": status,
            "as_of": self.as_of.isoformat(),
            "started_at": self.started_at,
            "head_before": self.head_before,
            "passes": self.passes,
            "batch_size": self.batch_size,
            "model": None if self.model is None else type(self.model).__name__,
            **extra,
        }
        put(self.mem, RUNS + self.run, system_value(record, "run"))

    def run_step(self, step: Step) -> None:
        """Record and apply one step; the run's audit record is written first, on its first step,
        so a run that finds nothing to do writes nothing at all."""
        if not self.started:
            self.audit("running")
            self.started = True
        if not step.n:
            self.next_n += 1
            step.n = self.next_n
        self.writes += apply_step(self.mem, step)
        self.steps.append(step)
        self.progress(f"{step.kind}: step {step.id} done ({len(step.writes)} writes planned)")
