"""Fork / rollback model test at scale: tests/core/test_stateful.py's machine, run longer.

The machine (store, delete, rollback, fork, checkout, reopen against a reference DAG, with
state, log, ids, branches and record counts compared after every step) is imported, not
copied; only its settings change. Normal mode runs a modest budget on top of the core suite's
own run; soak mode runs hundreds of examples of long programs.
"""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.core.test_stateful import LineageMachine
from tests.reliability._soak import scale


def test_lineage_machine_at_scale(figures: dict[str, object]) -> None:
    """Proves: over long random programs of stores, deletes, rollbacks, forks, checkouts and
    reopens, the engine never disagrees with the reference model of branches and state."""
    examples, steps = scale(6, 200), scale(50, 100)
    run_state_machine_as_test(
        LineageMachine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            derandomize=False,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
            database=None,
        ),
    )
    figures.update(examples=examples, max_steps=steps)
