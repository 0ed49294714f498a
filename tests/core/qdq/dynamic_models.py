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


def _w(name, *shape):
    fan_in = int(np.prod(shape[1:])) or 1
    return numpy_helper.from_array((RNG.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32), name)


def _conv_silu(name, x, out, w, **kw):
    return [helper.make_node("Conv", [x, w], [f"{name}_o"], name=name, **kw),
            helper.make_node("Sigmoid", [f"{name}_o"], [f"{name}_s"], name=f"{name}_sig"),
            helper.make_node("Mul", [f"{name}_o", f"{name}_s"], [out], name=f"{name}_mul")]


def _tiny_yolo_backbone(c: int):
    """stem -> C2f -> down -> SPPF -> upsample + Concat neck: the Ultralytics layout, every dim dynamic."""
    h = c // 2
    pool = {"kernel_shape": [5, 5], "strides": [1, 1], "pads": [2, 2, 2, 2]}
    k3 = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    nodes = _conv_silu("stem", "images", "p1", "w_stem", strides=[2, 2], **k3)
    nodes += _conv_silu("c2f_cv1", "p1", "t", "w_c2f1", kernel_shape=[1, 1])
    nodes += [helper.make_node("Split", ["t", "split"], ["a", "b"], name="c2f_split", axis=1)]
    nodes += _conv_silu("c2f_m1", "b", "m1", "w_m1", **k3)
    nodes += _conv_silu("c2f_m2", "m1", "m2", "w_m2", **k3)
    nodes += [helper.make_node("Add", ["b", "m2"], ["d"], name="c2f_add"),
              helper.make_node("Concat", ["a", "b", "d"], ["cat1"], name="c2f_cat", axis=1)]
    nodes += _conv_silu("c2f_cv2", "cat1", "f1", "w_c2f2", kernel_shape=[1, 1])
    nodes += _conv_silu("down", "f1", "p2", "w_down", strides=[2, 2], **k3)
    nodes += _conv_silu("sppf_cv1", "p2", "s0", "w_sppf1", kernel_shape=[1, 1])
    nodes += [helper.make_node("MaxPool", ["s0"], ["s1"], name="sppf_pool1", **pool),
              helper.make_node("MaxPool", ["s1"], ["s2"], name="sppf_pool2", **pool),
              helper.make_node("MaxPool", ["s2"], ["s3"], name="sppf_pool3", **pool),
              helper.make_node("Concat", ["s0", "s1", "s2", "s3"], ["scat"], name="sppf_cat", axis=1)]
    nodes += _conv_silu("sppf_cv2", "scat", "f2", "w_sppf2", kernel_shape=[1, 1])
    nodes += [helper.make_node("Resize", ["f2", "", "up_scales"], ["up"], name="neck_up", mode="nearest"),
              helper.make_node("Concat", ["up", "f1"], ["ncat"], name="neck_cat", axis=1)]
    nodes += _conv_silu("neck", "ncat", "n1", "w_neck", **k3)
    inits = [_w("w_stem", c, 3, 3, 3), _w("w_c2f1", c, c, 1, 1), _i("split", [h, h]), _w("w_m1", h, h, 3, 3),
             _w("w_m2", h, h, 3, 3), _w("w_c2f2", c, 3 * h, 1, 1), _w("w_down", 2 * c, c, 3, 3),
             _w("w_sppf1", 2 * c, 2 * c, 1, 1), _w("w_sppf2", 2 * c, 8 * c, 1, 1), _f("up_scales", [1, 1, 2, 2]),
             _w("w_neck", c, 3 * c, 3, 3)]
    return nodes, inits


def _anchor_grid():
    """Anchor centres from the feature map's shape: Shape -> Gather -> Cast -> Range, as YOLOv8's make_anchors."""
    nodes = [helper.make_node("Shape", ["n1"], ["n1_shape"], name="anc_shape"),
             helper.make_node("Gather", ["n1_shape", "two_i"], ["h_len"], name="anc_h", axis=0),
             helper.make_node("Gather", ["n1_shape", "three_i"], ["w_len"], name="anc_w", axis=0),
             helper.make_node("Cast", ["h_len"], ["h_f"], name="anc_h_f", to=TensorProto.FLOAT),
             helper.make_node("Cast", ["w_len"], ["w_f"], name="anc_w_f", to=TensorProto.FLOAT),
             helper.make_node("Range", ["zero_f", "w_f", "one"], ["sx0"], name="anc_range_x"),
             helper.make_node("Range", ["zero_f", "h_f", "one"], ["sy0"], name="anc_range_y"),
             helper.make_node("Add", ["sx0", "half"], ["sx"], name="anc_sx"),
             helper.make_node("Add", ["sy0", "half"], ["sy"], name="anc_sy"),
             helper.make_node("Unsqueeze", ["h_len", "axis0"], ["h1"], name="anc_h1"),
             helper.make_node("Unsqueeze", ["w_len", "axis0"], ["w1"], name="anc_w1"),
             helper.make_node("Concat", ["h1", "w1"], ["hw"], name="anc_hw", axis=0),
             helper.make_node("Unsqueeze", ["sx", "axis0"], ["sx2"], name="anc_sx2"),
             helper.make_node("Unsqueeze", ["sy", "axis1"], ["sy2"], name="anc_sy2"),
             helper.make_node("Expand", ["sx2", "hw"], ["gx"], name="anc_gx"),
             helper.make_node("Expand", ["sy2", "hw"], ["gy"], name="anc_gy"),
             helper.make_node("Unsqueeze", ["gx", "axis0"], ["gx1"], name="anc_gx1"),
             helper.make_node("Unsqueeze", ["gy", "axis0"], ["gy1"], name="anc_gy1"),
             helper.make_node("Concat", ["gx1", "gy1"], ["grid"], name="anc_grid", axis=0),
             helper.make_node("Reshape", ["grid", "shape_2a"], ["anchors"], name="anc_flat")]
    inits = [_i("two_i", 2), _i("three_i", 3), _f("zero_f", 0.0), _f("one", 1.0), _f("half", 0.5),
             _i("axis0", [0]), _i("axis1", [1]), _i("shape_2a", [1, 2, -1])]
    return nodes, inits


def _dfl_head(c: int, classes: int, bins: int = 16):
    """Decoupled head: box -> DFL (Softmax, fixed 1x1 conv) decoded against the anchors; class scores -> Sigmoid."""
    k3 = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    nodes = _conv_silu("box1", "n1", "bx", "w_box1", **k3)
    nodes += [helper.make_node("Conv", ["bx", "w_box2"], ["box"], name="box2", kernel_shape=[1, 1])]
    nodes += _conv_silu("cls1", "n1", "cx", "w_cls1", **k3)
    nodes += [helper.make_node("Conv", ["cx", "w_cls2"], ["cls"], name="cls2", kernel_shape=[1, 1]),
              # the batch is read from the input (0 in a Reshape target copies it): no literal batch
              helper.make_node("Reshape", ["box", "shape_bins"], ["box_r"], name="dfl_view"),
              helper.make_node("Transpose", ["box_r"], ["box_t"], name="dfl_t", perm=[0, 2, 1, 3]),
              helper.make_node("Softmax", ["box_t"], ["prob"], name="dfl_softmax", axis=1),
              helper.make_node("Conv", ["prob", "w_dfl"], ["dist4"], name="dfl_conv", kernel_shape=[1, 1]),
              helper.make_node("Reshape", ["dist4", "shape_dist"], ["dist"], name="dfl_out"),
              helper.make_node("Split", ["dist", "split2"], ["lt", "rb"], name="dist_split", axis=1),
              helper.make_node("Sub", ["anchors", "lt"], ["x1y1"], name="dec_x1y1"),
              helper.make_node("Add", ["anchors", "rb"], ["x2y2"], name="dec_x2y2"),
              helper.make_node("Add", ["x1y1", "x2y2"], ["cxy2"], name="dec_sum"),
              helper.make_node("Div", ["cxy2", "two_f"], ["cxy"], name="dec_c"),
              helper.make_node("Sub", ["x2y2", "x1y1"], ["wh"], name="dec_wh"),
              helper.make_node("Concat", ["cxy", "wh"], ["xywh"], name="dec_cat", axis=1),
              helper.make_node("Mul", ["xywh", "stride"], ["boxes"], name="dec_stride"),
              helper.make_node("Sigmoid", ["cls"], ["scores4"], name="cls_sig"),
              helper.make_node("Reshape", ["scores4", "shape_cls"], ["scores"], name="cls_flat"),
              helper.make_node("Concat", ["boxes", "scores"], ["output0"], name="out", axis=1)]
    inits = [_w("w_box1", c, c, 3, 3), _w("w_box2", 4 * bins, c, 1, 1), _w("w_cls1", c, c, 3, 3),
             _w("w_cls2", classes, c, 1, 1), _i("shape_bins", [0, 4, bins, -1]),
             numpy_helper.from_array(np.arange(bins, dtype=np.float32).reshape(1, bins, 1, 1), "w_dfl"),
             _i("shape_dist", [0, 4, -1]), _i("split2", [2, 2]), _f("two_f", 2.0), _f("stride", 4.0),
             _i("shape_cls", [0, classes, -1])]
    return nodes, inits


def tiny_yolo(c: int = 16, classes: int = 3, opset: int = 17) -> onnx.ModelProto:
    """A YOLOv8-layout detector as Ultralytics exports it with ``dynamic=True``: every input dim dynamic.

    Conv + SiLU (Sigmoid x Mul) everywhere, C2f (Split/Concat + residual), SPPF (MaxPool chain), an
    upsample + Concat neck, and a DFL head whose anchors come from Shape -> Gather -> Cast -> Range.
    Output ``[N, 4 + classes, A]``.
    """
    nodes, inits = _tiny_yolo_backbone(c)
    for part in (_anchor_grid(), _dfl_head(c, classes)):
        nodes += part[0]
        inits += part[1]
    x = helper.make_tensor_value_info("images", TensorProto.FLOAT, ["batch", 3, "height", "width"])
    y = helper.make_tensor_value_info("output0", TensorProto.FLOAT, ["batch", 4 + classes, "anchors"])
    model = helper.make_model(helper.make_graph(nodes, "tiny_yolo", [x], [y], inits),
                              opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model
