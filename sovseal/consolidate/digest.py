"""Digest: the chat model summarises the day's episodic memories into one episodic memory,
``digest.<YYYY-MM-DD>`` (Sci's ``runDigestPass``).

The digest records a hash of the snapshot ids it summarised; a run finds the same hash and does
nothing, and a run after more of that day's episodes arrived rewrites the digest (the old one
stays in the lineage).
"""

from __future__ import annotations

import json

from .context import Context
from .layout import MARK, digest_of
from .model import DigestAnswer, ask
from .records import Step, Value, memories, memory_text, plan_store

NAME = "digest"
MAX_EPISODES = 200

PROMPT = """Summarise the day {day} of an AI assistant's work with its user from the EPISODES below:
what happened, what was decided, what is still open. A few sentences; plain text.
Answer with one JSON object and nothing else: {{"summary": "..."}}
INPUT:
{data}
"""


def path_for(day: str) -> str:
    return f"digest.{day}"


def run(ctx: Context) -> None:
    day = ctx.as_of.isoformat()
    episodes = [
        m
        for m in memories(ctx.mem)
        if m.type == "episodic" and m.metadata.get(MARK) != NAME and m.created_at.date() == ctx.as_of
    ][-MAX_EPISODES:]
    if not episodes:
        return
    sids = [m.snapshot_id for m in episodes]
    sources_hash = digest_of(sids)
    current = ctx.mem.get(path_for(day))
    if current is not None and current.metadata.get("sources_hash") == sources_hash:
        return
    step_id = f"{NAME}-{day}-{sources_hash}"
    data = [{"when": f"{m.created_at:%H:%M}", "text": memory_text(m, 500)} for m in episodes]
    prompt = PROMPT.format(day=day, data=json.dumps(data, ensure_ascii=False, indent=1))
    answer = ask(ctx.need_model(NAME), prompt, DigestAnswer, pass_name=NAME, batch=step_id)
    value = Value(answer.summary, {MARK: NAME, "day": day, "sources_hash": sources_hash, "episodes": len(episodes)}, "episodic", "observed")
    write = plan_store(ctx.mem, path_for(day), value)
    ctx.run_step(Step(step_id, ctx.run, 0, NAME, sids, [] if write is None else [write], info={"episodes": len(episodes)}))
