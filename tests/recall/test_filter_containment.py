"""The containment operators ($contains $any $all $substring $isubstring) and ``filters.evaluate``.

Recall filters in bulk through the catalog (which falls back to ``filters.matches`` for operators it
does not index); ``evaluate`` applies the same filter to one record in hand, as the framework
adapters do. A property test checks the two agree on random records and random filters.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sovseal import Sovseal
from sovseal.errors import InvalidInputError
from sovseal.recall import parse_filter
from sovseal.recall.filters import evaluate

ROWS: list[tuple[str, dict[str, Any]]] = [
    ("r.tags-ab", {"tags": ["a", "b"], "title": "Hello World"}),
    ("r.tags-b", {"tags": ["b"], "title": "hello there"}),
    ("r.tags-num", {"tags": [1, 2.0, True], "title": ""}),
    ("r.tags-str", {"tags": "abc", "title": "WORLD"}),
    ("r.tags-nested", {"tags": [["a"], {"k": 1}]}),
    ("r.none", {}),
]


@pytest.fixture
def seeded(mem: Sovseal) -> Sovseal:
    for path, metadata in ROWS:
        mem.store(path, path, metadata=metadata)
    return mem


def recalled(mem: Sovseal, flt: dict[str, Any]) -> set[str]:
    return {m.path for m in mem.recall("anything", k=100, filter=flt)}


def evaluated(flt: dict[str, Any]) -> set[str]:
    tree = parse_filter(flt)
    return {p for p, md in ROWS if evaluate(tree, path=p, type="semantic", provenance="explicit", metadata=md)}


@pytest.mark.parametrize(
    ("condition", "expected"),
    [
        ({"tags": {"$contains": "a"}}, {"r.tags-ab", "r.tags-str"}),  # list item, or substring of a string
        ({"tags": {"$contains": "b"}}, {"r.tags-ab", "r.tags-b", "r.tags-str"}),
        ({"tags": {"$contains": 2}}, {"r.tags-num"}),  # JSON equality: 2 == 2.0
        ({"tags": {"$contains": 1}}, {"r.tags-num"}),  # 1 is in [1, ...]; true is not 1
        ({"tags": {"$contains": ["a"]}}, {"r.tags-nested"}),  # a list item compared whole
        ({"tags": {"$contains": {"k": 1.0}}}, {"r.tags-nested"}),
        ({"tags": {"$any": ["a", "zz"]}}, {"r.tags-ab"}),  # lists only: "abc" is not a list
        ({"tags": {"$any": []}}, set()),
        ({"tags": {"$all": ["a", "b"]}}, {"r.tags-ab"}),
        ({"tags": {"$all": []}}, {"r.tags-ab", "r.tags-b", "r.tags-num", "r.tags-nested"}),  # every list
        ({"tags": {"$all": [True]}}, {"r.tags-num"}),
        ({"title": {"$substring": "World"}}, {"r.tags-ab"}),
        ({"title": {"$substring": ""}}, {"r.tags-ab", "r.tags-b", "r.tags-num", "r.tags-str"}),  # every string
        ({"title": {"$isubstring": "world"}}, {"r.tags-ab", "r.tags-str"}),
        ({"title": {"$isubstring": "HELLO"}}, {"r.tags-ab", "r.tags-b"}),
        ({"missing": {"$contains": "a"}}, set()),  # a missing field matches none of them
        ({"missing": {"$all": []}}, set()),
    ],
)
def test_containment_operators(seeded: Sovseal, condition: dict[str, Any], expected: set[str]) -> None:
    flt = {"metadata": condition}
    assert recalled(seeded, flt) == expected
    assert evaluated(flt) == expected


def test_containment_combines_with_not_and_or(seeded: Sovseal) -> None:
    flt = {"$or": [{"metadata": {"tags": {"$all": ["a", "b"]}}}, {"$not": {"metadata": {"title": {"$exists": True}}}}]}
    assert recalled(seeded, flt) == evaluated(flt) == {"r.tags-ab", "r.tags-nested", "r.none"}


@pytest.mark.parametrize(
    "flt",
    [
        {"metadata": {"t": {"$any": "a"}}},  # a list is required
        {"metadata": {"t": {"$all": {"a": 1}}}},
        {"metadata": {"t": {"$substring": 3}}},  # a string is required
        {"metadata": {"t": {"$isubstring": ["a"]}}},
        {"metadata": {"t": {"$contains": float("nan")}}},  # a JSON value is required
        {"path": {"$contains": "a"}},  # metadata only
        {"type": {"$any": ["episodic"]}},
    ],
)
def test_bad_containment_operands_are_refused(flt: dict[str, Any]) -> None:
    with pytest.raises(InvalidInputError):
        parse_filter(flt)


def test_evaluate_covers_every_field() -> None:
    tree = parse_filter(
        {
            "path_prefix": "a.",
            "path": {"$ne": "a.x"},
            "type": {"$in": ["episodic"]},
            "provenance": "observed",
            "metadata": {"n": {"$gte": 2}},
        }
    )
    record = {"path": "a.b", "type": "episodic", "provenance": "observed", "metadata": {"n": 3}}
    assert evaluate(tree, **record)
    assert evaluate(None, **record)
    for change in (
        {"path": "b.b"},
        {"path": "a.x"},
        {"type": "semantic"},
        {"provenance": "explicit"},
        {"metadata": {"n": 1}},
        {"metadata": {}},
    ):
        assert not evaluate(tree, **{**record, **change})


# -- property: the catalog's bulk filtering and evaluate() agree ------------------------------------

_scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.sampled_from([0.5, 2.0]), st.sampled_from(["", "a", "ab", "B", "xa"]))
_values = st.one_of(_scalars, st.lists(st.one_of(_scalars, st.lists(_scalars, max_size=2)), max_size=4))
_fields = st.sampled_from(["f", "g"])
_leaf = st.one_of(
    st.builds(lambda f, v: {"metadata": {f: {"$contains": v}}}, _fields, _values),
    st.builds(lambda f, v: {"metadata": {f: {"$any": v}}}, _fields, st.lists(_scalars, max_size=3)),
    st.builds(lambda f, v: {"metadata": {f: {"$all": v}}}, _fields, st.lists(_scalars, max_size=3)),
    st.builds(lambda f, v: {"metadata": {f: {"$substring": v}}}, _fields, st.sampled_from(["", "a", "b", "A"])),
    st.builds(lambda f, v: {"metadata": {f: {"$isubstring": v}}}, _fields, st.sampled_from(["", "a", "b", "A"])),
    st.builds(lambda f, v: {"metadata": {f: v}}, _fields, _values),
    st.builds(lambda f, v: {"metadata": {f: {"$nin": v}}}, _fields, st.lists(_scalars, max_size=3)),
    st.builds(lambda f, v: {"metadata": {f: {"$gte": v}}}, _fields, st.sampled_from([0, 1, "a"])),
)
_filters = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.builds(lambda xs: {"$and": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda xs: {"$or": xs}, st.lists(inner, min_size=1, max_size=3)),
        st.builds(lambda x: {"$not": x}, inner),
    ),
    max_leaves=6,
)
_records = st.lists(st.dictionaries(_fields, _values, max_size=2), min_size=1, max_size=6)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(records=_records, filters=st.lists(_filters, min_size=1, max_size=4))
def test_recall_and_evaluate_agree(
    tmp_path_factory: pytest.TempPathFactory, records: list[dict[str, Any]], filters: list[dict[str, Any]]
) -> None:
    from tests.fakes import fake_embed

    with Sovseal(tmp_path_factory.mktemp("agree"), key=bytes(32), embedder=fake_embed) as mem:
        mem.store_many([{"path": f"p{i}", "payload": f"p{i}", "metadata": md} for i, md in enumerate(records)])
        for flt in filters:
            tree = parse_filter(flt)
            expected = {
                f"p{i}" for i, md in enumerate(records) if evaluate(tree, path=f"p{i}", type="semantic", provenance="explicit", metadata=md)
            }
            assert {m.path for m in mem.recall("q", k=100, filter=flt)} == expected, flt
