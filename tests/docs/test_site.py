"""The documentation site builds with ``mkdocs build --strict``: a broken link, a missing anchor, a link
out of docs/, a page left out of the nav or a nav entry without a page fails the build (mkdocs.yml's
``validation`` turns each into a warning, and strict mode makes warnings errors). Offline: the theme
loads no web fonts and no plugin fetches anything."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]


def _nav_pages(nav: list) -> list[str]:
    pages: list[str] = []
    for entry in nav:
        value = next(iter(entry.values())) if isinstance(entry, dict) else entry
        pages += _nav_pages(value) if isinstance(value, list) else [value]
    return pages


def test_mkdocs_build_strict(tmp_path: Path) -> None:
    site = tmp_path / "site"
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "WARNING" not in result.stderr, result.stderr
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    for page in _nav_pages(config["nav"]):
        built = site / (page.removesuffix(".md") + "/index.html" if page != "index.md" else "index.html")
        assert built.is_file(), f"{page} in the nav was not built"
    assert (site / "benchmarks" / "index.html").read_text().count("<img") >= 1, "the benchmark plots are not embedded"

