"""Model builders for the accuracy tests (onnx.helper only, no onnxruntime)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper


def _weight_tensor(graph: onnx.GraphProto, name: str):
    # The demo model carries its weights in Constant nodes, tiny models in initializers.
    for t in graph.initializer:
        if t.name == name:
            return t
    for n in graph.node:
        if n.op_type == "Constant" and n.output[0] == name:
            for a in n.attribute:
                if a.name == "value":
                    return a.t
    return None


def conv_nodes(proto: onnx.ModelProto):
    """Conv nodes whose weight is a constant (initializer or Constant node), in graph order."""
    return [n for n in proto.graph.node if n.op_type == "Conv" and _weight_tensor(proto.graph, n.input[1]) is not None]


def with_int8_rounded_weights(proto: onnx.ModelProto, node_name: str) -> onnx.ModelProto:
    """A copy where one Conv's weights are quantized to int8 (per tensor, symmetric) and back.

    A coarse, deliberately lossy version of what INT8 does to one layer.
    """
    out = onnx.ModelProto()
    out.CopyFrom(proto)
    node = next(n for n in out.graph.node if n.name == node_name)
    init = _weight_tensor(out.graph, node.input[1])
    w = numpy_helper.to_array(init).astype(np.float32)
    # 4-bit-like coarseness on top of int8 so the effect is far above FP32 noise.
    scale = np.abs(w).max() / 7.0
    q = np.clip(np.round(w / scale), -8, 7) * scale
    init.CopyFrom(numpy_helper.from_array(q.astype(np.float32), init.name or ""))
    return out


def tiny_chain() -> onnx.ModelProto:
    """x -> Relu -> Mul(2) -> Add(1) -> y, for the ranking math on hand-made errors."""
    h = onnx.helper
    nodes = [
        h.make_node("Relu", ["x"], ["a"], name="relu"),
        h.make_node("Mul", ["a", "two"], ["b"], name="mul"),
        h.make_node("Add", ["b", "one"], ["y"], name="add"),
    ]
    g = h.make_graph(
        nodes, "chain",
        [h.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 4])],
        [h.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2, 4])],
        [numpy_helper.from_array(np.array(2.0, np.float32), "two"),
         numpy_helper.from_array(np.array(1.0, np.float32), "one")],
    )
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
