"""Lint: inputs the schemas keep FP32/integer (SCHEMA_KEEPS_TYPE) and Reshapes that pin the batch (BATCH_PINNED_SHAPE)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.core.qdq import dynamic_models as dm
from trtwidgets.core.model.lint import lint


def _codes(findings, code):
    return [f for f in findings if f.code == code]


def test_schema_keeps_type_names_the_ops_and_what_the_export_does():
    (f,) = _codes(lint(dm.anchor_head()), "SCHEMA_KEEPS_TYPE")
    assert f.severity == "info"
    assert "Range input 1" in f.message and "Resize input 2" in f.message and "FP32" in f.message
    assert "integer only: Gather input 1" in f.message or "Unsqueeze input 1" in f.message
    assert {"range_w", "cast_w", "scale_mul"} <= set(f.nodes) and "conv" not in f.nodes


def _reshape_model(batch, target_batch, opset=13):
    nodes = [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", kernel_shape=[1, 1]),
             helper.make_node("Reshape", ["c", "shape"], ["r"], name="dfl_view"),
             helper.make_node("Relu", ["r"], ["y"], name="relu")]
    inits = [numpy_helper.from_array(np.ones((64, 8, 1, 1), np.float32), "w"),
             numpy_helper.from_array(np.array([target_batch, 4, 16, 25], np.int64), "shape")]
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 8, 5, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4, 16, 25])
    m = helper.make_model(helper.make_graph(nodes, "g", [x], [y], inits), opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(m)
    return m


def test_a_dynamic_batch_into_a_literal_reshape_target_is_a_warning_naming_the_node():
    (f,) = _codes(lint(_reshape_model("N", 1)), "BATCH_PINNED_SHAPE")
    assert f.severity == "warning" and f.nodes == ("dfl_view",)
    assert "reshape changes volume" in f.message and "[1, 4, 16, 25]" in f.message
    assert "dynamic" in f.fix and "-1" in f.fix


def test_a_static_batch_is_info_until_a_profile_asks_for_another_batch():
    m = _reshape_model(1, 1)
    (f,) = _codes(lint(m), "BATCH_PINNED_SHAPE")
    assert f.severity == "info" and f.nodes == ("dfl_view",)
    profile = {"x": {"min": (32, 8, 5, 5), "opt": (32, 8, 5, 5), "max": (32, 8, 5, 5)}}
    (f,) = _codes(lint(m, profiles=[profile]), "BATCH_PINNED_SHAPE")
    assert f.severity == "warning"


def test_a_reshape_that_reads_its_batch_is_not_reported():
    assert not _codes(lint(_reshape_model("N", 0)), "BATCH_PINNED_SHAPE")
    assert not _codes(lint(_reshape_model(4, 1)), "BATCH_PINNED_SHAPE")  # the literal is not the batch
