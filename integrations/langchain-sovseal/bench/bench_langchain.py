"""LangChain vector stores side by side: sovseal, Chroma (langchain-chroma) and LanceDB (langchain-community).

Ingest: ``add_documents`` of N LoCoMo turns (default 2,000). Search: ``similarity_search(question, k=5)``
for LoCoMo questions, one at a time. Every store gets the same embedder instance (sovseal's on-device
all-MiniLM-L6-v2 through ``SovsealEmbeddings``); the query vectors are cached before timing, so the search
figures measure the store, not the model. Each store starts empty in its own temporary directory.

sovseal does more per document than its peers: it canonicalizes, seals (AES-256-GCM), chains the record
into the lineage and fsyncs before ``add_documents`` returns; the peers do not fsync.

Run (the peers are the package's ``bench`` extra; a missing one is reported and skipped; LoCoMo is
read from ``--data DIR``, default ``$SOVSEAL_EVALDATA``, see the repository's ``bench/evaldata.py``)::

    pip install -e "integrations/langchain-sovseal[bench]"
    python integrations/langchain-sovseal/bench/bench_langchain.py --data DIR [--docs 2000] [--queries 200] [--json PATH]

Prints medians and ratios; never part of the test suite's pass/fail.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from langchain_core.documents import Document

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))  # the repository's benchmark helpers

import evaldata  # noqa: E402


def locomo(data_dir: Path, n_docs: int, n_queries: int) -> tuple[list[Document], list[str]]:
    data = json.loads((data_dir / "locomo" / "locomo10.json").read_text())
    docs: list[Document] = []
    questions: list[str] = []
    for sample in data:
        conv = sample["conversation"]
        sessions = sorted(
            (k for k in conv if k.startswith("session_") and not k.endswith("date_time")), key=lambda k: int(k.split("_")[1])
        )
        for s in sessions:
            for turn in conv[s]:
                docs.append(
                    Document(
                        id=f"{sample['sample_id']}:{turn['dia_id']}",
                        page_content=f"{turn['speaker']}: {turn['text']}",
                        metadata={"sample": sample["sample_id"], "session": int(s.split("_")[1]), "speaker": turn["speaker"]},
                    )
                )
        questions.extend(str(q["question"]) for q in sample["qa"])
    return docs[:n_docs], questions[:n_queries]


def make_sovseal(embeddings: Any, directory: Path) -> tuple[Any, Callable[[], None]]:
    from langchain_sovseal import SovsealVectorStore

    store = SovsealVectorStore(embeddings, path=directory / "sovseal", key=os.urandom(32), endpoint="")
    return store, store.close


def make_chroma(embeddings: Any, directory: Path) -> tuple[Any, Callable[[], None]]:
    from langchain_chroma import Chroma

    store = Chroma(collection_name="bench", embedding_function=embeddings, persist_directory=str(directory / "chroma"))
    return store, lambda: None


def make_lancedb(embeddings: Any, directory: Path) -> tuple[Any, Callable[[], None]]:
    from langchain_community.vectorstores import LanceDB

    # "append": under LangChain's default "overwrite" every add call replaces the table.
    store = LanceDB(uri=str(directory / "lancedb"), embedding=embeddings, table_name="bench", mode="append")
    return store, lambda: None


STORES: dict[str, Callable[[Any, Path], tuple[Any, Callable[[], None]]]] = {
    "sovseal": make_sovseal,
    "chroma": make_chroma,
    "lancedb": make_lancedb,
}


def run(name: str, embeddings: Any, docs: list[Document], queries: list[str], k: int) -> dict[str, float] | str:
    directory = Path(tempfile.mkdtemp(prefix=f"bench-lc-{name}-"))
    try:
        try:
            store, close = STORES[name](embeddings, directory)
        except ImportError as exc:
            return f"skipped ({exc.name} is not installed)"
        try:
            started = time.perf_counter()
            store.add_documents(docs, ids=[d.id for d in docs])
            ingest = time.perf_counter() - started
            for q in queries[:10]:  # warm-up
                store.similarity_search(q, k=k)
            times = []
            for q in queries:
                t = time.perf_counter()
                found = store.similarity_search(q, k=k)
                times.append(time.perf_counter() - t)
                assert len(found) == k, (name, len(found))
            times.sort()
            return {
                "ingest_s": ingest,
                "docs_per_s": len(docs) / ingest,
                "p50_ms": statistics.median(times) * 1000,
                "p95_ms": times[int(0.95 * (len(times) - 1))] * 1000,
                "samples_ms": [round(x * 1000, 4) for x in times],
            }
        finally:
            close()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--docs", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--stores", default=",".join(STORES))
    parser.add_argument("--json", type=Path, default=None, help="also write the figures (and the search samples) here")
    evaldata.add_argument(parser)
    args = parser.parse_args()
    data_dir = evaldata.resolve(args.data, ["locomo"])

    from langchain_sovseal import SovsealEmbeddings

    docs, queries = locomo(data_dir, args.docs, args.queries)
    embeddings = SovsealEmbeddings()
    embeddings.ready()
    for q in queries:  # every store then finds its query vectors in the embedder's cache (256 entries)
        embeddings.embed_query(q)
    # Warm-up, untimed: onnxruntime grows its memory arena on the first run of each batch shape, a cost
    # that would otherwise fall on whichever store ingests first.
    embeddings.embed_documents([d.page_content for d in docs])
    # Likewise the libraries: lancedb (which sovseal's vector index and the LanceDB peer share) takes
    # about 2 s to import and would be charged to whichever store first writes.
    for module in ("lancedb", "chromadb"):
        with contextlib.suppress(ImportError):  # a peer that is not installed is reported as skipped
            importlib.import_module(module)
    print(f"{len(docs)} LoCoMo turns, {len(queries)} questions, k={args.k}, embedder: sovseal all-MiniLM-L6-v2 (shared)")
    results: dict[str, dict[str, float] | str] = {}
    for name in args.stores.split(","):
        results[name] = run(name, embeddings, docs, queries, args.k)
    peers = {n: r for n, r in results.items() if n != "sovseal" and isinstance(r, dict)}
    best_ingest = max((r["docs_per_s"] for r in peers.values()), default=None)
    print(f"{'store':<10} {'ingest s':>9} {'docs/s':>8} {'vs best peer':>13} {'search p50 ms':>14} {'p95 ms':>8}")
    for name, r in results.items():
        if isinstance(r, str):
            print(f"{name:<10} {r}")
            continue
        ratio = f"{r['docs_per_s'] / best_ingest:.2f}x" if best_ingest else "-"
        print(f"{name:<10} {r['ingest_s']:>9.2f} {r['docs_per_s']:>8.0f} {ratio:>13} {r['p50_ms']:>14.2f} {r['p95_ms']:>8.2f}")
    if args.json:
        args.json.write_text(json.dumps({"docs": len(docs), "queries": len(queries), "k": args.k, "stores": results}, indent=1))


if __name__ == "__main__":
    main()
