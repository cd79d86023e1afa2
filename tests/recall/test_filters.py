"""Recall filters: path prefix, type, provenance, metadata equality and comparisons, combinators, bad input."""

from __future__ import annotations

import pytest

from sovseal import Sovseal
from sovseal.errors import InvalidInputError
from sovseal.recall import RecallParams

ROWS = [
    ("user.editor", "neovim", {"source": "chat", "n": 1, "tags": ["a", "b"]}, "semantic", "explicit"),
    ("user.shell", "zsh", {"source": "chat", "n": 5}, "semantic", "observed"),
    ("user.deploy", "run make deploy", {"source": "docs", "n": 10.0, "pinned": True}, "procedural", "explicit"),
    ("trip.lisbon", "went to Lisbon in May", {"source": "chat", "n": "7"}, "episodic", "observed"),
    ("trip.porto", "visited Porto", {}, "episodic", "explicit"),
]


@pytest.fixture
def seeded(mem: Sovseal) -> Sovseal:
    for path, payload, metadata, type_, provenance in ROWS:
        mem.store(path, payload, metadata=metadata, type=type_, provenance=provenance)
    mem.store("user.shell", "fish")  # shadows zsh: a filter never brings a shadowed value back
    return mem


def paths(mem: Sovseal, flt: object) -> set[str]:
    return {m.path for m in mem.recall("anything at all", k=100, filter=flt)}  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("flt", "expected"),
    [
        (None, {"user.editor", "user.shell", "user.deploy", "trip.lisbon", "trip.porto"}),
        ({}, {"user.editor", "user.shell", "user.deploy", "trip.lisbon", "trip.porto"}),
        ({"path_prefix": "user."}, {"user.editor", "user.shell", "user.deploy"}),
        ({"path_prefix": "trip.l"}, {"trip.lisbon"}),
        ({"path_prefix": "nothing"}, set()),
        ({"path": "trip.porto"}, {"trip.porto"}),
        ({"path": {"$in": ["trip.porto", "user.editor", "nope"]}}, {"trip.porto", "user.editor"}),
        ({"path": {"$ne": "trip.porto", "$prefix": "trip."}}, {"trip.lisbon"}),
        ({"type": "episodic"}, {"trip.lisbon", "trip.porto"}),
        ({"type": {"$in": ["procedural", "episodic"]}}, {"user.deploy", "trip.lisbon", "trip.porto"}),
        ({"type": {"$nin": ["episodic"]}}, {"user.editor", "user.shell", "user.deploy"}),
        ({"provenance": "observed"}, {"trip.lisbon"}),  # user.shell's observed version is shadowed
        ({"provenance": {"$ne": "observed"}}, {"user.editor", "user.shell", "user.deploy", "trip.porto"}),
        ({"metadata": {"source": "chat"}}, {"user.editor", "trip.lisbon"}),
        ({"metadata": {"n": 10}}, {"user.deploy"}),  # 10 == 10.0
        ({"metadata": {"n": {"$gte": 5}}}, {"user.deploy"}),  # "7" is a string: no match
        ({"metadata": {"n": {"$gt": 0, "$lt": 10}}}, {"user.editor"}),
        ({"metadata": {"n": {"$lte": "8"}}}, {"trip.lisbon"}),  # strings compare with strings
        ({"metadata": {"n": {"$ne": 1}}}, {"user.deploy", "trip.lisbon", "trip.porto", "user.shell"}),
        ({"metadata": {"pinned": True}}, {"user.deploy"}),
        ({"metadata": {"pinned": 1}}, set()),  # true is not 1
        ({"metadata": {"tags": ["a", "b"]}}, {"user.editor"}),
        ({"metadata": {"source": {"$exists": False}}}, {"trip.porto", "user.shell"}),
        ({"metadata": {"source": {"$exists": True}}}, {"user.editor", "user.deploy", "trip.lisbon"}),
        ({"metadata": {"source": {"$in": ["docs", "web"]}}}, {"user.deploy"}),
        ({"metadata": {"source": {"$nin": ["chat"]}}}, {"user.deploy", "trip.porto", "user.shell"}),
        ({"metadata": {"source": {"$prefix": "do"}}}, {"user.deploy"}),
        ({"type": "semantic", "provenance": "explicit"}, {"user.editor", "user.shell"}),
        ({"$or": [{"type": "procedural"}, {"path": "trip.porto"}]}, {"user.deploy", "trip.porto"}),
        ({"$and": [{"path_prefix": "user."}, {"$not": {"type": "procedural"}}]}, {"user.editor", "user.shell"}),
    ],
)
def test_filters_select_exactly(seeded: Sovseal, flt: object, expected: set[str]) -> None:
    assert paths(seeded, flt) == expected


def test_filters_hold_for_every_fusion(seeded: Sovseal) -> None:
    for fusion in ("weighted", "rrf", "dense"):
        seeded.recall_params = RecallParams(fusion=fusion)
        assert paths(seeded, {"type": "episodic"}) == {"trip.lisbon", "trip.porto"}
    seeded.recall_params = RecallParams(fusion="keyword")
    assert {m.path for m in seeded.recall("Lisbon Porto", k=10, filter={"path": "trip.porto"})} == {"trip.porto"}


def test_a_filter_is_exact_even_when_few_records_match(mem: Sovseal) -> None:
    for i in range(150):
        mem.store(f"bulk.{i}", f"routine note {i}", metadata={"i": i})
    mem.store("needle.one", "an unrelated needle", metadata={"i": -1})
    found = mem.recall("routine note", k=5, filter={"metadata": {"i": {"$lt": 0}}})
    assert [m.path for m in found] == ["needle.one"]
    assert len(mem.recall("routine note", k=1000, filter={"metadata": {"i": {"$gte": 100, "$lt": 150}}})) == 50


@pytest.mark.parametrize(
    ("flt", "message"),
    [
        ("type=episodic", "filter must be a dict"),
        (["type"], "filter must be a dict"),
        ({"colour": "red"}, "unknown filter field 'colour'"),
        ({"type": "forever"}, "type must be one of"),
        ({"type": {"$gt": "episodic"}}, "does not apply to type"),
        ({"provenance": "rumour"}, "provenance must be one of"),
        ({"path_prefix": 3}, "path_prefix must be a string"),
        ({"path": {"$in": "user.editor"}}, r"\$in on path takes a list"),
        ({"path": 7}, "path values are strings"),
        ({"metadata": ["source"]}, "metadata must be a dict"),
        ({"metadata": {"n": {"$near": 3}}}, r"unknown operator '\$near'"),
        ({"metadata": {"n": {"$gt": [1]}}}, r"\$gt on metadata field 'n' takes a number or a string"),
        ({"metadata": {"n": {"$gt": True}}}, "takes a number or a string"),
        ({"metadata": {"n": {"$exists": "yes"}}}, "takes true or false"),
        ({"metadata": {"n": {"$gt": 1, "plain": 2}}}, "mixes operators and plain keys"),
        ({"metadata": {"n": float("nan")}}, "not a JSON number"),
        ({"metadata": {"n": {1, 2}}}, "not a JSON value"),
        ({"$or": []}, "non-empty list"),
        ({"$or": {"type": "episodic"}}, "non-empty list"),
        ({"$not": "x"}, "must be a dict"),
    ],
)
def test_bad_filters_raise_typed_errors(seeded: Sovseal, flt: object, message: str) -> None:
    with pytest.raises(InvalidInputError, match=message):
        seeded.recall("q", filter=flt)  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=message):
        seeded.recall("", filter=flt)  # type: ignore[arg-type]  # checked even when the query is empty


def test_absurdly_nested_filters_are_refused(seeded: Sovseal) -> None:
    deep: dict[str, object] = {"type": "episodic"}
    for _ in range(40):
        deep = {"$not": deep}
    with pytest.raises(InvalidInputError, match="deeper"):
        seeded.recall("q", filter=deep)
    with pytest.raises(InvalidInputError, match="more than"):
        seeded.recall("q", filter={"$or": [{"type": "episodic"}] * 2000})
