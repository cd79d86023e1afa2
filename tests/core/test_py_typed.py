"""Every package sovseal ships is marked typed (PEP 561), so a type checker reads its hints.

What it proves: the core and each framework package have a ``py.typed`` in the package itself
(for the namespace packages, in each ``sovseal`` leaf, never the shared namespace root), and the
setuptools builds list it as package data (hatch ships the whole ``llama_index/`` tree). Building
the wheels takes too long for the suite; ``pip wheel . --no-deps`` and ``unzip -l`` show the same.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INTEGRATIONS = ROOT / "integrations"

#: package directory -> the pyproject.toml that builds it
TYPED = {
    ROOT / "sovseal": ROOT,
    INTEGRATIONS / "langchain-sovseal" / "langchain_sovseal": INTEGRATIONS / "langchain-sovseal",
    INTEGRATIONS / "langgraph-checkpoint-sovseal" / "langgraph" / "checkpoint" / "sovseal": INTEGRATIONS / "langgraph-checkpoint-sovseal",
    INTEGRATIONS / "langgraph-checkpoint-sovseal" / "langgraph" / "store" / "sovseal": INTEGRATIONS / "langgraph-checkpoint-sovseal",
    INTEGRATIONS / "llama-index-sovseal" / "llama_index" / "vector_stores" / "sovseal": INTEGRATIONS / "llama-index-sovseal",
    INTEGRATIONS / "llama-index-sovseal" / "llama_index" / "retrievers" / "sovseal": INTEGRATIONS / "llama-index-sovseal",
    INTEGRATIONS / "llama-index-sovseal" / "llama_index" / "embeddings" / "sovseal": INTEGRATIONS / "llama-index-sovseal",
    INTEGRATIONS / "llama-index-sovseal" / "llama_index" / "storage" / "chat_store" / "sovseal": INTEGRATIONS / "llama-index-sovseal",
}


def test_every_shipped_package_has_py_typed() -> None:
    missing = [str(package.relative_to(ROOT)) for package in TYPED if not (package / "py.typed").is_file()]
    assert not missing, f"no py.typed in {missing}"


def test_namespace_roots_carry_no_py_typed() -> None:
    """A py.typed in a namespace root (``llama_index/``, ``langgraph/``) would be claimed by every distribution sharing it."""
    roots = [INTEGRATIONS / "llama-index-sovseal" / "llama_index", INTEGRATIONS / "langgraph-checkpoint-sovseal" / "langgraph"]
    assert [str(root) for root in roots if (root / "py.typed").exists()] == []


def test_setuptools_builds_list_py_typed() -> None:
    for package, project in TYPED.items():
        config = tomllib.loads((project / "pyproject.toml").read_text(encoding="utf-8"))
        if "setuptools" not in config["build-system"]["build-backend"]:
            continue  # hatch: the wheel includes the package directory whole
        name = ".".join(package.relative_to(project).parts)
        data = config["tool"]["setuptools"]["package-data"]
        assert "py.typed" in data.get(name, []), f"{project.name}: {name} lacks py.typed in package-data"
