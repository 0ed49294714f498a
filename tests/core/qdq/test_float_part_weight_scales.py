"""An FP16 float part keeps each stored weight: a per-channel scale below FP16's smallest normal is not raised.

The zoo's ViT patch embedding has channels with weights around 5e-4 (scale ~4e-6 < 2**-14): raising their
scale to 2**-14, as a QuantizeLinear's scale is, multiplied those channels by 14 and the float-part check
measured cosine 0.78 against the FP32 float part (benchmarks/float_part_zoo.py).
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq
from trtwidgets.core.qdq.float_part.convert import _FP16_MIN_NORMAL
from trtwidgets.core.qdq.validate import run_model


def _conv_with_tiny_channels() -> onnx.ModelProto:
    rng = np.random.default_rng(3)
    w = (rng.standard_normal((4, 3, 3, 3)) * 0.05).astype(np.float32)
    w[1] *= 5e-4 / np.abs(w[1]).max()   # scale ~4e-6: an FP16 subnormal
    w[2] *= 1e-7 / np.abs(w[2]).max()   # scale ~8e-10: rounds to 0 in FP16
    nodes = [helper.make_node("Conv", ["x", "w"], ["out"], name="conv", kernel_shape=[3, 3], pads=[1, 1, 1, 1])]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 8, 8])],
                          [helper.make_tensor_value_info("out", TensorProto.FLOAT, ["n", 4, 8, 8])],
                          [numpy_helper.from_array(w, "w")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


def _dequantized_weight(model: onnx.ModelProto) -> np.ndarray:
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    dq = next(n for n in model.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in inits
              and inits[n.input[0]].dtype == np.int8 and inits[n.input[0]].ndim == 4)
    q, s = inits[dq.input[0]], inits[dq.input[1]]
    assert s.min() > 0
    return q.astype(np.float64) * s.astype(np.float64).reshape(-1, 1, 1, 1)


def test_tiny_weight_scales_keep_the_weight_in_fp16():
    model = _conv_with_tiny_channels()
    x = np.random.default_rng(0).standard_normal((4, 3, 8, 8)).astype(np.float32)
    amax = {"x": float(np.abs(x).max())}
    fp32 = build_qdq(model, QdqSpec(amax, QdqOptions(high_precision="fp32"))).model
    fp16 = build_qdq(model, QdqSpec(amax, QdqOptions(high_precision="fp16")))
    w32, w16 = _dequantized_weight(fp32), _dequantized_weight(fp16.model)
    # Every channel dequantizes to its FP32 weight, within INT8 rounding (not 14x it).
    for c in range(4):
        step = float(np.abs(w32[c]).max()) / 127 + 2.0 ** -25
        assert np.abs(w16[c] - w32[c]).max() <= step, c
    inits = {t.name: t for t in fp16.model.graph.initializer}
    scale = numpy_helper.to_array(next(t for n, t in inits.items() if n.endswith("w_scale")))
    assert scale.dtype == np.float16 and float(scale[1]) < _FP16_MIN_NORMAL
    # The scale that rounds to 0 is raised and its channel re-quantized: reported as clamped.
    assert any(n.endswith("w_scale") for n in fp16.report.high_precision.clamped)
    a, _ = run_model(fp32, [{"x": x}])
    b, _ = run_model(fp16.model, [{"x": x}])
    for c in (0, 1):
        ra, rb = a["out"][:, c].ravel().astype(np.float64), b["out"][:, c].ravel().astype(np.float64)
        assert np.dot(ra, rb) / (np.linalg.norm(ra) * np.linalg.norm(rb)) > 0.999, c


def test_activation_scale_is_still_clamped():
    # A QuantizeLinear's scale (activations) keeps the clamp: Q and DQ read the same value.
    model = _conv_with_tiny_channels()
    ex = build_qdq(model, QdqSpec({"x": 1e-7}, QdqOptions(high_precision="fp16")))
    inits = {t.name: numpy_helper.to_array(t) for t in ex.model.graph.initializer}
    q = [inits[n.input[1]] for n in ex.model.graph.node if n.op_type == "QuantizeLinear"]
    assert q and all(float(s.min()) >= _FP16_MIN_NORMAL for s in q)
