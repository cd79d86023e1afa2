"""Ranking: decay and reinforcement move memories in the documented direction; lineage context; params; bad input."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from sovseal import Sovseal
from sovseal.errors import InvalidInputError, UnknownBranchError
from sovseal.recall import RecallParams, decay, reinforcement
from tests.fakes import fake_embed

DAY = 86400.0
#: Keyword-only, no neighbour context: equal texts score equally, so only decay and reinforcement differ.
KEYWORD = RecallParams(fusion="keyword", neighbor_weights=())


@pytest.fixture
def mem(store_dir: Path, key: bytes, monkeypatch: pytest.MonkeyPatch) -> Iterator[Sovseal]:
    """A store created a year ago: a store's clock never runs backwards (docs/design.md, ``hlc``),
    so the tests below can date memories anywhere in the past year, oldest first."""
    a_year_ago = time.time() - 365 * DAY
    with monkeypatch.context() as m:
        m.setattr("sovseal.storage.store.time.time", lambda: a_year_ago)
        opened = Sovseal(store_dir, key=key, embedder=fake_embed)
    with opened:
        yield opened


def store_at(mem: Sovseal, monkeypatch: pytest.MonkeyPatch, when: float, *args: object, **kwargs: object) -> None:
    with monkeypatch.context() as m:
        m.setattr("sovseal.storage.store.time.time", lambda: when)
        mem.store(*args, **kwargs)  # type: ignore[arg-type]


def order(mem: Sovseal, query: str, **kwargs: object) -> list[str]:
    return [m.path for m in mem.recall(query, k=10, **kwargs)]  # type: ignore[arg-type]


def test_decay_function_is_documented_shape() -> None:
    p = RecallParams()
    assert decay(p, "episodic", 0) == pytest.approx(1.0)
    assert decay(p, "episodic", 14) == pytest.approx(p.decay_floor + (1 - p.decay_floor) / 2)
    assert decay(p, "semantic", 90) == pytest.approx(decay(p, "episodic", 14))
    assert decay(p, "procedural", 180) == pytest.approx(decay(p, "episodic", 14))
    assert decay(p, "episodic", 10_000) == pytest.approx(p.decay_floor, abs=1e-6)
    assert decay(p, "semantic", -5) == pytest.approx(1.0)  # a clock behind the record counts as fresh
    assert reinforcement(p, 0) == 1.0 < reinforcement(p, 1) < reinforcement(p, 5) <= p.reinforcement_cap
    assert reinforcement(p, 10**9) == p.reinforcement_cap


def test_newer_memories_outrank_older_equal_ones(mem: Sovseal, monkeypatch: pytest.MonkeyPatch) -> None:
    mem.recall_params = KEYWORD
    now = time.time()
    store_at(mem, monkeypatch, now - 30 * DAY, "notes.alpha", "the quarterly report deadline", type="episodic")
    store_at(mem, monkeypatch, now - 1 * DAY, "notes.bravo", "the quarterly report deadline", type="episodic")
    found = mem.recall("quarterly report", k=2)
    assert [m.path for m in found] == ["notes.bravo", "notes.alpha"]
    assert found[0].score is not None and found[1].score is not None and found[0].score > found[1].score
    mem.recall_params = RecallParams(fusion="keyword", neighbor_weights=(), decay_floor=1.0)  # decay off: a tie
    tie = mem.recall("quarterly report", k=2)
    assert tie[0].score == pytest.approx(tie[1].score)


def test_episodic_memories_fade_faster_than_semantic_and_procedural(mem: Sovseal, monkeypatch: pytest.MonkeyPatch) -> None:
    mem.recall_params = KEYWORD
    old = time.time() - 60 * DAY
    store_at(mem, monkeypatch, old, "notes.alpha", "deploy with the blue pipeline", type="episodic")
    store_at(mem, monkeypatch, old, "notes.bravo", "deploy with the blue pipeline", type="semantic")
    store_at(mem, monkeypatch, old, "notes.delta", "deploy with the blue pipeline", type="procedural")
    assert order(mem, "blue pipeline deploy") == ["notes.delta", "notes.bravo", "notes.alpha"]


def test_the_clock_moving_on_changes_the_order(mem: Sovseal, monkeypatch: pytest.MonkeyPatch) -> None:
    """A fresh episodic memory beats an equal semantic one; months later the semantic one wins."""
    mem.recall_params = KEYWORD
    now = time.time()
    store_at(mem, monkeypatch, now - 20 * DAY, "notes.alpha", "the cat is called Miso", type="semantic")
    store_at(mem, monkeypatch, now, "notes.bravo", "the cat is called Miso", type="episodic")
    assert order(mem, "cat Miso") == ["notes.bravo", "notes.alpha"]
    mem._recall_engine().now = lambda: now + 120 * DAY
    assert order(mem, "cat Miso") == ["notes.alpha", "notes.bravo"]


def test_reinforced_memories_outrank_one_off_ones(mem: Sovseal, monkeypatch: pytest.MonkeyPatch) -> None:
    mem.recall_params = KEYWORD
    now = time.time()
    store_at(mem, monkeypatch, now - 1, "notes.alpha", "prefers dark mode", type="semantic")
    store_at(mem, monkeypatch, now - 1, "notes.bravo", "prefers dark mode", type="semantic")
    assert order(mem, "dark mode")[0] == "notes.bravo"  # equal: the newer node first
    for _ in range(3):
        assert mem.store("notes.alpha", "prefers dark mode").reinforced
    found = mem.recall("dark mode", k=2)
    assert [m.path for m in found] == ["notes.alpha", "notes.bravo"]
    assert found[0].reinforce_count == 3 and found[0].score > found[1].score  # type: ignore[operator]


def test_reinforcement_refreshes_decay(mem: Sovseal, monkeypatch: pytest.MonkeyPatch) -> None:
    """Age counts from the last reinforcement: restating an old fact makes it fresh again."""
    mem.recall_params = RecallParams(fusion="keyword", neighbor_weights=(), reinforcement_weight=0.0)
    now = time.time()
    store_at(mem, monkeypatch, now - 40 * DAY, "notes.alpha", "standup is at nine", type="episodic")
    store_at(mem, monkeypatch, now - 10 * DAY, "notes.bravo", "standup is at nine", type="episodic")
    assert order(mem, "standup nine") == ["notes.bravo", "notes.alpha"]
    store_at(mem, monkeypatch, now, "notes.alpha", "standup is at nine", type="episodic")
    assert order(mem, "standup nine") == ["notes.alpha", "notes.bravo"]


def test_neighbours_in_the_lineage_give_context(mem: Sovseal) -> None:
    """A turn with none of the query's words is found through the turn stored next to it."""
    mem.store("chat.1", "Did you ever finish that painting of the lake at sunrise?")
    mem.store("chat.2", "Yes! It took me three weekends, I used oils this time.")
    for i in range(20):
        mem.store(f"other.{i}", f"unrelated chatter number {i} about groceries and errands")
    mem.store("chat.3", "It took me three weekends to clean the garage.")
    mem.recall_params = RecallParams(dense_weight=0.0, neighbor_weights=(0.3,), context_coherence=0.0)
    assert order(mem, "painting lake sunrise")[:2] == ["chat.1", "chat.2"]
    mem.recall_params = RecallParams(dense_weight=0.0, neighbor_weights=())
    assert "chat.2" not in order(mem, "painting lake sunrise")[:2]


def test_context_is_the_best_neighbour_not_the_sum_of_them(mem: Sovseal) -> None:
    """One neighbour that matches well is better context than several that match a little."""
    mem.store("a.1", "filler about the weather today")
    mem.store("a.2", "the painting of the lake at sunrise")
    mem.store("a.3", "alpha reply with no shared words")
    mem.store("a.4", "filler about the traffic today")
    mem.store("a.5", "filler about the dinner today")
    mem.store("b.1", "a lake at sunrise seen from the wall")
    mem.store("b.2", "a lake at sunrise seen from the door")
    mem.store("b.3", "bravo reply with no shared words")
    mem.store("b.4", "a lake at sunrise seen from the desk")
    mem.store("b.5", "a lake at sunrise seen from the shelf")
    mem.recall_params = RecallParams(dense_weight=0.0, keyword_weight=1.0, neighbor_weights=(0.5, 0.5), context_coherence=0.0)
    found = order(mem, "painting lake sunrise")
    assert found.index("a.3") < found.index("b.3")  # a sum over b.3's four "lake sunrise" neighbours would win


def test_scores_are_descending_and_results_carry_their_fields(mem: Sovseal) -> None:
    mem.store("user.diet", {"likes": ["tea"]}, metadata={"source": "chat"}, type="episodic", provenance="observed")
    mem.store("user.editor", "neovim")
    found = mem.recall("what does the user like to drink, tea?", k=5)
    scores = [m.score for m in found]
    assert scores == sorted(scores, reverse=True) and all(s is not None and s >= 0 for s in scores)
    diet = next(m for m in found if m.path == "user.diet")
    assert diet.payload == {"likes": ["tea"]} and diet.metadata == {"source": "chat"}
    assert (diet.type, diet.provenance, diet.reinforce_count) == ("episodic", "observed", 0)
    assert diet.snapshot_id.startswith("snap_") and diet.created_at is not None


def test_recall_on_another_branch_without_switching(mem: Sovseal) -> None:
    mem.store("user.editor", "vim")
    base = mem.snapshot()
    mem.fork(branch="exp")
    mem.store("user.editor", "emacs")
    mem.store("user.shell", "fish")
    mem.checkout("main")
    assert {(m.path, m.payload) for m in mem.recall("editor", k=10, branch="exp")} == {("user.editor", "emacs"), ("user.shell", "fish")}
    assert {(m.path, m.payload) for m in mem.recall("editor", k=10)} == {("user.editor", "vim")}
    assert mem.branch == "main" and base == mem.snapshot()
    with pytest.raises(UnknownBranchError):
        mem.recall("editor", branch="nope")
    with pytest.raises(InvalidInputError, match="branch"):
        mem.recall("editor", branch="")


def test_empty_query_returns_nothing_after_checking_the_arguments(mem: Sovseal) -> None:
    mem.store("a", "alpha")
    assert mem.recall("") == [] and mem.recall("   \n") == []
    with pytest.raises(InvalidInputError, match="k must be"):
        mem.recall("", k=0)
    with pytest.raises(InvalidInputError, match="query must be a string"):
        mem.recall(None)  # type: ignore[arg-type]
    with pytest.raises(UnknownBranchError):
        mem.recall("", branch="nope")


@pytest.mark.parametrize("k", [0, -1, 1001, 10**9, 2.5, True, "5", None])
def test_bad_k(mem: Sovseal, k: object) -> None:
    with pytest.raises(InvalidInputError, match="k must be"):
        mem.recall("query", k=k)  # type: ignore[arg-type]


def test_k_larger_than_the_store_returns_everything_visible(mem: Sovseal) -> None:
    for i in range(7):
        mem.store(f"p.{i}", f"value {i}")
    mem.delete("p.3")
    assert {m.path for m in mem.recall("value", k=1000)} == {f"p.{i}" for i in range(7) if i != 3}


@pytest.mark.parametrize(
    "kwargs",
    [
        {"fusion": "magic"},
        {"dense_weight": -1},
        {"bm25_b": 2},
        {"neighbor_weights": (0.1, float("nan"))},
        {"half_life_days": {"episodic": 1}},
        {"half_life_days": {"episodic": 0, "semantic": 1, "procedural": 1}},
        {"rrf_k": 0},
        {"reinforcement_cap": 0.5},
    ],
)
def test_bad_params(kwargs: dict[str, object]) -> None:
    with pytest.raises(InvalidInputError):
        RecallParams(**kwargs)  # type: ignore[arg-type]


def test_recall_params_must_be_recall_params(mem: Sovseal) -> None:
    with pytest.raises(InvalidInputError, match="RecallParams"):
        mem.recall_params = {"fusion": "rrf"}  # type: ignore[assignment]


def test_the_query_embedding_is_cached(mem: Sovseal) -> None:
    calls: list[list[str]] = []
    inner = mem._shared.embedder
    assert inner is not None

    def counting(texts):  # type: ignore[no-untyped-def]
        calls.append(list(texts))
        return inner(texts)

    mem._shared.embedder = counting
    mem.store("a", "alpha")
    calls.clear()
    for _ in range(3):
        mem.recall("the same question")
    assert calls == [["the same question"]]
    for i in range(300):  # an LRU of 256: the first query falls out
        mem._recall_engine().query_vector(f"q{i}")
    calls.clear()
    mem.recall("the same question")
    assert calls == [["the same question"]]


def topic_embed(texts):  # type: ignore[no-untyped-def]
    """Texts ending in "topic N" get topic N's direction plus noise: records of one topic are alike."""
    import numpy as np

    out = []
    for text in texts:
        topic = int(text.rsplit("topic ", 1)[1]) if "topic " in text else 999
        base = np.random.default_rng(topic).standard_normal(64)
        noise = np.random.default_rng(int(hashlib.sha256(text.encode()).hexdigest()[:8], 16)).standard_normal(64)
        out.append(base + 0.7 * noise)
    return np.array(out, dtype=np.float32)


@pytest.mark.parametrize("runs", [True, False])
def test_lineage_context_is_gated_by_how_coherent_the_chain_is(tmp_path: Path, key: bytes, runs: bool) -> None:
    """Context from neighbours counts fully where consecutive records are alike (a conversation: runs
    of one topic) and not at all where they are no more alike than any two (documents in random order)."""
    import numpy as np

    rng = np.random.default_rng(7)
    topics = [i // 6 for i in range(120)] if runs else rng.integers(0, 20, 120).tolist()
    with Sovseal(tmp_path / "s", key=key, embedder=topic_embed) as mem:
        for i, topic in enumerate(topics):
            mem.store(f"rec.{i}", f"record {i} topic {topic}")
        engine = mem._recall_engine()
        engine.wait_ready()
        with mem._store.reading() as lineage:
            visible = engine.visible(lineage, mem._store.branch("main"))
            gate = engine._coherence(mem._vector_index(), np.flatnonzero(visible), visible)
    if runs:
        assert gate == 1.0
    else:
        assert gate < 0.35  # no more alike than random pairs, up to sampling noise


def test_reinforcement_is_read_from_a_checkpoints_columns_as_from_its_nodes(mem: Sovseal, store_dir: Path, key: bytes) -> None:
    """Recall reads each candidate's reinforcement count and decay start with ``NodeTable.reinforcement``:
    from the checkpoint's columns for the nodes it restored (no Node objects made), from the
    objects for nodes made since (whose fields a later reinforcement changes) and for new ones."""
    for path in ("notes.alpha", "notes.bravo", "notes.charlie"):
        mem.store(path, f"{path} prefers dark mode")
    for _ in range(2):
        assert mem.store("notes.alpha", "notes.alpha prefers dark mode").reinforced
    mem._store.write_checkpoint()
    mem.close()
    with Sovseal(store_dir, key=key, embedder=fake_embed) as again:
        with again._store.reading() as lineage:
            table = lineage.nodes
            assert table._base == len(table) == 3  # every node restored from the checkpoint's columns
            everything = np.arange(len(table))
            counts, starts = table.reinforcement(everything)  # before this test makes a Node object
            made = [table[int(i)] for i in everything]
            assert counts.tolist() == [n.reinforce_count for n in made]
            assert starts.tolist() == [n.created_at if n.last_reinforced is None else n.last_reinforced for n in made]
            assert counts.max() == 2
        assert again.store("notes.bravo", "notes.bravo prefers dark mode").reinforced  # a made node changes
        again.store("notes.delta", "notes.delta prefers dark mode")  # a node past the checkpoint
        with again._store.reading() as lineage:
            table = lineage.nodes
            everything = np.arange(len(table))
            counts, starts = table.reinforcement(everything)
            nodes = [table[int(i)] for i in everything]
            assert counts.tolist() == [n.reinforce_count for n in nodes]
            assert starts.tolist() == [n.created_at if n.last_reinforced is None else n.last_reinforced for n in nodes]
            assert sorted(counts.tolist()) == [0, 0, 1, 2]
        again.recall_params = KEYWORD  # equal texts for BM25: reinforcement decides
        assert again.recall("dark mode", k=2)[0].path == "notes.alpha"
