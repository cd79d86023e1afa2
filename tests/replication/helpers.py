"""Shared scenario code: a history that exercises every replicable frame, and how to compare stores."""

from __future__ import annotations

import base64
import time
from typing import Any

import httpx

from sovseal import Sovseal
from sovseal.replication.protocol import PROJECT_HEADER, PULL_PATH


def history(mem: Sovseal, tag: str = "") -> None:
    """Stores, an overwrite, a reinforcement, a fork with its own write, a delete and a rollback."""
    a = mem.store(f"user.editor{tag}", "vim").snapshot_id
    mem.store(f"user.editor{tag}", "neovim")
    mem.store(f"user.shell{tag}", {"name": "fish"})
    mem.store(f"user.shell{tag}", {"name": "fish"})  # a reinforcement
    branch = mem.branch
    mem.fork(a, branch=f"experiment{tag}")
    mem.store(f"user.editor{tag}", "helix")
    mem.checkout(branch)
    mem.delete(f"user.shell{tag}")
    mem.rollback(a)
    mem.store(f"user.pager{tag}", "less", metadata={"why": "habit"}, type="procedural")


def snapshot_of(mem: Sovseal) -> dict[str, Any]:
    """Everything a user can read, per branch: state, the full log and reinforcement metadata."""
    out: dict[str, Any] = {}
    current = mem.branch
    for branch in mem.branches():
        mem.checkout(branch)
        memories = {p: mem.get(p) for p in mem.state()}
        out[branch] = (
            mem.snapshot(),
            mem.state(),
            mem.log(),
            {p: (m.reinforce_count, m.last_reinforced, m.metadata, m.type, m.created_at) for p, m in memories.items() if m},
        )
    mem.checkout(current)
    return out


def server_items(endpoint: str, api_key: str, project: str) -> list[dict[str, Any]]:
    """Every item the server accepted for a project, in pull order, through the real pull endpoint."""
    items: list[dict[str, Any]] = []
    cursor = 0
    headers = {"Authorization": f"Bearer {api_key}", PROJECT_HEADER: project}
    with httpx.Client(base_url=endpoint, headers=headers, timeout=10) as client:
        while True:
            page = client.get(PULL_PATH, params={"cursor": cursor, "limit": 1000}).raise_for_status().json()
            items += page["records"]
            cursor = page["cursor"]
            if not page["more"]:
                return items


def raw_item(kind: str, item_id: str, parent: str, branch: str, path_hash: str, sealed: bytes, reason: str) -> dict[str, Any]:
    """An item as a format-2 client pushes it (no format-3 fields): for tests that talk to the server
    directly, with ids and bodies of their own making."""
    return {
        "kind": kind,
        "id": item_id,
        "parent": parent,
        "branch": branch,
        "path_hash": path_hash,
        "sealed": base64.b64encode(sealed).decode(),
        "created_at": time.time(),
        "reason": reason,
    }
