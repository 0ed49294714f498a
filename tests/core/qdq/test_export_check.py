"""Every export is checked before it is written (core/qdq/export_check.py)."""

from __future__ import annotations

import copy

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.core.qdq import dynamic_models as dm
from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq, save_qdq_model
from trtwidgets.core.qdq.export_check import ExportCheckError, check_export


def _fp16_range_model() -> onnx.ModelProto:
    # What the old converter wrote for the model: a float16 tensor into Range, which refuses it.
    nodes = [helper.make_node("Range", ["a", "b", "c"], ["y"], name="range")]
    inits = [numpy_helper.from_array(np.array(v, np.float16), n) for n, v in (("a", 0), ("b", 4), ("c", 1))]
    g = helper.make_graph(nodes, "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT16, [4])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


def test_a_type_error_fails_the_check_and_is_not_written(tmp_path):
    check = check_export(_fp16_range_model())
    assert not check.passed and any("float16" in f for f in check.failures)
    path = tmp_path / "bad.onnx"
    with pytest.raises(ExportCheckError, match="was not written"):
        save_qdq_model(_fp16_range_model(), path)
    assert not path.exists()


def test_fp16_export_passes_against_its_fp32_float_part_on_data():
    model = dm.anchor_head()
    ex = build_qdq(model, QdqSpec({"x": 3.0, "f": 3.0, "up": 3.0}, QdqOptions(trt_version="10.16")))
    assert ex.float32_model is not None
    feeds = [{"x": np.random.default_rng(s).random((1, 3, 16, 24)).astype(np.float32)} for s in range(3)]
    check = check_export(ex.model, reference=ex.float32_model, conversion=ex.report.high_precision, feeds=feeds)
    assert check.passed, check.failures
    assert set(check.cosines) == {"y", "z"} and min(check.cosines.values()) >= 0.998
    strict = check_export(ex.model, reference=ex.float32_model, conversion=ex.report.high_precision, feeds=feeds,
                          min_cosine=1.0)
    assert not strict.passed and "drifts from FP32" in strict.failures[0]


def test_a_kernel_ort_lacks_is_a_note_not_a_failure():
    # BF16 QuantizeLinear is valid ONNX; ONNX Runtime's CPU provider has no kernel for it.
    ex = build_qdq(dm.anchor_head(), QdqSpec({"x": 3.0, "f": 3.0, "up": 3.0}, QdqOptions(high_precision="bf16")))
    check = check_export(ex.model)
    assert check.passed and any("no kernel" in n for n in check.notes)


def test_a_tensorrt_plugin_op_is_a_note_not_a_failure():
    nodes = [helper.make_node("Relu", ["x"], ["r"], name="relu"),
             helper.make_node("EfficientNMS_TRT", ["r"], ["y"], name="nms", domain="trt.plugins")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("trt.plugins", 1)])
    check = check_export(m)
    assert check.passed and any("custom op" in n for n in check.notes)


def test_without_onnx_runtime_the_strict_checker_still_refuses_a_type_error(monkeypatch):
    # The GPU machine has numpy + onnx + tensorrt only: the checker's strict inference is the type check there.
    import sys

    monkeypatch.setitem(sys.modules, "onnxruntime", None)
    check = check_export(_fp16_range_model())
    assert not check.passed and any("onnx.checker" in f for f in check.failures)
    assert any("not installed" in n for n in check.notes)


def _deep_mlp(depth: int = 16, width: int = 64, amax: float = 8.0, zero_point: int = 0) -> onnx.ModelProto:
    """``depth`` quantized MatMul + Relu layers (FP32, opset 19): INT8 steps that a deep model carries to its output."""
    rng = np.random.default_rng(0)
    nodes, inits, t = [], [], "x"
    for i in range(depth):
        inits += [numpy_helper.from_array(np.float32(amax / 127), f"s{i}"),
                  numpy_helper.from_array(np.int8(zero_point if i == depth // 2 else 0), f"z{i}"),
                  numpy_helper.from_array((rng.standard_normal((width, width)) * 1.4 / np.sqrt(width)
                                           ).astype(np.float32), f"w{i}")]
        nodes += [helper.make_node("QuantizeLinear", [t, f"s{i}", f"z{i}"], [f"q{i}"], name=f"q{i}"),
                  helper.make_node("DequantizeLinear", [f"q{i}", f"s{i}", f"z{i}"], [f"d{i}"], name=f"dq{i}"),
                  helper.make_node("MatMul", [f"d{i}", f"w{i}"], [f"m{i}"], name=f"mm{i}"),
                  helper.make_node("Relu", [f"m{i}"], ["y" if i == depth - 1 else f"r{i}"], name=f"relu{i}")]
        t = f"r{i}"
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, width])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, width])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


def _mlp_feeds(width: int = 64):
    rng = np.random.default_rng(1)
    return [{"x": (np.abs(rng.standard_normal((1, width))) * 1.5).astype(np.float32)} for _ in range(8)]


def test_int8_steps_that_flip_end_to_end_are_not_the_float_parts_drift():
    # Sixteen quantizers: the FP16 float part moves a few values next to an INT8 step by a step, and the model
    # carries each step to its output (end to end below 0.998, the old check's failure). With every quantizer
    # held at the reference's integers, each span of the float part matches FP32 to 1e-7.
    reference = _deep_mlp()
    model, conversion = _fp16(reference)
    check = check_export(model, reference=reference, conversion=conversion, feeds=_mlp_feeds())
    assert check.passed, check.failures
    assert check.end_to_end["y"] < 0.998 < 0.9999 < check.cosines["y"], check
    q = check.quantizers
    assert q["held"] == 16 and q["inputs_min_cosine"] > 0.9999 and q["moved_one_step"] > 0 and q["moved_more"] == 0
    assert any("every quantizer held" in n for n in check.notes) and any("end to end" in n for n in check.notes)


def test_a_quantizer_that_writes_other_integers_fails():
    # The exported model's eighth quantizer has zero point 5 where the reference's has 0: its spans still match,
    # but the integers it writes do not.
    reference = _deep_mlp(depth=10)
    model, conversion = _fp16(_deep_mlp(depth=10, zero_point=5))
    check = check_export(model, reference=reference, conversion=conversion, feeds=_mlp_feeds())
    assert not check.passed
    assert any("quantizers write other integers" in f and "quantizer q5 " in f for f in check.failures), check.failures


# The reference carries the export's own Q/DQ scales (same_quantization.same_quantization): the cosine compares
# float parts under one quantization, not the scales' rounding to FP16.

_S = np.float32(2.0 ** -3 * (1 + 2.0 ** -11 + 2.0 ** -20))  # FP16 rounds it up by 4.9e-4


def _qdq_model(scale: float, tail, extra_inits=(), n: int = 256) -> onnx.ModelProto:
    """x -> QuantizeLinear -> DequantizeLinear -> ``tail`` (nodes from ``xd`` to ``y``), opset 19, FP32."""
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "zp"], ["xq"], name="q"),
             helper.make_node("DequantizeLinear", ["xq", "s", "zp"], ["xd"], name="dq"), *tail]
    inits = [numpy_helper.from_array(np.float32(scale), "s"), numpy_helper.from_array(np.int8(0), "zp"),
             *extra_inits]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, n])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, n])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


def _fp16(reference: onnx.ModelProto, dtype: str = "fp16"):
    """``(the model with its float part in dtype, the conversion's report)``."""
    from trtwidgets.core.qdq.float_part.convert import convert_float_part

    return convert_float_part(copy.deepcopy(reference), dtype)


def _flipping_inputs(seed: int) -> np.ndarray:
    """FP16-exact values whose INT8 step differs between the FP32 scale ``_S`` and its FP16 rounding, with random
    ones: a quarter of them flip by one step when only the scale is rounded."""
    every = np.frombuffer(np.arange(0, 0x7C00, dtype=np.uint16).tobytes(), np.float16).astype(np.float32)
    every = every[every < 120 * _S]
    s16 = np.float32(np.float16(_S))
    margin = np.minimum(np.abs(every / _S % 1 - 0.5), np.abs(every / s16 % 1 - 0.5))
    flips = every[(np.rint(every / _S) != np.rint(every / s16)) & (margin > 1e-4)]
    rng = np.random.default_rng(seed)
    x = np.where(rng.random(256) < 0.25, rng.choice(flips, 256), rng.choice(every, 256))
    return (x * rng.choice([-1.0, 1.0], 256)).astype(np.float32)[None]


def test_a_scale_rounded_to_fp16_no_longer_fails_the_check():
    # y = x - DQ(Q(x)), the quantization error: every value that the scale's rounding moves by a step flips sign.
    from trtwidgets.core.qdq.export_check import _compare, _session

    reference = _qdq_model(_S, [helper.make_node("Sub", ["x", "xd"], ["y"], name="residual")])
    model, conversion = _fp16(reference)
    feeds = [{"x": _flipping_inputs(s)} for s in range(4)]
    old = _compare(_session(model, [])[0], reference, feeds, [])[0]  # the FP32 scales: the old check's reference
    assert old["y"] < 0.9, old
    before = reference.SerializeToString()
    check = check_export(model, reference=reference, conversion=conversion, feeds=feeds)
    assert check.passed, check.failures
    assert check.cosines["y"] >= 0.998
    assert any("carries the export's FP16 values (1 Q/DQ scale)" in n for n in check.notes), check.notes
    assert reference.SerializeToString() == before, "the caller's reference is not changed"
    # Without the conversion's record the reference keeps its FP32 scales, and the check says so.
    blind = check_export(model, reference=reference, feeds=feeds)
    assert any("no record of the float part's conversion" in n for n in blind.notes), blind.notes
    assert not any("carries the export's" in n for n in blind.notes)


def test_a_record_of_another_model_is_not_applied():
    # The record names the reading node by its index in the FP32 model: a reference whose node there differs is
    # not the model that was converted, and the check says so instead of moving scales into the wrong nodes.
    reference = _qdq_model(_S, [helper.make_node("Sub", ["x", "xd"], ["y"], name="residual")])
    model, conversion = _fp16(reference)
    other = copy.deepcopy(reference)
    other.graph.node[0].name = "another_q"
    check = check_export(model, reference=other, conversion=conversion, feeds=[{"x": _flipping_inputs(0)}])
    assert any("the reference keeps its FP32 Q/DQ scales (ValueError" in n and "node q (#0)" in n
               for n in check.notes), check.notes
    assert not any("carries the export's" in n for n in check.notes)


@pytest.mark.parametrize("tail, inits", [
    # x * 30000 above 65504 is inf in FP16: the next QuantizeLinear saturates, its DequantizeLinear overflows
    ([helper.make_node("Mul", ["xd", "big"], ["m"], name="scale_up"),
      helper.make_node("QuantizeLinear", ["m", "s2"], ["q2"], name="q2"),
      helper.make_node("DequantizeLinear", ["q2", "s2"], ["y"], name="dq2")],
     [numpy_helper.from_array(np.float32(30000), "big"), numpy_helper.from_array(np.float32(1000), "s2")]),
    # x + 2048 in FP16 keeps x to a multiple of 2 (ONNX Runtime's FP16 LayerNormalization reads it so)
    ([helper.make_node("Add", ["xd", "offset"], ["shifted"], name="shift"),
      helper.make_node("LayerNormalization", ["shifted", "gamma"], ["y"], name="ln", axis=-1)],
     [numpy_helper.from_array(np.float32(2048), "offset"), numpy_helper.from_array(np.ones(256, np.float32), "gamma")]),
], ids=["overflow", "absorbed"])
def test_a_float_part_that_loses_precision_in_fp16_still_fails(tail, inits):
    reference = _qdq_model(0.02, tail, inits)
    original = copy.deepcopy(reference)  # the float model: no Q/DQ
    del original.graph.node[:2]
    for node in original.graph.node:
        node.input[:] = ["x" if i == "xd" else i for i in node.input]
    feeds = [{"x": (np.random.default_rng(s).standard_normal((1, 256)) * 1.2).astype(np.float32)} for s in range(4)]
    model, conversion = _fp16(reference)
    check = check_export(model, reference=reference, conversion=conversion, feeds=feeds, original=original)
    assert not check.passed and "drifts from FP32" in check.failures[0], check
    assert "every quantizer held" in check.failures[0] and "carries the export's Q/DQ scales" in check.failures[0]
    if "q2" in str(check.failures):  # the overflow: the quantizer's input is inf, which holding its output hides
        assert any("the input of quantizer q2 nan" in f for f in check.failures), check.failures


def test_the_reference_takes_requantized_weights_and_bf16_scales():
    from trtwidgets.core.qdq.float_part.same_quantization import same_quantization

    # A stored INT8 weight whose per-channel scales round to 0 in FP16 (below 2**-25): the conversion re-quantizes
    # that channel's integers to 2**-24, and the reference takes them with the scale.
    q = np.random.default_rng(1).integers(-127, 128, (4, 8)).astype(np.int8)
    w_scale = np.array([1e-8, 0.01, 0.02, 0.03], np.float32)
    nodes = [helper.make_node("DequantizeLinear", ["wq", "ws"], ["w"], name="w_dq", axis=0),
             helper.make_node("MatMul", ["xd", "w"], ["y"], name="mm")]
    reference = _qdq_model(0.05, nodes, [numpy_helper.from_array(q, "wq"), numpy_helper.from_array(w_scale, "ws")],
                           n=4)
    reference.graph.output[0].type.tensor_type.shape.dim[1].dim_value = 8
    model, conversion = _fp16(reference)
    assert {(v.node, v.slot) for v in conversion.qdq_values} == {("q", 1), ("dq", 1), ("w_dq", 1), ("w_dq", 0)}
    ref, n_scales, n_weights, low = same_quantization(model, reference, conversion)
    inits = {t.name: numpy_helper.to_array(t) for t in ref.graph.initializer}
    exported = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    assert (n_scales, n_weights, low) == (2, 1, "FP16")
    assert inits["ws"].dtype == np.float32 and np.array_equal(inits["ws"], exported["ws"].astype(np.float32))
    assert np.array_equal(inits["wq"], exported["wq"]) and not np.array_equal(inits["wq"], q)
    feeds = [{"x": np.random.default_rng(s).standard_normal((1, 4)).astype(np.float32)} for s in range(4)]
    check = check_export(model, reference=reference, conversion=conversion, feeds=feeds)
    assert check.passed and check.cosines["y"] > 0.9999, check

    # BF16 rounds the scales to BF16 too (ONNX Runtime has no CPU kernel to run it: the reference alone is checked).
    bf16, conversion = _fp16(_qdq_model(_S, [helper.make_node("Relu", ["xd"], ["y"], name="relu")]), "bf16")
    ref, n_scales, _, low = same_quantization(bf16, _qdq_model(_S, [helper.make_node("Relu", ["xd"], ["y"])]),
                                               conversion)
    s = {t.name: numpy_helper.to_array(t) for t in ref.graph.initializer}["s"]
    assert (n_scales, low) == (1, "BF16") and s.dtype == np.float32 and s == np.float32(0.125)
