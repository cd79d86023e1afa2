"""Consolidation end to end on real stores: the passes, lineage, sealing, idempotence, rollback, recall's edges."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from langchain_core.language_models import FakeListChatModel, GenericFakeChatModel
from langchain_core.messages import AIMessage

from sovseal import Sovseal
from sovseal.consolidate import (
    ConsolidationError,
    ModelOutputError,
    UnknownRunError,
    consolidate,
    get_run,
    related,
    retention,
    rollback_run,
    runs,
)
from sovseal.consolidate.layout import PREFIX, RUNS, STEPS
from tests.consolidate.conftest import fill
from tests.consolidate.models import RuleChatModel
from tests.fakes import fake_embed


def user_state(mem: Sovseal) -> dict[str, object]:
    return {p: v for p, v in mem.state().items() if not p.startswith(PREFIX)}


def test_a_run_promotes_links_digests_scores_and_audits(filled: Sovseal) -> None:
    head_before = filled.snapshot()
    before = len(filled.log())
    report = consolidate(filled, RuleChatModel(), batch_size=2)

    # promotion: new semantic facts, observed, pointing at their episodes; the restated fact reinforced
    editor = filled.get("user.editor")
    assert editor is not None and editor.payload == "The user edits code in neovim"
    assert (editor.type, editor.provenance) == ("semantic", "observed")
    chat1 = filled.get("chat.1")
    assert editor.metadata["consolidated_from"] == [chat1.snapshot_id]
    pet = filled.get("user.pet")
    assert pet.reinforce_count == 2 and pet.provenance == "explicit"  # reinforced by chat.4 and chat.6, not rewritten
    assert report.counts["promotion"] == {"steps": 3, "episodes": 6, "new": 5, "reinforced": 2}

    # digest: one episodic memory for the day
    day = datetime.now(UTC).date().isoformat()
    digest = filled.get(f"digest.{day}")
    assert digest.type == "episodic" and digest.payload.startswith("Digest: We set up the laptop")

    # decay: every memory has a score
    assert all(0 < retention(filled, p) <= 1 for p in user_state(filled))

    # lineage: every write is an ordinary snapshot after the old HEAD, and the audit record says so
    log = filled.log()
    assert log[len(log) - before].snapshot_id == head_before
    new_paths = {e.path for e in log[: len(log) - before]}
    assert {"user.editor", "user.testing", "project.ci", f"digest.{day}"} <= new_paths
    audit = get_run(filled, report.run)
    assert audit.status == "done" and audit.head_before == head_before
    # The audit record closes the run.
    assert log[0].path == RUNS + report.run and log[1].snapshot_id == audit.head_after == report.head_after
    assert audit.counts == report.counts and [r.run for r in runs(filled)] == [report.run]
    assert filled.verify().ok


def test_recall_follows_the_graphs_edges(filled: Sovseal) -> None:
    consolidate(filled, RuleChatModel(), batch_size=8)
    hit = filled.recall("which editor does the user use", k=3, filter={"type": "semantic", "path": "user.editor"})[0]
    linked = {(r.memory.path, r.relation, r.direction) for r in filled.related(hit.path)}
    assert ("user.testing", "same_subject", "out") in linked
    assert {p for p, _, _ in linked} == {"user.testing", "user.shell", "user.pet"}
    back = {(r.memory.path, r.direction) for r in related(filled, "user.testing")}
    assert ("user.editor", "in") in back  # the same edge, followed from its other end
    assert all(r.memory.path.startswith("project.") for r in filled.related("project.ci"))
    assert filled.related("project.ci", relation="contradicts") == []
    assert filled.related("chat.3") == []
    # consolidation's own records are never ranked by recall
    assert not any(m.path.startswith(PREFIX) for m in filled.recall("same_subject edges retention scores", k=50))


def test_a_second_run_changes_nothing(filled: Sovseal) -> None:
    first = consolidate(filled, RuleChatModel(), batch_size=3)
    state, log = filled.state(), [e.snapshot_id for e in filled.log()]
    counts = {p: filled.get(p).reinforce_count for p in state}
    model = RuleChatModel()
    again = consolidate(filled, model, batch_size=3)
    assert again.run is None and again.steps == again.writes == 0 and first.run is not None
    assert model.calls == 0  # every input is known to be consolidated: the model is not even asked
    assert filled.state() == state and [e.snapshot_id for e in filled.log()] == log
    assert {p: filled.get(p).reinforce_count for p in state} == counts


def test_new_episodes_are_consolidated_by_the_next_run(filled: Sovseal) -> None:
    consolidate(filled, RuleChatModel())
    filled.store("chat.7", "Editor change! fact:user.editor=The user moved to Helix;", type="episodic")
    report = consolidate(filled, RuleChatModel())
    assert report.counts["promotion"]["episodes"] == 1
    assert filled.get("user.editor").payload == "The user moved to Helix"
    assert "The user moved to Helix" in filled.get(f"digest.{datetime.now(UTC).date()}").payload


def test_decay_orders_by_age_type_and_reinforcement(mem: Sovseal) -> None:
    from sovseal.consolidate.decay import score

    assert score("episodic", 0, 1) > score("episodic", 0, 10) > score("episodic", 0, 100)
    assert score("procedural", 0, 30) > score("semantic", 0, 30) > score("episodic", 0, 30)
    assert score("episodic", 3, 30) > score("episodic", 1, 30) > score("episodic", 0, 30)
    assert score("semantic", 0, 90) == pytest.approx(0.5)  # unreinforced: recall's half-life exactly

    mem.store("a.episode", "an episode", type="episodic")
    mem.store("a.fact", "a fact", type="semantic")
    mem.store("a.habit", "a habit", type="procedural")
    mem.store("a.restated", "a restated fact", type="semantic")
    mem.store("a.restated", "a restated fact", type="semantic")  # reinforced once
    later = datetime.now(UTC).date() + timedelta(days=60)
    report = consolidate(mem, as_of=later)  # no model: decay runs, the others are skipped and say why
    assert report.passes == ["decay"] and set(report.skipped) == {"promotion", "graph", "digest"}
    r = {p: retention(mem, p) for p in ("a.episode", "a.fact", "a.habit", "a.restated")}
    assert r["a.habit"] > r["a.restated"] > r["a.fact"] > r["a.episode"]
    assert report.counts["decay"]["fading"] == ["a.episode"]  # 60 days at a 14-day half-life
    assert consolidate(mem, as_of=later).run is None  # same day, same scores: nothing written
    assert consolidate(mem, as_of=later + timedelta(days=1)).run is not None  # a day on, every score moved


def test_model_passes_without_a_model_say_what_to_pass(filled: Sovseal) -> None:
    with pytest.raises(ConsolidationError, match="need a chat model"):
        consolidate(filled, passes=["promotion"])
    with pytest.raises(ValueError, match="passes are"):
        consolidate(filled, RuleChatModel(), passes=["promote"])
    with pytest.raises(ValueError, match="chat model"):
        consolidate(filled, model=42)


def test_any_langchain_chat_model_or_plain_callable_works(filled: Sovseal) -> None:
    """The core imports no LangChain: FakeListChatModel and GenericFakeChatModel are real LangChain
    chat model classes, answering in a fixed order (one promotion batch, then the digest)."""
    promotion = (
        '```json\n{"memories": [{"path": "user.editor", "text": "The user edits code in neovim", "sources": [0]}], '
        '"reinforce": [{"candidate": 0}]}\n```'
    )
    digest = 'Here you go: {"summary": "A day of setup."}'
    consolidate(filled, FakeListChatModel(responses=[promotion, digest]), passes="promotion,digest", batch_size=8)
    assert filled.get("user.editor").payload == "The user edits code in neovim"
    assert filled.get("user.pet").reinforce_count == 1
    filled.store("chat.7", "One more thing.", type="episodic")
    generic = GenericFakeChatModel(
        messages=iter(
            [
                AIMessage(content='{"memories": [], "reinforce": []}'),
                AIMessage(content=[{"type": "text", "text": '{"summary": "Setup, then one more thing."}'}]),
            ]
        )
    )
    consolidate(filled, generic, passes="promotion,digest")
    assert filled.get(f"digest.{datetime.now(UTC).date()}").payload == "Setup, then one more thing."
    filled.store("chat.8", "Last one.", type="episodic")
    consolidate(filled, lambda prompt: '{"summary": "From a plain function."}', passes=["digest"])
    assert filled.get(f"digest.{datetime.now(UTC).date()}").payload == "From a plain function."


@pytest.mark.parametrize(
    "answer, match",
    [
        ("The user clearly likes neovim.", "not the JSON asked for"),
        ('{"memories": [{"path": "user.editor"}]}', "not the JSON asked for"),
        ('{"memories": [{"path": "user.editor", "text": "neovim", "sources": [42]}]}', "episode numbers \\[42\\] do not exist"),
        ('{"memories": [], "reinforce": [{"candidate": 7}]}', "known fact 7 does not exist"),
        ('{"memories": [{"path": "_sovseal/consolidation/runs/x", "text": "sneaky"}]}', "reserved"),
        ('{"memories": [{"path": "_sovseal/elsewhere", "text": "sneaky"}]}', "reserved"),
        ('{"memories": [{"path": "a.b", "text": "one"}, {"path": "a.b", "text": "two"}]}', "given twice"),
        ('{"memories": [{"path": "chat.3", "text": "The weather was nice"}]}', "must not replace an episode"),
    ],
)
def test_malformed_model_output_raises_and_writes_nothing(filled: Sovseal, answer: str, match: str) -> None:
    log, records = [e.snapshot_id for e in filled.log()], filled.status().records
    with pytest.raises(ModelOutputError, match=match) as caught:
        consolidate(filled, FakeListChatModel(responses=[answer]), passes=["promotion"])
    assert caught.value.pass_name == "promotion" and caught.value.batch.startswith("promotion-")
    assert [e.snapshot_id for e in filled.log()] == log and filled.status().records == records
    assert runs(filled) == []


def test_a_failed_batch_keeps_the_finished_ones_and_the_next_run_resumes(filled: Sovseal, tmp_path: Path, key: bytes) -> None:
    with pytest.raises(RuntimeError, match="injected"):
        consolidate(filled, RuleChatModel(fail_on=2), batch_size=2)  # batch 1 done, batch 2's model call fails
    (crashed,) = runs(filled)
    assert crashed.status == "running"
    assert filled.get("user.editor") is not None and filled.get("user.shell") is None
    model = RuleChatModel()
    report = consolidate(filled, model, batch_size=2)
    assert report.resumed and report.run == crashed.run and get_run(filled, crashed.run).status == "done"
    assert report.counts["promotion"]["steps"] == 3  # the finished batch counted once, not redone

    with Sovseal(tmp_path / "clean", key=key, embedder=fake_embed) as clean:  # the same inputs, run without a failure
        fill(clean)
        consolidate(clean, RuleChatModel(), batch_size=2)
        assert user_state(filled) == user_state(clean)
        assert {p: filled.get(p).reinforce_count for p in user_state(filled)} == {
            p: clean.get(p).reinforce_count for p in user_state(clean)
        }


def test_rollback_undoes_a_run_by_appending_and_keeps_later_writes(filled: Sovseal) -> None:
    filled.store("user.testing", "The user tests with unittest", type="semantic")  # the run will overwrite this
    original = user_state(filled)
    report = consolidate(filled, RuleChatModel(), batch_size=8)
    assert filled.get("user.testing").payload == "The user tests with pytest"
    filled.store("user.shell", "The user switched to fish", type="semantic")  # written after the run: not ours to undo
    run_log = [e.snapshot_id for e in filled.log()]

    undone = rollback_run(filled, report.run)
    assert undone.conflicts == ["user.shell"] and undone.reinforcements == 1  # user.pet, restated twice in one batch
    expected = {**original, "user.shell": "The user switched to fish"}
    assert user_state(filled) == expected  # new facts gone, the overwritten one back, the later write kept
    assert filled.related("user.editor") == [] and retention(filled, "chat.1") is None
    assert not any(p.startswith(STEPS) for p in filled.state())
    log = [e.snapshot_id for e in filled.log()]
    assert log[len(log) - len(run_log) :] == run_log  # appended: the run's snapshots are all still there
    assert get_run(filled, report.run).status == "rolled_back"
    assert rollback_run(filled, report.run).already
    with pytest.raises(UnknownRunError):
        rollback_run(filled, "run-nope")

    # the inputs are unconsolidated again: the next run redoes the work
    again = consolidate(filled, RuleChatModel(), batch_size=8)
    assert again.run != report.run and filled.get("user.editor") is not None


def test_nothing_consolidation_writes_is_on_disk_in_the_clear(filled: Sovseal, store_dir: Path) -> None:
    consolidate(filled, RuleChatModel(), batch_size=4)
    words = [b"neovim", b"Biscuit", b"same_subject", b"digest.", b"_sovseal", b"consolidat", b"user.editor", b"promotion", b"retention"]
    for f in (p for p in store_dir.rglob("*") if p.is_file()):
        data = f.read_bytes()
        assert not [w for w in words if w in data], f"plaintext in {f}"


@pytest.mark.parametrize(
    "mode, n",
    [
        # Inside batch 2: its plan, user.shell and the user.pet reinforcement are durable, its "done" is not.
        # (Between batches is the in-process injected failure above; ("model", 2) kills there, in a child too.)
        ("op", 9),
    ],
)
def test_a_killed_run_resumes_to_the_same_result(tmp_path: Path, key: bytes, mode: str, n: int) -> None:
    store = tmp_path / "killed"
    with Sovseal(store, key=key, embedder=fake_embed) as mem:
        fill(mem)
    child = subprocess.run(
        [sys.executable, "-m", "tests.consolidate.crash_run", str(store), key.hex(), mode, str(n)],
        cwd=Path(__file__).parents[2],
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])},
        capture_output=True,
        text=True,
        check=False,
    )
    assert child.returncode == -signal.SIGKILL, child.stderr
    with Sovseal(store, key=key, embedder=fake_embed) as mem:
        assert mem.verify().ok
        (crashed,) = runs(mem)
        assert crashed.status == "running"
        report = consolidate(mem, RuleChatModel(), batch_size=2)
        assert report.resumed and report.run == crashed.run
        with Sovseal(tmp_path / "clean", key=key, embedder=fake_embed) as clean:
            fill(clean)
            consolidate(clean, RuleChatModel(), batch_size=2)
            assert user_state(mem) == user_state(clean)
            paths = sorted(user_state(clean))
            assert [mem.get(p).reinforce_count for p in paths] == [clean.get(p).reinforce_count for p in paths]
        assert mem.get("user.pet").reinforce_count == 2  # a reinforcement made before the kill is not made again
        assert consolidate(mem, RuleChatModel(), batch_size=2).run is None


def test_sdk_reinforce_counts_without_a_snapshot(mem: Sovseal) -> None:
    stored = mem.store("doc.1", {"title": "x"}, text="a custom recall text")
    log = [e.snapshot_id for e in mem.log()]
    again = mem.reinforce("doc.1")  # the exact entry, custom text included: no new snapshot
    assert again.reinforced and again.snapshot_id == stored.snapshot_id
    assert mem.get("doc.1").reinforce_count == 1 and [e.snapshot_id for e in mem.log()] == log
    assert mem.reinforce("doc.nothing") is None


def test_graph_answers_naming_no_fact_write_nothing(filled: Sovseal) -> None:
    consolidate(filled, RuleChatModel(), passes="promotion")
    log = [e.snapshot_id for e in filled.log()]
    for answer in (
        '{"edges": [{"source": 0, "target": 99, "relation": "uses"}]}',
        '{"edges": [{"source": 1, "target": 1, "relation": "is"}]}',
    ):
        with pytest.raises(ModelOutputError, match="names no pair of distinct facts") as caught:
            consolidate(filled, FakeListChatModel(responses=[answer]), passes="graph")
        assert caught.value.pass_name == "graph"
    assert [e.snapshot_id for e in filled.log()] == log


def test_async_handle_reinforces_and_follows_edges(store_dir: Path, key: bytes) -> None:
    import asyncio

    from sovseal import AsyncSovseal

    async def main() -> None:
        async with AsyncSovseal(store_dir, key=key, embedder=fake_embed) as mem:
            await mem.store("user.pet", "The user has a dog named Biscuit")
            assert (await mem.reinforce("user.pet")).reinforced
            assert await mem.related("user.pet") == []

    asyncio.run(main())


def test_one_consolidation_at_a_time(filled: Sovseal, store_dir: Path) -> None:
    import fcntl

    from sovseal.consolidate.run import LOCK_FILE

    report = consolidate(filled, RuleChatModel())
    fd = os.open(store_dir / LOCK_FILE, os.O_RDWR)  # another process's run, as far as flock can tell
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ConsolidationError, match="another consolidation is running"):
            consolidate(filled, RuleChatModel())
        with pytest.raises(ConsolidationError, match="another consolidation is running"):
            rollback_run(filled, report.run)
    finally:
        os.close(fd)
    assert rollback_run(filled, report.run).restored  # free again
    assert (store_dir / LOCK_FILE).stat().st_size == 0
