"""The float part as TensorRT's FP16 kernels hold it (core/qdq/float_part/storage.py)."""

from __future__ import annotations

import copy

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from trtwidgets.core.common.ort import open_session
from trtwidgets.core.qdq.export_check import check_export
from trtwidgets.core.qdq.float_part.convert import convert_float_part
from trtwidgets.core.qdq.float_part.storage import NotEmulable, storage_emulation

pytest.importorskip("onnxruntime")


def _chain(dtype=TensorProto.FLOAT16) -> onnx.ModelProto:
    # y = x * a + b, all FP16: x * a needs more bits than FP16 holds, so rounding it before the Add shows.
    np_type = helper.tensor_dtype_to_np_dtype(dtype)
    nodes = [helper.make_node("Mul", ["x", "a"], ["t"], name="mul"), helper.make_node("Add", ["t", "b"], ["y"], name="add")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", dtype, [4])],
                          [helper.make_tensor_value_info("y", dtype, [4])],
                          [numpy_helper.from_array(np.full(4, 1.0009765625, np_type), "a"),
                           numpy_helper.from_array(np.full(4, -1.0, np_type), "b")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


def _run(model, feed):
    return open_session(model, optimization="disable", purpose="test").run(None, feed)[0]


def test_onnx_runtime_runs_an_fp16_chain_in_fp32_and_the_emulation_rounds_every_tensor():
    x = np.array([1.0009765625, 1.0029296875, 1.5, 1.9990234375], np.float16)
    every_step = (x * np.float16(1.0009765625)).astype(np.float16) - np.float16(1.0)  # numpy rounds each op
    once = (x.astype(np.float32) * np.float32(1.0009765625) - 1).astype(np.float16)  # FP32 math, one rounding
    assert not np.array_equal(every_step, once), "the inputs must tell the two apart"
    assert np.array_equal(_run(_chain(), {"x": x}), once), "ONNX Runtime's CPU provider: one rounding"
    emulation, rounded, low = storage_emulation(_chain())
    assert (rounded, low) == (2, "FP16")
    assert np.array_equal(_run(emulation, {"x": x.astype(np.float32)}).astype(np.float16), every_step)
    assert [i.type.tensor_type.elem_type for i in emulation.graph.input] == [TensorProto.FLOAT]


def test_a_model_without_low_precision_comes_back_unchanged():
    model = _chain(TensorProto.FLOAT)
    emulation, rounded, low = storage_emulation(model)
    assert (rounded, low) == (0, "") and emulation.graph == model.graph


def _absorbing(offset: float) -> onnx.ModelProto:
    """x -> Q -> DQ -> + offset -> - offset: FP16 holds x + 2048 to a multiple of 2 (FP32 model, opset 19)."""
    nodes = [helper.make_node("QuantizeLinear", ["x", "s"], ["xq"], name="q"),
             helper.make_node("DequantizeLinear", ["xq", "s"], ["xd"], name="dq"),
             helper.make_node("Add", ["xd", "offset"], ["shifted"], name="shift"),
             helper.make_node("Sub", ["shifted", "offset"], ["y"], name="unshift")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 256])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 256])],
                          [numpy_helper.from_array(np.float32(0.02), "s"),
                           numpy_helper.from_array(np.float32(offset), "offset")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


@pytest.mark.parametrize("offset, passes", [(2048.0, False), (1.0, True)])
def test_a_value_lost_in_ops_without_fp16_kernels_fails_the_check(offset, passes):
    # Add and Sub have no FP16 kernel on the CPU: ONNX Runtime runs them in FP32 and the exported model's own
    # run keeps x (end to end 1.0). TensorRT's FP16 Add writes x + 2048 in FP16, which loses x; the emulation too.
    reference = _absorbing(offset)
    model, conversion = convert_float_part(copy.deepcopy(reference), "fp16")
    feeds = [{"x": np.random.default_rng(s).standard_normal((1, 256)).astype(np.float32)} for s in range(4)]
    check = check_export(model, reference=reference, conversion=conversion, feeds=feeds)
    assert check.end_to_end["y"] > 0.9999, "ONNX Runtime's own run of the FP16 model does not see it"
    assert check.passed is passes, check
    if not passes:
        assert check.cosines["y"] < 0.9 and "output y" in check.failures[0]


def test_a_subgraph_holding_fp16_is_not_emulated_and_the_check_says_so():
    branch = helper.make_graph([helper.make_node("Cast", ["x"], ["h"], to=TensorProto.FLOAT16),
                                helper.make_node("Cast", ["h"], ["o"], to=TensorProto.FLOAT)], "b", [],
                               [helper.make_tensor_value_info("o", TensorProto.FLOAT, [4])])
    nodes = [helper.make_node("If", ["c"], ["y"], then_branch=branch, else_branch=branch, name="if")]
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
                          [numpy_helper.from_array(np.array(True), "c")])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    with pytest.raises(NotEmulable, match="if"):
        storage_emulation(model)
    feeds = [{"x": np.linspace(-1, 1, 4).astype(np.float32)}]
    check = check_export(model, reference=model, feeds=feeds)
    assert check.passed and any("not emulated" in n for n in check.notes), check
