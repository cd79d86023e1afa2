"""Reliability suite settings: the normal mode (part of the test command) and the soak mode.

``SOVSEAL_SOAK=1 python -m pytest tests/reliability`` widens every scenario (more rounds, more
kills, more Hypothesis examples and steps); without it the scenarios are sized so that the whole
directory fits in the normal test run. Each scenario reads its size from ``_soak.scale``, so one
switch turns the suite from a regression check into a soak.

``figures`` collects what each scenario did (rounds, kills, records, detections); the session
prints them at the end (``-s`` not needed: they go to the terminal summary) so that
docs/reliability.md can quote the latest run.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import pytest

from tests.reliability._soak import SOAK

_FIGURES: dict[str, dict[str, Any]] = defaultdict(dict)


@pytest.fixture
def figures(request: pytest.FixtureRequest) -> dict[str, Any]:
    """A per-scenario dict of figures, reported at the end of the session."""
    return _FIGURES[request.node.name]


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not _FIGURES:
        return
    terminalreporter.section(f"sovseal reliability figures ({'soak' if SOAK else 'normal'} mode)")
    for name, values in sorted(_FIGURES.items()):
        if values:
            terminalreporter.write_line(f"{name}: " + ", ".join(f"{k}={v}" for k, v in values.items()))
