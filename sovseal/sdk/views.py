"""Read-side views of a store shared by the CLI and the MCP server: a memory that must exist, the
snapshot graph, branch rows, snapshot-id prefixes, recurring patterns, and plain JSON data.

They sit on the public :class:`~sovseal.Sovseal` API only, so no behaviour exists in one front end alone.
"""

from __future__ import annotations

import base64
import dataclasses
import heapq
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sovseal.errors import AmbiguousSnapshotError, InvalidInputError, MemoryNotFoundError, UnknownSnapshotError
from sovseal.models import Memory

if TYPE_CHECKING:
    from .client import Sovseal


def jsonable(value: Any) -> Any:
    """Dataclasses, datetimes, bytes and containers as JSON-ready values (datetimes in ISO 8601)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [jsonable(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, Path):
        return str(value)
    return value


def require_memory(mem: Sovseal, path: str) -> Memory:
    """``mem.get(path)``, or :class:`MemoryNotFoundError` naming the branch when nothing is visible there."""
    found = mem.get(path)
    if found is None:
        raise MemoryNotFoundError(
            f"no memory at path {path!r} on branch {mem.branch!r}; search with recall to find the path"
        )
    return found


@contextmanager
def _on_branch(mem: Sovseal, branch: str) -> Iterator[None]:
    """Temporarily make ``branch`` the handle's branch (the caller serializes use of ``mem``)."""
    previous = mem.branch
    mem.checkout(branch)
    try:
        yield
    finally:
        mem.checkout(previous)


def branch_heads(mem: Sovseal) -> dict[str, str | None]:
    """Every branch and its HEAD snapshot id (None: no snapshot yet)."""
    return mem.heads()


@dataclass(frozen=True, slots=True)
class GraphNode:
    """One snapshot of the lineage DAG, with the branches whose HEAD it is."""

    snapshot_id: str
    parent_id: str | None  # the parents' ids joined by "," (a merge has several), as log() gives it
    op: str
    path: str
    created_at: datetime
    branches: tuple[str, ...] = ()

    @property
    def parents(self) -> list[str]:
        return self.parent_id.split(",") if self.parent_id else []


def snapshot_graph(mem: Sovseal) -> list[GraphNode]:
    """The snapshots reachable from any branch HEAD, children before parents, newest first.

    Snapshots that no branch reaches any more (a branch rolled back past them) are left out, like
    ``git log --all``.
    """
    heads = mem.status().heads  # every head of every branch: a branch a pull left unmerged has several
    labels: dict[str, list[str]] = {}
    for name, sids in heads.items():
        for head in sids:
            if head is not None:
                labels.setdefault(head, []).append(name)
    nodes: dict[str, GraphNode] = {}
    for name in heads:
        with _on_branch(mem, name):
            for entry in mem.log(damaged="mark"):  # a damaged record shows where it sits
                if entry.snapshot_id in nodes:
                    continue  # reached from another branch already
                nodes[entry.snapshot_id] = GraphNode(
                    entry.snapshot_id,
                    entry.parent_id,
                    entry.op,
                    entry.path,
                    entry.created_at,
                    tuple(sorted(labels.get(entry.snapshot_id, []))),
                )
    # Topological order, newest first: a snapshot comes after all of its children.
    children: dict[str, int] = dict.fromkeys(nodes, 0)
    for node in nodes.values():
        for parent in node.parents:
            if parent in children:
                children[parent] += 1
    ready = [(-n.created_at.timestamp(), n.snapshot_id) for n in nodes.values() if children[n.snapshot_id] == 0]
    heapq.heapify(ready)
    out: list[GraphNode] = []
    while ready:
        _, sid = heapq.heappop(ready)
        node = nodes[sid]
        out.append(node)
        for parent in node.parents:
            if parent in children:
                children[parent] -= 1
                if children[parent] == 0:
                    heapq.heappush(ready, (-nodes[parent].created_at.timestamp(), parent))
    return out


def resolve_snapshot(mem: Sovseal, text: str) -> str:
    """A full snapshot id from ``text``: a full id, or a unique prefix (``snap_4f3a``, ``4f3a``) of a
    snapshot reachable from some branch HEAD."""
    if not isinstance(text, str) or not text.strip():
        raise InvalidInputError("a snapshot id looks like 'snap_<64 hex>' (a unique prefix such as snap_4f3ad8 works)")
    text = text.strip().lower()
    prefix = text if text.startswith("snap_") else "snap_" + text
    body = prefix[len("snap_") :]
    if not body or any(c not in "0123456789abcdef" for c in body):
        raise InvalidInputError(f"a snapshot id looks like 'snap_<64 hex>'; got {text!r}")
    if len(body) == 64:
        return prefix
    matches = sorted({n.snapshot_id for n in snapshot_graph(mem) if n.snapshot_id.startswith(prefix)})
    if not matches:
        raise UnknownSnapshotError(f"no snapshot starting with {prefix} on any branch; list snapshots with `sovseal log --graph`")
    if len(matches) > 1:
        raise AmbiguousSnapshotError(f"{prefix} matches {len(matches)} snapshots; give more characters of the id")
    return matches[0]


def branch_table(mem: Sovseal) -> list[dict[str, Any]]:
    """One row per branch: name, HEAD snapshot id, visible memory count, and whether it is ``mem``'s branch."""
    rows: list[dict[str, Any]] = []
    for name in mem.branches():
        with _on_branch(mem, name):
            status = mem.status()
        rows.append({"name": name, "head": status.head, "visible": status.visible, "current": name == mem.branch})
    return rows


def recurring_patterns(mem: Sovseal, *, min_count: int = 1) -> dict[str, list[Memory]]:
    """Reinforced memories visible at HEAD, grouped by type, most reinforced first (``sovseal
    mind``'s "Recurring Patterns"). ``min_count`` is the least ``reinforce_count`` shown (0 shows everything)."""
    if not isinstance(min_count, int) or isinstance(min_count, bool) or min_count < 0:
        raise InvalidInputError(f"min_count must be an integer >= 0; got {min_count!r}")
    groups: dict[str, list[Memory]] = {"semantic": [], "procedural": [], "episodic": []}
    for path in mem.state():
        found = mem.get(path)
        if found is not None and found.reinforce_count >= min_count:
            groups.setdefault(found.type, []).append(found)
    for items in groups.values():
        items.sort(key=lambda m: (-m.reinforce_count, -(m.last_reinforced or m.created_at).timestamp(), m.path))
    return groups
