"""The graph consolidation builds: edges between memories, and :func:`related`, which follows them.

The graph pass (:mod:`.graph_pass`) has the chat model name relationships between semantic
memories; each becomes an edge that :func:`related` (``Sovseal.related``) follows from either end.
Edges are kept per memory in one adjacency record, ``_sovseal/consolidation/graph/<hash of path>``,
holding ``{"path", "edges": [{"to", "relation", "direction"}]}``; an edge a→b is written to both
ends (``out`` at a, ``in`` at b), so following it from either side is one ``get``. Edges name
paths, so they keep pointing at a memory when its value is updated; an edge to a deleted path is
skipped when followed.

The SDK imports this module to answer ``related()``: it needs a handle's ``get`` and nothing of
the passes, so it imports no SDK module and the SDK and consolidation do not import each other.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from sovseal.storage.entries import validate_path

from ..models import Memory
from .layout import GRAPH, digest_of


class Reader(Protocol):
    """What :func:`related` needs of a handle (``Sovseal`` has it)."""

    def get(self, path: str) -> Memory | None: ...


@dataclass(frozen=True, slots=True)
class Related:
    """A memory reached from another over a graph edge: ``direction`` is ``out`` (path → memory) or ``in``."""

    memory: Memory
    relation: str
    direction: str


def adjacency_path(path: str) -> str:
    return GRAPH + digest_of([path], 32)


def related(mem: Reader, path: str, *, relation: str | None = None) -> list[Related]:
    """The memories linked to ``path`` by the graph pass, visible at HEAD, in edge order."""
    validate_path(path)
    found = mem.get(adjacency_path(path))
    if found is None:
        return []
    out: list[Related] = []
    for edge in found.payload["edges"]:
        if relation is not None and edge["relation"] != relation:
            continue
        target = mem.get(edge["to"])
        if target is not None:
            out.append(Related(target, edge["relation"], edge["direction"]))
    return out
