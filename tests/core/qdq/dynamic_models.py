"""Small models with every dim dynamic and shape arithmetic (onnx.helper only): YOLO-style anchor heads."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(3)


def _f(name, value):
    return numpy_helper.from_array(np.asarray(value, np.float32), name)


def _i(name, value):
    return numpy_helper.from_array(np.asarray(value, np.int64), name)


def anchor_head(opset: int = 17) -> onnx.ModelProto:
    """Conv + SiLU feature map; anchors from Shape -> Gather -> Cast -> Range; a ConstantOfShape; a Resize by scales.

    ``x`` is ``[N, 3, H, W]`` with every dim dynamic, as Ultralytics exports with ``dynamic=True``.
    """
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["c"], ["c_sig"], name="silu_sig"),
        helper.make_node("Mul", ["c", "c_sig"], ["f"], name="silu_mul"),
        # anchors along the width: (Range(0, W) + 0.5) * stride
        helper.make_node("Shape", ["f"], ["f_shape"], name="shape"),
        helper.make_node("Gather", ["f_shape", "three"], ["w_len"], name="gather_w", axis=0),
        helper.make_node("Cast", ["w_len"], ["w_len_f"], name="cast_w", to=TensorProto.FLOAT),
        helper.make_node("Constant", [], ["start"], name="start_const",
                         value=numpy_helper.from_array(np.array(0.0, np.float32), "start_v")),
        helper.make_node("Range", ["start", "w_len_f", "one"], ["ax"], name="range_w"),
        helper.make_node("Add", ["ax", "half"], ["ax_c"], name="anchor_center"),
        helper.make_node("Mul", ["ax_c", "stride"], ["ax_s"], name="anchor_stride"),
        # a float ConstantOfShape the size of the width, added to the anchors
        helper.make_node("Unsqueeze", ["w_len", "zero_axis"], ["w_len_1d"], name="unsq_w"),
        helper.make_node("ConstantOfShape", ["w_len_1d"], ["zeros"], name="zeros_like_w",
                         value=numpy_helper.from_array(np.array([0.25], np.float32), "cos_v")),
        helper.make_node("Add", ["ax_s", "zeros"], ["anchors"], name="anchors"),
        helper.make_node("Add", ["f", "anchors"], ["y"], name="decode"),
        # a 2x upsample whose scales are computed (float32 only in the schema)
        helper.make_node("Mul", ["s0", "two"], ["scales"], name="scale_mul"),
        helper.make_node("Resize", ["f", "", "scales"], ["up"], name="up", mode="nearest"),
        helper.make_node("Conv", ["up", "w2"], ["z"], name="conv2", kernel_shape=[1, 1]),
    ]
    inits = [numpy_helper.from_array((RNG.standard_normal((8, 3, 3, 3)) * 0.3).astype(np.float32), "w"),
             numpy_helper.from_array((RNG.standard_normal((4, 8, 1, 1)) * 0.3).astype(np.float32), "w2"),
             _i("three", 3), _i("zero_axis", [0]), _f("one", 1.0), _f("half", 0.5), _f("stride", 8.0),
             _f("s0", [0.5, 0.5, 1.0, 1.0]), _f("two", 2.0)]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3, "H", "W"])
    outs = [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 8, "H", "W"]),
            helper.make_tensor_value_info("z", TensorProto.FLOAT, ["N", 4, "H2", "W2"])]
    model = helper.make_model(helper.make_graph(nodes, "anchor_head", [x], outs, inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def topk_head(opset: int = 19) -> onnx.ModelProto:
    """TopK whose K is computed from a float shape ratio (K is int64; the ratio math is float)."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], name="shape"),
        helper.make_node("Gather", ["s", "one_i"], ["n"], name="gather_n", axis=0),
        helper.make_node("Cast", ["n"], ["n_f"], name="cast_n", to=TensorProto.FLOAT),
        helper.make_node("Mul", ["n_f", "ratio"], ["k_f"], name="k_ratio"),
        helper.make_node("Ceil", ["k_f"], ["k_c"], name="k_ceil"),
        helper.make_node("Cast", ["k_c"], ["k1"], name="cast_k", to=TensorProto.INT64),
        helper.make_node("Reshape", ["k1", "shape1"], ["k"], name="k_1d"),
        helper.make_node("TopK", ["x", "k"], ["vals", "idx"], name="topk", axis=1),
    ]
    inits = [_i("one_i", 1), _f("ratio", 0.5), _i("shape1", [1])]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "M"])
    outs = [helper.make_tensor_value_info("vals", TensorProto.FLOAT, ["N", "K"]),
            helper.make_tensor_value_info("idx", TensorProto.INT64, ["N", "K"])]
    model = helper.make_model(helper.make_graph(nodes, "topk_head", [x], outs, inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model
