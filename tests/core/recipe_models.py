"""Tiny ONNX models for the recipe and profile tests, summarised in memory."""

from __future__ import annotations

from onnx import TensorProto, helper

from trtwidgets.core.model.load import ModelSummary, summarize


def two_input_model(x_shape=("N", 3, "H", "W"), mask_shape=("N", 16)):
    """Relu(x) and Identity(mask): one 4-D input with named dynamic dims, one 2-D input."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x_shape))
    mask = helper.make_tensor_value_info("mask", TensorProto.FLOAT, list(mask_shape))
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x_shape))
    m = helper.make_tensor_value_info("m", TensorProto.FLOAT, list(mask_shape))
    nodes = [helper.make_node("Relu", ["x"], ["y"], name="relu"), helper.make_node("Identity", ["mask"], ["m"], name="id")]
    graph = helper.make_graph(nodes, "g", [x, mask], [y, m])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def summary_of(model, sha256: str = "a" * 64) -> ModelSummary:
    return summarize(model, path="mem.onnx", sha256=sha256)


def qdq_model():
    """x -> QuantizeLinear -> DequantizeLinear -> Relu, static shape: an explicitly quantized model."""
    from onnx import numpy_helper
    import numpy as np

    scale = numpy_helper.from_array(np.array(0.1, np.float32), "s")
    zp = numpy_helper.from_array(np.array(0, np.int8), "zp")
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["q"], name="q"),
             helper.make_node("DequantizeLinear", ["q", "s", "zp"], ["dq"], name="dq"),
             helper.make_node("Relu", ["dq"], ["y"], name="relu")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])
    graph = helper.make_graph(nodes, "g", [x], [y], initializer=[scale, zp])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model
