"""bench/report.py turns the committed benchmark result files into docs/benchmarks.md and its plots.

These tests run the generator on ``bench/results/*.json`` (never the benchmarks themselves): the page
and every plot are produced without error, the tables carry the figures of the result files, the
committed page is what the committed results generate, and a section without results says how to
make them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import matplotlib.image
import pytest

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "bench" / "results"
sys.path.insert(0, str(ROOT / "bench"))

import report  # noqa: E402 (bench/ is not a package)


def _runs() -> dict[str, Any]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(RESULTS.glob("*.json"))}


@pytest.fixture(scope="module")
def rendered(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, Path]:
    out = tmp_path_factory.mktemp("report")
    text = report.render(RESULTS, out / "benchmarks.md", out / "img")
    return text, out / "img"


def test_committed_results_exist() -> None:
    runs = _runs()
    assert {"store", "embed", "recall_quality_dev"} <= set(runs), sorted(runs)
    for name, run in runs.items():
        assert run["name"] == name and run["results"], name
        assert {"cores", "cpu", "ram_gib"} <= set(run["machine"])


def test_every_plot_is_a_readable_image(rendered: tuple[str, Path]) -> None:
    text, img = rendered
    linked = [line.split("](img/")[1].rstrip(")") for line in text.splitlines() if "](img/" in line]
    assert "throughput.png" in linked and "locomo_recall.png" in linked
    for name in linked:
        pixels = matplotlib.image.imread(img / name)
        assert pixels.shape[0] > 200 and pixels.shape[1] > 400, name
        assert pixels.std() > 0.01, f"{name} is blank"


def test_tables_carry_the_figures_of_the_result_files(rendered: tuple[str, Path]) -> None:
    text, _ = rendered
    runs = _runs()
    expected: list[str] = []
    if "store" in runs:
        r = runs["store"]["results"]
        expected += [f"| {r['sovseal']['p50']:.3f} | {r['sovseal']['p95']:.3f} | {r['sovseal']['p99']:.3f} |"]
        expected += [f"| {r['lancedb']['p50']:.3f} |"]
    if "embed" in runs:
        for s in runs["embed"]["results"]["systems"].values():
            expected += [f"{s['turn_p50_ms']:.2f} / {s['turn_p95_ms']:.2f}", f"{s['bulk_texts_per_s']:,.0f} texts/s"]
    for name in ("recall_quality_dev", "recall_quality_test"):
        for fusion, m in runs.get(name, {}).get("results", {}).get("locomo", {}).items():
            cells = [f"{m[k]:.3f}" for k in ("R@1", "R@5", "R@10", "MRR")]
            expected += [" | ".join(f"**{c}**" for c in cells) if fusion == "sovseal" else " | ".join(cells)]
    for name in ("recall_latency_10k", "recall_latency_100k", "recall_latency_1m"):
        for size, res in runs.get(name, {}).get("results", {}).items():
            if size.isdigit():
                expected += [f"{v['p50']:,.2f} / {v['p95']:,.2f}" for v in res["latency_ms"].values()]
    for name in ("replication", "replication_postgres"):
        if name in runs:
            r = runs[name]["results"]
            expected += [f"{r['throughput']['records_per_s']:,.0f} records/s", f"p95 {r['lag']['lag_ms']['p95']:,.0f} ms"]
    if "langchain" in runs:
        expected += [f"| {s['p50_ms']:,.2f} |" for s in runs["langchain"]["results"]["stores"].values() if isinstance(s, dict)]
    if "langgraph" in runs:
        r = runs["langgraph"]["results"]
        expected += [f"| {r['sync']['sovseal']['put']:,.3f} | {r['sync']['sqlite']['put']:,.3f} |"]
    if "llama_index" in runs:
        expected += [f"| {s['p50_ms']:,.1f} |" for s in runs["llama_index"]["results"]["stores"].values()]
    assert expected
    missing = [figure for figure in expected if figure not in text]
    assert not missing, missing
    for run in runs.values():
        assert run["command"] in text, run["command"]


def test_the_committed_page_is_generated_from_the_committed_results(rendered: tuple[str, Path]) -> None:
    text, _ = rendered
    assert (ROOT / "docs" / "benchmarks.md").read_text() == text, "run `python bench/report.py` and commit the page"


def test_a_section_without_results_says_how_to_make_them(tmp_path: Path) -> None:
    text = report.render(tmp_path, tmp_path / "benchmarks.md", tmp_path / "img")
    assert "python bench/run_all.py --only store" in text
    assert "python bench/run_all.py --only langgraph" in text
    assert "**Earlier runs**" in text  # the hand-recorded figures stay whatever the results
    assert "{{" not in text
