"""The lane layout of `sovseal log --graph` (sovseal.cli.graph.draw_graph), on hand-made lineages."""

from __future__ import annotations

from datetime import UTC, datetime

from sovseal.cli.graph import draw_graph
from sovseal.sdk.views import GraphNode


def node(sid: str, parent: str | None, t: int) -> GraphNode:
    return GraphNode(sid, parent, "store", f"path.{sid}", datetime.fromtimestamp(t, UTC))


def shape(nodes: list[GraphNode]) -> list[str]:
    return [prefix + ("" if n is None else f" {n.snapshot_id}") for prefix, n in draw_graph(nodes)]


def test_a_single_branch_is_one_lane() -> None:
    assert shape([node("c", "b", 3), node("b", "a", 2), node("a", None, 1)]) == ["* c", "* b", "* a"]


def test_a_fork_joins_back_like_git() -> None:
    nodes = [node("main2", "p", 4), node("exp1", "p", 3), node("p", "a", 2), node("a", None, 1)]
    assert shape(nodes) == ["* main2", "| * exp1", "|/", "* p", "* a"]


def test_a_join_across_another_lane_uses_underscores() -> None:
    nodes = [node("m", "q", 6), node("o", "a", 5), node("x", "p", 4), node("q", "p", 3), node("p", "a", 2), node("a", None, 1)]
    assert shape(nodes) == ["* m", "| * o", "| | * x", "* | | q", "|_|/", "* | p", "|/", "* a"]


def test_two_roots_shift_lanes_left() -> None:
    nodes = [node("x", "c", 4), node("y", "p", 3), node("c", None, 2), node("p", None, 1)]
    assert shape(nodes) == ["* x", "| * y", "* | c", " /", "* p"]
