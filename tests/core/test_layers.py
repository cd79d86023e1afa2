"""The layers of docs/design.md's "Module map" hold: no module imports a layer its row does not name.

What it proves: every import statement in sovseal/ and the framework packages (at module level,
inside a function, under ``TYPE_CHECKING``: the same graph as the import-cycle test) goes to the
importer's own layer or to one its row allows; the adapters import only the modules their row
names. The table in docs/design.md is the single statement of the rules: this test parses it, so
the document and the check cannot drift apart.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from tests.core.test_import_cycles import import_graph

DESIGN = Path(__file__).resolve().parents[2] / "docs" / "design.md"
_NAMES = re.compile(r"`([A-Za-z_][\w.]*)`")


@dataclass(frozen=True)
class Row:
    layer: str
    modules: tuple[str, ...]  # the dotted prefixes this row owns
    layers: frozenset[str]  # the layers it may import
    exact: frozenset[str]  # modules it may import by name (the adapters' row)


def module_map(text: str) -> list[Row]:
    """The rows of the "Module map" table: layer | modules | owns | may import."""
    section = text.split("## Module map", 1)[1].split("\n## ", 1)[0]
    rows: list[Row] = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 4 or cells[0] in ("layer", "---"):
            continue
        allowed = cells[3]
        exact = frozenset(_NAMES.findall(allowed))
        layers = frozenset(word.strip() for word in _NAMES.sub("", allowed).split(",") if word.strip() not in ("", "—"))
        rows.append(Row(cells[0], tuple(_NAMES.findall(cells[1])), layers, exact))
    return rows


def owner(module: str, rows: list[Row]) -> Row | None:
    """The row naming the longest prefix of ``module``."""
    best: tuple[int, Row] | None = None
    for row in rows:
        for prefix in row.modules:
            if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[0]):
                best = (len(prefix), row)
    return best[1] if best else None


def violations(graph: dict[str, set[str]], rows: list[Row]) -> list[str]:
    found: list[str] = []
    for module, targets in sorted(graph.items()):
        mine = owner(module, rows)
        assert mine is not None, f"{module} is in no row of the module map in docs/design.md: add it to one"
        for target in sorted(targets):
            theirs = owner(target, rows)
            assert theirs is not None, f"{target} is in no row of the module map in docs/design.md"
            if theirs.layer == mine.layer or theirs.layer in mine.layers or target in mine.exact:
                continue
            found.append(f"{module} ({mine.layer}) imports {target} ({theirs.layer})")
    return found


def test_the_module_map_is_read_from_the_design() -> None:
    rows = {row.layer: row for row in module_map(DESIGN.read_text(encoding="utf-8"))}
    assert rows["storage"].layers == {"foundation", "frame layout", "crypto"}
    assert "sovseal.errors" in rows["foundation"].modules and not rows["foundation"].layers
    assert rows["adapters"].exact == {"sovseal", "sovseal.errors", "sovseal.embed", "sovseal.integration"}
    assert not rows["adapters"].layers


def test_a_layer_violation_is_found() -> None:
    rows = [
        Row("low", ("pkg.low",), frozenset(), frozenset()),
        Row("high", ("pkg.high",), frozenset({"low"}), frozenset()),
        Row("user", ("app",), frozenset(), frozenset({"pkg.high"})),
    ]
    graph = {"pkg.low.a": {"pkg.high.b"}, "pkg.high.b": {"pkg.low.a"}, "app": {"pkg.high", "pkg.low.a"}, "pkg.high": set()}
    assert violations(graph, rows) == ["app (user) imports pkg.low.a (low)", "pkg.low.a (low) imports pkg.high.b (high)"]


def test_every_import_follows_the_module_map() -> None:
    found = violations(import_graph(), module_map(DESIGN.read_text(encoding="utf-8")))
    advice = "imports the module map in docs/design.md does not allow (move the code down a layer, or the import up)"
    assert not found, advice + ":\n" + "\n".join(found)
