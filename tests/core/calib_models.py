"""Tiny ONNX models for the calibration tests (built with onnx.helper)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _model(nodes, inputs, outputs, inits=(), opset=13):
    graph = helper.make_graph(nodes, "calib_test", inputs, outputs, initializer=list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    onnx.checker.check_model(m)
    return m


def conv_relu_model(channels: int = 4, seed: int = 0) -> onnx.ModelProto:
    """x[N,3,H,W] -> Conv -> Relu -> Conv -> Sigmoid -> y (dynamic N, H, W)."""
    rng = np.random.default_rng(seed)
    w1 = numpy_helper.from_array(rng.normal(0, 0.5, (channels, 3, 3, 3)).astype(np.float32), "w1")
    w2 = numpy_helper.from_array(rng.normal(0, 0.5, (2, channels, 1, 1)).astype(np.float32), "w2")
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["conv1"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Relu", ["conv1"], ["relu1"]),
        helper.make_node("Conv", ["relu1", "w2"], ["conv2"], kernel_shape=[1, 1]),
        helper.make_node("Sigmoid", ["conv2"], ["y"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2, "H", "W"])
    return _model(nodes, [x], [y], [w1, w2])


def nan_model() -> onnx.ModelProto:
    """x[N,4] -> Sqrt (NaN for x<0) -> s; Div(1, x) (Inf for x==0) -> r; y = Relu(x) + 1 (int64 shape path too)."""
    one = numpy_helper.from_array(np.ones((1,), np.float32), "one")
    nodes = [
        helper.make_node("Sqrt", ["x"], ["s"]),
        helper.make_node("Div", ["one", "x"], ["r"]),
        helper.make_node("Relu", ["x"], ["relu"]),
        helper.make_node("Add", ["relu", "one"], ["y"]),
        helper.make_node("Shape", ["x"], ["shape"]),
    ]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4]),
            helper.make_tensor_value_info("s", TensorProto.FLOAT, ["N", 4]),
            helper.make_tensor_value_info("r", TensorProto.FLOAT, ["N", 4]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [2])]
    return _model(nodes, [x], outs, [one])


def two_input_model() -> onnx.ModelProto:
    """a[N,2] (float32) and b[N,2] (float32) -> Add -> y; and a static-shaped c[1,2]."""
    nodes = [helper.make_node("Add", ["a", "b"], ["ab"]), helper.make_node("Mul", ["ab", "c"], ["y"])]
    ins = [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["N", 2]),
           helper.make_tensor_value_info("b", TensorProto.FLOAT, ["N", 2]),
           helper.make_tensor_value_info("c", TensorProto.FLOAT, [1, 2])]
    return _model(nodes, ins, [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 2])])


def save(model: onnx.ModelProto, path) -> str:
    onnx.save(model, str(path))
    return str(path)
