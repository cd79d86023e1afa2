"""Weight-quantized variants of the embedder's graph: do they keep the vectors, and are they faster here?

    python bench/bench_embed_variants.py --data DIR [--turns 2000] [--json PATH]

Issue 3's latency and throughput targets sit close to what this machine's fp32 peak allows
(``bench_embed.py`` prints that bound), so the only way past them is less arithmetic per token:
integer matmuls. This script builds, from sovseal's own fp32 graph, the variants onnxruntime runs
on the CPU and measures each against the fp32 graph on the same LoCoMo turns (``--data DIR``, default
``$SOVSEAL_EVALDATA``; see ``bench/evaldata.py``), in the same process:

- ``int8-w8a8-block32``: ``MatMulNBits``, 8-bit weights (the int8 package's own values, exact: its
  per-channel scales are kept per block of 32) and activations quantized per block of 32
  (``accuracy_level=4``);
- ``int8-w8a8-block128``: the same with blocks of 128;
- ``int8-w8-fp32``: 8-bit weights, fp32 arithmetic (``accuracy_level=1``);
- ``int4-w4a8-block32``: 4-bit weights, asymmetric per block of 32, int8 activations;
- ``int8-dynamic``: onnxruntime's own ``quantize_dynamic`` (per-channel int8 weights, activations
  quantized per tensor at run time, attention as ``QAttention``), the usual way to make an int8 BERT.

Fidelity is the cosine of each text's vector to the fp32 graph's over the bulk turns (the embedder's
requirement is >= 0.99); speed is single-text p50 for short texts and turns, taken round-robin so
every variant sees the same load, and bulk throughput in sorted batches of 16.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import evaldata  # noqa: E402 (same directory)
from bench_embed import locomo_turns  # noqa: E402

from sovseal.embed import Embedder  # noqa: E402
from sovseal.embed.embedder import BATCH_SIZE, _encode, _Model  # noqa: E402

VARIANTS = {
    "int8-w8a8-block32": (8, 32, 4),
    "int8-w8a8-block128": (8, 128, 4),
    "int8-w8-fp32": (8, 32, 1),
    "int4-w4a8-block32": (4, 32, 4),
    "int8-dynamic": None,
}


def dynamic(model_path: Path, dest: Path) -> None:
    """onnxruntime's ``quantize_dynamic`` over the fp32 graph (its fused ops are already fp32 CPU kernels)."""
    import onnx
    from onnxruntime.quantization import QuantType, quantize_dynamic

    options = {"DefaultTensorType": onnx.TensorProto.FLOAT}  # types of the contrib ops' outputs, for its shape inference
    quantize_dynamic(model_path, dest, weight_type=QuantType.QInt8, per_channel=True, extra_options=options)


def quantized(model_path: Path, bits: int, block: int, accuracy: int) -> bytes:
    """The fp32 graph with every constant-weight MatMul replaced by ``MatMulNBits``."""
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(model_path))
    graph = model.graph
    inits = {t.name: t for t in graph.initializer}
    nodes = []
    for node in graph.node:
        if node.op_type != "MatMul" or node.input[1] not in inits:
            nodes.append(node)
            continue
        weight = numpy_helper.to_array(inits[node.input[1]])  # (K, N)
        k, n = weight.shape
        blocks = weight.T.reshape(n, k // block, block)
        if bits == 8:  # symmetric per channel in the source: exact as uint8 around the default zero point 128
            scale = np.repeat((np.abs(weight).max(axis=0) / 127.0)[:, None], k // block, axis=1)
            q = (np.round(blocks / scale[:, :, None]) + 128).astype(np.uint8)
            extra: list[np.ndarray] = []
        else:
            low, high = np.minimum(blocks.min(axis=2), 0), np.maximum(blocks.max(axis=2), 0)
            scale = np.maximum((high - low) / 15.0, 1e-8)
            zero = np.clip(np.round(-low / scale), 0, 15).astype(np.uint8)
            q4 = np.clip(np.round(blocks / scale[:, :, None]) + zero[:, :, None], 0, 15).astype(np.uint8)
            q = q4[:, :, 0::2] | (q4[:, :, 1::2] << 4)
            extra = [(zero[:, 0::2] | (zero[:, 1::2] << 4)).reshape(-1)]
        names = [f"{node.input[1]}.{part}" for part in ("q", "scale", "zero")][: 2 + len(extra)]
        for name, array in zip(names, [q, scale.astype(np.float32).reshape(-1), *extra], strict=True):
            graph.initializer.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        graph.initializer.remove(inits[node.input[1]])
        attrs = {"K": k, "N": n, "bits": bits, "block_size": block, "accuracy_level": accuracy}
        nodes.append(
            helper.make_node("MatMulNBits", [node.input[0], *names], list(node.output), name=node.name, domain="com.microsoft", **attrs)
        )
    del graph.node[:]
    graph.node.extend(nodes)
    return bytes(model.SerializeToString())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", type=Path, default=None)
    evaldata.add_argument(parser)
    args = parser.parse_args()
    data_dir = evaldata.resolve(args.data, ["locomo"])
    import onnxruntime as ort

    print(f"load average at start: {os.getloadavg()[0]:.2f}")
    fp32 = Embedder()
    fp32.ready()
    base = fp32._loaded()
    model_path = Path(fp32.origin or "")
    if model_path.is_dir():
        model_path = model_path / "model.onnx"
    options = base.session.get_session_options()
    models: dict[str, _Model] = {"fp32 graph (sovseal)": base}
    with tempfile.TemporaryDirectory() as tmp:
        for name, spec in VARIANTS.items():
            path = Path(tmp) / f"{name}.onnx"
            if spec is None:
                dynamic(model_path, path)
                options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED  # fuses its int8 matmuls
            else:
                path.write_bytes(quantized(model_path, *spec))
            session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
            models[name] = _Model(session, base.tokenizer, np.int32, token_types=False)

    turns = locomo_turns(data_dir)
    # The latency texts come from the first 2,000 turns whatever --turns is (94 short ones, the first
    # 300), so a small --turns (run_all --quick) still has short texts; --turns sizes the bulk figure.
    pool = _encode(base.tokenizer, turns[: max(args.turns, 2000)])
    ids = pool[: args.turns]
    order = sorted(range(len(ids)), key=lambda i: len(ids[i]))

    def bulk(model: _Model) -> np.ndarray:
        out = np.empty((len(ids), 384), dtype=np.float32)
        for start in range(0, len(order), BATCH_SIZE):
            batch = order[start : start + BATCH_SIZE]
            out[batch] = fp32._run(model, [ids[i] for i in batch])
        return out

    reference = bulk(base)
    short = [seq for seq in pool if len(seq) <= 12][:200]
    sample = pool[:300]
    results: dict[str, dict[str, float]] = {}
    timings: dict[str, dict[str, list[float]]] = {name: {"short": [], "turn": []} for name in models}
    for _ in range(args.rounds):
        for kind, texts in (("short", short), ("turn", sample)):
            for seq in texts:
                for name, model in models.items():
                    start = time.perf_counter()
                    fp32._run(model, [seq])
                    timings[name][kind].append(time.perf_counter() - start)
    for name, model in models.items():
        start = time.perf_counter()
        vectors = bulk(model)
        rate = len(ids) / (time.perf_counter() - start)
        cosine = (vectors * reference).sum(axis=1)
        results[name] = {
            "cos_min": float(cosine.min()),
            "cos_p01": float(np.quantile(cosine, 0.01)),
            "cos_mean": float(cosine.mean()),
            "short_p50_ms": statistics.median(timings[name]["short"]) * 1e3,
            "turn_p50_ms": statistics.median(timings[name]["turn"]) * 1e3,
            "bulk_texts_per_s": rate,
        }
    print(f"\n| {len(ids):,} LoCoMo turns | cosine to fp32 min / 1st pct / mean | short p50 ms | turn p50 ms | bulk texts/s |")
    print("| --- | --- | --- | --- | --- |")
    for name, r in results.items():
        print(
            f"| {name} | {r['cos_min']:.4f} / {r['cos_p01']:.4f} / {r['cos_mean']:.5f} | {r['short_p50_ms']:.2f} "
            f"| {r['turn_p50_ms']:.2f} | {r['bulk_texts_per_s']:.0f} |"
        )
    load_end = os.getloadavg()[0]
    print(f"\nload average at end: {load_end:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"turns": len(ids), "rounds": args.rounds, "load_end": load_end, "variants": results}, indent=1))


if __name__ == "__main__":
    main()
