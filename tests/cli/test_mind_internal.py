"""`sovseal mind` lists the user's memories only: consolidation's own records under `_sovseal/`
(its runs, steps and retention scores, stored as procedural memories) are left out, as recall does."""

from __future__ import annotations

from tests.cli.conftest import Run


def test_mind_all_leaves_out_consolidations_own_records(store: Run) -> None:
    store("store", "user.os", "The user works on Linux.")
    store("consolidate", "--json", SOVSEAL_CONSOLIDATE_MODEL=None)  # decay only: a run, a step, retention scores
    assert any(r["status"] == "done" for r in store.json("consolidate", "runs"))
    groups = store.json("mind", "--all")["recurring_patterns"]
    paths = [m["path"] for items in groups.values() for m in items]
    assert paths == ["user.os"]
    text = store("mind", "--all").stdout
    assert "user.os" in text and "_sovseal" not in text and "Procedural" not in text


def test_the_cli_prefix_is_consolidations_reserved_prefix() -> None:
    """The CLI writes the prefix out (importing sovseal.consolidate would load numpy for `mind`)."""
    from sovseal.cli import reading
    from sovseal.consolidate.layout import RESERVED

    assert reading._RESERVED == RESERVED
