"""LangGraph checkpointers backed by sovseal: ``SovsealSaver`` and ``AsyncSovsealSaver``.

Every checkpoint, its metadata and every pending write is a sealed sovseal record; a thread is a
sovseal branch whose history is a tamper-evident chain, and time travel is a sovseal fork.
See docs/integrations/langgraph.md.
"""

from langgraph.checkpoint.sovseal.saver import (
    AsyncSovsealSaver,
    SovsealSaver,
    ThreadVerification,
)

__all__ = ["AsyncSovsealSaver", "SovsealSaver", "ThreadVerification"]
