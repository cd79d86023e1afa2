"""Differential: under random store / overwrite / delete / fork / checkout / rollback sequences, what
recall can return (k large) is exactly state(HEAD) of a brute-force reference, on every branch."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sovseal import Sovseal
from sovseal.recall import RecallParams
from tests.fakes import fake_embed

PATHS = ["user.editor", "user.shell", "proj.alpha", "proj.beta", "notes"]
VALUES = ["vim", "emacs", "fish", "zsh", {"x": 1}, "the quick brown fox", 42]

op = st.one_of(
    st.tuples(st.just("store"), st.sampled_from(PATHS), st.sampled_from(range(len(VALUES)))),
    st.tuples(st.just("delete"), st.sampled_from(PATHS)),
    st.tuples(st.just("fork")),
    st.tuples(st.just("checkout"), st.integers(0, 5)),
    st.tuples(st.just("rollback"), st.integers(0, 50)),
)

FUSIONS = [RecallParams(), RecallParams(fusion="rrf"), RecallParams(fusion="dense", neighbor_weights=())]


def check(mem: Sovseal, state: dict[str, object], branch: str | None = None) -> None:
    for query in ("editor shell fox", "zzz"):
        found = mem.recall(query, k=1000, branch=branch)
        assert {m.path: m.payload for m in found} == state
        assert len(found) == len(state)  # each path once: never a shadowed version too
    prefix = {p: v for p, v in state.items() if p.startswith("proj.")}
    assert {m.path: m.payload for m in mem.recall("alpha", k=1000, filter={"path_prefix": "proj."}, branch=branch)} == prefix


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(op, min_size=1, max_size=20), fusion=st.sampled_from(range(len(FUSIONS))))
def test_recall_returns_exactly_the_state_at_head(ops: list[tuple], fusion: int) -> None:
    snapshots: dict[str | None, dict[str, object]] = {None: {}}  # the reference: state per snapshot id
    heads: dict[str, str | None] = {"main": None}
    order: list[str] = []  # snapshot ids in creation order, for rollback targets
    branch = "main"
    with tempfile.TemporaryDirectory() as tmp, Sovseal(Path(tmp) / "s", key=os.urandom(32), embedder=fake_embed) as mem:
        mem.recall_params = FUSIONS[fusion]
        for step in ops:
            kind = step[0]
            current = snapshots[heads[branch]]
            if kind == "store":
                value = VALUES[step[2]]
                result = mem.store(step[1], value)
                if result.reinforced:  # the visible value again: HEAD stays, the memory is reinforced
                    assert current.get(step[1]) == value
                    continue
                snapshots.setdefault(result.snapshot_id, {**current, step[1]: value})
                heads[branch] = result.snapshot_id
                order.append(result.snapshot_id)
            elif kind == "delete":
                result = mem.delete(step[1])
                assert (result is None) == (step[1] not in current)
                if result is not None:
                    snapshots[result.snapshot_id] = {p: v for p, v in current.items() if p != step[1]}
                    heads[branch] = result.snapshot_id
                    order.append(result.snapshot_id)
            elif kind == "fork":
                if heads[branch] is None:
                    continue
                head = heads[branch]
                branch = mem.fork(branch=f"b{len(heads)}")
                heads[branch] = head
            elif kind == "checkout":
                branch = sorted(heads)[step[1] % len(heads)]
                mem.checkout(branch)
            elif kind == "rollback":
                if not order:
                    continue
                target = order[step[1] % len(order)]
                mem.rollback(target)
                heads[branch] = target
            assert mem.snapshot() == heads[branch]
            check(mem, snapshots[heads[branch]])  # after every step: the cached views move incrementally
        check(mem, snapshots[heads[branch]])
        assert mem.state() == dict(sorted(snapshots[heads[branch]].items()))
        for other in heads:
            check(mem, snapshots[heads[other]], branch=other)
