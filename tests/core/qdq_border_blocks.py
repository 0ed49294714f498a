"""INT8/float borders as tiny Q/DQ models: what makes TensorRT 8.6 assert in ``chooseHigherPrecision`` (issue 33).

TensorRT 8.6 refused the planner's YOLOv8 "INT8 where it pays" model (51 INT8 convs; the stem, the first C2f and
six head convs float) with ``[graphOptimizer.cpp::chooseHigherPrecision::7079] Error Code 2: Internal Error
(Assertion dt1 == DataType::kFLOAT || dt1 == DataType::kHALF failed.)``. Each block here writes one kind of border
of that model (and the kinds other partial placements make) with the Q/DQ placed by hand, so that a build on
TensorRT 8.6 (``scripts/gpu_border_blocks.py``) tells which border it cannot build. numpy + onnx only (the GPU
machine's Python 3.9).

Borders in the YOLO model (``benchmarks/yolo_borders.py`` lists them): a quantized conv whose SiLU output is read by
a float conv (cv2.0.1 -> cv2.0.2, cv2.2.0 -> cv2.2.1, cv3.2.0 -> cv3.2.1); a float conv whose SiLU output is
quantized for an INT8 conv (the stem: C2f model.2's cv2 -> model.3); float convs before it from the graph input.
Hypotheses beyond it: a DequantizeLinear read by an INT8 and a float layer; a quantized and a float tensor joined by
a Concat or an Add; a tensor read through a Q/DQ and in float.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

C = 32
HW = 16
SCALE = 4.0 / 127.0


class _Block:
    """Nodes and initializers of one block, with helpers that add a conv, a SiLU or a Q/DQ pair."""

    def __init__(self, name: str, seed: int = 0):
        self.name = name
        self.nodes: List[onnx.NodeProto] = []
        self.inits: List[onnx.TensorProto] = []
        self.rng = np.random.default_rng(seed)
        self.inits += [numpy_helper.from_array(np.array(SCALE, np.float32), "act_scale"),
                       numpy_helper.from_array(np.array(0, np.int8), "act_zp")]

    def qdq(self, x: str) -> str:
        """``x`` quantized and dequantized (per tensor, symmetric)."""
        self.nodes += [helper.make_node("QuantizeLinear", [x, "act_scale", "act_zp"], [f"{x}_q"], name=f"{x}_Q"),
                       helper.make_node("DequantizeLinear", [f"{x}_q", "act_scale", "act_zp"], [f"{x}_dq"],
                                        name=f"{x}_DQ")]
        return f"{x}_dq"

    def conv(self, name: str, x: str, cin: int = C, cout: int = C, k: int = 3, stride: int = 1,
             int8: bool = False) -> str:
        """A conv (+ bias); ``int8``: its weights stored INT8 per channel behind a DequantizeLinear."""
        w = (self.rng.standard_normal((cout, cin, k, k)) * np.sqrt(2.0 / (cin * k * k))).astype(np.float32)
        b = self.rng.uniform(-0.1, 0.1, cout).astype(np.float32)
        if int8:
            s = np.abs(w).reshape(cout, -1).max(1) / 127.0
            q = np.clip(np.round(w / s[:, None, None, None]), -127, 127).astype(np.int8)
            self.inits += [numpy_helper.from_array(q, f"{name}_wq"),
                           numpy_helper.from_array(s.astype(np.float32), f"{name}_ws"),
                           numpy_helper.from_array(np.zeros(cout, np.int8), f"{name}_wz")]
            self.nodes.append(helper.make_node("DequantizeLinear", [f"{name}_wq", f"{name}_ws", f"{name}_wz"],
                                               [f"{name}_w"], name=f"{name}_wDQ", axis=0))
        else:
            self.inits.append(numpy_helper.from_array(w, f"{name}_w"))
        self.inits.append(numpy_helper.from_array(b, f"{name}_b"))
        pad = k // 2
        self.nodes.append(helper.make_node("Conv", [x, f"{name}_w", f"{name}_b"], [f"{name}_o"], name=name,
                                           kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4))
        return f"{name}_o"

    def silu(self, x: str) -> str:
        self.nodes += [helper.make_node("Sigmoid", [x], [f"{x}_sig"], name=f"{x}_Sigmoid"),
                       helper.make_node("Mul", [x, f"{x}_sig"], [f"{x}_silu"], name=f"{x}_Mul")]
        return f"{x}_silu"

    def conv_silu(self, name: str, x: str, **kw) -> str:
        return self.silu(self.conv(name, x, **kw))

    def op(self, op: str, inputs, name: str, outputs: int = 1, **attrs) -> List[str]:
        outs = [f"{name}_o{i}" for i in range(outputs)]
        self.nodes.append(helper.make_node(op, list(inputs), outs, name=name, **attrs))
        return outs

    def const(self, name: str, value, dtype=np.float32) -> str:
        self.inits.append(numpy_helper.from_array(np.asarray(value, dtype), name))
        return name

    def model(self, out, shape=(1, C, HW, HW), in_shape=(1, C, HW, HW)) -> onnx.ModelProto:
        """The block with input ``x`` and output ``y`` (``out`` a list: outputs ``y0``, ``y1``, ... of ``shape``)."""
        outs = [out] if isinstance(out, str) else list(out)
        names = ["y"] if isinstance(out, str) else [f"y{i}" for i in range(len(outs))]
        for o, n in zip(outs, names):
            self.nodes.append(helper.make_node("Identity", [o], [n], name=f"output_{n}"))
        graph = helper.make_graph(self.nodes, self.name,
                                  [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(in_shape))],
                                  [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(shape)) for n in names],
                                  self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
        m.ir_version = 8
        onnx.checker.check_model(m)
        return m


# -- the YOLO's own borders --------------------------------------------------------------------------------------


def int8_silu_to_float_conv() -> onnx.ModelProto:
    """INT8 conv + SiLU, its output read in float by a float conv (head: cv2.0.1 -> cv2.0.2)."""
    b = _Block("int8_silu_to_float_conv")
    a = b.conv_silu("c1", b.qdq("x"), int8=True)
    return b.model(b.conv("c2", a, k=1))


def int8_to_float_conv() -> onnx.ModelProto:
    """The same without the SiLU: an INT8 conv's output read by a float conv."""
    b = _Block("int8_to_float_conv")
    a = b.conv("c1", b.qdq("x"), int8=True)
    return b.model(b.conv("c2", a, k=1))


def int8_silu_to_float_conv_silu_conv() -> onnx.ModelProto:
    """INT8 conv + SiLU -> float conv + SiLU -> float conv (head: cv2.2.0 -> cv2.2.1 -> cv2.2.2)."""
    b = _Block("int8_silu_to_float_conv_silu_conv")
    a = b.conv_silu("c1", b.qdq("x"), int8=True)
    a = b.conv_silu("c2", a)
    return b.model(b.conv("c3", a, k=1))


def float_silu_to_int8_conv() -> onnx.ModelProto:
    """A float conv + SiLU quantized for an INT8 conv (the stem's end: model.2's cv2 -> model.3)."""
    b = _Block("float_silu_to_int8_conv")
    a = b.conv_silu("c1", "x")
    return b.model(b.conv("c2", b.qdq(a), int8=True))


def float_stem() -> onnx.ModelProto:
    """Graph input -> two strided float convs + SiLU -> Q/DQ -> INT8 conv (YOLOv8's model.0, model.1 float)."""
    b = _Block("float_stem")
    a = b.conv_silu("c0", "x", cin=3, cout=16, stride=2)
    a = b.conv_silu("c1", a, cin=16, cout=C, stride=2)
    return b.model(b.conv("c2", b.qdq(a), int8=True), in_shape=(1, 3, 4 * HW, 4 * HW))


def float_c2f_to_int8() -> onnx.ModelProto:
    """A float C2f (cv1 -> Split -> bottleneck with its residual Add -> Concat -> cv2) quantized into an INT8 conv."""
    b = _Block("float_c2f_to_int8")
    h = C // 2
    a = b.conv_silu("cv1", "x", k=1)
    s0, s1 = b.op("Split", [a, b.const("split", [h, h], np.int64)], "split", outputs=2, axis=1)
    m = b.conv_silu("m_cv1", s1, cin=h, cout=h)
    m = b.conv_silu("m_cv2", m, cin=h, cout=h)
    (add,) = b.op("Add", [s1, m], "m_add")
    (cat,) = b.op("Concat", [s0, s1, add], "concat", axis=1)
    a = b.conv_silu("cv2", cat, cin=3 * h, cout=C, k=1)
    return b.model(b.conv("next", b.qdq(a), int8=True))


def head_concat_mixed() -> onnx.ModelProto:
    """Three head branches, two ending in INT8 convs and one in a float conv, reshaped and concatenated, Sigmoid
    (YOLOv8's class Concat_1 with cv3.0.2, cv3.1.2 INT8 and cv3.2.2 float)."""
    b = _Block("head_concat_mixed")
    outs, x = [], b.qdq("x")
    for i, int8 in enumerate((True, True, False)):
        a = b.conv_silu(f"b{i}_c1", x, int8=True)
        a = b.conv_silu(f"b{i}_c2", b.qdq(a) if int8 else a, int8=int8)
        a = b.conv(f"b{i}_c3", b.qdq(a) if int8 else a, k=1, int8=int8)
        outs += b.op("Reshape", [a, b.const(f"shape{i}", [1, C, -1], np.int64)], f"b{i}_reshape")
    (cat,) = b.op("Concat", outs, "concat", axis=2)
    (sig,) = b.op("Sigmoid", [cat], "sigmoid")
    return b.model(sig, shape=(1, C, 3 * HW * HW))


# -- other borders a partial placement can write ----------------------------------------------------------------


def dq_shared_int8_float() -> onnx.ModelProto:
    """One DequantizeLinear read by an INT8 conv and by a float conv (weights float), summed."""
    b = _Block("dq_shared_int8_float")
    x = b.qdq("x")
    (s,) = b.op("Add", [b.conv("c1", x, int8=True), b.conv("c2", x)], "add")
    return b.model(s)


def concat_int8_float() -> onnx.ModelProto:
    """A quantized tensor and a float one joined by a Concat read by a float conv."""
    b = _Block("concat_int8_float")
    a = b.conv_silu("c1", b.qdq("x"), int8=True)
    f = b.conv_silu("c2", "x")
    (cat,) = b.op("Concat", [b.qdq(a), f], "concat", axis=1)
    return b.model(b.conv("c3", cat, cin=2 * C, k=1))


def add_int8_float() -> onnx.ModelProto:
    """A quantized tensor and a float one joined by an Add read by a float conv."""
    b = _Block("add_int8_float")
    a = b.conv_silu("c1", b.qdq("x"), int8=True)
    f = b.conv_silu("c2", "x")
    (s,) = b.op("Add", [b.qdq(a), f], "add")
    return b.model(b.conv("c3", s, k=1))


def q_and_float_reads() -> onnx.ModelProto:
    """A tensor read through a Q/DQ by an INT8 conv and directly by a float conv."""
    b = _Block("q_and_float_reads")
    a = b.conv_silu("c1", b.qdq("x"), int8=True)
    (s,) = b.op("Add", [b.conv("c2", b.qdq(a), int8=True), b.conv("c3", a)], "add")
    return b.model(s)


# -- sibling convs reading one DequantizeLinear (YOLOv8's P5 head: cv2.2.0 and cv3.2.0 read model.21's output) ------


def _siblings(name: str, outputs: Tuple[str, str], cin: int = C, cout: int = C, hw: int = HW,
              kernels: Tuple[int, int] = (3, 3), silu: bool = True) -> onnx.ModelProto:
    """Two INT8 convs reading one Q/DQ of ``x``; each output ``"float"`` (read by a float conv), ``"int8"`` (quantized
    for an INT8 conv) or ``"out"`` (a graph output)."""
    b = _Block(name)
    x = b.qdq("x")
    ys = []
    for i, (how, k) in enumerate(zip(outputs, kernels)):
        a = b.conv(f"s{i}", x, cin=cin, cout=cout, k=k, int8=True)
        a = b.silu(a) if silu else a
        if how == "float":
            a = b.conv(f"s{i}_next", a, cin=cout, cout=cout)
        elif how == "int8":
            a = b.conv(f"s{i}_next", b.qdq(a), cin=cout, cout=cout, int8=True)
        ys.append(a)
    return b.model(ys, shape=(1, cout, hw, hw), in_shape=(1, cin, hw, hw))


def siblings_float_out() -> onnx.ModelProto:
    """Two INT8 convs + SiLU on one DQ, both outputs read by float convs (the failing YOLO P5 head)."""
    return _siblings("siblings_float_out", ("float", "float"))


def siblings_float_out_no_silu() -> onnx.ModelProto:
    """The same without the SiLUs."""
    return _siblings("siblings_float_out_no_silu", ("float", "float"), silu=False)


def siblings_graph_out() -> onnx.ModelProto:
    """Two INT8 convs + SiLU on one DQ, both outputs graph outputs (no float conv after them)."""
    return _siblings("siblings_graph_out", ("out", "out"))


def siblings_mixed_out() -> onnx.ModelProto:
    """Two INT8 convs + SiLU on one DQ: one output quantized for an INT8 conv, the other read by a float conv."""
    return _siblings("siblings_mixed_out", ("int8", "float"))


def siblings_int8_out() -> onnx.ModelProto:
    """Two INT8 convs + SiLU on one DQ, both outputs quantized for INT8 convs (all-INT8: the control)."""
    return _siblings("siblings_int8_out", ("int8", "int8"))


def siblings_float_out_kernels() -> onnx.ModelProto:
    """Two INT8 convs of different kernels (3x3, 1x1) on one DQ, both outputs read by float convs."""
    return _siblings("siblings_float_out_kernels", ("float", "float"), kernels=(3, 1))


def siblings_float_out_p5() -> onnx.ModelProto:
    """``siblings_float_out`` at the YOLO's P5 shapes (256 -> 64 channels, 10x10)."""
    return _siblings("siblings_float_out_p5", ("float", "float"), cin=256, cout=64, hw=10)


def float_siblings(kernels: Tuple[int, int] = (3, 3)) -> onnx.ModelProto:
    """The float twin of the sibling blocks: a conv + SiLU (``c0``), then two convs + SiLU on its output, each read by
    a conv (``s0_next``, ``s1_next``). Exported with both readers kept float, rule 12 keeps ``s0`` and ``s1`` float
    too (``c0`` stays INT8, so the engine has INT8 layers)."""
    b = _Block("float_siblings")
    x = b.conv_silu("c0", "x")
    ys = []
    for i, k in enumerate(kernels):
        ys.append(b.conv(f"s{i}_next", b.conv_silu(f"s{i}", x, k=k)))
    return b.model(ys, shape=(1, C, HW, HW))


#: name -> (builder, what it isolates)
BORDER_BLOCKS: Dict[str, Tuple[Callable[[], onnx.ModelProto], str]] = {
    "int8_silu_to_float_conv": (int8_silu_to_float_conv, "INT8 conv + SiLU read by a float conv (head)"),
    "int8_to_float_conv": (int8_to_float_conv, "INT8 conv read by a float conv, no activation"),
    "int8_silu_to_float_conv_silu_conv": (int8_silu_to_float_conv_silu_conv, "INT8 -> float -> float convs (head)"),
    "float_silu_to_int8_conv": (float_silu_to_int8_conv, "float conv + SiLU quantized for an INT8 conv (stem end)"),
    "float_stem": (float_stem, "graph input -> float convs -> INT8 conv (stem)"),
    "float_c2f_to_int8": (float_c2f_to_int8, "float C2f quantized into an INT8 conv (stem)"),
    "head_concat_mixed": (head_concat_mixed, "INT8 and float head branches joined by a Concat (head)"),
    "dq_shared_int8_float": (dq_shared_int8_float, "one DQ read by an INT8 and a float conv"),
    "concat_int8_float": (concat_int8_float, "quantized and float tensors joined by a Concat"),
    "add_int8_float": (add_int8_float, "quantized and float tensors joined by an Add"),
    "q_and_float_reads": (q_and_float_reads, "a tensor read through a Q/DQ and in float"),
    "siblings_float_out": (siblings_float_out, "two INT8 convs + SiLU on one DQ, both read by float convs (P5)"),
    "siblings_float_out_no_silu": (siblings_float_out_no_silu, "the same without SiLU"),
    "siblings_graph_out": (siblings_graph_out, "two INT8 convs + SiLU on one DQ, both graph outputs"),
    "siblings_mixed_out": (siblings_mixed_out, "two INT8 convs + SiLU on one DQ, one read INT8, one in float"),
    "siblings_int8_out": (siblings_int8_out, "two INT8 convs + SiLU on one DQ, both read INT8 (control)"),
    "siblings_float_out_kernels": (siblings_float_out_kernels, "siblings of different kernels, both read in float"),
    "siblings_float_out_p5": (siblings_float_out_p5, "siblings_float_out at the YOLO's P5 shapes"),
}
