"""The adapters raise sovseal's typed errors, never a bare ``ValueError`` or ``TypeError`` (issue 35 item 2).

A bad argument to an adapter is an ``InvalidInputError`` (also a ``ValueError``) or, for a wrong type,
an ``InvalidArgumentTypeError`` (also a ``TypeError``): ``except SovsealError`` catches it, it carries
the catalogue's exit code and advice fields, and the frameworks' conformance suites, which catch the
built-ins, still see the type they expect. The scan reads the source, so an adapter whose framework
is not installed is checked too.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from sovseal.errors import EXIT_USAGE, InvalidArgumentTypeError, InvalidInputError, SovsealError

ROOT = Path(__file__).resolve().parents[2]
BARE = {"ValueError", "TypeError"}


def _adapter_sources() -> list[Path]:
    """The adapters and the kit they share (sovseal.integration): what an adapter's user meets."""
    adapters = (p for p in (ROOT / "integrations").rglob("*.py") if "build" not in p.relative_to(ROOT).parts)
    return sorted([*adapters, *(ROOT / "sovseal" / "integration").glob("*.py")])


def _bare_raises(source: str) -> list[tuple[int, str]]:
    """``(line, name)`` of each ``raise ValueError`` / ``raise TypeError`` (called or not) in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Raise) and node.exc is not None:
            raised = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
            if isinstance(raised, ast.Name) and raised.id in BARE:
                found.append((node.lineno, raised.id))
    return sorted(found)


def test_the_scan_finds_a_bare_raise() -> None:
    source = "def f(x):\n    if x:\n        raise ValueError('no')\n    raise TypeError\n"
    assert _bare_raises(source) == [(3, "ValueError"), (4, "TypeError")]
    assert _bare_raises("from sovseal.errors import InvalidInputError\nraise InvalidInputError('no')\n") == []


def test_no_adapter_raises_a_bare_value_or_type_error() -> None:
    sources = _adapter_sources()
    assert len(sources) > 10, "the adapters' sources were not found"
    offenders = [
        f"{path.relative_to(ROOT)}:{line} raise {name}" for path in sources for line, name in _bare_raises(path.read_text(encoding="utf-8"))
    ]
    assert not offenders, (
        "raise a sovseal.errors class instead (InvalidInputError for a bad value, "
        f"InvalidArgumentTypeError for a wrong type), with a message that says what to do: {offenders}"
    )


def test_the_type_error_is_both_builtins_and_a_sovseal_error() -> None:
    exc = InvalidArgumentTypeError("x must be a bool (True or False), got str")
    assert isinstance(exc, TypeError) and isinstance(exc, ValueError) and isinstance(exc, InvalidInputError)
    assert isinstance(exc, SovsealError) and exc.exit_code == EXIT_USAGE


def test_langchain_adapters_raise_typed_errors(tmp_path: Path) -> None:
    pytest.importorskip("langchain_core")
    from langchain_sovseal import SovsealByteStore, SovsealChatMessageHistory

    with pytest.raises(InvalidArgumentTypeError, match="erase_on_delete must be a bool") as caught:
        SovsealByteStore(path=tmp_path / "kv", key=bytes(32), erase_on_delete="yes")  # type: ignore[arg-type]
    assert isinstance(caught.value, TypeError)
    with pytest.raises(InvalidArgumentTypeError, match="erase_on_delete"):
        SovsealChatMessageHistory("s", path=tmp_path / "chat", key=bytes(32), erase_on_delete=1)  # type: ignore[arg-type]

    from langchain_sovseal._common import translate_filter

    with pytest.raises(InvalidArgumentTypeError, match="filter must be a dict"):
        translate_filter(["source"])  # type: ignore[arg-type]
    with pytest.raises(InvalidInputError, match=r"non-empty list of filters, such as"):
        translate_filter({"$and": []})


def test_langgraph_adapters_raise_typed_errors() -> None:
    pytest.importorskip("langgraph.checkpoint.base")
    from langgraph.checkpoint.sovseal import SovsealSaver
    from langgraph.store.sovseal import SovsealStore

    with pytest.raises(InvalidArgumentTypeError, match=r"needs a sovseal.Sovseal handle, got str; or let SovsealSaver.open"):
        SovsealSaver("store")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"SovsealStore.open\(path, key=...\)"):
        SovsealStore("store")  # type: ignore[arg-type]


def test_llama_index_adapters_raise_typed_errors(tmp_path: Path) -> None:
    pytest.importorskip("llama_index.core")
    from llama_index.retrievers.sovseal import SovsealRetriever
    from llama_index.vector_stores.sovseal import SovsealVectorStore

    with pytest.raises(InvalidInputError, match="collection must be a non-empty string"):
        SovsealVectorStore(path=tmp_path / "v", key=bytes(32), collection="")
    with pytest.raises(InvalidInputError, match=r"similarity_top_k must be an integer from 1 to \d+, got 0"):
        SovsealRetriever(path=tmp_path / "r", key=bytes(32), similarity_top_k=0)
