"""Run every benchmark side by side with its peers, then regenerate docs/benchmarks.md.

    python bench/run_all.py [--quick] [--peer-python PATH] [--only NAME,...] [--postgres URL]

Each benchmark runs in its own process with ``--json``; its figures are wrapped with what a reader
needs to judge them (the command, the interpreter, the machine, the load average before and after,
the date) and written to ``bench/results/<name>.json``. A benchmark that fails leaves the previous
result file in place and the run goes on, so the report then shows that section's older date.
Finally ``bench/report.py`` turns the result files into ``docs/benchmarks.md`` and ``docs/img/*.png``.

Benchmarks with peers (LanceDB, Chroma, the int8 model file, the SQLite savers, LangChain's and
LlamaIndex's stores) run with ``--peer-python``: an interpreter whose environment also has the peer
packages, kept out of sovseal's own dependencies (default ``/work/bench-env/bin/python`` when it
exists, else this interpreter). The others run with this interpreter.

``--quick`` runs small sizes (a smoke test of the whole pipeline: figures not comparable with the
report's) and writes its results and report under ``--out`` (default: a ``sovseal-bench-quick``
directory in the temp dir) instead of the committed ones.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "bench" / "results"
CACHE = Path(tempfile.gettempdir()) / "sovseal-bench-cache"  # bulk embeddings, shared by the recall benchmarks
DEFAULT_PEER_PYTHON = Path("/work/bench-env/bin/python")


@dataclass(frozen=True)
class Job:
    """One benchmark invocation: its script, its full and quick arguments, and whether it needs peers."""

    name: str
    script: str
    full: list[str]
    quick: list[str] | None  # None: not run with --quick
    peers: bool
    needs: str = ""  # "postgres": only when --postgres is given
    env: dict[str, str] = field(default_factory=dict)


JOBS = [
    Job("store", "bench/bench_store.py", ["--n", "2000"], ["--n", "200"], peers=True),
    Job("embed", "bench/bench_embed.py", ["--turns", "2000", "--rounds", "5"], ["--turns", "200", "--rounds", "1"], peers=True),
    Job("embed_variants", "bench/bench_embed_variants.py", ["--turns", "2000", "--rounds", "3"], ["--turns", "100", "--rounds", "1"], peers=False),
    Job(
        "recall_quality_dev",
        "bench/bench_recall_quality.py",
        ["--datasets", "locomo,scifact,cranfield", "--split", "dev", "--cache", str(CACHE)],
        ["--datasets", "locomo", "--split", "dev", "--cache", str(CACHE)],
        peers=False,
    ),
    Job(
        "recall_quality_test",
        "bench/bench_recall_quality.py",
        ["--datasets", "locomo", "--split", "test", "--cache", str(CACHE)],
        None,
        peers=False,
    ),
    Job("recall_latency_10k", "bench/bench_recall_latency.py", ["--sizes", "10000"], ["--sizes", "2000", "--queries", "50"], peers=True),
    Job(
        "recall_latency_100k",
        "bench/bench_recall_latency.py",
        ["--sizes", "100000", "--real-vectors", "10000"],
        None,
        peers=True,
    ),
    Job(
        "recall_latency_1m",
        "bench/bench_recall_latency.py",
        ["--sizes", "1000000", "--real-vectors", "10000", "--peers", "langchain-lancedb"],
        None,
        peers=True,
    ),
    Job("recall_ann", "bench/bench_recall_latency.py", ["--ann-check"], None, peers=False),
    Job("replication", "bench/bench_replication.py", ["--n", "10000"], ["--n", "300", "--seconds", "2", "--fake-embedder"], peers=False),
    Job(
        "replication_postgres",
        "bench/bench_replication.py",
        ["--n", "10000", "--fake-embedder"],
        ["--n", "300", "--seconds", "2", "--fake-embedder"],
        peers=False,
        needs="postgres",
    ),
    Job(
        "langchain",
        "integrations/langchain-sovseal/bench/bench_langchain.py",
        ["--docs", "2000", "--queries", "200"],
        ["--docs", "200", "--queries", "30"],
        peers=True,
    ),
    Job(
        "langgraph",
        "integrations/langgraph-checkpoint-sovseal/bench/bench_langgraph.py",
        ["--n", "200", "--runs", "6"],
        ["--n", "20", "--runs", "2", "--steps", "10"],
        peers=True,
    ),
    Job(
        "llama_index",
        "integrations/llama-index-sovseal/bench/bench_llama_index.py",
        ["--turns", "2000", "--queries", "200"],
        ["--turns", "200", "--queries", "30"],
        peers=True,
    ),
]


#: CPU flags that decide how fast the embedder's kernels run, in the words a reader knows them by.
VECTOR_UNITS = (("AVX2", "avx2"), ("AVX-512", "avx512f"), ("VNNI", "avx512_vnni"), ("AMX", "amx_tile"))


def machine() -> dict[str, Any]:
    """Cores, CPU model, RAM and platform: what a reader needs to place the figures."""
    model, flags = "", set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name") and not model:
                model = line.split(":", 1)[1].strip()
            elif line.startswith("flags") and not flags:
                flags = set(line.split(":", 1)[1].split())
    except OSError:
        pass
    if flags:  # the embedder's speed depends on these far more than on the model name
        units = [name for name, flag in VECTOR_UNITS if flag in flags]
        model = f"{model}, {' + '.join(units) or 'no AVX2'}"
    ram_gib = None
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                ram_gib = round(int(line.split()[1]) / 1024**2, 1)
                break
    except OSError:
        pass
    return {
        "cores": os.cpu_count(),
        "cpu": model or platform.processor() or platform.machine(),
        "ram_gib": ram_gib,
        "platform": platform.platform(),
    }


def run_job(job: Job, python: str, quick: bool, results: Path, postgres: str | None) -> bool:
    """Run one benchmark; on success write its wrapped result file. Returns whether it succeeded."""
    args = list(job.quick if quick else job.full)  # type: ignore[arg-type]
    if job.needs == "postgres":
        args += ["--database", postgres or ""]
    logs = Path(tempfile.gettempdir()) / "sovseal-bench-logs"  # full output of each benchmark, kept out of the repository
    logs.mkdir(parents=True, exist_ok=True)
    raw = results / f".{job.name}.raw.json"
    raw.unlink(missing_ok=True)
    command = [python, job.script, *args, "--json", str(raw)]
    shown = " ".join(["python", job.script, *args])
    print(f"[{dt.datetime.now(dt.UTC):%H:%M:%S}] {job.name}: {shown}  (interpreter {python})", flush=True)
    started = dt.datetime.now(dt.UTC)
    load_start = os.getloadavg()
    t0 = time.perf_counter()
    with (logs / f"{job.name}.log").open("w") as log:
        code = subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, **job.env}).returncode
    seconds = time.perf_counter() - t0
    if code != 0 or not raw.exists():
        print(f"    FAILED (exit {code}) after {seconds:.0f} s; see {logs / (job.name + '.log')}; the previous result is kept", flush=True)
        return False
    wrapped = {
        "name": job.name,
        "command": shown,
        "python": python,
        "peer_environment": job.peers,
        "quick": quick,
        "started": started.isoformat(timespec="seconds"),
        "seconds": round(seconds, 1),
        "load_start": [round(x, 2) for x in load_start],
        "load_end": [round(x, 2) for x in os.getloadavg()],
        "machine": machine(),
        "results": json.loads(raw.read_text()),
    }
    raw.unlink()
    (results / f"{job.name}.json").write_text(json.dumps(wrapped, indent=1) + "\n")
    print(f"    done in {seconds:.0f} s (load {wrapped['load_start'][0]} -> {wrapped['load_end'][0]})", flush=True)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes; results and report go to --out, not the docs")
    parser.add_argument(
        "--peer-python",
        default=str(DEFAULT_PEER_PYTHON) if DEFAULT_PEER_PYTHON.exists() else sys.executable,
        help="interpreter for the benchmarks with peers (its environment has chromadb, langchain-community, ...)",
    )
    parser.add_argument("--only", default="", help="comma list of benchmark names: " + ",".join(j.name for j in JOBS))
    parser.add_argument("--postgres", default=None, help="a postgresql:// URL: also run replication against a PostgreSQL server")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "sovseal-bench-quick", help="with --quick")
    parser.add_argument("--no-report", action="store_true", help="run the benchmarks only")
    args = parser.parse_args()

    results = args.out / "results" if args.quick else RESULTS
    results.mkdir(parents=True, exist_ok=True)
    wanted = set(filter(None, args.only.split(",")))
    unknown = wanted - {j.name for j in JOBS}
    if unknown:
        raise SystemExit(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    print(f"benchmarks with peers run with {args.peer_python}; the others with {sys.executable}")
    print(f"results: {results}; machine: {machine()}", flush=True)
    failed, skipped = [], []
    for job in JOBS:
        if wanted and job.name not in wanted:
            continue
        if (args.quick and job.quick is None) or (job.needs == "postgres" and not args.postgres):
            skipped.append(job.name)
            continue
        python = args.peer_python if job.peers else sys.executable
        if not run_job(job, python, args.quick, results, args.postgres):
            failed.append(job.name)
    if skipped:
        print(f"skipped: {', '.join(skipped)}" + ("" if args.postgres else " (replication_postgres needs --postgres URL)"))
    if not args.no_report:
        from report import render

        out_md = args.out / "benchmarks.md" if args.quick else ROOT / "docs" / "benchmarks.md"
        img = args.out / "img" if args.quick else ROOT / "docs" / "img"
        render(results, out_md, img)
        print(f"report: {out_md} (images in {img})")
    if failed:
        raise SystemExit(f"failed: {', '.join(failed)}")


if __name__ == "__main__":
    main()
