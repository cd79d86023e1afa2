"""Cold open: a fresh process imports, opens a large store and answers its first query.

What an MCP server restart, a notebook kernel, a CLI command or a web worker pays each time
(issue #22). Three systems get the same vectors and texts:

    sovseal            Sovseal(path).recall(q, k=10): journal, checkpoint, catalog, vector snapshot,
                       hybrid search over HEAD, every result decrypted and checked
    lancedb            lancedb.connect(path).open_table(...).search(v).limit(10): flat search
    chroma             chromadb.PersistentClient(path).get_collection(...).query(v, n_results=10): HNSW

Each cold run is a new Python process (``python bench_cold_open.py --child SYSTEM PATH``) that
times import + open + first query *including the query's embedding by the real model* and
reports its own peak RSS (``VmHWM``); runs rotate between the systems so that load changes hit
all alike, and the medians are reported. Then, warm, in one process each: the p50 of a query
(embedding included) over ``--queries`` queries, and sovseal's IVF recall@10 against its exact
search.

The records: ``--paths`` paths each written ``--writes`` times (the issue's 100,000 x 2), the text
of each a dozen words drawn from a fixed vocabulary (``--seed``), the vectors mixtures of
``--real`` real MiniLM embeddings of such texts plus noise (the model embeds ~30 texts/s on a
busy 2-core machine: a million is out of reach), so that the IVF lists have the structure real
vectors give them. sovseal's store is written through ``store_many`` with those vectors, then
opened once the way a long-running process leaves it (catalog checkpointed, IVF built, closed):
that preparation is timed and reported apart. Nothing here needs a corpus.

The peers are in the project's ``bench`` extra: ``pip install -e ".[bench]"``.

Run: python bench/bench_cold_open.py --paths 100000 --writes 2
     python bench/bench_cold_open.py --paths 500000 --writes 2 --runs 3
     (--workdir DIR keeps the stores there, --reuse uses those a previous run left)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

WORDS = [f"w{i}" for i in range(20000)] + (
    "memory user likes coffee tea paris berlin meeting project deadline alice bob travel doctor "
    "allergy birthday flight hotel invoice password garden piano recipe"
).split()
QUERIES = [
    "user likes coffee in paris",
    "a meeting in berlin about the project deadline",
    "alice travel to the doctor",
    "birthday flight and hotel",
    "garden piano recipe",
]


def texts(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(WORDS), size=(n, 12))
    return [" ".join(WORDS[j] for j in row) for row in picks]


def vectors(n: int, real: int, seed: int, cache: Path) -> np.ndarray:
    """``n`` unit vectors: mixtures of two of ``real`` MiniLM embeddings plus noise (deterministic)."""
    path = cache / f"cold-open-real-{real}-{seed}.npy"
    if path.exists():
        base = np.load(path)
    else:
        from sovseal.embed import Embedder

        base = Embedder().embed_documents(texts(real, seed + 1))
        cache.mkdir(parents=True, exist_ok=True)
        np.save(path, base)
    rng = np.random.default_rng(seed)
    out = np.empty((n, base.shape[1]), dtype=np.float32)
    for start in range(0, n, 100_000):
        m = min(100_000, n - start)
        a, b = rng.integers(0, len(base), m), rng.integers(0, len(base), m)
        mixed = base[a] + 0.5 * base[b] + 0.05 * rng.standard_normal((m, base.shape[1])).astype(np.float32)
        out[start : start + m] = mixed / np.linalg.norm(mixed, axis=1, keepdims=True)
    return out


# -- building --------------------------------------------------------------------------------------


def build_sovseal(root: Path, paths: int, writes: int, vecs: np.ndarray, words: list[str]) -> dict[str, float]:
    from sovseal import Sovseal

    key = os.urandom(32)
    (root / "sovseal.key").write_bytes(key)
    started = time.perf_counter()
    with Sovseal(root / "sovseal", key=key) as mem:
        for w in range(writes):
            for start in range(0, paths, 2000):
                end = min(paths, start + 2000)
                rows = slice(w * paths + start, w * paths + end)
                items = [
                    {"path": f"note.{i}", "payload": {"text": t, "v": w}, "text": t}
                    for i, t in zip(range(start, end), words[rows], strict=True)
                ]
                mem.store_many(items, vectors=vecs[rows])
    return {"ingest_s": time.perf_counter() - started}


def prepare_sovseal(root: Path) -> float:
    """Open the store as a long-running process would and close it: its catalog checkpointed, its
    IVF built and snapshotted (with a store left by an earlier run: whatever a newer version needs)."""
    from sovseal import Sovseal

    started = time.perf_counter()
    with Sovseal(root / "sovseal", key=(root / "sovseal.key").read_bytes()) as mem:
        mem.recall(QUERIES[0], k=1)
        mem._recall_engine().wait_ready()
        mem._vector_index().wait_ivf()
    return time.perf_counter() - started


def build_lancedb(root: Path, vecs: np.ndarray, words: list[str]) -> dict[str, float]:
    import lancedb
    import pyarrow as pa

    started = time.perf_counter()
    db = lancedb.connect(str(root / "lancedb"))
    data = pa.table(
        {
            "id": pa.array(np.arange(len(vecs))),
            "text": pa.array(words),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(vecs.ravel()), vecs.shape[1]),
        }
    )
    db.create_table("bench", data, mode="overwrite")
    return {"ingest_s": time.perf_counter() - started}


def build_chroma(root: Path, vecs: np.ndarray, words: list[str]) -> dict[str, float]:
    import chromadb
    from chromadb.config import Settings

    started = time.perf_counter()
    client = chromadb.PersistentClient(path=str(root / "chroma"), settings=Settings(anonymized_telemetry=False))
    collection = client.create_collection("bench", embedding_function=None, metadata={"hnsw:space": "cosine"})
    step = 5000
    for start in range(0, len(vecs), step):
        end = min(start + step, len(vecs))
        collection.add(ids=[str(i) for i in range(start, end)], documents=words[start:end], embeddings=vecs[start:end])
    return {"ingest_s": time.perf_counter() - started}


# -- the child: one cold run -----------------------------------------------------------------------


def child(system: str, root: Path, query: str) -> None:
    started = time.perf_counter()
    if system == "sovseal":
        from sovseal import Sovseal

        mem = Sovseal(root / "sovseal", key=(root / "sovseal.key").read_bytes())
        found = len(mem.recall(query, k=10))
        seconds, peak = time.perf_counter() - started, peak_rss_mb()
        mem._vector_index().warmed.wait()  # what the process holds once it has lived a few seconds
        print(json.dumps({"seconds": seconds, "rss_mb": peak, "resident_rss_mb": peak_rss_mb(), "found": found}))
        return
    else:
        from sovseal.embed import Embedder

        vector = Embedder().embed_documents([query])[0]
        if system == "lancedb":
            import lancedb

            table = lancedb.connect(str(root / "lancedb")).open_table("bench")
            found = len(table.search(vector).limit(10).to_list())
        else:
            import chromadb
            from chromadb.config import Settings

            client = chromadb.PersistentClient(path=str(root / "chroma"), settings=Settings(anonymized_telemetry=False))
            found = len(client.get_collection("bench").query(query_embeddings=[vector], n_results=10)["ids"][0])
    seconds = time.perf_counter() - started
    print(json.dumps({"seconds": seconds, "rss_mb": peak_rss_mb(), "found": found}))


def peak_rss_mb() -> float:
    """This process's peak resident set (VmHWM): ``ru_maxrss`` would carry the parent's over from fork."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def cold(systems: list[str], root: Path, runs: int) -> dict[str, dict[str, float]]:
    samples: dict[str, list[dict[str, float]]] = {s: [] for s in systems}
    for run in range(runs):
        for system in systems[run % len(systems) :] + systems[: run % len(systems)]:
            query = QUERIES[run % len(QUERIES)]
            out = subprocess.run(
                [sys.executable, __file__, "--child", system, str(root), query], capture_output=True, text=True, check=True
            ).stdout
            samples[system].append(json.loads(out.strip().splitlines()[-1]))
    return {
        s: {
            "seconds_p50": statistics.median(x["seconds"] for x in v),
            "rss_mb_p50": statistics.median(x["rss_mb"] for x in v),
            "rss_mb_max": max(x["rss_mb"] for x in v),
            **({"resident_rss_mb_p50": statistics.median(x["resident_rss_mb"] for x in v)} if "resident_rss_mb" in v[0] else {}),
        }
        for s, v in samples.items()
    }


# -- warm: query latency and recall@10 -------------------------------------------------------------


def warm(systems: list[str], root: Path, queries: int) -> dict[str, Any]:
    from sovseal import Sovseal
    from sovseal.embed import Embedder

    embedder = Embedder()
    qs = [f"{QUERIES[i % len(QUERIES)]} {WORDS[(7 * i) % len(WORDS)]}" for i in range(queries)]
    calls: dict[str, Any] = {}
    mem = Sovseal(root / "sovseal", key=(root / "sovseal.key").read_bytes(), embedder=embedder) if "sovseal" in systems else None
    if mem is not None:
        engine = mem._recall_engine()

        def recall(q: str) -> Any:
            engine._queries.clear()  # every call embeds its query
            return mem.recall(q, k=10)

        calls["sovseal"] = recall
    if "lancedb" in systems:
        import lancedb

        table = lancedb.connect(str(root / "lancedb")).open_table("bench")
        calls["lancedb"] = lambda q: table.search(embedder.embed_documents([q])[0]).limit(10).to_list()
    if "chroma" in systems:
        import chromadb
        from chromadb.config import Settings

        collection = chromadb.PersistentClient(path=str(root / "chroma"), settings=Settings(anonymized_telemetry=False)).get_collection(
            "bench"
        )
        calls["chroma"] = lambda q: collection.query(query_embeddings=[embedder.embed_documents([q])[0]], n_results=10)
    calls["query embedding"] = lambda q: embedder.embed_documents([q])
    if mem is not None:  # a long-running process: the mapped matrix is made resident in the background
        mem._vector_index().warmed.wait()
    names = list(calls)
    for name in names:
        calls[name]("warm up")
    samples: dict[str, list[float]] = {n: [] for n in names}
    for i, q in enumerate(qs):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            started = time.perf_counter()
            calls[name](q)
            samples[name].append(time.perf_counter() - started)
    out: dict[str, Any] = {"p50_ms": {n: statistics.median(v) * 1000 for n, v in samples.items()}}
    if mem is not None:
        index = mem._vector_index()
        with mem._store.reading() as lineage:
            visible = engine.visible(lineage, mem._store.branch(mem.branch)).copy()
        overlap = []
        for q in qs[:100]:
            v = embedder.embed_documents([q])[0]
            approx = {n for n, _ in index.search(v, 10, visible)}
            exact = {n for n, _ in index.search(v, 10, visible, exact=True)}
            overlap.append(len(approx & exact) / 10)
        out["sovseal_ivf_recall@10"] = float(np.mean(overlap))
        mem.close()
    return out


def cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return f"{line.split(':', 1)[1].strip()} ({os.cpu_count()} cores)"
    except OSError:
        pass
    return f"{platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        child(sys.argv[2], Path(sys.argv[3]), sys.argv[4])
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--paths", type=int, default=100_000)
    parser.add_argument("--writes", type=int, default=2)
    parser.add_argument("--real", type=int, default=2000, help="real MiniLM embeddings the vectors are mixed from")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--runs", type=int, default=5, help="cold runs per system")
    parser.add_argument("--queries", type=int, default=200, help="warm queries per system")
    parser.add_argument("--peers", default="lancedb,chroma", help="comma list, or 'none'")
    parser.add_argument("--workdir", type=Path, default=None, help="where the stores go (default: a temporary folder, removed)")
    parser.add_argument("--reuse", action="store_true", help="use the stores a previous run left in --workdir")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "sovseal-bench")
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    peers = [] if args.peers == "none" else [p for p in args.peers.split(",") if p]
    systems = ["sovseal", *peers]
    root = args.workdir or Path(tempfile.mkdtemp(prefix="sovseal-cold-"))
    root.mkdir(parents=True, exist_ok=True)
    n = args.paths * args.writes
    result: dict[str, Any] = {"cpu": cpu(), "records": n, "paths": args.paths, "build": {}}
    try:
        if not args.reuse:
            words = texts(n, args.seed)
            vecs = vectors(n, args.real, args.seed, args.cache)
            for system in systems:
                shutil.rmtree(root / system, ignore_errors=True)
                print(f"building {system} ({n} records)...", file=sys.stderr, flush=True)
                build = {
                    "sovseal": lambda: build_sovseal(root, args.paths, args.writes, vecs, words),
                    "lancedb": lambda: build_lancedb(root, vecs, words),
                    "chroma": lambda: build_chroma(root, vecs, words),
                }[system]
                result["build"][system] = build()
            del vecs, words
        if "sovseal" in systems:
            result["build"].setdefault("sovseal", {})["prepare_s"] = prepare_sovseal(root)
        result["load"] = os.getloadavg()
        result["cold"] = cold(systems, root, args.runs)
        result["warm"] = warm(systems, root, args.queries)
        result["load_after"] = os.getloadavg()
    finally:
        if args.workdir is None:
            shutil.rmtree(root, ignore_errors=True)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        args.json.write_text(text)


if __name__ == "__main__":
    main()
