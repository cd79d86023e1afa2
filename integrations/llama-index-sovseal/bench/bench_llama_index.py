"""LlamaIndex: index build and retrieval latency, SovsealVectorStore vs LanceDBVectorStore.

Both get the same LoCoMo turns (from ``--data DIR``, default ``$SOVSEAL_EVALDATA``: see the
repository's ``bench/evaldata.py``; the first N across the ten
conversations, one ``TextNode`` per turn, text ``"{speaker}: {text}"``) and the same embedder:
``SovsealEmbedding`` (all-MiniLM-L6-v2 on onnxruntime), one instance per system so neither profits
from the other's query cache.

Build: wall time of ``VectorStoreIndex(nodes, storage_context=..., embed_model=...)``, which embeds
the nodes through LlamaIndex (batches of ``embed_batch_size``) and adds them to the store.
  - LanceDB stores LlamaIndex's vectors (one table add per ``add`` call, no fsync).
  - sovseal seals each node, appends it to the lineage and makes the batch durable (fsync)
    before returning. It keeps LlamaIndex's node vectors (``use_node_embeddings=True``, the
    documented setting when ``embed_model`` is the store's own ``SovsealEmbedding``), so both
    stores embed each node exactly once (see docs/integrations/llama_index.md).
Retrieval: ``index.as_retriever(similarity_top_k=10).retrieve(question)`` per LoCoMo question of
the loaded conversations (distinct queries, each embedded inside the timed call); p50 and p95.
hit@10: the share of questions with at least one evidence turn in the 10 results.

The peer is the package's ``bench`` extra, never in its dependencies (tested:
llama-index-vector-stores-lancedb 0.6.0, pylance 14.0.2):

    pip install -e "integrations/llama-index-sovseal[bench]"
    python integrations/llama-index-sovseal/bench/bench_llama_index.py --data DIR [--turns 2000] [--queries 200] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))  # the repository's benchmark helpers

import evaldata  # noqa: E402


def locomo_turns(data_dir: Path, limit: int) -> tuple[list[Any], list[dict[str, Any]]]:
    from llama_index.core.schema import TextNode

    data = json.loads((data_dir / "locomo" / "locomo10.json").read_text())
    nodes, queries = [], []
    for sample in data:
        conv = sample["conversation"]
        sessions = sorted(
            int(k.split("_")[1]) for k, v in conv.items() if re.fullmatch(r"session_\d+", k) and isinstance(v, list)
        )
        ids = set()
        for n in sessions:
            for turn in conv[f"session_{n}"]:
                if len(nodes) >= limit:
                    break
                node_id = f"{sample['sample_id']}:{turn['dia_id']}"
                ids.add(turn["dia_id"])
                nodes.append(
                    TextNode(
                        id_=node_id,
                        text=f"{turn['speaker']}: {turn['text']}",
                        metadata={"conversation": sample["sample_id"], "session": n, "dia_id": turn["dia_id"]},
                    )
                )
        for qa in sample["qa"]:
            evidence = {e for ev in qa.get("evidence", []) for e in re.split(r"[;\s]+", ev) if e in ids}
            if qa.get("category") in (1, 2, 3, 4) and evidence:
                queries.append({"q": qa["question"], "relevant": {f"{sample['sample_id']}:{e}" for e in evidence}})
        if len(nodes) >= limit:
            break
    return nodes, queries


def run(name: str, make_store, nodes, queries, batch: int) -> dict[str, float]:
    from llama_index.core import StorageContext, VectorStoreIndex
    from llama_index.embeddings.sovseal import SovsealEmbedding

    embed = SovsealEmbedding(embed_batch_size=batch)
    embed.ready()
    store = make_store(embed)
    fresh = [n.model_copy(deep=True) for n in nodes]
    started = time.perf_counter()
    index = VectorStoreIndex(fresh, storage_context=StorageContext.from_defaults(vector_store=store), embed_model=embed)
    build = time.perf_counter() - started
    retriever = index.as_retriever(similarity_top_k=10)
    retriever.retrieve("warm-up question that is not in the set")
    times, hits = [], 0
    for q in queries:
        t = time.perf_counter()
        found = retriever.retrieve(q["q"])
        times.append(time.perf_counter() - t)
        hits += bool({h.node.node_id for h in found} & q["relevant"])
    times.sort()
    return {
        "build_s": build,
        "nodes_per_s": len(nodes) / build,
        "p50_ms": 1000 * statistics.median(times),
        "p95_ms": 1000 * times[int(0.95 * (len(times) - 1))],
        "hit@10": hits / len(queries),
        "samples_ms": [round(x * 1000, 4) for x in times],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument("--batch", type=int, default=64, help="embed_batch_size of both")
    parser.add_argument("--dir", default=None, help="where the stores go (default: a temporary directory, removed at the end)")
    parser.add_argument("--json", type=Path, default=None, help="also write the figures (and the retrieval samples) here")
    evaldata.add_argument(parser)
    args = parser.parse_args()
    data_dir = evaldata.resolve(args.data, ["locomo"])

    nodes, queries = locomo_turns(data_dir, args.turns)
    queries = queries[: args.queries]
    root = Path(args.dir or tempfile.mkdtemp(prefix="bench-llama-index-"))
    print(f"{len(nodes)} LoCoMo turns, {len(queries)} questions, stores in {root}")

    def sovseal_store(embed):
        from llama_index.vector_stores.sovseal import SovsealVectorStore

        return SovsealVectorStore(path=root / "sovseal", key=os.urandom(32), embedder=embed, use_node_embeddings=True)

    def lance_store(embed):
        from llama_index.vector_stores.lancedb import LanceDBVectorStore

        return LanceDBVectorStore(uri=str(root / "lancedb"), table_name="locomo")

    # Untimed: lancedb (which the peer and sovseal's vector index share) takes about 2 s to import,
    # a cost that would otherwise be charged to whichever store is built first.
    import lancedb  # noqa: F401

    results = {}
    try:
        for name, make in (("lancedb", lance_store), ("sovseal", sovseal_store)):
            results[name] = run(name, make, nodes, queries, args.batch)
            print(name, {k: round(v, 3) for k, v in results[name].items() if k != "samples_ms"}, flush=True)
    finally:
        if args.dir is None:
            shutil.rmtree(root, ignore_errors=True)

    ours, lance = results["sovseal"], results["lancedb"]
    print()
    print("| store | build (s) | nodes/s | retrieve p50 (ms) | p95 (ms) | hit@10 |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, r in results.items():
        print(
            f"| {name} | {r['build_s']:.1f} | {r['nodes_per_s']:.0f} | {r['p50_ms']:.1f} | {r['p95_ms']:.1f} | {r['hit@10']:.2f} |"
        )
    print()
    print(f"build throughput sovseal/lancedb: {ours['nodes_per_s'] / lance['nodes_per_s']:.2f} (target >= 0.90)")
    print(f"retrieval p50 sovseal/lancedb:    {ours['p50_ms'] / lance['p50_ms']:.2f} (target < 1.00)")
    if args.json:
        args.json.write_text(json.dumps({"turns": len(nodes), "queries": len(queries), "batch": args.batch, "stores": results}, indent=1))


if __name__ == "__main__":
    main()
