"""Batch axes found, not assumed: named dims, dynamic dims, a batch-2 run, the user's word, none at all."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from trtwidgets.core.common.errors import UserError
from trtwidgets.core.model.batch_axis import find_batch_axes, named_batch_axis, parse_batch_axis


def _model(inp_shape, out_shape, nodes, inits=(), out_name="Y"):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, inp_shape)],
                              [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, out_shape)],
                              initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def batch_first():
    return _model(["N", 3, 4], ["N", 3, 4], [helper.make_node("Relu", ["X"], ["Y"])])


def time_major(out_shape=(5, "batch", 4)):
    """An LSTM-like output: input [batch, T, C] -> Transpose -> [T, batch, C]."""
    return _model(["batch", 5, 4], list(out_shape) if out_shape else None,
                  [helper.make_node("Transpose", ["X"], ["Y"], perm=[1, 0, 2])])


def no_batch():
    """Voice-activity style: one sample is [94 frames, 576 features]."""
    w = numpy_helper.from_array(np.random.default_rng(0).normal(size=(576, 8)).astype(np.float32), "W")
    return _model([94, 576], [94, 8], [helper.make_node("MatMul", ["X", "W"], ["Y"])], [w])


def test_named_batch_dims():
    assert named_batch_axis(["seq", "batch_size", 4]) == 1
    assert named_batch_axis(["N", 3]) == 0 and named_batch_axis(["Bs", 3]) == 0
    assert named_batch_axis(["height", "width"]) is None
    axes = find_batch_axes(batch_first(), run=False)
    assert axes.inputs == {"X": 0} and axes.outputs == {"Y": 0} and axes.batched


def test_time_major_output_by_dim_name():
    axes = find_batch_axes(time_major(), run=False)
    assert axes.inputs == {"X": 0} and axes.outputs == {"Y": 1}
    assert "carries the inputs' batch dim 'batch'" in axes.reasons["Y"]
    assert any("'Y': batch axis 1" in n for n in axes.notes())


def test_time_major_output_by_batch2_run():
    pytest.importorskip("onnxruntime")
    unnamed = time_major(out_shape=None)
    assert find_batch_axes(unnamed).outputs == {"Y": 1}
    assert find_batch_axes(unnamed, run=False).outputs == {"Y": None}


def test_model_without_batch_axis_has_none():
    axes = find_batch_axes(no_batch())
    assert axes.inputs == {"X": None} and axes.outputs == {"Y": None} and not axes.batched


def test_static_leading_one_is_a_batch_of_one():
    w = numpy_helper.from_array(np.ones((4, 2), np.float32), "W")
    model = _model([1, 4], [1, 2], [helper.make_node("MatMul", ["X", "W"], ["Y"])], [w])
    axes = find_batch_axes(model, run=False)
    assert axes.inputs == {"X": 0} and axes.fixed_batch == {"X": 1} and not axes.batched
    pytest.importorskip("onnxruntime")
    assert find_batch_axes(model).outputs == {"Y": 0}
    # A Reshape that fixes the batch at 1 (as YOLO's DFL head does): the batch-2 run fails, the leading 1 stands.
    shape = numpy_helper.from_array(np.array([1, 2], np.int64), "shape")
    fixed = _model([1, 4], [1, 2], [helper.make_node("MatMul", ["X", "W"], ["h"]),
                                    helper.make_node("Reshape", ["h", "shape"], ["Y"])], [w, shape])
    axes = find_batch_axes(fixed)
    assert axes.outputs == {"Y": 0} and "fixed batch of 1" in axes.reasons["Y"]


def test_dynamic_dims_without_names():
    model = _model(["a", 3, "h", "w"], None, [helper.make_node("Relu", ["X"], ["Y"])])
    assert find_batch_axes(model, run=False).inputs == {"X": 0}
    model = _model([3, "t"], None, [helper.make_node("Relu", ["X"], ["Y"])])
    axes = find_batch_axes(model, run=False)
    assert axes.inputs == {"X": 1} and "only dynamic axis" in axes.reasons["X"]
    model = _model([3, "h", "w"], None, [helper.make_node("Relu", ["X"], ["Y"])])
    assert find_batch_axes(model, run=False).inputs == {"X": None}


def test_user_batch_axis_wins():
    assert parse_batch_axis("1") == {"*": 1}
    assert parse_batch_axis("X:0, Y:none") == {"X": 0, "Y": None}
    with pytest.raises(UserError, match="is not an axis"):
        parse_batch_axis("X:first")
    axes = find_batch_axes(no_batch(), user={"X": 0, "Y": 0}, run=False)
    assert axes.inputs == {"X": 0} and axes.reasons["X"] == "--batch-axis"
    axes = find_batch_axes(time_major(), user={"*": -2}, run=False)
    assert axes.inputs == {"X": 1} and axes.outputs == {"Y": 1}
    with pytest.raises(UserError, match="it has 3 axes"):
        find_batch_axes(time_major(), user={"Y": 3}, run=False)
