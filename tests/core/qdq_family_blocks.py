"""Blocks of the model families users bring (YOLOv8, CSP/C2f, SPPF, FPN necks, DFL heads, GELU, MLPs), onnx.helper only.

``tests/gpu/test_qdq_blocks.py`` builds each one's Q/DQ export with TensorRT 8.6 beside the seven blocks of
:mod:`tests.core.qdq_blocks` and ``tests/core/qdq/test_qdq_family_blocks.py`` asserts on the recorded layers.
"""

from __future__ import annotations

from typing import List

import numpy as np
import onnx
from onnx import helper, numpy_helper

from tests.core.qdq_blocks import C, HW, _bn, _c, _conv, _model, _w, _x, _y


def _i64(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, np.int64), name)


def _silu(prefix: str, x: str, out: str) -> List[onnx.NodeProto]:
    # x * Sigmoid(x), as torch.onnx writes nn.SiLU before opset 22 (Ultralytics' Conv = conv + BN + SiLU).
    return [helper.make_node("Sigmoid", [x], [f"{prefix}_s"], name=f"{prefix}_sig"),
            helper.make_node("Mul", [x, f"{prefix}_s"], [out], name=f"{prefix}_mul")]


def _conv_silu(name: str, x: str, out: str, w: str, **kw) -> List[onnx.NodeProto]:
    return [_conv(name, x, f"{name}_o", w, **kw)] + _silu(f"{name}_act", f"{name}_o", out)


def conv_silu() -> onnx.ModelProto:
    """conv + BN + SiLU (Sigmoid x Mul) -> conv + SiLU -> conv: the epilogue must fuse, the Q after the Mul."""
    nodes = [_conv("c1", "x", "a", "w1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["a", "bn_g", "bn_b", "bn_m", "bn_v"], ["ab"], name="bn")]
    nodes += _silu("act1", "ab", "s1")
    nodes += _conv_silu("c2", "s1", "s2", "w2", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    nodes += [_conv("c3", "s2", "y", "w3", kernel_shape=[1, 1])]
    inits = [_w("w1", C, C, 3, 3), _w("w2", C, C, 3, 3), _w("w3", C, C, 1, 1)] + _bn("bn", C)
    return _model("conv_silu", nodes, [_x()], [_y((1, C, HW, HW))], inits)


def conv_gelu() -> onnx.ModelProto:
    """conv -> GELU (Erf form, as torch writes nn.GELU) -> conv (ConvNeXt / MetaFormer blocks)."""
    nodes = [_conv("c1", "x", "a", "w1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Div", ["a", "sqrt2"], ["gd"], name="gelu_div"),
             helper.make_node("Erf", ["gd"], ["ge"], name="gelu_erf"),
             helper.make_node("Add", ["ge", "one"], ["ga"], name="gelu_add"),
             helper.make_node("Mul", ["a", "ga"], ["gm"], name="gelu_mul"),
             helper.make_node("Mul", ["gm", "half"], ["g"], name="gelu_half"),
             _conv("c2", "g", "y", "w2", kernel_shape=[1, 1])]
    inits = [_w("w1", C, C, 3, 3), _w("w2", C, C, 1, 1), _c("sqrt2", np.sqrt(2.0)), _c("one", 1.0), _c("half", 0.5)]
    return _model("conv_gelu", nodes, [_x()], [_y((1, C, HW, HW))], inits)


def leaky_prelu() -> onnx.ModelProto:
    """conv -> LeakyRelu -> conv -> PRelu (per-channel slope) -> conv (YOLOv3/v4, PP-OCR heads)."""
    nodes = [_conv("c1", "x", "a", "w1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("LeakyRelu", ["a"], ["al"], name="leaky", alpha=0.1),
             _conv("c2", "al", "b", "w2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("PRelu", ["b", "slope"], ["bp"], name="prelu"),
             _conv("c3", "bp", "y", "w3", kernel_shape=[1, 1])]
    inits = [_w("w1", C, C, 3, 3), _w("w2", C, C, 3, 3), _w("w3", C, C, 1, 1),
             _c("slope", np.full((C, 1, 1), 0.25))]
    return _model("leaky_prelu", nodes, [_x()], [_y((1, C, HW, HW))], inits)


def c2f() -> onnx.ModelProto:
    """YOLOv8's C2f (n=1, shortcut): cv1 -> Split -> bottleneck (+ residual) -> Concat(a, b, d) -> cv2."""
    h = C // 2
    nodes = _conv_silu("cv1", "x", "t", "w_cv1", kernel_shape=[1, 1])
    nodes += [helper.make_node("Split", ["t", "split"], ["a", "b"], name="split", axis=1)]
    nodes += _conv_silu("m_cv1", "b", "m1", "w_m1", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    nodes += _conv_silu("m_cv2", "m1", "m2", "w_m2", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    nodes += [helper.make_node("Add", ["b", "m2"], ["d"], name="m_add"),
              helper.make_node("Concat", ["a", "b", "d"], ["cat"], name="cat", axis=1)]
    nodes += _conv_silu("cv2", "cat", "y", "w_cv2", kernel_shape=[1, 1])
    inits = [_w("w_cv1", C, C, 1, 1), _i64("split", [h, h]), _w("w_m1", h, h, 3, 3), _w("w_m2", h, h, 3, 3),
             _w("w_cv2", C, 3 * h, 1, 1)]
    return _model("c2f", nodes, [_x()], [_y((1, C, HW, HW))], inits)


def sppf() -> onnx.ModelProto:
    """YOLOv5/v8's SPPF: cv1 -> MaxPool(5, s1) x3 -> Concat(x, p1, p2, p3) -> cv2."""
    pool = {"kernel_shape": [5, 5], "strides": [1, 1], "pads": [2, 2, 2, 2]}
    nodes = _conv_silu("cv1", "x", "x1", "w_cv1", kernel_shape=[1, 1])
    nodes += [helper.make_node("MaxPool", ["x1"], ["p1"], name="pool1", **pool),
              helper.make_node("MaxPool", ["p1"], ["p2"], name="pool2", **pool),
              helper.make_node("MaxPool", ["p2"], ["p3"], name="pool3", **pool),
              helper.make_node("Concat", ["x1", "p1", "p2", "p3"], ["cat"], name="cat", axis=1)]
    nodes += _conv_silu("cv2", "cat", "y", "w_cv2", kernel_shape=[1, 1])
    inits = [_w("w_cv1", C, C, 1, 1), _w("w_cv2", C, 4 * C, 1, 1)]
    return _model("sppf", nodes, [_x()], [_y((1, C, HW, HW))], inits)


def upsample_neck() -> onnx.ModelProto:
    """A PAN/FPN neck: a stride-2 conv's map upsampled x2 (nearest) and concatenated with a lateral map -> conv."""
    nodes = _conv_silu("down", "x", "s", "w_down", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2])
    nodes += [helper.make_node("Resize", ["s", "", "scales"], ["up"], name="up", mode="nearest")]
    nodes += _conv_silu("lat", "x", "l", "w_lat", kernel_shape=[1, 1])
    nodes += [helper.make_node("Concat", ["up", "l"], ["cat"], name="cat", axis=1)]
    nodes += _conv_silu("fuse", "cat", "y", "w_fuse", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    inits = [_w("w_down", C, C, 3, 3), _w("w_lat", C, C, 1, 1), _w("w_fuse", C, 2 * C, 3, 3),
             _c("scales", [1, 1, 2, 2])]
    return _model("upsample_neck", nodes, [_x()], [_y((1, C, HW, HW))], inits)


def dfl_head(classes: int = 16, bins: int = 16) -> onnx.ModelProto:
    """YOLOv8's decoupled head at one scale: box branch -> DFL (Softmax over bins, fixed 1x1 conv); class branch -> Sigmoid."""
    a = HW * HW
    nodes = _conv_silu("box1", "x", "bx", "w_box1", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    nodes += [_conv("box2", "bx", "box", "w_box2", kernel_shape=[1, 1]),
              helper.make_node("Reshape", ["box", "shape_bins"], ["box_r"], name="dfl_reshape"),
              helper.make_node("Transpose", ["box_r"], ["box_t"], name="dfl_transpose", perm=[0, 2, 1, 3]),
              helper.make_node("Softmax", ["box_t"], ["prob"], name="softmax", axis=1),
              _conv("dfl", "prob", "dist", "w_dfl", kernel_shape=[1, 1]),
              helper.make_node("Reshape", ["dist", "shape_box"], ["ltrb"], name="dfl_out")]
    nodes += _conv_silu("cls1", "x", "cx", "w_cls1", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    nodes += [_conv("cls2", "cx", "cls", "w_cls2", kernel_shape=[1, 1]),
              helper.make_node("Sigmoid", ["cls"], ["score"], name="cls_sig"),
              helper.make_node("Reshape", ["score", "shape_cls"], ["score_r"], name="cls_out"),
              helper.make_node("Concat", ["ltrb", "score_r"], ["y"], name="out", axis=1)]
    inits = [_w("w_box1", C, C, 3, 3), _w("w_box2", 4 * bins, C, 1, 1),
             _c("w_dfl", np.arange(bins, dtype=np.float32).reshape(1, bins, 1, 1)),
             _i64("shape_bins", [1, 4, bins, a]), _i64("shape_box", [1, 4, a]),
             _w("w_cls1", C, C, 3, 3), _w("w_cls2", classes, C, 1, 1), _i64("shape_cls", [1, classes, a])]
    return _model("dfl_head", nodes, [_x()], [_y((1, 4 + classes, a))], inits)


def mlp_gelu_tanh(batch: int = 2, seq: int = 32, d: int = 64) -> onnx.ModelProto:
    """A transformer MLP with the tanh GELU: MatMul -> 0.5x(1 + tanh(sqrt(2/pi)(x + 0.044715x^3))) -> MatMul."""
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["m1"], name="fc1"),
             helper.make_node("Pow", ["m1", "three"], ["cube"], name="gelu_pow"),
             helper.make_node("Mul", ["cube", "k"], ["kc"], name="gelu_k"),
             helper.make_node("Add", ["m1", "kc"], ["inner"], name="gelu_inner"),
             helper.make_node("Mul", ["inner", "c"], ["sc"], name="gelu_c"),
             helper.make_node("Tanh", ["sc"], ["th"], name="gelu_tanh"),
             helper.make_node("Add", ["th", "one"], ["t1"], name="gelu_add"),
             helper.make_node("Mul", ["m1", "t1"], ["xm"], name="gelu_mul"),
             helper.make_node("Mul", ["xm", "half"], ["g"], name="gelu_half"),
             helper.make_node("MatMul", ["g", "w2"], ["y"], name="fc2")]
    inits = [_w("w1", d, 4 * d), _w("w2", 4 * d, d), _c("three", 3.0), _c("k", 0.044715),
             _c("c", np.sqrt(2.0 / np.pi)), _c("one", 1.0), _c("half", 0.5)]
    return _model("mlp_gelu_tanh", nodes, [_x((batch, seq, d))], [_y((batch, seq, d))], inits, opset=17)


def vit_attention(batch: int = 2, seq: int = 64, d: int = 64, heads: int = 4) -> onnx.ModelProto:
    """Multi-head self-attention as ViT / DETR exports it: per-head Reshape/Transpose, Q·Kᵀ, Softmax, P·V."""
    dh = d // heads
    nodes = []
    for name in ("q", "k", "v"):
        nodes += [helper.make_node("MatMul", ["x", f"w{name}"], [f"{name}0"], name=f"{name}_proj"),
                  helper.make_node("Reshape", [f"{name}0", "heads_shape"], [f"{name}1"], name=f"{name}_heads"),
                  helper.make_node("Transpose", [f"{name}1"], [name], name=f"{name}_t",
                                   perm=[0, 2, 3, 1] if name == "k" else [0, 2, 1, 3])]
    nodes += [helper.make_node("MatMul", ["q", "k"], ["qk"], name="qk"),
              helper.make_node("Mul", ["qk", "inv_sqrt_dh"], ["qks"], name="scale"),
              helper.make_node("Softmax", ["qks"], ["p"], name="softmax", axis=-1),
              helper.make_node("MatMul", ["p", "v"], ["ctx"], name="pv"),
              helper.make_node("Transpose", ["ctx"], ["ctx_t"], name="ctx_t", perm=[0, 2, 1, 3]),
              helper.make_node("Reshape", ["ctx_t", "merge_shape"], ["ctx_m"], name="ctx_merge"),
              helper.make_node("MatMul", ["ctx_m", "wo"], ["o"], name="o_proj"),
              helper.make_node("Add", ["x", "o"], ["y"], name="residual")]
    inits = [_w("wq", d, d), _w("wk", d, d), _w("wv", d, d), _w("wo", d, d), _c("inv_sqrt_dh", 1.0 / np.sqrt(dh)),
             _i64("heads_shape", [batch, seq, heads, dh]), _i64("merge_shape", [batch, seq, d])]
    return _model("vit_attention", nodes, [_x((batch, seq, d))], [_y((batch, seq, d))], inits, opset=17)


#: name -> (maker, layers that must not run INT8)
FAMILY_BLOCKS = {
    "conv_silu": (conv_silu, ()),
    "conv_gelu": (conv_gelu, ()),
    "leaky_prelu": (leaky_prelu, ()),
    "c2f": (c2f, ()),
    "sppf": (sppf, ()),
    "upsample_neck": (upsample_neck, ()),
    "dfl_head": (dfl_head, ("softmax", "dfl")),
    "mlp_gelu_tanh": (mlp_gelu_tanh, ()),
    "vit_attention": (vit_attention, ("softmax",)),
}
