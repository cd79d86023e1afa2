"""Recall latency at 10k and 100k memories: sovseal vs LangChain's LanceDB vector store vs Chroma.

All three get the same texts, the same all-MiniLM-L6-v2 (``sovseal.embed.Embedder``) and the same
queries. Stored texts are embedded once in bulk (``embed_documents``) and handed to every system by
a lookup, so ingestion costs no model time; every *query* is embedded by the real model inside the
timed call, and no call hits a query cache. The systems are timed round-robin on each query in a
rotating order, so a change in the machine's load during the run hits all of them alike:

    query embedding    embedder.embed_documents([q]) alone: the floor every system pays
    sovseal            mem.recall(q, k=10): query embedding, hybrid dense + BM25 search over the
                       records visible at HEAD, fusion with lineage context, decay/reinforcement, and
                       decrypting and re-deriving the snapshot id of each of the 10 results
    sovseal-dense      the same with RecallParams(fusion="dense", neighbor_weights=())
    langchain-lancedb  LanceDB(...).similarity_search(q, k=10)  (flat search, no ANN index)
    chroma             collection.query(query_embeddings=[embed(q)], n_results=10)  (HNSW)

and, timed on its own after those, sovseal's recall with the query's vector already in its LRU:
everything recall does but the embedding (``without_embedding_ms`` in the JSON).

sovseal's stores go through ``Sovseal.store`` one by one (journal, seal, fsync). By default the
stores live in /dev/shm, where fsync costs nothing, to keep a 100k ingest to minutes; the timed
recalls never fsync. The texts: SciFact abstract sentences, pairs of adjacent sentences, LoCoMo
turns and Cranfield sentences (from ``--data DIR``, default ``$SOVSEAL_EVALDATA``: see
``bench/evaldata.py``), in that order, the first N; past the
~125k distinct ones (a 1M run), random pairs of them joined. Queries: the
300 SciFact validation claims, then LoCoMo questions.

``--real-vectors N`` embeds only the first N texts and gives the others mixtures of those vectors
(two real vectors plus noise): on a busy 2-core machine the model embeds ~20-30 texts/s, too slow
for 100k in one session. The latency of a dense search does not depend on the values; the
ANN recall is then measured on real vectors only with ``--ann-check`` (every embedding the quality
and latency benchmarks cached, ~24k, 500 held out as queries).

Also reported: recall@10 of sovseal's vector search (IVF from 8,000 vectors on) against exact
search over the same vectors, and the time to open the store and load its in-memory catalog.

The peers are in the project's ``bench`` extra, never in sovseal's dependencies (tested: chromadb
1.5.9, langchain-community 0.4.2):

    pip install -e ".[bench]"

Run: python bench/bench_recall_latency.py --data DIR --sizes 10000 [--queries 300]
     python bench/bench_recall_latency.py --data DIR --sizes 100000 --real-vectors 10000
     python bench/bench_recall_latency.py --ann-check     (reads only the --cache, no corpus)
     (--peers none runs sovseal alone, without the bench extra)
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import evaldata  # bench/ is not a package
from bench_recall_quality import CACHE, _scifact_sentences, _smart, entry_text

from sovseal import Sovseal
from sovseal.embed import Embedder
from sovseal.recall import RecallParams


def corpus(data_dir: Path, n: int) -> list[str]:
    import csv
    import io
    import zipfile

    with zipfile.ZipFile(data_dir / "scifact" / "scifact.zip") as z:
        name = next(x for x in z.namelist() if x.endswith("corpus_train.csv"))
        abstracts = [_scifact_sentences(r["abstract"]) for r in csv.DictReader(io.TextIOWrapper(z.open(name), encoding="utf-8"))]
    texts = [s for a in abstracts for s in a]
    texts += [f"{a[i]} {a[i + 1]}" for a in abstracts for i in range(len(a) - 1)]
    data = json.loads((data_dir / "locomo" / "locomo10.json").read_text())
    for sample in data:
        conv = sample["conversation"]
        for key, turns in conv.items():
            if re.fullmatch(r"session_\d+", key) and isinstance(turns, list):
                texts += [f"{t['speaker']}: {t['text']}" for t in turns]
    for doc in _smart(data_dir / "cranfield" / "cran.all.1400"):
        texts += [s.strip() for s in doc.get("W", "").split(" . ") if len(s.strip()) > 20]
    unique = list(dict.fromkeys(t for t in texts if t.strip()))
    if len(unique) >= n:
        return unique[:n]
    # Past the distinct sentences (about 125k), two of them joined: real words in real proportions
    # for the keyword index, every text distinct (deterministic, so a --reuse run sees the same texts).
    rng = np.random.default_rng(1)
    seen, base = set(unique), len(unique)
    while len(unique) < n:
        for a, b in rng.integers(0, base, (n - len(unique), 2)):
            joined = f"{unique[a]} {unique[b]}"
            if joined not in seen:
                seen.add(joined)
                unique.append(joined)
    return unique[:n]


def queries(data_dir: Path, count: int) -> list[str]:
    import csv
    import io
    import zipfile

    with zipfile.ZipFile(data_dir / "scifact" / "scifact.zip") as z:
        name = next(x for x in z.namelist() if x.endswith("claims_validation.csv"))
        out = list(dict.fromkeys(r["claim"] for r in csv.DictReader(io.TextIOWrapper(z.open(name), encoding="utf-8"))))
    data = json.loads((data_dir / "locomo" / "locomo10.json").read_text())
    out += [qa["question"] for s in data for qa in s["qa"]]
    return list(dict.fromkeys(out))[:count]


def bulk(embedder: Embedder, texts: list[str], cache: Path, label: str) -> np.ndarray:
    digest = hashlib.sha256("\x00".join(texts).encode()).hexdigest()[:16]
    path = cache / f"latency-{label}-{len(texts)}-{digest}.npy"
    if path.exists():
        return np.load(path)
    started = time.perf_counter()
    vectors = embedder.embed_documents(texts)
    print(f"  embedded {len(texts)} {label} texts in {time.perf_counter() - started:.0f} s", file=sys.stderr, flush=True)
    cache.mkdir(parents=True, exist_ok=True)
    np.save(path, vectors)
    return vectors


def synthesize(real: np.ndarray, n: int) -> np.ndarray:
    """``n`` unit vectors: the real ones, then mixtures of two real ones plus noise (deterministic)."""
    rng = np.random.default_rng(0)
    extra = n - len(real)
    a, b = rng.integers(0, len(real), extra), rng.integers(0, len(real), extra)
    mixed = real[a] + 0.5 * real[b] + 0.05 * rng.standard_normal((extra, real.shape[1])).astype(np.float32)
    mixed /= np.linalg.norm(mixed, axis=1, keepdims=True)
    return np.concatenate([real, mixed.astype(np.float32)])


def ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50": statistics.median(ordered) * 1000,
        "p95": ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))] * 1000,
        "mean": statistics.fmean(ordered) * 1000,
    }


def interleaved(calls: dict[str, Callable[[str], Any]], qs: list[str]) -> tuple[dict[str, dict[str, float]], dict[str, list[float]]]:
    """Time every system on every query, round-robin in a rotating order, so that a change in the
    machine's load during the run affects all of them alike. Returns the summaries and the samples (ms)."""
    names = list(calls)
    for name in names:
        calls[name]("warm-up: what is the weather like today?")
    samples: dict[str, list[float]] = {name: [] for name in names}
    for i, q in enumerate(qs):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            gc.disable()
            started = time.perf_counter()
            calls[name](q)
            samples[name].append(time.perf_counter() - started)
            gc.enable()
    rounded = {name: [round(x * 1000, 4) for x in values] for name, values in samples.items()}
    return {name: ms(values) for name, values in samples.items()}, rounded


class Lookup:
    """Stored texts: their precomputed vectors. Anything else (queries): the real model, uncached."""

    def __init__(self, embedder: Embedder, table: dict[str, np.ndarray]) -> None:
        self.embedder, self.table = embedder, table

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        return np.stack([self.table[t] if t in self.table else self.embedder.embed_documents([t])[0] for t in texts])


def run_sovseal(root: Path, texts: list[str], vectors: np.ndarray, embedder: Embedder, qs: list[str], reuse: bool) -> dict[str, Any]:
    paths = [f"bench.{i}" for i in range(len(texts))]
    table = {entry_text(p, t): v for p, t, v in zip(paths, texts, vectors, strict=True)}
    lookup = Lookup(embedder, table)
    store = root / f"sovseal-{len(texts)}"
    key_file = root / f"sovseal-{len(texts)}.key"
    out: dict[str, Any] = {}
    if not (reuse and key_file.exists()):
        shutil.rmtree(store, ignore_errors=True)
        key = os.urandom(32)
        started = time.perf_counter()
        with Sovseal(store, key=key, embedder=lookup) as mem:
            for path, text in zip(paths, texts, strict=True):
                mem.store(path, text)
        out["ingest_s"] = time.perf_counter() - started
        key_file.write_bytes(key)
    started = time.perf_counter()
    mem = Sovseal(store, key=key_file.read_bytes(), embedder=lookup)
    engine = mem._recall_engine()
    engine.wait_ready()
    index = mem._vector_index()
    index.wait_ivf()
    out["open_s"] = time.perf_counter() - started
    out["catalog_load_s"] = engine.load_seconds
    out["ivf"] = index._ivf is not None
    try:
        # recall@10 of the vector search against exact search, on the same query vectors
        with mem._store.reading() as lineage:
            visible = engine.visible(lineage, mem._store.branch(mem.branch)).copy()
        qv = [engine.query_vector(q) for q in qs]  # also warms nothing that is timed below: fresh queries follow
        overlap = []
        for v in qv:
            approx = {n for n, _ in index.search(v, 10, visible)}
            exact = {n for n, _ in index.search(v, 10, visible, exact=True)}
            overlap.append(len(approx & exact) / 10)
        out["ann_recall@10"] = float(np.mean(overlap))
        hybrid, dense = RecallParams(), replace(RecallParams(), fusion="dense", neighbor_weights=())

        def recall_with(params: RecallParams) -> Callable[[str], Any]:
            def call(q: str) -> Any:
                mem.recall_params = params
                engine._queries.clear()  # every timed call embeds its query
                return mem.recall(q, k=10)

            return call

        out["calls"] = {"sovseal": recall_with(hybrid), "sovseal-dense": recall_with(dense)}
        vectors_by_query = dict(zip(qs, qv, strict=True))

        def cached_query(q: str) -> Any:
            mem.recall_params = hybrid
            vector = vectors_by_query.get(q)  # None: the warm-up query
            if vector is not None:
                engine._queries[q] = vector  # an LRU hit: everything of recall but the embedding
            return mem.recall(q, k=10)

        out["cached_query"] = cached_query
        out["close"] = mem.close
        return out
    except BaseException:
        mem.close()
        raise



def run_langchain(root: Path, texts: list[str], vectors: np.ndarray, embedder: Embedder, qs: list[str]) -> dict[str, Any]:
    from langchain_community.vectorstores import LanceDB
    from langchain_core.embeddings import Embeddings

    table = dict(zip(texts, vectors, strict=True))

    class Adapter(Embeddings):
        def embed_documents(self, batch: list[str]) -> list[list[float]]:
            return [table[t].tolist() for t in batch]

        def embed_query(self, text: str) -> list[float]:
            return embedder.embed_documents([text])[0].tolist()

    uri = root / f"langchain-lancedb-{len(texts)}"
    shutil.rmtree(uri, ignore_errors=True)
    started = time.perf_counter()
    # "append": with LangChain's default "overwrite", every add_texts call replaces the table, and
    # the store would hold only the last batch (this benchmark's runs before 2026-11-26 12:00 did).
    store = LanceDB(uri=str(uri), embedding=Adapter(), table_name="bench", mode="append")
    for start in range(0, len(texts), 5000):
        store.add_texts(texts[start : start + 5000], ids=[str(i) for i in range(start, min(start + 5000, len(texts)))])
    ingest = time.perf_counter() - started
    held = store.get_table().count_rows()
    if held != len(texts):
        raise RuntimeError(f"the LangChain LanceDB store holds {held} rows, not {len(texts)}")
    return {"ingest_s": ingest, "calls": {"langchain-lancedb": lambda q: store.similarity_search(q, k=10)}}


def run_chroma(root: Path, texts: list[str], vectors: np.ndarray, embedder: Embedder, qs: list[str]) -> dict[str, Any]:
    import chromadb
    from chromadb.config import Settings

    path = root / f"chroma-{len(texts)}"
    shutil.rmtree(path, ignore_errors=True)
    client = chromadb.PersistentClient(path=str(path), settings=Settings(anonymized_telemetry=False))
    collection = client.create_collection("bench", embedding_function=None, metadata={"hnsw:space": "cosine"})
    started = time.perf_counter()
    step = 5000
    for start in range(0, len(texts), step):
        end = min(start + step, len(texts))
        collection.add(ids=[str(i) for i in range(start, end)], documents=texts[start:end], embeddings=vectors[start:end].tolist())
    ingest = time.perf_counter() - started

    def query(q: str) -> Any:
        return collection.query(query_embeddings=[embedder.embed_documents([q])[0].tolist()], n_results=10)

    return {"ingest_s": ingest, "calls": {"chroma": query}}


def ann_check(cache: Path, held_out: int = 500, sizes: Sequence[int] = (8000, 10000)) -> dict[str, Any]:
    """IVF recall@10 against exact search on real MiniLM vectors only: every embedding cached by the
    quality benchmark and this one (LoCoMo, SciFact, Cranfield, the corpus), minus held-out queries.

    The top-level figures are for all of them; ``by_size`` repeats the measurement on the first
    ``sizes`` of them (in a random order, so every dataset is represented): the IVF index is used
    from 8,000 vectors on, where its lists are fewest and a search probes 64 of them."""
    files = sorted(cache.glob("*.npy"))
    if not files:
        print(f"--ann-check reads the embeddings the recall benchmarks cached, and {cache} has none: run "
              "bench_recall_quality.py and bench_recall_latency.py (same --cache) first", file=sys.stderr)
        sys.exit(2)
    vectors = np.concatenate([np.load(f) for f in files]).astype(np.float32)
    vectors = np.unique(vectors, axis=0)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(vectors))
    queries_, data = vectors[order[:held_out]], vectors[order[held_out:]]
    by_size = [_ann_check_one(data[:n], queries_) for n in sizes if n < len(data)]
    return {**_ann_check_one(data, queries_), "by_size": by_size}


def _ann_check_one(data: np.ndarray, queries_: np.ndarray) -> dict[str, Any]:
    from sovseal.recall.vector_index import VectorIndex

    with tempfile.TemporaryDirectory() as tmp:
        index = VectorIndex(Path(tmp) / "idx", data.shape[1])
        try:
            index.add(range(len(data)), data)
            started = time.perf_counter()
            index.wait_ivf()
            build = time.perf_counter() - started
            allowed = np.ones(len(data), dtype=bool)
            overlap, fast, slow = [], [], []
            for q in queries_:
                t0 = time.perf_counter()
                approx = {n for n, _ in index.search(q, 10, allowed)}
                t1 = time.perf_counter()
                exact = {n for n, _ in index.search(q, 10, allowed, exact=True)}
                t2 = time.perf_counter()
                overlap.append(len(approx & exact) / 10)
                fast.append(t1 - t0)
                slow.append(t2 - t1)
            return {
                "vectors": len(data),
                "lists": index._ivf.lists if index._ivf else 0,
                "build_s": build,
                "recall@10": float(np.mean(overlap)),
                "ivf_ms": ms(fast),
                "exact_ms": ms(slow),
            }
        finally:
            index.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=300)
    parser.add_argument("--peers", default="langchain-lancedb,chroma", help="comma list, or 'none'")
    parser.add_argument("--workdir", default="/dev/shm" if os.path.isdir("/dev/shm") else None)
    parser.add_argument("--cache", type=Path, default=CACHE, help="bulk embeddings, kept between runs (default: %(default)s)")
    parser.add_argument("--reuse", action="store_true", help="reuse sovseal stores left in --workdir by an earlier run")
    parser.add_argument("--embed-only", action="store_true", help="only compute the bulk embeddings (cached)")
    parser.add_argument(
        "--real-vectors",
        type=int,
        default=0,
        help="embed only the first N texts; the vectors of the others are mixtures of those (when the model is too slow)",
    )
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--ann-check", action="store_true", help="only: IVF recall@10 vs exact on the cached real vectors")
    evaldata.add_argument(parser)
    args = parser.parse_args()
    if args.ann_check:
        check = ann_check(args.cache)
        print(json.dumps(check, indent=2))
        if args.json:
            args.json.write_text(json.dumps({"ann_check": check}, indent=2))
        return
    sizes = [int(s) for s in args.sizes.split(",")]
    data_dir = evaldata.resolve(args.data, ["scifact", "locomo", "cranfield"])
    embedder = Embedder()
    embedder.ready()
    texts_all = corpus(data_dir, max(sizes))
    if args.real_vectors and args.real_vectors < len(texts_all):
        vectors_all = synthesize(bulk(embedder, texts_all[: args.real_vectors], args.cache, "corpus"), len(texts_all))
    else:
        vectors_all = bulk(embedder, texts_all, args.cache, "corpus")
    qs = queries(data_dir, args.queries)
    if args.embed_only:
        return
    root = Path(args.workdir or tempfile.gettempdir()) / "sovseal-latency-bench"
    root.mkdir(parents=True, exist_ok=True)
    report: dict[str, Any] = {"cpus": os.cpu_count(), "load_before": os.getloadavg(), "queries": len(qs)}
    peers = [] if args.peers == "none" else args.peers.split(",")
    for n in sizes:
        texts, vectors = texts_all[:n], vectors_all[:n]
        result: dict[str, Any] = {"sovseal": run_sovseal(root, texts, vectors, embedder, qs, args.reuse)}
        calls: dict[str, Callable[[str], Any]] = {"query embedding": lambda q: embedder.embed_documents([q])}
        calls.update(result["sovseal"].pop("calls"))
        if "langchain-lancedb" in peers:
            result["langchain-lancedb"] = run_langchain(root, texts, vectors, embedder, qs)
            calls.update(result["langchain-lancedb"].pop("calls"))
        if "chroma" in peers:
            result["chroma"] = run_chroma(root, texts, vectors, embedder, qs)
            calls.update(result["chroma"].pop("calls"))
        result["load_before"] = os.getloadavg()
        try:
            result["latency_ms"], result["samples_ms"] = interleaved(calls, qs)
            # sovseal's recall without the query embedding (its vector in the LRU), timed on its own after the rest
            result["sovseal"]["without_embedding_ms"] = interleaved({"cached": result["sovseal"].pop("cached_query")}, qs)[0]["cached"]
        finally:
            result["sovseal"].pop("close")()
        result["load_after"] = os.getloadavg()
        report[str(n)] = result
        print(f"\n{n:,} memories, {len(qs)} distinct queries, k=10 (ms, query embedding included)")
        for name, figures in result["latency_ms"].items():
            print(f"  {name:18s} p50 {figures['p50']:7.2f}  p95 {figures['p95']:7.2f}  mean {figures['mean']:7.2f}")
        s = result["sovseal"]
        cached = s["without_embedding_ms"]
        print(
            f"  sovseal without the query embedding (vector cached): p50 {cached['p50']:.2f}  p95 {cached['p95']:.2f}  "
            f"mean {cached['mean']:.2f}"
        )
        print(
            f"  sovseal: ANN recall@10 vs exact {s['ann_recall@10']:.3f} (IVF in use: {s['ivf']}); open + catalog load "
            f"{s['open_s']:.1f} s; ingest {s.get('ingest_s', float('nan')):.0f} s"
        )
        for p in peers:
            print(f"  {p}: ingest {result[p]['ingest_s']:.0f} s")
        sys.stdout.flush()
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
