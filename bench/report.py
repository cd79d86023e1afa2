"""Regenerate docs/benchmarks.md and its plots from the benchmark result files.

    python bench/report.py [--results bench/results] [--out docs/benchmarks.md] [--img docs/img]

The page is ``bench/report_template.md`` (the method and the interpretation of each section, written
by hand) with every ``{{latest:NAME}}`` marker replaced by a block made from the result file(s) of
that section: when and where it ran (date, cores, CPU, RAM, load average before and after), the
command, tables of medians and ratios, and a plot. ``bench/run_all.py`` writes the result files; a
section without one says how to make it. Nothing here measures anything.
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after the backend is chosen
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

import evaldata  # noqa: E402 (bench/ is not a package)
import run_all  # noqa: E402

TEMPLATE = Path(__file__).with_name("report_template.md")
FUSIONS = ["dense", "bm25", "rrf60", "weighted", "ungated", "sovseal"]
PNG_METADATA = {"Software": None}  # no matplotlib version in the file: regenerating changes only what changed


# -- formatting ---------------------------------------------------------------------------------------


def f(value: float | None, digits: int = 2) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "—"
    return f"{value:,.{digits}f}"


def ratio(a: float | None, b: float | None) -> str:
    if not a or not b:
        return "—"
    return f"{a / b:.2f}×"


def table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "| " + " | ".join("---" for _ in header) + " |"]
    lines += ["| " + " | ".join(row) + " |" for row in rows]
    return "\n".join(lines)


def provenance(run: dict[str, Any]) -> str:
    """The line that says when, where and how a result was measured."""
    m = run["machine"]
    date = run["started"].replace("T", " ").replace("+00:00", " UTC")
    load = f"{run['load_start'][0]:.2f} → {run['load_end'][0]:.2f}"
    packages = run.get("packages")  # recorded since the bench extras: Python and package versions
    env = f" Python {run['python']}, " + ", ".join(f"{k} {v}" for k, v in packages.items()) + "." if packages else ""
    quick = " **Quick sizes (`--quick`): a smoke run, not comparable with the targets.**" if run.get("quick") else ""
    return (
        f"*Latest run: {date}, {m['cores']} cores ({m['cpu']}), {m['ram_gib']} GiB RAM, 1-min load average "
        f"{load} (start → end), {run['seconds']:.0f} s.* `{run['command']}`.{env}{quick}"
    )


def missing(name: str) -> str:
    return f"*No result file for this section yet: `python bench/run_all.py --only {name}` makes one.*"


def image(img: Path, name: str, alt: str) -> str:
    return f"![{alt}](img/{name})"


def save(fig: Any, img: Path, name: str) -> None:
    img.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(img / name, dpi=110, metadata=PNG_METADATA)
    plt.close(fig)


def ecdf(ax: Any, samples: dict[str, list[float]], title: str, unit: str = "ms") -> None:
    """Latency distributions as empirical CDFs on a log axis (several systems stay readable together)."""
    for label, values in samples.items():
        if not values:
            continue
        xs = sorted(values)
        ys = [(i + 1) / len(xs) for i in range(len(xs))]
        ax.step(xs, ys, where="post", label=f"{label} (p50 {statistics.median(xs):.2f})")
    ax.set_xscale("log")
    ax.xaxis.set_major_locator(LogLocator(subs=(1.0, 2.0, 5.0)))
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel(f"latency ({unit}, log scale)")
    ax.set_ylabel("fraction of calls ≤ x")
    ax.axhline(0.5, color="grey", lw=0.5, ls=":")
    ax.axhline(0.95, color="grey", lw=0.5, ls=":")
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    ax.grid(True, which="both", alpha=0.2)


# -- sections ----------------------------------------------------------------------------------------


def section_store(runs: dict[str, Any], img: Path) -> str:
    run = runs.get("store")
    if not run:
        return missing("store")
    r = run["results"]
    a, b = r["sovseal"], r["lancedb"]
    rows = [
        ["sovseal `store` (sealed, fsync)", f(a["p50"], 3), f(a["p95"], 3), f(a["p99"], 3)],
        ["plain LanceDB `add` (no fsync)", f(b["p50"], 3), f(b["p95"], 3), f(b["p99"], 3)],
        ["LanceDB / sovseal", ratio(b["p50"], a["p50"]), ratio(b["p95"], a["p95"]), ratio(b["p99"], a["p99"])],
    ]
    met = "met" if a["p50"] <= 1 and a["p99"] <= 4 else "**not met**"
    fig, ax = plt.subplots(figsize=(7, 3.6))
    ecdf(
        ax, {"sovseal store": r["samples_ms"]["sovseal"], "plain LanceDB add": r["samples_ms"]["lancedb"]}, f"{r['n']:,} sequential stores"
    )
    save(fig, img, "store_latency.png")
    return "\n\n".join(
        [
            provenance(run),
            table([f"{r['n']:,} stores, ms", "p50", "p95", "p99"], rows),
            f"Target p50 ≤ 1 ms and p99 ≤ 4 ms: {met} in this run.",
            image(img, "store_latency.png", "Store latency distribution: sovseal against plain LanceDB"),
        ]
    )


def _replication_block(run: dict[str, Any]) -> list[list[str]]:
    r = run["results"]
    t, lag, rest = r["throughput"], r["lag"], r["restore"]
    return [
        [
            f"throughput: {t['items']:,} items written offline, then drained",
            f"**{f(t['records_per_s'], 0)} records/s** ({f(t['drain_s'], 1)} s)",
            "≥ 2,000/s",
        ],
        [
            f"lag store → server ack, {lag['achieved_rate']:.0f} stores/s for {r['seconds']:.0f} s",
            f"p50 {f(lag['lag_ms']['p50'], 0)} ms, **p95 {f(lag['lag_ms']['p95'], 0)} ms**, max {f(lag['lag_ms']['max'], 0)} ms",
            "p95 ≤ 1 s",
        ],
        ["`store()` latency while replicating", f"p50 {f(lag['store_ms']['p50'], 1)} ms, p95 {f(lag['store_ms']['p95'], 1)} ms", ""],
        [f"restore {rest['records']:,} records (pull + verify + import)", f"{f(rest['pull_verify_import_s'], 1)} s", ""],
        [
            f"restore: embedding on the device ({rest['embedder']})",
            (
                f"{f(rest['embedding_s'], 1)} s, {rest['embedding_share'] * 100:.0f} % of the restore "
                f"({f(rest['embedding_texts_per_s'], 0)} texts/s)"
            ),
            "bounded by embedding",
        ],
    ]


def section_replication(runs: dict[str, Any], img: Path) -> str:
    blocks = []
    samples = {}
    for name, label in (("replication", "SQLite server"), ("replication_postgres", "PostgreSQL server")):
        run = runs.get(name)
        if not run:
            blocks.append(f"**{label}.** " + missing(name) + (" It needs `--postgres URL`." if "postgres" in name else ""))
            continue
        blocks.append(f"**{label}** ({run['results']['backend']}). " + provenance(run))
        blocks.append(table(["figure", label, "target"], _replication_block(run)))
        samples[label] = run["results"]["lag"]["samples"]["lag_ms"]
    if samples:
        fig, ax = plt.subplots(figsize=(7, 3.4))
        ecdf(ax, samples, "store → server acknowledgement (steady rate)")
        save(fig, img, "replication_lag.png")
        blocks.append(image(img, "replication_lag.png", "Replication lag distribution"))
    return "\n\n".join(blocks)


def section_convergence(runs: dict[str, Any], img: Path) -> str:
    run = runs.get("convergence")
    if not run:
        return missing("convergence")
    soak, pull = run["results"]["soak"], run["results"].get("pull")
    rows = [
        ["seeds converged", f"{soak['converged']} of {soak['seeds']}"],
        ["devices × operations per seed", f"{soak['devices']} × {soak['steps']}"],
        ["snapshots per run (p50)", f(soak["snapshots_p50"], 0)],
        ["time to converge once all are online, p50 / max (s)", f"{f(soak['settle_s_p50'])} / {f(soak['settle_s_max'])}"],
    ]
    if pull:
        rows += [
            [f"pull {pull['records']:,} records into a new device (s)", f(pull["pull_s"])],
            ["embedding the same texts alone (s)", f(pull["embed_s"])],
            ["pull / embedding alone", ratio(pull["pull_s"], pull["embed_s"])],
        ]
    return "\n\n".join([provenance(run), table(["figure", "value"], rows)])


def section_embed(runs: dict[str, Any], img: Path) -> str:
    run = runs.get("embed")
    if not run:
        return missing("embed")
    r = run["results"]
    systems = r["systems"]
    (_, ours), (_, peer) = list(systems.items())
    targets = r["targets"]
    rows = [
        [
            name,
            f"{f(s['short_p50_ms'])} / {f(s['short_p95_ms'])}",
            f"{f(s['turn_p50_ms'])} / {f(s['turn_p95_ms'])}",
            f"{f(s['bulk_texts_per_s'], 0)} texts/s",
        ]
        for name, s in systems.items()
    ]
    rows.append(
        [
            "ratio sovseal / peer",
            f"{ours['short_p50_ms'] / peer['short_p50_ms']:.2f}",
            f"{ours['turn_p50_ms'] / peer['turn_p50_ms']:.2f}",
            f"{ours['bulk_texts_per_s'] / peer['bulk_texts_per_s']:.2f}",
        ]
    )
    rows.append(
        ["target (issue 3)", f"≤ {targets['short p50 ms']}", f"≤ {targets['turn p50 ms']}", f"≥ {targets['bulk texts/s']:.0f} texts/s"]
    )
    cold, first = r["cold_start_s"], r["first_start_s"]
    cold_rows = [
        [f"model cached (median of {cold['runs']}; best {f(cold['best_total'], 3)})"]
        + [f(cold["median"][k], 3) for k in ("total", "runtime_imports", "import_sovseal", "embedder")],
        ["first ever (builds the cache)"] + [f(first[k], 3) for k in ("total", "runtime_imports", "import_sovseal", "embedder")],
        ["target (issue 3), model cached", f"≤ {targets['cold start s']}", "", "", ""],
    ]
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for ax, kind, title in ((axes[0], "short", "short texts (≤ 12 tokens)"), (axes[1], "turn", "LoCoMo turns")):
        ecdf(ax, {name: s[kind] for name, s in r["samples_ms"].items()}, f"one text per call: {title}")
    save(fig, img, "embed_latency.png")
    return "\n\n".join(
        [
            provenance(run),
            table(
                [
                    f"{r['threads']} threads, best of {r['rounds']}",
                    "short p50 / p95 ms",
                    "LoCoMo turn p50 / p95 ms",
                    f"bulk, {r['bulk_turns']:,} turns",
                ],
                rows,
            ),
            table(
                [
                    "fresh process to first vector",
                    "total s",
                    "numpy + onnxruntime + tokenizers import s",
                    "`import sovseal` s",
                    "`Embedder()` to vector s",
                ],
                cold_rows,
            ),
            image(img, "embed_latency.png", "Embedding latency distributions: sovseal against the int8 file"),
        ]
    )


def section_embed_variants(runs: dict[str, Any], img: Path) -> str:
    run = runs.get("embed_variants")
    if not run:
        return missing("embed_variants")
    r = run["results"]
    rows = [
        [
            f"`{name}`",
            f"{v['cos_min']:.4f} / {v['cos_p01']:.4f} / {v['cos_mean']:.5f}",
            f(v["short_p50_ms"]),
            f(v["turn_p50_ms"]),
            f(v["bulk_texts_per_s"], 0),
        ]
        for name, v in r["variants"].items()
    ]
    header = [
        f"{r['turns']:,} LoCoMo turns",
        "cosine to the fp32 graph: min / 1st percentile / mean",
        "short p50 ms",
        "turn p50 ms",
        "bulk texts/s",
    ]
    return "\n\n".join([provenance(run), table(header, rows)])


def section_langchain(runs: dict[str, Any], img: Path) -> str:
    run = runs.get("langchain")
    if not run:
        return missing("langchain")
    r = run["results"]
    stores = r["stores"]
    peers = {n: s for n, s in stores.items() if n != "sovseal" and isinstance(s, dict)}
    best = max((s["docs_per_s"] for s in peers.values()), default=None)
    rows = []
    for name, s in stores.items():
        if not isinstance(s, dict):
            rows.append([name, s, "", "", "", ""])
            continue
        vs = (
            "best" if peers and name != "sovseal" and s["docs_per_s"] == best else ratio(s["docs_per_s"], best) if name == "sovseal" else ""
        )
        rows.append([name, f"{f(s['ingest_s'], 1)} s", f(s["docs_per_s"], 1), vs, f(s["p50_ms"]), f(s["p95_ms"])])
    fig, ax = plt.subplots(figsize=(7, 3.4))
    ecdf(
        ax,
        {n: s["samples_ms"] for n, s in stores.items() if isinstance(s, dict)},
        f"similarity_search(k={r['k']}), {r['queries']} questions",
    )
    save(fig, img, "langchain_search.png")
    return "\n\n".join(
        [
            provenance(run),
            table(["store", f"ingest, {r['docs']:,} LoCoMo turns", "docs/s", "sovseal vs better peer", "search p50 ms", "p95 ms"], rows),
            "Target: ingest ≥ 90 % of the better peer (ratio ≥ 0.90×) and search p50 below both.",
            image(img, "langchain_search.png", "LangChain similarity_search latency distributions"),
        ]
    )


def section_langgraph(runs: dict[str, Any], img: Path) -> str:
    run = runs.get("langgraph")
    if not run:
        return missing("langgraph")
    r = run["results"]
    sync, asyn = r["sync"], r["async"]
    rows = []
    for op in sync["sovseal"]:
        rows.append(
            [
                op,
                f(sync["sovseal"][op], 3),
                f(sync["sqlite"][op], 3),
                ratio(sync["sovseal"][op], sync["sqlite"][op]),
                f(asyn["sovseal"].get(op), 3),
                f(asyn["sqlite"].get(op), 3),
                ratio(asyn["sovseal"].get(op), asyn["sqlite"].get(op)),
            ]
        )
    ops = list(sync["sovseal"])
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    width = 0.38
    xs = range(len(ops))
    ax.bar(
        [x - width / 2 for x in xs], [sync["sovseal"][o] / sync["sqlite"][o] for o in ops], width, label="sync: SovsealSaver / SqliteSaver"
    )
    ax.bar(
        [x + width / 2 for x in xs],
        [asyn["sovseal"][o] / asyn["sqlite"][o] for o in ops],
        width,
        label="async: AsyncSovsealSaver / AsyncSqliteSaver",
    )
    ax.axhline(1.5, color="red", lw=1, ls="--", label="target: within 1.5×")
    ax.axhline(1.0, color="grey", lw=0.5)
    ax.set_xticks(list(xs), ops)
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(subs=(1.0, 1.5, 2.0, 3.0, 5.0)))
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}×"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set_ylabel("p50 ratio sovseal / SQLite (log)")
    ax.set_title("LangGraph savers: p50 latency ratio per operation", fontsize=10)
    ax.legend(fontsize=8)
    save(fig, img, "langgraph_ratios.png")
    return "\n\n".join(
        [
            provenance(run),
            table(
                ["operation (p50 ms)", "`SovsealSaver`", "`SqliteSaver`", "ratio", "`AsyncSovsealSaver`", "`AsyncSqliteSaver`", "ratio"],
                rows,
            ),
            f"{r['n']} operations each, graph runs of {r['steps']} steps × {r['runs']}. Target: within 1.5× of the SQLite savers.",
            image(img, "langgraph_ratios.png", "LangGraph saver p50 ratios against the SQLite savers"),
        ]
    )


def section_langgraph_delete(runs: dict[str, Any], img: Path) -> str:
    run = runs.get("langgraph_delete")
    if not run:
        return missing("langgraph_delete")
    r = run["results"]
    z, d, g, c, pr = r["sizes_mb"], r["delete_s"], r["gone"], r["compactions"], r["prune"]
    mine, theirs = g["sovseal"], g["sqlite"]
    n = r["deleted"]

    def size(name: str, when: str) -> str:
        parts = z[name].get(when)
        if not parts:
            return "—"
        change = parts["total"] / z[name]["before"]["total"] - 1
        return f"{f(parts['total'])}" + ("" if when == "before" else f" ({change:+.0%})")

    def per(name: str) -> str:
        p = d[name]["per_thread_ms"]
        return f"{f(p['mean'], 1)} / {f(p['p50'], 1)} / {f(p['max'], 1)}"

    def marks(key: str) -> str:
        m = theirs[key]
        return f"{m['either']} of {n}" + (f" (WAL {m['wal']})" if m["wal"] else "")

    rows = [
        [f"on disk before, MB (at rest: {r['threads']} threads × {r['turns']} turns)", size("sovseal", "before"), size("sqlite", "before")],
        [f"right after deleting {n} threads, MB", size("sovseal", "after"), size("sqlite", "after")],
        ["after `wal_checkpoint(TRUNCATE)`, MB", "—", size("sqlite", "checkpointed")],
        [
            (
                f"after one `compact()` / `VACUUM` (sovseal {f(r['compact_s'], 2) if 'compact_s' in r else '—'} s, "
                f"SQLite {f(r['vacuum_s'], 2)} s), MB"
            ),
            size("sovseal", "compacted"),
            size("sqlite", "vacuumed"),
        ],
        [f"`delete_thread` × {n}, s", f"**{f(d['sovseal']['total'], 2)}**", f"**{f(d['sqlite']['total'], 3)}**"],
        ["per thread, ms (mean / p50 / max)", per("sovseal"), per("sqlite")],
        [
            "deleted threads `get_tuple`/`list` still return",
            f"{mine['deleted_threads_still_readable']} of {n}",
            f"{theirs['deleted_threads_still_readable']} of {n}",
        ],
        [
            "kept threads with all their turns",
            f"{mine['kept_threads_intact']} of {mine['kept_threads']}",
            f"{theirs['kept_threads_intact']} of {theirs['kept_threads']}",
        ],
        [
            "store check",
            f"`verify()` {'ok' if mine['verify_ok'] else '**failed**'}: {mine['records']:,} records, {mine['erased']:,} erased (skeletons)",
            (
                f"rows of deleted threads left: {theirs['rows_left']['checkpoints']} + {theirs['rows_left']['writes']}; "
                f"{theirs['free_pages']:,} free pages ({f(theirs['free_pages'] * theirs['page_size'] / 1e6, 1)} MB)"
            ),
        ],
        [
            "deleted threads' text in the files' bytes: before / after delete / after checkpoint / after VACUUM",
            "— (sealed: no plaintext on disk)",
            " / ".join(
                marks(k)
                for k in (
                    "deleted_markers_in_file_before",
                    "deleted_markers_in_file_after_delete",
                    "deleted_markers_in_file_after_wal_checkpoint",
                    "deleted_markers_in_file_after_vacuum",
                )
            ),
        ],
    ]
    final = r.get("compact_report")
    during = (
        f"{c['count']} compactions during the {n} deletes: the `compact()` calls took {f(c['call_s_total'], 1)} s of the "
        f"{f(d['sovseal']['total'], 1)} s, the writer lock held {f(c['paused_s_total'], 2)} s in all. "
        if c["count"]
        else f"No compaction during the {n} deletes (`delete_thread` defers it). "
    )
    after = (
        f"The one `compact()` after them: {f(r['compact_s'], 2)} s (the rewrite {f(final['seconds'], 2)} s, the writer lock "
        f"{f(final['paused'], 3)} s), the journal {f(final['journal_mb'][0])} → {f(final['journal_mb'][1])} MB. "
        if final
        else ""
    )
    notes = (
        during + after + f'`prune({pr["threads"]} threads, strategy="delete")` in one call: {pr["compactions"]} compaction(s), '
        f"{f(pr['seconds'], 2)} s ({f(pr['seconds'] / max(pr['threads'], 1) * 1000, 0)} ms a thread), "
        f"{pr['gone']} of {pr['threads']} threads gone; SqliteSaver's `prune`: {pr['sqlite']}. "
        f"Building the threads took {f(r['build_s']['sovseal'], 1)} s (sovseal) and {f(r['build_s']['sqlite'], 1)} s (SQLite). "
        f"SQLite {theirs['sqlite_version']}, `secure_delete` = {theirs['secure_delete']}."
    )
    fig, ax = plt.subplots(figsize=(7.5, 3.4))
    for name, label in (("sovseal", "SovsealSaver (redaction; the rewrite deferred)"), ("sqlite", "SqliteSaver (DELETE, commit)")):
        samples = d[name]["samples_ms"]
        ax.plot(range(1, len(samples) + 1), samples, lw=1, label=label)
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlabel("delete_thread call (one thread each, in order)")
    ax.set_ylabel("ms (log scale)")
    ax.set_title(f"delete_thread, {n} of {r['threads']} threads deleted one by one", fontsize=10)
    ax.legend(fontsize=8)
    ax.grid(True, which="both", alpha=0.2)
    save(fig, img, "langgraph_delete.png")
    return "\n\n".join(
        [
            provenance(run),
            table(["", "`SovsealSaver`", "`SqliteSaver`"], rows),
            notes,
            image(img, "langgraph_delete.png", "delete_thread latency per call: SovsealSaver against SqliteSaver"),
        ]
    )


def section_llama_index(runs: dict[str, Any], img: Path) -> str:
    run = runs.get("llama_index")
    if not run:
        return missing("llama_index")
    r = run["results"]
    stores = r["stores"]
    rows = [
        [n, f(s["build_s"], 1), f(s["nodes_per_s"], 1), f(s["p50_ms"], 1), f(s["p95_ms"], 1), f(s["hit@10"])] for n, s in stores.items()
    ]
    s, peer = stores["sovseal"], stores["lancedb"]
    fig, ax = plt.subplots(figsize=(7, 3.4))
    ecdf(ax, {n: v["samples_ms"] for n, v in stores.items()}, f"retrieve(similarity_top_k=10), {r['queries']} questions")
    save(fig, img, "llama_index_retrieve.png")
    return "\n\n".join(
        [
            provenance(run),
            table(["store", "build (s)", "nodes/s", "retrieve p50 (ms)", "p95 (ms)", "hit@10"], rows),
            (
                f"{r['turns']:,} turns. Build throughput sovseal / LanceDB: {ratio(s['nodes_per_s'], peer['nodes_per_s'])} "
                f"(target ≥ 0.90×); retrieval p50 sovseal / LanceDB: {ratio(s['p50_ms'], peer['p50_ms'])} (target < 1)."
            ),
            image(img, "llama_index_retrieve.png", "LlamaIndex retrieval latency distributions"),
        ]
    )


def _locomo_rows(split: str, results: dict[str, Any]) -> list[list[str]]:
    rows = []
    for i, fusion in enumerate(x for x in FUSIONS if x in results):
        m = results[fusion]
        bold = (lambda v: f"**{v}**") if fusion == "sovseal" else (lambda v: v)
        label = f"{split} ({int(m['queries'])} q)" if i == 0 else ""
        rows.append([label, bold(fusion)] + [bold(f(m[k], 3)) for k in ("R@1", "R@5", "R@10", "MRR")])
    return rows


def section_recall_quality_locomo(runs: dict[str, Any], img: Path) -> str:
    found = [
        (split, runs[name])
        for split, name in (("dev", "recall_quality_dev"), ("test", "recall_quality_test"))
        if name in runs and "locomo" in runs[name]["results"]
    ]
    if not found:
        return missing("recall_quality_dev,recall_quality_test")
    blocks = [f"**{split} split.** " + provenance(run) for split, run in found]
    rows = [row for split, run in found for row in _locomo_rows(split, run["results"]["locomo"])]
    blocks.append(table(["split", "fusion", "R@1", "R@5", "R@10", "MRR"], rows))
    test = dict(found).get("test")
    if test:
        r10 = test["results"]["locomo"]["sovseal"]["R@10"]
        base = test["results"]["locomo"].get("rrf60", {}).get("R@10")
        verdict = "met" if r10 >= 0.70 else "**not met**"
        against = f"; against the RRF baseline {r10 - base:+.3f}" if base is not None else ""
        blocks.append(f"Target: R@10 ≥ 0.70 on the held-out test split with no LLM: {f(r10, 3)}, {verdict}{against}.")
    fig, axes = plt.subplots(1, len(found), figsize=(5.2 * len(found), 3.8), squeeze=False)
    for ax, (split, run) in zip(axes[0], found, strict=True):
        res = run["results"]["locomo"]
        fusions = [x for x in FUSIONS if x in res]
        width = 0.8 / 3
        for j, k in enumerate(("R@1", "R@5", "R@10")):
            ax.bar([i + (j - 1) * width for i in range(len(fusions))], [res[x][k] for x in fusions], width, label=k)
        if split == "test":
            ax.axhline(0.70, color="red", lw=1, ls="--", label="target R@10 ≥ 0.70")
        ax.set_xticks(range(len(fusions)), fusions, fontsize=8)
        ax.set_ylim(0, 1)
        ax.set_ylabel("evidence recall")
        ax.set_title(f"LoCoMo {split} split: sovseal against the baselines", fontsize=10)
        ax.legend(fontsize=7, loc="upper left")
        ax.grid(True, axis="y", alpha=0.2)
    save(fig, img, "locomo_recall.png")
    blocks.append(image(img, "locomo_recall.png", "LoCoMo recall@k: sovseal against dense, BM25 and RRF baselines"))
    return "\n\n".join(blocks)


def section_recall_quality_beir(runs: dict[str, Any], img: Path) -> str:
    run = next(
        (
            runs[n]
            for n in ("recall_quality_dev", "recall_quality_test")
            if n in runs and {"scifact", "cranfield"} & set(runs[n]["results"])
        ),
        None,
    )
    if not run:
        return missing("recall_quality_dev")
    res = run["results"]
    names = {"scifact": "SciFact test", "cranfield": "Cranfield"}
    targets = {"scifact": "≥ 0.70", "cranfield": "—"}
    rows = []
    for ds in ("scifact", "cranfield"):
        if ds not in res:
            continue
        m = res[ds]
        cells = [f(m[x]["nDCG@10"], 3) if x in m else "—" for x in FUSIONS]
        cells[-1] = f"**{cells[-1]}**"
        rows.append([f"{names[ds]} ({int(next(iter(m.values()))['queries'])} queries)", *cells, targets[ds]])
    return "\n\n".join([provenance(run), table(["dataset (nDCG@10)", *FUSIONS[:-1], "**sovseal**", "target"], rows)])


RECALL_LATENCY_RUNS = ("recall_latency_10k", "recall_latency_100k", "recall_latency_1m")


def section_recall_latency(runs: dict[str, Any], img: Path) -> str:
    found = [runs[n] for n in RECALL_LATENCY_RUNS if n in runs]
    if not found:
        return missing("recall_latency_10k,recall_latency_100k")
    systems = ["query embedding", "sovseal", "sovseal-dense", "langchain-lancedb", "chroma"]
    blocks, rows, other, panels = [], [], [], []
    for run in found:
        blocks.append(provenance(run))
        r = run["results"]
        for size in (k for k in r if k.isdigit()):
            res = r[size]
            lat = res["latency_ms"]
            rows.append(
                [f"{int(size):,} (load {res['load_before'][0]:.1f})"]
                + [f"{f(lat[s]['p50'])} / {f(lat[s]['p95'])}" if s in lat else "—" for s in systems]
            )
            sov = res["sovseal"]
            peers = ", ".join(f"{p} {f(res[p]['ingest_s'], 0)} s" for p in ("chroma", "langchain-lancedb") if p in res)
            other.append(
                f"- {int(size):,} records: sovseal ingest {f(sov.get('ingest_s'), 0)} s (one by one; {peers}); open + catalog load "
                f"{f(sov['open_s'], 1)} s; vector search recall@10 against exact {f(sov['ann_recall@10'], 3)} (IVF in use: {sov['ivf']})"
                + (
                    "; sovseal recall with the query vector already cached (everything but the embedding) "
                    f"p50 {f(sov['without_embedding_ms']['p50'])} ms."
                    if "without_embedding_ms" in sov
                    else "."
                )
            )
            if "samples_ms" in res:
                panels.append((int(size), res["samples_ms"]))
    blocks.append(table(["records (load at start)"] + [f"{s} p50 / p95" for s in systems], rows))
    blocks.append("\n".join(other))
    blocks.append(
        "Targets: sovseal p50 ≤ 5 ms at 10k and ≤ 12 ms at 100k, and faster than both peers (issue 4); at 1M, ≤ 8 ms and "
        "faster than LangChain LanceDB, the only peer there (issue #22: faster, but not ≤ 8 ms; see below)."
    )
    if panels:
        fig, axes = plt.subplots(1, len(panels), figsize=(6 * len(panels), 3.8), squeeze=False)
        for ax, (size, samples) in zip(axes[0], panels, strict=True):
            ecdf(ax, samples, f"recall k=10 at {size:,} records (query embedding included)")
        save(fig, img, "recall_latency.png")
        blocks.append(image(img, "recall_latency.png", "Recall latency distributions against LangChain LanceDB and Chroma"))
    return "\n\n".join(blocks)


def section_recall_ann(runs: dict[str, Any], img: Path) -> str:
    run = runs.get("recall_ann")
    if not run:
        return ""
    a = run["results"]["ann_check"]
    return "\n\n".join(
        [
            "**IVF against exact search** (`--ann-check`, real MiniLM vectors only). " + provenance(run),
            table(
                ["vectors", "lists", "build s", "recall@10 vs exact", "IVF search p50 ms", "exact p50 ms"],
                [
                    [
                        f"{b['vectors']:,}",
                        str(b["lists"]),
                        f(b["build_s"], 1),
                        f(b["recall@10"], 3),
                        f(b["ivf_ms"]["p50"]),
                        f(b["exact_ms"]["p50"]),
                    ]
                    for b in [*a.get("by_size", []), a]
                ],
            ),
        ]
    )


def throughput_plot(runs: dict[str, Any], img: Path) -> str:
    """One figure: sovseal's throughput against its peers, one panel per benchmark that has one."""
    panels: list[tuple[str, str, dict[str, float]]] = []
    if "embed" in runs:
        s = runs["embed"]["results"]["systems"]
        panels.append(
            (
                "embedder, bulk",
                "texts/s",
                {("sovseal" if n.startswith("sovseal") else "int8 file, bare"): v["bulk_texts_per_s"] for n, v in s.items()},
            )
        )
    if "langchain" in runs:
        st = runs["langchain"]["results"]["stores"]
        panels.append(("LangChain add_documents", "docs/s", {n: v["docs_per_s"] for n, v in st.items() if isinstance(v, dict)}))
    if "llama_index" in runs:
        st = runs["llama_index"]["results"]["stores"]
        panels.append(("LlamaIndex index build", "nodes/s", {n: v["nodes_per_s"] for n, v in st.items()}))
    if "store" in runs:
        r = runs["store"]["results"]
        panels.append(
            (
                "single-record writes (1 / p50)",
                "writes/s",
                {"sovseal": 1000 / r["sovseal"]["p50"], "plain LanceDB": 1000 / r["lancedb"]["p50"]},
            )
        )
    if not panels:
        return ""
    fig, axes = plt.subplots(1, len(panels), figsize=(3.3 * len(panels), 3.4), squeeze=False)
    for ax, (title, unit, values) in zip(axes[0], panels, strict=True):
        names = sorted(values, key=lambda n: not n.startswith("sovseal"))  # sovseal first, peers in run order
        colors = ["tab:green" if n.startswith("sovseal") else "tab:grey" for n in names]
        ax.bar(range(len(names)), [values[n] for n in names], color=colors)
        ax.set_xticks(range(len(names)), names, fontsize=8, rotation=15)
        ax.set_ylabel(unit)
        ax.set_title(title, fontsize=9)
        for i, n in enumerate(names):
            ax.annotate(f"{values[n]:,.0f}", (i, values[n]), ha="center", va="bottom", fontsize=8)
        ax.margins(y=0.15)
    save(fig, img, "throughput.png")
    return (
        "## Throughput against peers\n\n"
        + image(img, "throughput.png", "Throughput of sovseal against its peers")
        + ("\n\nGreen: sovseal; grey: its peers in the same run (see each section for the date and load).")
    )


def section_cold_open(runs: dict[str, Any], img: Path) -> str:
    parts = []
    rows = []
    for name in ("cold_open_100k", "cold_open_1m"):
        run = runs.get(name)
        if not run:
            parts.append(missing(name))
            continue
        parts.append(provenance(run))
        r = run["results"]
        warm = r["warm"]["p50_ms"]
        for system, cold in r["cold"].items():
            resident = cold.get("resident_rss_mb_p50")
            rows.append(
                [
                    f"{r['records']:,} ({r['paths']:,} paths)",
                    system,
                    f(cold["seconds_p50"], 2),
                    f(cold["rss_mb_p50"], 0) + (f" ({f(resident, 0)} resident)" if resident else ""),
                    f(warm.get(system), 2),
                    f(warm.get("query embedding"), 2),
                    f(r["warm"].get("sovseal_ivf_recall@10"), 3) if system == "sovseal" else "",
                ]
            )
    parts.append(
        table(
            [
                "records",
                "system",
                "cold: import + open + first query, s (p50)",
                "cold: peak RSS, MB (p50)",
                "warm query p50, ms",
                "query embedding alone p50, ms",
                "IVF recall@10 vs exact",
            ],
            rows,
        )
    )
    return "\n\n".join(parts)


def section_compaction(runs: dict[str, Any], img: Path) -> str:
    run = runs.get("compaction")
    if not run:
        return missing("compaction")
    r = run["results"]

    def latency(w: dict[str, Any], bold: bool = False) -> str:
        top = f(w["max"], 0)
        return f"{f(w['p50'])} / {f(w['p99'])} / " + (f"**{top}**" if bold else top)

    rows = []
    for size, entry in r["sizes"].items():
        sov, lite = entry["median"]["sovseal"], entry["median"]["sqlite"]
        for name, m, what in (("sovseal", sov, "`compact()`"), ("SQLite", lite, "`VACUUM` + WAL checkpoint")):
            w = m["writer_ms"]
            rows.append(
                [
                    f"{int(size):,} (load {entry['load'][0]:.1f})",
                    f"{name}: {what}",
                    f"{f(m['mb_before'], 1)} → {f(m['mb_after'], 1)}",
                    f(m["rewrite_s"]),
                    f(m["mb_per_s"], 0),
                    f(m["pause_s"]),
                    latency(w["before"]),
                    latency(w["during_or_after"], bold=True),
                    f(w["resumed_s"]["s"]),
                ]
            )
        rows.append(
            [
                "",
                "sovseal / SQLite",
                "",
                ratio(sov["rewrite_s"], lite["rewrite_s"]),
                ratio(sov["mb_per_s"], lite["mb_per_s"]),
                ratio(sov["pause_s"], lite["pause_s"]),
                "",
                ratio(sov["writer_ms"]["during_or_after"]["max"], lite["writer_ms"]["during_or_after"]["max"]) + " (max)",
                "",
            ]
        )
    header = [
        "records (load at start)",
        "system",
        "file MB before → after",
        "rewrite s",
        "MB/s",
        "writer-lock pause s",
        "writer before: p50 / p99 / max ms",
        f"writer during and {r['after_s']:g} s after: p50 / p99 / max ms",
        "writer's first call back, s after the end",
    ]
    other = []
    for size, entry in r["sizes"].items():
        b, sov = entry["build"], entry["median"]["sovseal"]
        other.append(
            f"- {int(size):,} records: sovseal's journal {f(b['sovseal']['journal_mb_built'], 1)} MB as written, "
            f"{f(b['sovseal']['journal_mb_purged'], 1)} MB with the redactions of the {b['sovseal']['erased']:,} erased records "
            f"(`purge` {f(b['sovseal']['purge_s'], 1)} s; SQLite's `DELETE` {f(b['sqlite']['purge_s'], 2)} s); the whole `compact()` call "
            f"{f(sov['call_s'])} s; the longest hold of the writer lock, timed around it, {f(sov.get('lock_held_s'))} s; the compaction "
            f"added {f(sov['peak_rss_added_mb'], 0)} MB to its process's peak RSS."
        )
    parts = [
        provenance(run),
        table(header, rows),
        "\n".join(other),
    ]
    largest = max(r["sizes"], key=int)
    lines = r["sizes"][largest].get("timeline")
    if lines:
        fig, ax = plt.subplots(figsize=(7.5, 3.4))
        for name, label, color in (
            ("sovseal", "sovseal store() during compact()", "tab:green"),
            ("sqlite", "SQLite INSERT during VACUUM", "tab:grey"),
        ):
            t = lines[name]
            ax.step([x for x, _ in t["max_ms"]], [y for _, y in t["max_ms"]], where="post", label=label, color=color)
            ax.axvspan(0, t["end_s"], color=color, alpha=0.12)
        held = lines["sovseal"].get("lock_held_s")  # the compacting process's longest hold, timed around it
        if held:
            ax.axvspan(held[0], held[1], color="tab:green", alpha=0.25, hatch="//", label="sovseal's compaction holds the writer lock")
        ax.set_yscale("log")
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
        ax.set_xlabel("seconds from the start of the compaction / VACUUM (shaded: its duration)")
        ax.set_ylabel(f"slowest call started per {lines['sovseal']['step_s']:g} s, ms")
        ax.set_title(f"A writer in another process, {r['writer_rate']:.0f} writes/s, {int(largest):,} records", fontsize=10)
        ax.legend(fontsize=8, loc="upper left")
        ax.grid(True, which="both", alpha=0.2)
        save(fig, img, "compaction_writer.png")
        parts.append(image(img, "compaction_writer.png", "Writer latency over time during sovseal's compaction and SQLite's VACUUM"))
    return "\n\n".join(parts)


SECTIONS: dict[str, Callable[[dict[str, Any], Path], str]] = {
    "cold_open": section_cold_open,
    "store": section_store,
    "replication": section_replication,
    "convergence": section_convergence,
    "compaction": section_compaction,
    "embed": section_embed,
    "embed_variants": section_embed_variants,
    "langchain": section_langchain,
    "langgraph": section_langgraph,
    "langgraph_delete": section_langgraph_delete,
    "llama_index": section_llama_index,
    "recall_quality_locomo": section_recall_quality_locomo,
    "recall_quality_beir": section_recall_quality_beir,
    "recall_latency": section_recall_latency,
    "recall_ann": section_recall_ann,
}


def corpora() -> str:
    """The files ``--data DIR`` holds and the lines that fetch them, from bench/evaldata.py."""
    rows = [
        [f"`{file.path}`", corpus.what, corpus.licence, f"`{file.sha256[:16]}…`"]
        for corpus in evaldata.CORPORA.values()
        for file in corpus.files
    ]
    fetch = ['DIR="$HOME/sovseal-evaldata"   # any folder outside the clone']
    fetch += [f'curl -fL --create-dirs -o "$DIR/{f.path}" {f.url}' for c in evaldata.CORPORA.values() for f in c.files]
    fetch += [f'export {evaldata.ENV}="$DIR"   # or pass --data "$DIR" to each command']
    return table(["file under DIR", "corpus", "licence", "SHA-256"], rows) + "\n\n```bash\n" + "\n".join(fetch) + "\n```"


def commands() -> str:
    """What ``bench/run_all.py`` runs for each result file, from its job list."""
    rows = []
    for job in run_all.JOBS:
        extra = " --database URL" if job.needs == "postgres" else ""
        reads = ", ".join(job.data) if job.data else "—"
        note = " (with `--postgres URL`)" if job.needs == "postgres" else ""
        rows.append([f"`{job.name}`{note}", f"`python {job.script} {' '.join(job.full)}{extra}`", reads])
    return table(["result file (`--only` name)", "command", "corpora (`--data`)"], rows)


def runs_table(runs: dict[str, Any]) -> str:
    if not runs:
        return "*No result files yet: run `python bench/run_all.py`.*"
    hardware = {(r["machine"]["cores"], r["machine"]["cpu"], r["machine"]["ram_gib"]) for r in runs.values()}
    platforms = {r["machine"]["platform"] for r in runs.values()}
    rows = [
        [
            f"`{name}`",
            r["started"].replace("T", " ").replace("+00:00", " UTC"),
            f"{r['seconds']:.0f} s",
            f"{r['load_start'][0]:.2f} → {r['load_end'][0]:.2f}",
            "quick" if r.get("quick") else "full",
        ]
        + ([r["machine"]["platform"]] if len(platforms) > 1 else [])
        for name, r in sorted(runs.items(), key=lambda kv: kv[1]["started"])
    ]
    head = "The result files behind this page:"
    if len(hardware) == 1:
        cores, cpu, ram = next(iter(hardware))
        where = next(iter(platforms)) if len(platforms) == 1 else "the platform of each run in the table"
        head = f"Machine of these runs: {cores} cores ({cpu}), {ram} GiB RAM, {where}. " + head
    loads = [x for r in runs.values() for x in (r["load_start"][0], r["load_end"][0])]
    cores = {r["machine"]["cores"] for r in runs.values()}
    load = (
        f"The 1-min load average ranged from {min(loads):.2f} to {max(loads):.2f} during these runs, on "
        f"{'/'.join(str(c) for c in sorted(cores))} cores: above the core count, other processes competed for the CPU, "
        "so latency and throughput figures are inflated (ratios measured side by side in one run hold better); "
        "quality figures do not depend on the load."
    )
    columns = ["result", "started", "took", "1-min load average (start → end)", "sizes"] + (["platform"] if len(platforms) > 1 else [])
    return head + "\n\n" + table(columns, rows) + "\n\n" + load


def load_runs(results: Path) -> dict[str, Any]:
    return {p.stem: json.loads(p.read_text()) for p in sorted(results.glob("*.json"))}


def render(results: Path, out: Path, img: Path) -> str:
    """Write the page (and its images) from the result files in ``results``; returns the markdown."""
    runs = load_runs(results)
    text = TEMPLATE.read_text()
    text = text.replace("{{corpora}}", corpora())
    text = text.replace("{{commands}}", commands())
    text = text.replace("{{runs}}", runs_table(runs))
    text = text.replace("{{throughput}}", throughput_plot(runs, img))
    for name, make in SECTIONS.items():
        text = text.replace("{{latest:" + name + "}}", make(runs, img))
    leftover = re.findall(r"\{\{[^}]*\}\}", text)
    if leftover:
        raise ValueError(f"unknown markers in {TEMPLATE.name}: {leftover}")
    text = re.sub(r"\n{3,}", "\n\n", text).rstrip("\n") + "\n"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--results", type=Path, default=ROOT / "bench" / "results")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "benchmarks.md")
    parser.add_argument("--img", type=Path, default=ROOT / "docs" / "img")
    args = parser.parse_args()
    render(args.results, args.out, args.img)
    print(f"wrote {args.out} and the images in {args.img}")


if __name__ == "__main__":
    main()
