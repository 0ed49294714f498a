"""Small ONNX models that are wrong in one way each (issue 22), built with onnx.helper: no files checked in."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from trtwidgets import demo

#: An ANSI escape that would turn a terminal red and clear it, if printed raw.
ANSI = "\x1b[31m\x1b[2J"


def _model(nodes, inputs, outputs, inits=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="trtwidgets-tests")
    model.ir_version = 8
    return model


def no_input_model() -> onnx.ModelProto:
    """A constant through a Relu: a graph without inputs."""
    c = numpy_helper.from_array(np.ones((1, 4), np.float32), "c")
    return _model([helper.make_node("Relu", ["c"], ["y"], name="relu")], [],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [c])


def cycle_model() -> onnx.ModelProto:
    """``add`` reads ``relu``'s output and ``relu`` reads ``add``'s: a cycle of two nodes."""
    nodes = [helper.make_node("Add", ["x", "r"], ["a"], name="add"),
             helper.make_node("Relu", ["a"], ["r"], name="relu"),
             helper.make_node("Sigmoid", ["a"], ["y"], name="out")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])


def huge_dim_model(dim: int = 3_000_000_000, batch: int = 1) -> onnx.ModelProto:
    """An input declared ``[batch, dim]`` (by default ``[1, 3e9]``: beyond int32)."""
    return _model([helper.make_node("Relu", ["x"], ["y"], name="relu")],
                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, dim])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, [batch, dim])])


def ansi_model() -> onnx.ModelProto:
    """A float64 model (so that lint names its tensors) whose input, node and output names hold ANSI escapes."""
    x, y = f"x{ANSI}", f"y{ANSI}"
    return _model([helper.make_node("Relu", [x], [y], name=f"relu{ANSI}")],
                  [helper.make_tensor_value_info(x, TensorProto.DOUBLE, [1, 4])],
                  [helper.make_tensor_value_info(y, TensorProto.DOUBLE, [1, 4])])


def demo_without_shape(which: str) -> onnx.ModelProto:
    """The demo model with the shape of its input (``"input"``) or output (``"output"``) removed."""
    model = onnx.load(str(demo.MODEL_PATH))
    vi = model.graph.input[0] if which == "input" else model.graph.output[0]
    vi.type.tensor_type.ClearField("shape")
    return model


def no_bias_stack(channels: int = 8, depth: int = 3, seed: int = 4, offset: bool = False) -> onnx.ModelProto:
    """``x[N, C, 8, 8] -> (Conv 3x3 without bias -> Relu) x depth``: all-zero input gives all-zero activations.

    ``offset``: the output is the last Relu plus a constant (``y``), the one tensor with a range on zero input
    (issue 45's "the plan given covers 1 of the 7 tensors ... made for another model").
    """
    rng = np.random.default_rng(seed)
    nodes, inits, t = [], [], "x"
    for i in range(depth):
        w = rng.standard_normal((channels, channels, 3, 3)).astype(np.float32) * 0.2
        inits.append(numpy_helper.from_array(w, f"w{i}"))
        nodes.append(helper.make_node("Conv", [t, f"w{i}"], [f"c{i}"], name=f"conv{i}", kernel_shape=[3, 3],
                                      pads=[1, 1, 1, 1]))
        nodes.append(helper.make_node("Relu", [f"c{i}"], [f"r{i}"], name=f"relu{i}"))
        t = f"r{i}"
    if offset:
        inits.append(numpy_helper.from_array(np.full((1, channels, 1, 1), 0.5, np.float32), "b"))
        nodes.append(helper.make_node("Add", [t, "b"], ["y"], name="offset"))
        t = "y"
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", channels, 8, 8])],
                  [helper.make_tensor_value_info(t, TensorProto.FLOAT, ["N", channels, 8, 8])], inits)
