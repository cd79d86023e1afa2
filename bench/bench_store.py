"""Store latency: sovseal's engine vs. adding the same rows one by one to a plain LanceDB table.

Both sides get the same 2,000 short texts and the same precomputed 384-d vectors (a fixed-cost
fake embedder), so the figures are the storage engines alone. sovseal's store canonicalizes,
seals (AES-256-GCM), appends to its journal and fsyncs before returning, and hands the vector to
its background LanceDB indexer; the plain LanceDB add does not fsync at all, so the
comparison favours the peer on durability.

Run: python bench/bench_store.py [--n 2000] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from sovseal import Sovseal

DIM = 384


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    pick = lambda q: ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000
    return {"p50": statistics.median(ordered) * 1000, "p95": pick(0.95), "p99": pick(0.99)}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures and the samples (ms) here")
    args = parser.parse_args()
    texts = [f"memory {i}: the user mentioned detail number {i} about their week" for i in range(args.n)]
    rng = np.random.default_rng(0)
    vectors = rng.standard_normal((args.n, DIM)).astype(np.float32)
    table = dict(zip(texts, vectors, strict=True))

    def fixed_cost_embedder(batch: list[str]) -> np.ndarray:
        return np.stack([table.get(t, vectors[0]) for t in batch])

    with tempfile.TemporaryDirectory() as tmp:
        mem = Sovseal(Path(tmp) / "sovseal", key=os.urandom(32), embedder=fixed_cost_embedder)
        mem.ready()
        sov: list[float] = []
        for i, text in enumerate(texts):
            t = time.perf_counter()
            mem.store(f"bench.{i}", text)
            sov.append(time.perf_counter() - t)
        mem.close()

        import lancedb

        db = lancedb.connect(str(Path(tmp) / "lance"))
        schema = pa.schema([pa.field("id", pa.string()), pa.field("text", pa.string()), pa.field("vector", pa.list_(pa.float32(), DIM))])
        tbl = db.create_table("plain", schema=schema)
        lance: list[float] = []
        for i, text in enumerate(texts):
            row = pa.table(
                {
                    "id": [f"bench.{i}"],
                    "text": [text],
                    "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors[i]), DIM),
                }
            )
            t = time.perf_counter()
            tbl.add(row)
            lance.append(time.perf_counter() - t)

    a, b = percentiles(sov), percentiles(lance)
    print(f"store latency, {args.n} sequential stores of short texts, fixed-cost embedder (ms)")
    print(f"{'engine':<34} {'p50':>8} {'p95':>8} {'p99':>8}")
    print(f"{'sovseal store (fsync, sealed)':<34} {a['p50']:>8.3f} {a['p95']:>8.3f} {a['p99']:>8.3f}")
    print(f"{'plain LanceDB add (no fsync)':<34} {b['p50']:>8.3f} {b['p95']:>8.3f} {b['p99']:>8.3f}")
    print(f"{'ratio lance/sovseal':<34} {b['p50'] / a['p50']:>8.2f} {b['p95'] / a['p95']:>8.2f} {b['p99'] / a['p99']:>8.2f}")
    if args.json:
        samples = {"sovseal": [round(x * 1000, 4) for x in sov], "lancedb": [round(x * 1000, 4) for x in lance]}
        args.json.write_text(json.dumps({"n": args.n, "sovseal": a, "lancedb": b, "samples_ms": samples}, indent=1))


if __name__ == "__main__":
    main()
