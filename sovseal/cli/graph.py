"""``sovseal log --graph``: the snapshot DAG laid out in lanes, as ``git log --graph`` draws it."""

from __future__ import annotations

from sovseal.sdk.views import GraphNode


def draw_graph(nodes: list[GraphNode]) -> list[tuple[str, GraphNode | None]]:
    """Lay ``nodes`` (from :func:`snapshot_graph`) out in lanes like ``git log --graph``.

    Returns rows of (graph prefix, node); connector rows between snapshots have node None. Lanes
    join where branches forked, and a merge (several parents) opens a lane for each other parent.
    """
    lanes: list[str] = []  # the snapshot id each lane is waiting for
    rows: list[tuple[str, GraphNode | None]] = []
    for node in nodes:
        if node.snapshot_id in lanes:
            col = lanes.index(node.snapshot_id)
        else:
            lanes.append(node.snapshot_id)
            col = len(lanes) - 1
        rows.append((" ".join("*" if k == col else "|" for k in range(len(lanes))), node))
        parents = node.parents
        if not parents:
            lanes.pop(col)
            if col < len(lanes):  # lanes to the right shift left by one
                rows.append((_shift_row(len(lanes) + 1, col), None))
            continue
        lanes[col] = parents[0]
        for extra in parents[1:]:  # a merge: each other parent gets a lane of its own, to the right
            if extra not in lanes:
                lanes.insert(col + 1, extra)
                rows.append((_merge_row(len(lanes), col), None))
        while True:  # join lanes that now wait for the same parent (a fork point)
            dup = next((j for j in range(len(lanes)) if lanes[j] in lanes[:j]), None)
            if dup is None:
                break
            rows.append((_join_row(len(lanes), lanes.index(lanes[dup]), dup), None))
            lanes.pop(dup)
    return rows


def _join_row(width: int, into: int, lane: int) -> str:
    chars = [" "] * (2 * width)
    for k in range(width):
        if k < lane:
            chars[2 * k] = "|"
        else:
            chars[2 * k - 1] = "/"
    for k in range(into, lane - 1):
        chars[2 * k + 1] = "_"
    return "".join(chars).rstrip()


def _merge_row(width: int, col: int) -> str:
    """A connector row in which lane ``col`` opens a new lane to its right (a merge's other parent):
    ``|`` up to it, a backslash after it, lanes past it moved one to the right."""
    chars = [" "] * (2 * width)
    for k in range(width):
        if k <= col:
            chars[2 * k] = "|"
        else:
            chars[2 * k - 1] = "\\"
    return "".join(chars).rstrip()


def _shift_row(width: int, gone: int) -> str:
    chars = [" "] * (2 * width)
    for k in range(width):
        if k < gone:
            chars[2 * k] = "|"
        elif k > gone:
            chars[2 * k - 1] = "/"
    return "".join(chars).rstrip()
