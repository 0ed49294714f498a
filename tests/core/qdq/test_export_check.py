"""Every export is checked before it is written (core/qdq/export_check.py)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.core.qdq import dynamic_models as dm
from trtwidgets.core.qdq.export import build_qdq, save_qdq_model
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
    ex = build_qdq(model, {"x": 3.0, "f": 3.0, "up": 3.0}, trt_version="10.16")
    assert ex.float32_model is not None
    feeds = [{"x": np.random.default_rng(s).random((1, 3, 16, 24)).astype(np.float32)} for s in range(3)]
    check = check_export(ex.model, reference=ex.float32_model, feeds=feeds)
    assert check.passed, check.failures
    assert set(check.cosines) == {"y", "z"} and min(check.cosines.values()) >= 0.998
    strict = check_export(ex.model, reference=ex.float32_model, feeds=feeds, min_cosine=1.0)
    assert not strict.passed and "drifts from FP32" in strict.failures[0]


def test_a_kernel_ort_lacks_is_a_note_not_a_failure():
    # BF16 QuantizeLinear is valid ONNX; ONNX Runtime's CPU provider has no kernel for it.
    ex = build_qdq(dm.anchor_head(), {"x": 3.0, "f": 3.0, "up": 3.0}, high_precision="bf16")
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


def _offset_model(scale: float) -> onnx.ModelProto:
    # y = x + scale * c: stands for a model whose outputs moved by a known amount.
    c = np.random.default_rng(7).standard_normal((1, 64)).astype(np.float32)
    nodes = [helper.make_node("Add", ["x", "c"], ["y"], name="add")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 64])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 64])],
                          [numpy_helper.from_array(c * np.float32(scale), "c")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("model_offset, passes", [(0.45, True), (1.5, False)])
def test_a_drift_that_quantization_explains_passes_with_the_original(model_offset, passes):
    # original: y = x; reference (the FP32 Q/DQ model): off by 0.3; model: off by 0.45 from the original
    # (about as far from the reference as quantization moved the reference: passes) or by 1.5 (fails).
    feeds = [{"x": np.random.default_rng(s).standard_normal((1, 64)).astype(np.float32)} for s in range(4)]
    original, reference, model = _offset_model(0.0), _offset_model(0.3), _offset_model(model_offset)
    strict = check_export(model, reference=reference, feeds=feeds)
    assert not strict.passed, "without the original, the default threshold holds"
    check = check_export(model, reference=reference, feeds=feeds, original=original)
    assert check.passed is passes, check.failures
    if passes:
        assert any("INT8 rounding" in n for n in check.notes)
    else:
        assert "drifts from FP32" in check.failures[0]
