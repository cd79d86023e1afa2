"""The graph pass: the chat model names relationships between semantic memories; each becomes an
edge in :mod:`.graph`, which ``Sovseal.related`` follows (Sci's ``runGraphPass``).

A semantic memory is examined once per value (its snapshot id).
"""

from __future__ import annotations

import json
from typing import Any

from ..models import Memory
from .context import Context
from .graph import adjacency_path
from .layout import digest_of, is_system
from .model import GraphAnswer, ask, invalid
from .records import Step, Value, Write, memories, memory_text, plan_store, steps, system_value

NAME = "graph"
MAX_NEIGHBOURS = 20
#: Edges kept per memory: a hub is capped so its adjacency record stays small.
MAX_EDGES = 64

PROMPT = """You link the facts an AI assistant holds into a knowledge graph.
Below are FACTS, each with a number n. The first {new} are new; find how they relate to each other and to the rest.
Add an edge only for a clear relationship, with a short relation such as "uses", "part_of", "contradicts", "same_person_as":
{{"source": n, "target": n, "relation": "..."}}. An empty list is a fine answer.
Answer with one JSON object and nothing else: {{"edges": [...]}}
INPUT:
{data}
"""


def _neighbours(ctx: Context, batch: list[Memory]) -> list[Memory]:
    mine = {m.path for m in batch}
    seen: dict[str, Memory] = {}
    for m in batch:
        for hit in ctx.mem.recall(memory_text(m, 500), k=6, filter={"type": "semantic"}):
            if hit.path not in mine and not is_system(hit.path):
                seen.setdefault(hit.path, hit)
    return sorted(seen.values(), key=lambda m: m.path)[:MAX_NEIGHBOURS]


def run(ctx: Context) -> None:
    done = {sid for s in steps(ctx.mem, kind=NAME) for sid in s.sources}
    todo = [m for m in memories(ctx.mem) if m.type == "semantic" and m.snapshot_id not in done]
    for start in range(0, len(todo), ctx.batch_size):
        batch = todo[start : start + ctx.batch_size]
        sids = [m.snapshot_id for m in batch]
        step_id = f"{NAME}-{digest_of(sids)}"
        facts = batch + _neighbours(ctx, batch)
        edges: list[tuple[str, str, str]] = []
        if len(facts) >= 2:  # one fact alone has nothing to relate to: recorded as examined, no model call
            data = [{"n": i, "path": m.path, "text": memory_text(m)} for i, m in enumerate(facts)]
            prompt = PROMPT.format(new=len(batch), data=json.dumps(data, ensure_ascii=False, indent=1))
            answer = ask(ctx.need_model(NAME), prompt, GraphAnswer, pass_name=NAME, batch=step_id)
            for e in answer.edges:
                if not (0 <= e.source < len(facts) and 0 <= e.target < len(facts)) or e.source == e.target:
                    detail = f"edge {e.source}->{e.target} names no pair of distinct facts (0..{len(facts) - 1})"
                    raise invalid(NAME, step_id, detail, answer)
                edges.append((facts[e.source].path, e.relation, facts[e.target].path))
        writes = _plan(ctx, edges)
        ctx.run_step(Step(step_id, ctx.run, 0, NAME, sids, writes, info={"facts": len(batch), "edges": len(set(edges))}))


def _plan(ctx: Context, edges: list[tuple[str, str, str]]) -> list[Write]:
    """One adjacency write per memory the batch's edges touch (both ends of every edge)."""
    added: dict[str, list[dict[str, Any]]] = {}
    for a, rel, b in edges:
        added.setdefault(a, []).append({"to": b, "relation": rel, "direction": "out"})
        added.setdefault(b, []).append({"to": a, "relation": rel, "direction": "in"})
    writes: list[Write] = []
    for path in sorted(added):
        current = ctx.mem.get(adjacency_path(path))
        edges_now = list(current.payload["edges"]) if current is not None else []
        for edge in added[path]:
            if edge not in edges_now and len(edges_now) < MAX_EDGES:
                edges_now.append(edge)
        edges_now.sort(key=lambda e: (e["to"], e["relation"], e["direction"]))
        value: Value = system_value({"path": path, "edges": edges_now}, "graph")
        w = plan_store(ctx.mem, adjacency_path(path), value)
        if w is not None:
            writes.append(w)
    return writes
