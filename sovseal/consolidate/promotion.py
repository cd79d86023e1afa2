"""Promotion: the chat model reads batches of episodic memories and writes semantic ones, or
reinforces the semantic memories they restate (Sci's ``runPromotionPass``).

An episodic memory is promoted once: the step records list the snapshot ids of their batch, and
later runs skip those. Digests (episodic summaries this package writes) are never promoted.
"""

from __future__ import annotations

import json

from sovseal.storage.entries import validate_path

from ..errors import InvalidInputError
from ..models import Memory
from .context import Context
from .layout import MARK, RESERVED, digest_of, is_system
from .model import PromotionAnswer, ask, invalid
from .records import Step, Value, Write, memories, memory_text, plan_reinforce, plan_store, steps

NAME = "promotion"
#: Known semantic memories shown to the model per batch (the nearest to the batch's episodes).
MAX_KNOWN = 20

PROMPT = """You consolidate the long-term memory of an AI assistant.
EPISODES are things that happened (conversations, events). KNOWN are facts the assistant already holds.
Extract the durable facts the episodes establish (preferences, identities, decisions, how things are done).
- For a new fact, add {{"path": "a.dotted.name", "text": "one self-contained sentence", "sources": [episode n, ...]}} to "memories".
  Reuse a KNOWN path to correct that fact.
- When an episode restates a KNOWN fact unchanged, add {{"candidate": known n, "sources": [episode n, ...]}} to "reinforce".
- Ignore small talk. Empty lists are a fine answer.
Answer with one JSON object and nothing else: {{"memories": [...], "reinforce": [...]}}
INPUT:
{data}
"""


def pending(mem_list: list[Memory], done: set[str]) -> list[Memory]:
    return [
        m
        for m in mem_list
        if m.type == "episodic" and m.metadata.get(MARK) != "digest" and m.snapshot_id not in done
    ]


def known_for(ctx: Context, batch: list[Memory]) -> list[Memory]:
    """The semantic memories nearest to the batch's episodes (recall, so it scales past a prompt)."""
    seen: dict[str, Memory] = {}
    for m in batch:
        for hit in ctx.mem.recall(memory_text(m, 500), k=5, filter={"type": "semantic"}):
            if not is_system(hit.path):
                seen.setdefault(hit.path, hit)
    return sorted(seen.values(), key=lambda m: m.path)[:MAX_KNOWN]


def run(ctx: Context) -> None:
    done = {sid for s in steps(ctx.mem, kind=NAME) for sid in s.sources}
    todo = pending(memories(ctx.mem), done)
    model = ctx.need_model(NAME) if todo else None
    for start in range(0, len(todo), ctx.batch_size):
        batch = todo[start : start + ctx.batch_size]
        sids = [m.snapshot_id for m in batch]
        step_id = f"{NAME}-{digest_of(sids)}"
        known = known_for(ctx, batch)
        data = {
            "episodes": [{"n": i, "when": f"{m.created_at:%Y-%m-%d %H:%M}", "text": memory_text(m)} for i, m in enumerate(batch)],
            "known": [{"n": i, "path": m.path, "text": memory_text(m)} for i, m in enumerate(known)],
        }
        prompt = PROMPT.format(data=json.dumps(data, ensure_ascii=False, indent=1))
        answer = ask(model, prompt, PromotionAnswer, pass_name=NAME, batch=step_id)
        writes = _plan(ctx, answer, batch, known, step_id)
        new = sum(w.op == "store" for w in writes)
        info = {"episodes": len(batch), "new": new, "reinforced": len(writes) - new}
        ctx.run_step(Step(step_id, ctx.run, 0, NAME, sids, writes, info=info))


def _plan(ctx: Context, answer: PromotionAnswer, batch: list[Memory], known: list[Memory], step_id: str) -> list[Write]:
    """Check every index and path the model gave, then plan the writes (all or nothing)."""

    def sources(indices: list[int]) -> list[str]:
        bad = [i for i in indices if not 0 <= i < len(batch)]
        if bad:
            raise invalid(NAME, step_id, f"episode numbers {bad} do not exist (0..{len(batch) - 1})", answer)
        return [batch[i].snapshot_id for i in (indices or range(len(batch)))]

    facts: dict[str, Value] = {}
    for fact in answer.memories:
        try:
            path = validate_path(fact.path)
        except InvalidInputError as exc:
            raise invalid(NAME, step_id, f"bad path {fact.path!r}: {exc}", answer) from None
        if path.startswith(RESERVED):
            raise invalid(NAME, step_id, f"path {path!r} is reserved: {RESERVED} holds sovseal's own records", answer)
        if path in facts:
            raise invalid(NAME, step_id, f"path {path!r} is given twice", answer)
        held = ctx.mem.get(path)
        if held is not None and held.type == "episodic":
            raise invalid(NAME, step_id, f"path {path!r} holds an episodic memory; a fact must not replace an episode", answer)
        metadata = {MARK: NAME, "consolidated_from": sorted(sources(fact.sources))}
        facts[path] = Value(fact.text, metadata, "semantic", "observed")
    again: list[str] = []
    for r in answer.reinforce:
        if not 0 <= r.candidate < len(known):
            raise invalid(NAME, step_id, f"known fact {r.candidate} does not exist (0..{len(known) - 1})", answer)
        sources(r.sources)
        path = known[r.candidate].path
        if path not in facts and path not in again:
            again.append(path)
    writes = [w for path, value in facts.items() if (w := plan_store(ctx.mem, path, value)) is not None]
    writes += [w for path in again if (w := plan_reinforce(ctx.mem, path)) is not None]
    return writes
