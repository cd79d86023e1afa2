"""docs/api.md lists every public method and property of ``Sovseal`` and ``AsyncSovseal``: a new
method without a line in the reference fails here (read from the classes themselves)."""

from __future__ import annotations

import inspect
import re
from pathlib import Path

import pytest

from sovseal import AsyncSovseal, Sovseal

TEXT = (Path(__file__).resolve().parents[2] / "docs" / "api.md").read_text(encoding="utf-8")


def _public(cls: type) -> list[str]:
    return sorted(name for name, _ in inspect.getmembers(cls) if not name.startswith("_"))


@pytest.mark.parametrize("name", sorted(set(_public(Sovseal)) | set(_public(AsyncSovseal))))
def test_every_public_member_is_in_the_reference(name: str) -> None:
    assert re.search(rf"`{re.escape(name)}\b", TEXT), f"docs/api.md does not document {name}"


def test_async_mirrors_every_sovseal_method() -> None:
    sync = {n for n in _public(Sovseal) if callable(inspect.getattr_static(Sovseal, n))}
    missing = sync - set(_public(AsyncSovseal))
    assert not missing, f"AsyncSovseal lacks {sorted(missing)}"
