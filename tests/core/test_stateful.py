"""Hypothesis stateful test: the engine against a reference model of branches and state.

The model is a plain DAG of (entry, parent) tuples with a HEAD per branch; it mirrors the
documented rules (reinforcement appends nothing, a re-derived existing id moves HEAD, deleting
an invisible path is a no-op) and computes snapshot ids with sha256 over the canonical entry.
After every step, state, log, ids and branches must agree, across closes and reopens.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from sovseal import Sovseal
from sovseal.canonical import canonicalize
from tests.fakes import fake_embed

PATHS = st.sampled_from(["user.editor", "user.shell", "project.plan", "chat.1"])
PAYLOADS = st.one_of(
    st.sampled_from(["vim", "neovim", "zsh", 3, 2.5, None]),
    st.fixed_dictionaries({"v": st.integers(-3, 3)}),
)


def sid(entry: dict[str, object], parent: str) -> str:
    return "snap_" + hashlib.sha256(canonicalize(entry) + parent.encode()).hexdigest()


class Model:
    def __init__(self) -> None:
        self.snaps: dict[str, tuple[dict[str, object], str]] = {}  # id -> (entry, parent id or "")
        self.heads: dict[str, str] = {"main": ""}

    def chain(self, head: str) -> list[str]:
        out = []
        while head:
            out.append(head)
            head = self.snaps[head][1]
        return out

    def state(self, branch: str) -> dict[str, object]:
        seen: dict[str, object] = {}
        for s in self.chain(self.heads[branch]):
            entry = self.snaps[s][0]
            if entry["path"] not in seen:
                seen[entry["path"]] = entry
        return {p: e["payload"] for p, e in seen.items() if e["op"] == "store"}

    def visible_entry(self, branch: str, path: str) -> dict[str, object] | None:
        for s in self.chain(self.heads[branch]):
            if self.snaps[s][0]["path"] == path:
                entry = self.snaps[s][0]
                return entry if entry["op"] == "store" else None
        return None

    def write(self, branch: str, op: str, path: str, payload: object) -> None:
        entry = {"op": op, "path": path, "payload": payload, "metadata": {}, "type": "semantic", "provenance": "explicit"}
        visible = self.visible_entry(branch, path)
        if op == "delete" and visible is None:
            return
        if op == "store" and visible == entry:
            return  # reinforcement
        parent = self.heads[branch]
        new = sid(entry, parent)
        self.snaps.setdefault(new, (entry, parent))
        self.heads[branch] = new


class LineageMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="sovseal-stateful-"))
        self.key = os.urandom(32)
        self.model = Model()
        self.branch = "main"
        self.mem = Sovseal(self.dir, key=self.key, embedder=fake_embed)
        self.forks = 0

    def teardown(self) -> None:
        self.mem.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @rule(path=PATHS, payload=PAYLOADS)
    def store(self, path: str, payload: object) -> None:
        self.mem.store(path, payload)
        self.model.write(self.branch, "store", path, payload)

    @rule(path=PATHS)
    def delete(self, path: str) -> None:
        self.mem.delete(path)
        self.model.write(self.branch, "delete", path, None)

    @precondition(lambda self: self.model.snaps)
    @rule(data=st.data())
    def rollback(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(sorted(self.model.snaps)))
        self.mem.rollback(target)
        self.model.heads[self.branch] = target

    @precondition(lambda self: self.model.snaps)
    @rule(data=st.data())
    def fork(self, data: st.DataObject) -> None:
        target = data.draw(st.sampled_from(sorted(self.model.snaps)))
        self.forks += 1
        name = f"b{self.forks}"
        assert self.mem.fork(target, branch=name) == name
        self.model.heads[name] = target
        self.branch = name

    @rule(data=st.data())
    def checkout(self, data: st.DataObject) -> None:
        self.branch = data.draw(st.sampled_from(sorted(self.model.heads)))
        self.mem.checkout(self.branch)

    @rule()
    def reopen(self) -> None:
        self.mem.close()
        self.mem = Sovseal(self.dir, key=self.key, embedder=fake_embed, branch=self.branch)

    @invariant()
    def agrees(self) -> None:
        assert self.mem.state() == self.model.state(self.branch)
        assert self.mem.snapshot() == (self.model.heads[self.branch] or None)
        assert [e.snapshot_id for e in self.mem.log()] == self.model.chain(self.model.heads[self.branch])
        assert sorted(self.mem.branches()) == sorted(self.model.heads)

    @invariant()
    def records_match(self) -> None:
        assert self.mem.status().records == len(self.model.snaps)


LineageMachine.TestCase.settings = settings(
    max_examples=30, stateful_step_count=25, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
TestLineage = LineageMachine.TestCase
