"""Tiny float ONNX models for the Q/DQ placement and export tests (onnx.helper only)."""

from __future__ import annotations

from typing import Dict, List, Optional

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

def _rng(key: str) -> np.random.Generator:
    # Seeded by the weight's own name and shape: a model is the same whichever tests built models before it
    # (one module-level generator made a test's model, and its accuracy, depend on the tests that ran first).
    import zlib

    return np.random.default_rng(zlib.crc32(key.encode("utf-8")))


def _w(name: str, *shape: int, scale: float = 0.3) -> onnx.TensorProto:
    return numpy_helper.from_array((_rng(f"{name}{shape}").standard_normal(shape) * scale).astype(np.float32), name)


def _c(name: str, value) -> onnx.TensorProto:
    return numpy_helper.from_array(np.asarray(value, dtype=np.float32), name)


def _model(nodes, inputs, outputs, inits, opset: int = 13) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def _vi(name: str, shape) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def residual_cnn(kernel_shape: bool = True, opset: int = 13, channels: int = 4, size: int = 8) -> onnx.ModelProto:
    """x -> ConvA -> Relu = t; t -> ConvB -> BN -> Add(t, .) -> Relu -> MaxPool -> ConvC -> GAP -> out.

    The residual Add's skip input is ``t``; ConvB+BN is the fused branch. The GPU
    test uses it wider (``channels=32``) so that TensorRT has INT8 kernels for it.
    """
    c = channels
    ks = {"kernel_shape": [3, 3]} if kernel_shape else {}
    nodes = [
        helper.make_node("Conv", ["x", "wA", "bA"], ["convA"], name="convA", pads=[1, 1, 1, 1], **ks),
        helper.make_node("Relu", ["convA"], ["t"], name="reluA"),
        helper.make_node("Conv", ["t", "wB"], ["convB"], name="convB", pads=[1, 1, 1, 1], **ks),
        helper.make_node("BatchNormalization", ["convB", "g", "b", "m", "v"], ["bnB"], name="bnB"),
        helper.make_node("Add", ["t", "bnB"], ["sum"], name="residual"),
        helper.make_node("Relu", ["sum"], ["r"], name="reluR"),
        helper.make_node("MaxPool", ["r"], ["pool"], name="pool", kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Conv", ["pool", "wC"], ["convC"], name="convC", **({"kernel_shape": [1, 1]} if kernel_shape else {})),
        helper.make_node("GlobalAveragePool", ["convC"], ["out"], name="gap"),
    ]
    inits = [_w("wA", c, 3, 3, 3), _c("bA", np.zeros(c)), _w("wB", c, c, 3, 3), _c("g", np.ones(c) * 1.1),
             _c("b", np.full(c, 0.1)), _c("m", np.zeros(c)), _c("v", np.ones(c)), _w("wC", 2 * c, c, 1, 1)]
    return _model(nodes, [_vi("x", [1, 3, size, size])], [_vi("out", [1, 2 * c, 1, 1])], inits, opset)


def two_conv_residual() -> onnx.ModelProto:
    """ResNet downsampling block: Add(BN(conv_short(x)), BN(conv_main2(relu(conv_main1(x)))))."""
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], name="main1", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"], name="relu1"),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], name="main2", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("Conv", ["x", "ws"], ["cs"], name="shortcut", kernel_shape=[1, 1]),
        helper.make_node("Add", ["cs", "c2"], ["out"], name="add"),
    ]
    inits = [_w("w1", 4, 4, 3, 3), _w("w2", 4, 4, 3, 3), _w("ws", 4, 4, 1, 1)]
    return _model(nodes, [_vi("x", [1, 4, 6, 6])], [_vi("out", [1, 4, 6, 6])], inits)


def transformer_block() -> onnx.ModelProto:
    """MatMul -> decomposed LayerNorm -> MatMul -> Erf GELU -> MatMul -> Tanh GELU -> MatMul -> decomposed softmax."""
    d = 8
    nodes: List[onnx.NodeProto] = [helper.make_node("MatMul", ["x", "w0"], ["h0"], name="fc0")]
    # LayerNorm over the last axis (opset 13: ReduceMean has an axes attribute).
    nodes += [
        helper.make_node("ReduceMean", ["h0"], ["ln_mean"], name="ln_mean", axes=[-1]),
        helper.make_node("Sub", ["h0", "ln_mean"], ["ln_d"], name="ln_sub"),
        helper.make_node("Pow", ["ln_d", "two"], ["ln_sq"], name="ln_pow"),
        helper.make_node("ReduceMean", ["ln_sq"], ["ln_var"], name="ln_var", axes=[-1]),
        helper.make_node("Add", ["ln_var", "eps"], ["ln_ve"], name="ln_add_eps"),
        helper.make_node("Sqrt", ["ln_ve"], ["ln_std"], name="ln_sqrt"),
        helper.make_node("Div", ["ln_d", "ln_std"], ["ln_n"], name="ln_div"),
        helper.make_node("Mul", ["ln_n", "gamma"], ["ln_g"], name="ln_gamma"),
        helper.make_node("Add", ["ln_g", "beta"], ["ln_out"], name="ln_beta"),
        helper.make_node("MatMul", ["ln_out", "w1"], ["h1"], name="fc1"),
    ]
    # Erf GELU: x * 0.5 * (1 + erf(x / sqrt2)).
    nodes += [
        helper.make_node("Div", ["h1", "sqrt2"], ["ge_div"], name="ge_div"),
        helper.make_node("Erf", ["ge_div"], ["ge_erf"], name="ge_erf"),
        helper.make_node("Add", ["ge_erf", "one"], ["ge_add"], name="ge_add"),
        helper.make_node("Mul", ["h1", "ge_add"], ["ge_mul"], name="ge_mul"),
        helper.make_node("Mul", ["ge_mul", "half"], ["ge_out"], name="ge_half"),
        helper.make_node("MatMul", ["ge_out", "w2"], ["h2"], name="fc2"),
    ]
    # Tanh GELU: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))).
    nodes += [
        helper.make_node("Pow", ["h2", "three"], ["gt_cube"], name="gt_pow"),
        helper.make_node("Mul", ["gt_cube", "c044"], ["gt_k"], name="gt_mulk"),
        helper.make_node("Add", ["h2", "gt_k"], ["gt_inner"], name="gt_add_inner"),
        helper.make_node("Mul", ["gt_inner", "s2pi"], ["gt_s"], name="gt_muls"),
        helper.make_node("Tanh", ["gt_s"], ["gt_tanh"], name="gt_tanh"),
        helper.make_node("Add", ["gt_tanh", "one"], ["gt_add1"], name="gt_add1"),
        helper.make_node("Mul", ["h2", "half"], ["gt_halfx"], name="gt_halfx"),
        helper.make_node("Mul", ["gt_halfx", "gt_add1"], ["gt_out"], name="gt_join"),
        helper.make_node("MatMul", ["gt_out", "w3"], ["h3"], name="fc3"),
    ]
    # Decomposed softmax.
    nodes += [
        helper.make_node("ReduceMax", ["h3"], ["sm_max"], name="sm_max", axes=[-1]),
        helper.make_node("Sub", ["h3", "sm_max"], ["sm_sub"], name="sm_sub"),
        helper.make_node("Exp", ["sm_sub"], ["sm_exp"], name="sm_exp"),
        helper.make_node("ReduceSum", ["sm_exp", "axes"], ["sm_sum"], name="sm_sum"),
        helper.make_node("Div", ["sm_exp", "sm_sum"], ["out"], name="sm_div"),
    ]
    inits = [_w("w0", d, d), _w("w1", d, d), _w("w2", d, d), _w("w3", d, d), _c("two", 2.0), _c("three", 3.0),
             _c("eps", 1e-5), _c("gamma", np.ones(d)), _c("beta", np.zeros(d)), _c("sqrt2", np.sqrt(2.0)),
             _c("one", 1.0), _c("half", 0.5), _c("c044", 0.044715), _c("s2pi", np.sqrt(2 / np.pi)),
             numpy_helper.from_array(np.array([-1], np.int64), "axes")]
    return _model(nodes, [_vi("x", [2, 5, d])], [_vi("out", [2, 5, d])], inits)


def weighted_ops() -> onnx.ModelProto:
    """Gemm (transB=1), Gemm (transB=0), MatMul with a [K, N] weight and ConvTranspose, channel counts all distinct.

    Batch 2, so that no layer is a matrix-vector product.
    """
    nodes = [
        helper.make_node("Gemm", ["x", "wg1", "bg1"], ["g1"], name="gemm_tb", transB=1),   # wg1 [6, 5]
        helper.make_node("Gemm", ["g1", "wg2"], ["g2"], name="gemm_nt"),                  # wg2 [6, 7]
        helper.make_node("MatMul", ["g2", "wm"], ["m"], name="matmul"),                   # wm [7, 12]
        helper.make_node("Reshape", ["m", "shape"], ["m4"], name="reshape"),              # [2, 3, 2, 2]
        helper.make_node("ConvTranspose", ["m4", "wt"], ["out"], name="deconv", kernel_shape=[2, 2],
                         strides=[2, 2]),                                                 # wt [3, 9, 2, 2]
    ]
    inits = [_w("wg1", 6, 5), _c("bg1", np.zeros(6)), _w("wg2", 6, 7), _w("wm", 7, 12),
             numpy_helper.from_array(np.array([2, 3, 2, 2], np.int64), "shape"), _w("wt", 3, 9, 2, 2)]
    return _model(nodes, [_vi("x", [2, 5])], [_vi("out", [2, 9, 4, 4])], inits)


def squeeze_excite() -> onnx.ModelProto:
    """x -> ConvA -> GAP -> ConvSE (1x1 spatial) -> Sigmoid -> Mul(x', .) -> Flatten... -> MatMul to one output."""
    nodes = [
        helper.make_node("Conv", ["x", "wA"], ["a"], name="convA", kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
        helper.make_node("GlobalAveragePool", ["a"], ["p"], name="gap"),
        helper.make_node("Conv", ["p", "wS"], ["s"], name="convSE", kernel_shape=[1, 1]),
        helper.make_node("Sigmoid", ["s"], ["g"], name="sigmoid"),
        helper.make_node("Mul", ["a", "g"], ["y"], name="scale"),
        helper.make_node("Conv", ["y", "wB"], ["b"], name="convB", kernel_shape=[1, 1]),
        helper.make_node("Flatten", ["b"], ["f"], name="flatten", axis=1),
        helper.make_node("MatMul", ["f", "wM"], ["out"], name="score"),
    ]
    inits = [_w("wA", 4, 3, 3, 3), _w("wS", 4, 4, 1, 1), _w("wB", 2, 4, 1, 1), _w("wM", 32, 1)]
    return _model(nodes, [_vi("x", ["N", 3, 4, 4])], [_vi("out", ["N", 1])], inits)  # dynamic batch


def constant_weight_conv(kernel_shape: bool = False) -> onnx.ModelProto:
    """A Conv whose weight is a Constant node (as in Paddle exports) and has no kernel_shape."""
    w = (_rng("constant_weight_conv").standard_normal((5, 2, 3, 3)) * 0.2).astype(np.float32)
    nodes = [helper.make_node("Constant", [], ["w_const"], name="wconst", value=numpy_helper.from_array(w, "w")),
             helper.make_node("Conv", ["x", "w_const"], ["out"], name="conv",
                              **({"kernel_shape": [3, 3]} if kernel_shape else {}))]
    return _model(nodes, [_vi("x", [1, 2, 5, 5])], [_vi("out", [1, 5, 3, 3])], [])


def max_amax(model: onnx.ModelProto, feeds: List[Dict[str, np.ndarray]]) -> Dict[str, float]:
    """Plain max |x| of every float tensor over ``feeds``, with ONNX Runtime."""
    import onnxruntime as ort

    m = onnx.ModelProto()
    m.CopyFrom(model)
    names = [o for n in m.graph.node if n.op_type != "Constant" for o in n.output]
    have = {o.name for o in m.graph.output}
    for n in names:
        if n not in have:
            m.graph.output.append(onnx.ValueInfoProto(name=n))
    sess = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    out_names = [o.name for o in sess.get_outputs()]
    amax: Dict[str, float] = {}
    for feed in feeds:
        for k, v in feed.items():
            amax[k] = max(amax.get(k, 0.0), float(np.abs(v).max()))
        for n, v in zip(out_names, sess.run(out_names, feed)):
            if v.dtype == np.float32 and v.size:
                amax[n] = max(amax.get(n, 0.0), float(np.abs(v).max()))
    return amax


def previous_concat_form(proto: onnx.ModelProto) -> onnx.ModelProto:
    """The Q/DQ export as written before issue 44: the QuantizeLinear after each Concat of DequantizeLinears reads
    the Concat and its scale in the float part's type again (``trtwidgets.core.qdq.ort_concat`` undone)."""
    m = onnx.ModelProto()
    m.CopyFrom(proto)
    casts = {n.output[0]: n for n in m.graph.node if n.op_type == "Cast" and n.output[0].endswith("__fp32")}
    for n in m.graph.node:
        if n.op_type == "QuantizeLinear" and n.input[0] in casts:
            n.input[0] = casts[n.input[0]].input[0]
            n.input[1] = n.input[1][:-len("__fp32")]
    kept = [n for n in m.graph.node if n.output[0] not in casts]
    del m.graph.node[:]
    m.graph.node.extend(kept)
    return m


def random_feeds(model: onnx.ModelProto, n: int = 4, seed: int = 0) -> List[Dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    feeds = []
    for _ in range(n):
        feed = {}
        for vi in model.graph.input:
            shape = [d.dim_value for d in vi.type.tensor_type.shape.dim]
            feed[vi.name] = rng.standard_normal(shape).astype(np.float32)
        feeds.append(feed)
    return feeds


def run(model: onnx.ModelProto, feed: Dict[str, np.ndarray], output: Optional[str] = None) -> np.ndarray:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    if any(t.data_type == TensorProto.FLOAT8E4M3FN for t in model.graph.initializer):
        # ORT's QDQ fusion turns FP8 Q/DQ + Conv into QLinearConv, which has no FP8 kernel.
        opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    return sess.run([output] if output else None, feed)[0]


def depthwise_block(tail: str = "se", activation: str = "relu") -> onnx.ModelProto:
    """x -> 1x1 convP -> Relu -> depthwise convDW (group 8) -> BN -> activation = d, then ``tail``.

    ``activation``: ``"relu"`` or ``"hardswish"`` (decomposed as in Paddle exports:
    ``d * Clip(d + 3, 0, 6) / 6``).

    ``tail``:

    * ``"se"``: squeeze-excite, d -> GAP -> convSE (1x1 spatial) -> Sigmoid = g; Mul(d, g) -> convOut.
      d is read in float by the pool and the Mul.
    * ``"conv"``: d -> convOut (a 1x1 conv that reads d quantized).
    * ``"dw"``: d -> a second depthwise convDW2 -> graph output (read in float), so convDW's
      output is only read quantized until convDW2 is left float.
    """
    c = 8
    nodes = [
        helper.make_node("Conv", ["x", "wP"], ["p"], name="convP", kernel_shape=[1, 1]),
        helper.make_node("Relu", ["p"], ["pr"], name="reluP"),
        helper.make_node("Conv", ["pr", "wDW"], ["dw"], name="convDW", kernel_shape=[3, 3], pads=[1, 1, 1, 1],
                         group=c),
        helper.make_node("BatchNormalization", ["dw", "g", "b", "m", "v"], ["bn"], name="bnDW"),
    ]
    if activation == "relu":
        nodes.append(helper.make_node("Relu", ["bn"], ["d"], name="act"))
    else:
        nodes += [helper.make_node("Add", ["bn", "three"], ["hs_add"], name="hs_add"),
                  helper.make_node("Clip", ["hs_add", "zero", "six"], ["hs_clip"], name="hs_clip"),
                  helper.make_node("Mul", ["bn", "hs_clip"], ["hs_mul"], name="hs_mul"),
                  helper.make_node("Div", ["hs_mul", "six"], ["d"], name="hs_div")]
    inits = [_w("wP", c, 4, 1, 1), _w("wDW", c, 1, 3, 3), _c("g", np.ones(c)), _c("b", np.full(c, 0.1)),
             _c("m", np.zeros(c)), _c("v", np.ones(c)), _c("three", 3.0), _c("zero", 0.0), _c("six", 6.0)]
    if tail == "se":
        nodes += [helper.make_node("GlobalAveragePool", ["d"], ["pool"], name="gap"),
                  helper.make_node("Conv", ["pool", "wSE"], ["se"], name="convSE", kernel_shape=[1, 1]),
                  helper.make_node("Sigmoid", ["se"], ["gate"], name="sigmoid"),
                  helper.make_node("Mul", ["d", "gate"], ["y"], name="scale"),
                  helper.make_node("Conv", ["y", "wO"], ["out"], name="convOut", kernel_shape=[1, 1])]
        inits += [_w("wSE", c, c, 1, 1), _w("wO", 4, c, 1, 1)]
        out = _vi("out", [1, 4, 6, 6])
    elif tail == "conv":
        nodes.append(helper.make_node("Conv", ["d", "wO"], ["out"], name="convOut", kernel_shape=[1, 1]))
        inits.append(_w("wO", 4, c, 1, 1))
        out = _vi("out", [1, 4, 6, 6])
    else:
        nodes.append(helper.make_node("Conv", ["d", "wDW2"], ["out"], name="convDW2", kernel_shape=[3, 3],
                                      pads=[1, 1, 1, 1], group=c))
        inits.append(_w("wDW2", c, 1, 3, 3))
        out = _vi("out", [1, c, 6, 6])
    return _model(nodes, [_vi("x", [1, 4, 6, 6])], [out], inits)
