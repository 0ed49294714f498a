"""The float part of a Q/DQ model in FP16/BF16: types, casts, and ONNX Runtime's agreement with FP32."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.core import qdq_models as qm
from trtwidgets import demo
from trtwidgets.core.common.errors import UserError
from trtwidgets.core.qdq.export import QdqExportError, QdqOptions, QdqSpec, build_qdq
from trtwidgets.core.qdq.float_part.convert import convert_float_part, default_high_precision
from trtwidgets.core.qdq.validate import run_model


def _types(model):
    inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    return {v.name: v.type.tensor_type.elem_type for v in inferred.graph.value_info}


@pytest.mark.parametrize("version, dtype", [("8.6", "fp32"), ("10.16", "fp16"), ("11.4", "fp16"), (None, "fp16")])
def test_default_per_target(version, dtype):
    assert default_high_precision(version) == dtype


def test_fp16_export_types_io_and_accuracy():
    model = qm.residual_cnn(channels=8, size=16)
    feeds = qm.random_feeds(model, 8)
    amax = qm.max_amax(model, feeds)
    fp32 = build_qdq(model, QdqSpec(amax, QdqOptions(high_precision="fp32"))).model
    fp16 = build_qdq(model, QdqSpec(amax, QdqOptions(high_precision="fp16")))
    assert fp16.report.high_precision.dtype == "fp16" and fp16.report.opset_to >= 19
    m = fp16.model
    # The interface is unchanged: FP32 in, FP32 out.
    assert m.graph.input[0].type.tensor_type.elem_type == TensorProto.FLOAT
    assert m.graph.output[0].type.tensor_type.elem_type == TensorProto.FLOAT
    # Every DequantizeLinear's scale (hence output) is FP16; no float initializer is left FP32.
    inits = {t.name: t for t in m.graph.initializer}
    dq = [n for n in m.graph.node if n.op_type == "DequantizeLinear"]
    assert dq and all(inits[n.input[1]].data_type == TensorProto.FLOAT16 for n in dq)
    assert not [t.name for t in m.graph.initializer if t.data_type == TensorProto.FLOAT]
    types = _types(m)
    convs = [n for n in m.graph.node if n.op_type == "Conv"]
    assert all(types[n.output[0]] == TensorProto.FLOAT16 for n in convs)
    # Two casts: the input down, the output up.
    assert fp16.report.high_precision.casts == 2
    a, _ = run_model(fp32, feeds)
    b, _ = run_model(m, feeds)
    ref, out = a["out"].ravel(), b["out"].ravel()
    assert np.dot(ref, out) / (np.linalg.norm(ref) * np.linalg.norm(out)) > 0.999


def test_demo_fp16_export_runs_and_stays_close():
    feeds = list(demo.iter_skimage_inputs(8))
    from trtwidgets.core.calibration.collect import collect_stats
    from trtwidgets.core.calibration.ranges import amax_from_stats

    amax = amax_from_stats(collect_stats(demo.MODEL_PATH, demo.sample_inputs()[:8], progress=False))
    a, _ = run_model(build_qdq(demo.MODEL_PATH, QdqSpec(amax, QdqOptions(high_precision="fp32"))).model, feeds)
    b, _ = run_model(build_qdq(demo.MODEL_PATH, QdqSpec(amax, QdqOptions(high_precision="fp16"))).model, feeds)
    (ka, va), (kb, vb) = next(iter(a.items())), next(iter(b.items()))
    # FP16 rounding moves a value across a Q step now and then: close, not equal.
    cos = float(np.dot(va.ravel(), vb.ravel()) / (np.linalg.norm(va) * np.linalg.norm(vb)))
    assert ka == kb and cos > 0.995 and np.mean(va.argmax(-1) == vb.argmax(-1)) >= 0.875


def test_layernorm_variance_stays_fp32_with_its_reason():
    model = qm.transformer_block()
    feeds = qm.random_feeds(model, 4)
    ex = build_qdq(model, QdqSpec(qm.max_amax(model, feeds), QdqOptions(high_precision="fp16")))
    kept = dict(ex.report.high_precision.kept_fp32)
    assert {"ln_pow", "ln_var", "ln_sqrt"} <= set(kept)
    assert "overflows FP16" in kept["ln_pow"]
    types = _types(ex.model)
    assert types["ln_sq"] == TensorProto.FLOAT and types["h1"] == TensorProto.FLOAT16
    out, _ = run_model(ex.model, feeds)
    assert np.isfinite(out["out"]).all()


def test_resize_scales_stay_float32():
    # Resize's scales input is typed float32 by ONNX: the chain computing it must not become FP16.
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
             helper.make_node("Mul", ["s0", "two"], ["scales"], name="scale_mul"),
             helper.make_node("Resize", ["c", "", "scales"], ["y"], name="up", mode="nearest")]
    inits = [numpy_helper.from_array(np.ones((2, 2, 1, 1), np.float32), "w"),
             numpy_helper.from_array(np.array([0.5, 0.5, 1, 1], np.float32), "s0"),
             numpy_helper.from_array(np.array(2.0, np.float32), "two")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 8, 8])], inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    out, report = convert_float_part(m, "fp16")
    assert "scale_mul" in dict(report.kept_fp32)
    inits = {t.name: t.data_type for t in out.graph.initializer}
    assert inits["s0"] == TensorProto.FLOAT and inits["w"] == TensorProto.FLOAT16
    x = np.random.default_rng(0).standard_normal((1, 2, 4, 4)).astype(np.float32)
    y, _ = run_model(out, [{"x": x}])
    assert y["y"].shape == (1, 2, 8, 8)


def test_tiny_scale_is_clamped_not_zero():
    model = qm.residual_cnn()
    feeds = qm.random_feeds(model, 2)
    amax = {k: 1e-7 for k in qm.max_amax(model, feeds)}
    ex = build_qdq(model, QdqSpec(amax, QdqOptions(high_precision="fp16")))
    inits = {t.name: numpy_helper.to_array(t) for t in ex.model.graph.initializer}
    scales = [inits[n.input[1]] for n in ex.model.graph.node if n.op_type == "QuantizeLinear"]
    assert scales and all(float(s.min()) > 0 for s in scales)
    assert ex.report.high_precision.clamped


def test_bf16_is_written_as_bfloat16():
    model = qm.residual_cnn()
    ex = build_qdq(model, QdqSpec(qm.max_amax(model, qm.random_feeds(model, 2)), QdqOptions(high_precision="bf16")))
    assert ex.report.high_precision_dtype == "bf16"
    assert any(t.data_type == TensorProto.BFLOAT16 for t in ex.model.graph.initializer)


def test_unknown_dtype_and_low_opset_are_user_errors():
    model = qm.residual_cnn()
    with pytest.raises(UserError, match="high-precision"):
        build_qdq(model, QdqSpec({}, QdqOptions(high_precision="fp12")))
    with pytest.raises(UserError, match="opset 19"):
        convert_float_part(qm.residual_cnn(), "fp16")


def _ort_run(model, feeds):
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


@pytest.mark.parametrize("trt_version", ["10.16", "11.4"])
def test_dynamic_anchor_head_fp16_export_loads_and_runs_at_any_size(trt_version):
    # The failure: Range (whose schema refuses float16) fed by a Cast of a Shape, every dim dynamic.
    from tests.core.qdq import dynamic_models as dm

    model = dm.anchor_head()
    ex = build_qdq(model, QdqSpec({"x": 3.0, "f": 3.0, "up": 3.0}, QdqOptions(trt_version=trt_version)))
    kept = dict(ex.report.high_precision.kept_fp32)
    assert {"cast_w", "range_w", "scale_mul"} <= set(kept) and "Range" in kept["range_w"]
    assert not {"conv", "conv2", "silu_sig", "anchor_center", "decode"} & set(kept)
    types = _types(ex.model)
    assert types["ax"] == TensorProto.FLOAT and types["c_sig"] == TensorProto.FLOAT16
    ref_model = build_qdq(model, QdqSpec({"x": 3.0, "f": 3.0, "up": 3.0}, QdqOptions(high_precision="fp32"))).model
    for shape in [(1, 3, 16, 16), (2, 3, 24, 40)]:
        x = np.random.default_rng(1).random(shape).astype(np.float32)
        got, ref = _ort_run(ex.model, {"x": x}), _ort_run(ref_model, {"x": x})
        assert [g.shape for g in got] == [r.shape for r in ref]
        assert all(np.allclose(g, r, atol=0.1, rtol=0.02) for g, r in zip(got, ref))


def test_topk_k_arithmetic_stays_fp32_and_the_values_go_fp16():
    from tests.core.qdq import dynamic_models as dm

    out, report = convert_float_part(dm.topk_head(), "fp16")
    kept = dict(report.kept_fp32)
    # Ceil/Mul admit float16 and nothing downstream refuses it: only what the schemas require stays FP32.
    assert "topk" not in kept
    vals, idx = _ort_run(out, {"x": np.arange(30, dtype=np.float32).reshape(3, 10)})
    assert vals.shape == (3, 5) and idx[0].tolist() == [9, 8, 7, 6, 5]


def test_a_custom_op_keeps_fp32_with_casts_around_it():
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("MyPlugin", ["r"], ["p"], name="plugin", domain="my.ops"),
             helper.make_node("Relu", ["p"], ["y"], name="relu2")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19), helper.make_opsetid("my.ops", 1)])
    out, report = convert_float_part(m, "fp16")
    assert "custom op" in dict(report.kept_fp32)["plugin"]
    plugin = next(n for n in out.graph.node if n.name == "plugin")
    cast_in = next(n for n in out.graph.node if plugin.input[0] in n.output)
    assert cast_in.op_type == "Cast" and cast_in.attribute[0].i == TensorProto.FLOAT


def test_an_ir3_model_lists_its_converted_initializers_as_fp16_inputs():
    # Before IR 4 every initializer is a graph input too (old model zoo files): its declared type must follow.
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
             helper.make_node("Mul", ["c", "s"], ["y"], name="mul")]
    inits = [numpy_helper.from_array(np.ones((2, 2, 1, 1), np.float32), "w"),
             numpy_helper.from_array(np.array(0.5, np.float32), "s")]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 2, 4, 4]),
              helper.make_tensor_value_info("w", TensorProto.FLOAT, [2, 2, 1, 1]),
              helper.make_tensor_value_info("s", TensorProto.FLOAT, [])]
    g = helper.make_graph(nodes, "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])],
                          inits)
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 9)])
    m.ir_version = 3
    out, _ = convert_float_part(m, "fp16", require_opset=False)
    declared = {v.name: v.type.tensor_type.elem_type for v in out.graph.input}
    assert declared["w"] == declared["s"] == TensorProto.FLOAT16 and declared["x"] == TensorProto.FLOAT
    (y,) = _ort_run(out, {"x": np.ones((1, 2, 4, 4), np.float32)})
    assert np.allclose(y, 1.0)


@pytest.mark.parametrize("trt_version, opset", [(None, 22), ("10.16", 22), ("11.4", 22), ("10.2", 19)])
def test_a_bf16_float_part_is_written_at_the_opset_whose_convs_take_bfloat16(trt_version, opset):
    # Conv takes bfloat16 from opset 22; TensorRT 10.0-10.7 parse opset 20 at most: there convs stay FP32.
    model = qm.residual_cnn()
    ex = build_qdq(model, QdqSpec(qm.max_amax(model, qm.random_feeds(model, 2)),
                                  QdqOptions(high_precision="bf16", trt_version=trt_version)))
    assert ex.report.opset_to == opset
    kept = dict(ex.report.high_precision.kept_fp32)
    assert ("convA" in kept) == (opset < 22)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
def test_a_low_precision_float_part_for_tensorrt_8_is_refused_before_anything_is_written(dtype, tmp_path):
    """Its scales would be FP16/BF16, which TensorRT 8.6.0's parser refuses (seen on an H200)."""
    model = qm.residual_cnn()
    with pytest.raises(QdqExportError) as err:
        build_qdq(model, QdqSpec(qm.max_amax(model, qm.random_feeds(model, 2)),
                                 QdqOptions(high_precision=dtype, trt_version="8.6")))
    assert "Scale coefficients must all be positive" in str(err.value) and "auto" in str(err.value)
    assert build_qdq(model, QdqSpec({}, QdqOptions(high_precision=dtype, trt_version="10.16"))).model is not None
