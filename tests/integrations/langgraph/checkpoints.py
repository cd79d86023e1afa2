"""Writing one checkpoint through a saver, for tests that then look at (or tamper with) what it stored."""

from __future__ import annotations

from typing import Any

from langgraph.checkpoint.base import empty_checkpoint
from langgraph.checkpoint.base.id import uuid6
from langgraph.checkpoint.sovseal import SovsealSaver


def put(saver: SovsealSaver, thread: str, parent: dict[str, Any] | None = None, **values: Any) -> dict[str, Any]:
    """Put a checkpoint whose channels hold ``values`` on ``thread`` (after ``parent``); returns its config."""
    checkpoint = empty_checkpoint()
    checkpoint["id"] = str(uuid6(clock_seq=1))
    checkpoint["channel_values"] = values
    checkpoint["channel_versions"] = dict.fromkeys(values, 1)
    config = parent or {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}
    return saver.put(config, checkpoint, {"source": "loop", "step": 0}, checkpoint["channel_versions"])
