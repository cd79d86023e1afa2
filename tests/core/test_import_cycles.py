"""No import cycles (issue #25): in sovseal/ and the framework packages, no module imports one that imports it back.

What it proves: the static import graph has no cycle, counting every import statement: at module
level, inside a function (a lazy import still makes the two modules depend on each other) and under
``if TYPE_CHECKING:`` (a type still does). A cycle is a design smell the interpreter only sometimes
reports (a partly initialised module), so it is caught here rather than at someone's import.

How: each source file is parsed (nothing is imported); relative imports are resolved; ``from
package import name`` counts the submodule when ``name`` is one, else the package's ``__init__``.
A package is not counted as imported by its own submodules merely by containing them: Python has
run its ``__init__`` before any of them. The cycles are the strongly connected components.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
#: Each import root and the top-level name of what it holds.
SOURCES = [
    (ROOT, "sovseal"),
    (ROOT / "integrations" / "langchain-sovseal", "langchain_sovseal"),
    (ROOT / "integrations" / "langgraph-checkpoint-sovseal", "langgraph"),
    (ROOT / "integrations" / "llama-index-sovseal", "llama_index"),
]


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for root, top in SOURCES:
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def _imports(tree: ast.Module) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement, wherever it is (functions and TYPE_CHECKING blocks included)."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def _targets(module: str, node: ast.Import | ast.ImportFrom, modules: dict[str, Path]) -> set[str]:
    if isinstance(node, ast.Import):
        named = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            package = module.split(".") if modules[module].name == "__init__.py" else module.split(".")[:-1]
            base = ".".join(package[: len(package) - node.level + 1] + ([node.module] if node.module else []))
        submodules = [f"{base}.{alias.name}" for alias in node.names if f"{base}.{alias.name}" in modules]
        named = submodules if len(submodules) == len(node.names) else [*submodules, base]
    return {name for name in named if name in modules and name != module}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {
        module: {target for node in _imports(ast.parse(path.read_text(encoding="utf-8"))) for target in _targets(module, node, modules)}
        for module, path in modules.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for succ in successors:
                if succ not in index:
                    index[succ] = low[succ] = len(index)
                    stack.append(succ)
                    on_stack.add(succ)
                    work.append((succ, iter(sorted(graph[succ]))))
                    break
                if succ in on_stack:
                    low[node] = min(low[node], index[succ])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
    return found


def test_the_graph_is_read_from_the_sources() -> None:
    graph = import_graph()
    assert "sovseal.consolidate.graph_pass" in graph["sovseal.consolidate.run"]  # `from . import graph_pass`
    assert "sovseal.consolidate.graph" in graph["sovseal.sdk.client"]  # a lazy import, inside related()
    assert "sovseal.sdk.client" in graph["sovseal.consolidate.context"]  # under TYPE_CHECKING
    assert any(name.startswith("langgraph.checkpoint.sovseal") for name in graph)


def test_a_cycle_is_found() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_there_are_no_import_cycles() -> None:
    graph = import_graph()
    found = cycles(graph)
    shown = [" ; ".join(f"{a} -> {b}" for a in c for b in sorted(graph[a]) if b in c) for c in found]
    assert not found, "import cycles (break each, e.g. move what both need into a module neither imports):\n" + "\n".join(shown)
