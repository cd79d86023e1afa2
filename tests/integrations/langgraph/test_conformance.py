"""langgraph-checkpoint-conformance (pinned 0.0.2), unmodified, against both savers.

The suite is programmatic: ``validate`` detects capabilities from the overridden ``a*`` methods and
runs every spec test of each (81 in all: put 17, put_writes 10, get_tuple 10, list 16,
delete_thread 5, delete_for_runs 7, copy_thread 8, prune 8), each capability on a fresh saver
over a fresh store. Nothing is skipped: ``skip_capabilities`` stays empty.
"""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import tempfile
from collections.abc import AsyncIterator

import pytest
from langgraph.checkpoint.conformance import checkpointer_test, validate
from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES
from langgraph.checkpoint.sovseal import AsyncSovsealSaver, SovsealSaver

CONFORMANCE_VERSION = "0.0.2"


@checkpointer_test(name="AsyncSovsealSaver")
async def async_sovseal_saver() -> AsyncIterator[AsyncSovsealSaver]:
    directory = tempfile.mkdtemp(prefix="sovseal-conformance-")
    try:
        async with AsyncSovsealSaver.open(directory, key=os.urandom(32)) as saver:
            yield saver
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@checkpointer_test(name="SovsealSaver")
async def sync_sovseal_saver() -> AsyncIterator[SovsealSaver]:
    directory = tempfile.mkdtemp(prefix="sovseal-conformance-")
    try:
        with SovsealSaver.open(directory, key=os.urandom(32)) as saver:
            yield saver
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def test_pinned_suite_version() -> None:
    assert importlib.metadata.version("langgraph-checkpoint-conformance") == CONFORMANCE_VERSION


@pytest.mark.asyncio
@pytest.mark.parametrize("factory", [async_sovseal_saver, sync_sovseal_saver], ids=lambda f: f.name)
async def test_conformance_full(factory) -> None:
    report = await validate(factory)
    report.print_report()
    assert {c.value for c in ALL_CAPABILITIES} == {cap for cap, result in report.results.items() if result.detected}
    assert report.passed_all_base()
    assert report.passed_all(), report.to_dict()
    assert report.conformance_level() == "FULL"
    counts = {cap: (r.tests_passed, r.tests_failed, r.tests_skipped) for cap, r in report.results.items()}
    assert sum(p for p, _, _ in counts.values()) == 81 and all(f == s == 0 for _, f, s in counts.values()), counts
