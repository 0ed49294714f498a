"""The blocks real models are made of, as small float ONNX models (onnx.helper + numpy only).

Used on the CPU (placement and export tests) and on the GPU machine (Python 3.9,
numpy + onnx + tensorrt: ``tests/gpu/test_qdq_blocks.py`` builds each one's Q/DQ
export with TensorRT 8.6 and reads which layers ran INT8). 32+ channels, so TensorRT
has INT8 kernels for them.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Tuple

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

RNG = np.random.default_rng(11)
C = 32
HW = 16


def _w(name: str, *shape: int) -> onnx.TensorProto:
    fan_in = int(np.prod(shape[1:])) or 1
    return numpy_helper.from_array((RNG.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32), name)


def _c(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=np.float32), name)


def _model(name: str, nodes, inputs, outputs, inits, opset: int = 13) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, name, inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _x(shape=(1, C, HW, HW)):
    return helper.make_tensor_value_info("x", TensorProto.FLOAT, list(shape))


def _y(shape):
    return helper.make_tensor_value_info("y", TensorProto.FLOAT, list(shape))


def _bn(prefix: str, c: int) -> List[onnx.TensorProto]:
    return [_c(f"{prefix}_g", RNG.uniform(0.5, 1.5, c)), _c(f"{prefix}_b", RNG.uniform(-0.1, 0.1, c)),
            _c(f"{prefix}_m", RNG.uniform(-0.1, 0.1, c)), _c(f"{prefix}_v", RNG.uniform(0.5, 1.5, c))]


def _conv(name, x, out, w, **kw):
    return helper.make_node("Conv", [x, w], [out], name=name, **kw)


def _hardswish(prefix: str, x: str, out: str) -> List[onnx.NodeProto]:
    # x * Clip(x + 3, 0, 6) / 6, as exporters decompose it.
    return [helper.make_node("Add", [x, "three"], [f"{prefix}_a"], name=f"{prefix}_add3"),
            helper.make_node("Clip", [f"{prefix}_a", "zero", "six"], [f"{prefix}_c"], name=f"{prefix}_clip"),
            helper.make_node("Mul", [x, f"{prefix}_c"], [f"{prefix}_m"], name=f"{prefix}_mul"),
            helper.make_node("Div", [f"{prefix}_m", "six"], [out], name=f"{prefix}_div")]


_HS_CONSTS = [_c("three", 3.0), _c("zero", 0.0), _c("six", 6.0)]


def depthwise_hardswish() -> onnx.ModelProto:
    """pw conv -> depthwise 3x3 + BN + HardSwish -> pw conv (MobileNetV3's inverted residual, no SE)."""
    nodes = [_conv("pw1", "x", "p1", "w_pw1", kernel_shape=[1, 1]),
             helper.make_node("Relu", ["p1"], ["r1"], name="relu1"),
             _conv("dw", "r1", "d", "w_dw", kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=C),
             helper.make_node("BatchNormalization", ["d", "dw_g", "dw_b", "dw_m", "dw_v"], ["dbn"], name="dw_bn")]
    nodes += _hardswish("hs", "dbn", "h")
    nodes += [_conv("pw2", "h", "y", "w_pw2", kernel_shape=[1, 1])]
    inits = [_w("w_pw1", C, C, 1, 1), _w("w_dw", C, 1, 3, 3), _w("w_pw2", C, C, 1, 1)] + _bn("dw", C) + _HS_CONSTS
    return _model("depthwise_hardswish", nodes, [_x()], [_y((1, C, HW, HW))], inits)


def squeeze_excite() -> onnx.ModelProto:
    """depthwise conv + Relu -> SE (GAP, 1x1 conv Relu, 1x1 conv, HardSigmoid, Mul) -> pw conv."""
    nodes = [_conv("dw", "x", "d", "w_dw", kernel_shape=[3, 3], pads=[1, 1, 1, 1], group=C),
             helper.make_node("Relu", ["d"], ["dr"], name="dw_relu"),
             helper.make_node("GlobalAveragePool", ["dr"], ["g"], name="se_pool"),
             _conv("se1", "g", "s1", "w_se1", kernel_shape=[1, 1]),
             helper.make_node("Relu", ["s1"], ["s1r"], name="se_relu"),
             _conv("se2", "s1r", "s2", "w_se2", kernel_shape=[1, 1]),
             helper.make_node("HardSigmoid", ["s2"], ["s"], name="se_gate", alpha=0.2, beta=0.5),
             helper.make_node("Mul", ["dr", "s"], ["e"], name="se_mul"),
             _conv("pw", "e", "y", "w_pw", kernel_shape=[1, 1])]
    inits = [_w("w_dw", C, 1, 3, 3), _w("w_se1", C // 4, C, 1, 1), _w("w_se2", C, C // 4, 1, 1), _w("w_pw", C, C, 1, 1)]
    return _model("squeeze_excite", nodes, [_x()], [_y((1, C, HW, HW))], inits)


def residual() -> onnx.ModelProto:
    """conv + Relu = t; conv + BN (t) + t -> Relu -> conv (ResNet's basic block)."""
    nodes = [_conv("c1", "x", "a", "w1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["t"], name="r1"),
             _conv("c2", "t", "b", "w2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["b", "bn_g", "bn_b", "bn_m", "bn_v"], ["bb"], name="bn"),
             helper.make_node("Add", ["t", "bb"], ["s"], name="add"),
             helper.make_node("Relu", ["s"], ["r"], name="r2"),
             _conv("c3", "r", "y", "w3", kernel_shape=[1, 1])]
    inits = [_w("w1", C, C, 3, 3), _w("w2", C, C, 3, 3), _w("w3", C, C, 1, 1)] + _bn("bn", C)
    return _model("residual", nodes, [_x()], [_y((1, C, HW, HW))], inits)


def concat_resize() -> onnx.ModelProto:
    """Two conv branches -> Concat -> conv; a strided conv -> Resize x2 (nearest) -> Add -> conv (an FPN neck)."""
    nodes = [_conv("ba", "x", "a", "wa", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["ar"], name="ra"),
             _conv("bb", "x", "b", "wb", kernel_shape=[1, 1]),
             helper.make_node("Relu", ["b"], ["br"], name="rb"),
             helper.make_node("Concat", ["ar", "br"], ["cat"], name="cat", axis=1),
             _conv("fuse", "cat", "f", "wf", kernel_shape=[1, 1]),
             _conv("down", "f", "dn", "wd", kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
             helper.make_node("Resize", ["dn", "", "scales"], ["up"], name="up", mode="nearest"),
             helper.make_node("Add", ["f", "up"], ["sum"], name="sum"),
             _conv("head", "sum", "y", "wh", kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    inits = [_w("wa", C, C, 3, 3), _w("wb", C, C, 1, 1), _w("wf", C, 2 * C, 1, 1), _w("wd", C, C, 3, 3),
             _w("wh", C, C, 3, 3), _c("scales", [1, 1, 2, 2])]
    return _model("concat_resize", nodes, [_x()], [_y((1, C, HW, HW))], inits)


def transpose_head() -> onnx.ModelProto:
    """conv -> ConvTranspose x2 + BN + Relu -> ConvTranspose x2 -> Sigmoid (a DB text detector's head)."""
    nodes = [_conv("c", "x", "a", "w", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["ar"], name="r"),
             helper.make_node("ConvTranspose", ["ar", "wt1"], ["t1"], name="up1", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("BatchNormalization", ["t1", "bn_g", "bn_b", "bn_m", "bn_v"], ["t1b"], name="bn"),
             helper.make_node("Relu", ["t1b"], ["t1r"], name="r1"),
             helper.make_node("ConvTranspose", ["t1r", "wt2"], ["t2"], name="up2", kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Sigmoid", ["t2"], ["y"], name="sig")]
    inits = [_w("w", C, C, 3, 3), _w("wt1", C, C, 2, 2), _w("wt2", C, 1, 2, 2)] + _bn("bn", C)
    return _model("transpose_head", nodes, [_x()], [_y((1, 1, 4 * HW, 4 * HW))], inits)


def pool_classifier(batch: int = 8) -> onnx.ModelProto:
    """conv + Relu -> MaxPool -> conv + Relu -> GlobalAveragePool -> Flatten -> Gemm (a CNN's tail)."""
    nodes = [_conv("c1", "x", "a", "w1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["a"], ["ar"], name="r1"),
             helper.make_node("MaxPool", ["ar"], ["p"], name="maxpool", kernel_shape=[2, 2], strides=[2, 2]),
             _conv("c2", "p", "b", "w2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["b"], ["br"], name="r2"),
             helper.make_node("GlobalAveragePool", ["br"], ["g"], name="gap"),
             helper.make_node("Flatten", ["g"], ["f"], name="flatten"),
             helper.make_node("Gemm", ["f", "wfc", "bfc"], ["y"], name="fc", transB=1)]
    inits = [_w("w1", C, C, 3, 3), _w("w2", 2 * C, C, 3, 3), _w("wfc", 64, 2 * C), _c("bfc", np.zeros(64))]
    return _model("pool_classifier", nodes, [_x((batch, C, HW, HW))], [_y((batch, 64))], inits)


def _attention(x: str) -> List[onnx.NodeProto]:
    """Single-head self-attention on ``x`` with its residual: Q/K/V MatMuls (weights ``wq``, ``wk``, ``wv``),
    Q·Kᵀ scaled by ``sqrt_d``, Softmax, ·V, output MatMul (``wo``), ``h = x + o``."""
    return [helper.make_node("MatMul", [x, "wq"], ["q"], name="q_proj"),
            helper.make_node("MatMul", [x, "wk"], ["k"], name="k_proj"),
            helper.make_node("MatMul", [x, "wv"], ["v"], name="v_proj"),
            helper.make_node("Transpose", ["k"], ["kt"], name="k_t", perm=[0, 2, 1]),
            helper.make_node("MatMul", ["q", "kt"], ["qk"], name="qk"),
            helper.make_node("Div", ["qk", "sqrt_d"], ["qks"], name="scale"),
            helper.make_node("Softmax", ["qks"], ["p"], name="softmax", axis=-1),
            helper.make_node("MatMul", ["p", "v"], ["ctx"], name="pv"),
            helper.make_node("MatMul", ["ctx", "wo"], ["o"], name="o_proj"),
            helper.make_node("Add", [x, "o"], ["h"], name="res1")]


def encoder_layer(batch: int = 2, seq: int = 32, d: int = 64) -> onnx.ModelProto:
    """One transformer encoder layer: Q/K/V MatMuls, Q·Kᵀ, Softmax, ·V, output MatMul, residual,
    LayerNormalization, MLP with Erf GELU, residual, LayerNormalization (opset 17)."""
    sd = float(np.sqrt(d))
    nodes = _attention("x") + [
             helper.make_node("LayerNormalization", ["h", "ln1_g", "ln1_b"], ["h1"], name="ln1", axis=-1),
             helper.make_node("MatMul", ["h1", "w1"], ["m1"], name="fc1"),
             helper.make_node("Div", ["m1", "sqrt2"], ["gd"], name="gelu_div"),
             helper.make_node("Erf", ["gd"], ["ge"], name="gelu_erf"),
             helper.make_node("Add", ["ge", "one"], ["ga"], name="gelu_add"),
             helper.make_node("Mul", ["m1", "ga"], ["gm"], name="gelu_mul"),
             helper.make_node("Mul", ["gm", "half"], ["g"], name="gelu_half"),
             helper.make_node("MatMul", ["g", "w2"], ["m2"], name="fc2"),
             helper.make_node("Add", ["h1", "m2"], ["h2"], name="res2"),
             helper.make_node("LayerNormalization", ["h2", "ln2_g", "ln2_b"], ["y"], name="ln2", axis=-1)]
    inits = [_w("wq", d, d), _w("wk", d, d), _w("wv", d, d), _w("wo", d, d), _w("w1", d, 4 * d), _w("w2", 4 * d, d),
             _c("sqrt_d", sd), _c("ln1_g", np.ones(d)), _c("ln1_b", np.zeros(d)), _c("ln2_g", np.ones(d)),
             _c("ln2_b", np.zeros(d)), _c("sqrt2", np.sqrt(2.0)), _c("one", 1.0), _c("half", 0.5)]
    return _model("encoder_layer", nodes, [_x((batch, seq, d))], [_y((batch, seq, d))], inits, opset=17)


def _layer_norm(prefix: str, x: str, out: str, d: int, rng: np.random.Generator
                ) -> Tuple[List[onnx.NodeProto], List[onnx.TensorProto]]:
    """LayerNorm over the last axis decomposed as exporters before opset 17 write it (paddle2onnx, torch < 2)."""
    n = [helper.make_node("ReduceMean", [x], [f"{prefix}_mu"], name=f"{prefix}_mean", axes=[-1]),
         helper.make_node("Sub", [x, f"{prefix}_mu"], [f"{prefix}_xc"], name=f"{prefix}_sub"),
         helper.make_node("Pow", [f"{prefix}_xc", "two"], [f"{prefix}_sq"], name=f"{prefix}_pow"),
         helper.make_node("ReduceMean", [f"{prefix}_sq"], [f"{prefix}_var"], name=f"{prefix}_var_mean", axes=[-1]),
         helper.make_node("Add", [f"{prefix}_var", "eps"], [f"{prefix}_ve"], name=f"{prefix}_add_eps"),
         helper.make_node("Sqrt", [f"{prefix}_ve"], [f"{prefix}_sd"], name=f"{prefix}_sqrt"),
         helper.make_node("Div", [f"{prefix}_xc", f"{prefix}_sd"], [f"{prefix}_n"], name=f"{prefix}_div"),
         helper.make_node("Mul", [f"{prefix}_n", f"{prefix}_g"], [f"{prefix}_s"], name=f"{prefix}_scale"),
         helper.make_node("Add", [f"{prefix}_s", f"{prefix}_b"], [out], name=f"{prefix}_shift")]
    return n, [_c(f"{prefix}_g", rng.uniform(0.8, 1.2, d)), _c(f"{prefix}_b", rng.uniform(-0.1, 0.1, d))]


def svtr_block(batch: int = 2, seq: int = 40, d: int = 120) -> onnx.ModelProto:
    """A transformer encoder layer as paddle2onnx writes PaddleOCR's SVTR neck (opset 13): LayerNorm decomposed,
    every weight a Constant node, and the input reshaped to ``[batch, seq, d]`` by a target computed from ``Shape``
    (``Shape -> Slice -> Concat``), so ONNX shape inference knows no rank after it. Input ``x``: ``[batch, seq * d]``.

    Issue 33's zoo run: TensorRT 8.6 gave PaddleOCR rec's neck to Myelin, which asserted on INT8 weight constants
    (placement rule 13)."""
    rng = np.random.default_rng(13)  # its own: building it leaves the other blocks' weights as they were

    def w(name: str, rows: int, cols: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal((rows, cols)) * np.sqrt(2.0 / rows)).astype(np.float32),
                                       name)

    sd = float(np.sqrt(d))
    ln1, ln1_w = _layer_norm("ln1", "h", "h1", d, rng)
    ln2, ln2_w = _layer_norm("ln2", "h2", "y", d, rng)
    nodes = [helper.make_node("Shape", ["x"], ["x_shape"], name="shape"),
             helper.make_node("Slice", ["x_shape", "s0", "s1"], ["x_batch"], name="batch_of"),
             helper.make_node("Concat", ["x_batch", "seq_d"], ["x_target"], name="target", axis=0),
             helper.make_node("Reshape", ["x", "x_target"], ["xs"], name="to_sequence")] + _attention("xs") + ln1 + [
             helper.make_node("MatMul", ["h1", "w1"], ["m1"], name="fc1"),
             helper.make_node("Sigmoid", ["m1"], ["m1s"], name="swish_sigmoid"),
             helper.make_node("Mul", ["m1", "m1s"], ["g"], name="swish"),
             helper.make_node("MatMul", ["g", "w2"], ["m2"], name="fc2"),
             helper.make_node("Add", ["h1", "m2"], ["h2"], name="res2")] + ln2
    consts = [w("wq", d, d), w("wk", d, d), w("wv", d, d), w("wo", d, d), w("w1", d, 2 * d), w("w2", 2 * d, d),
              _c("sqrt_d", sd), _c("two", 2.0), _c("eps", 1e-6)] + ln1_w + ln2_w + [
              numpy_helper.from_array(np.array(v, np.int64), k) for k, v in (("s0", [0]), ("s1", [1]),
                                                                               ("seq_d", [seq, d]))]
    as_nodes = [helper.make_node("Constant", [], [t.name], name=f"{t.name}_const", value=t) for t in consts]
    return _model("svtr_block", as_nodes + nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                                  [batch, seq * d])],
                  [_y((batch, seq, d))], [], opset=13)


#: name -> (model maker, the layers that must NOT run INT8 whatever the export did, e.g. LayerNorm)
BLOCKS: Dict[str, Tuple[Callable[[], onnx.ModelProto], Tuple[str, ...]]] = {
    "depthwise_hardswish": (depthwise_hardswish, ()),
    "squeeze_excite": (squeeze_excite, ()),
    "residual": (residual, ()),
    "concat_resize": (concat_resize, ()),
    "transpose_head": (transpose_head, ()),
    "pool_classifier": (pool_classifier, ()),
    "encoder_layer": (encoder_layer, ("ln1", "ln2", "softmax")),
}


def feeds(model: onnx.ModelProto, n: int = 4, seed: int = 0) -> List[Dict[str, np.ndarray]]:
    """Random feeds (|N(0,1)|) for a block's input."""
    rng = np.random.default_rng(seed)
    shape = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
    return [{"x": np.abs(rng.standard_normal(shape)).astype(np.float32)} for _ in range(n)]


def simple_amax(model: onnx.ModelProto, value: float = 4.0) -> Dict[str, float]:
    """The same amax for every float tensor: enough to place Q/DQ where a GPU test only reads precisions."""
    names = {o for n in model.graph.node for o in n.output} | {i.name for i in model.graph.input}
    return {n: value for n in names}
