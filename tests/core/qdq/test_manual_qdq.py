"""replace_constant and insert_qdq: one change in a copy of the float model, checked with ONNX Runtime."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from trtwidgets.core.calibration.fake_quant import asymmetric_params, fake_quant
from trtwidgets.core.common.errors import UserError
from trtwidgets.core.model.onnx_graph import GraphIndex
from trtwidgets.core.qdq.manual import insert_qdq, replace_constant

ort = pytest.importorskip("onnxruntime")


def _model(constant_node: bool) -> onnx.ModelProto:
    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("HardSigmoid", ["h"], ["g"]),
             helper.make_node("Mul", ["g", "h"], ["y"])]
    inits = [numpy_helper.from_array(w, "w")]
    if constant_node:
        nodes.insert(0, helper.make_node("Constant", [], ["w"], value=numpy_helper.from_array(w)))
        inits = []
    g = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)], ir_version=8)


def _run(m, x):
    return ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]


@pytest.mark.parametrize("constant_node", [False, True])
def test_replace_constant_changes_only_the_copy(constant_node):
    m = _model(constant_node)
    new = np.full((3, 4), 0.5, np.float32)
    out = replace_constant(m, "w", new)
    np.testing.assert_array_equal(GraphIndex(out.graph).constant("w"), new)
    assert not np.array_equal(GraphIndex(m.graph).constant("w"), new)
    x = np.ones((2, 3), np.float32)
    h = x @ new
    np.testing.assert_allclose(_run(out, x), np.clip(0.2 * h + 0.5, 0, 1) * h, rtol=1e-6)


def test_replace_constant_refuses_unknown_names_and_shapes():
    with pytest.raises(UserError, match="not a constant"):
        replace_constant(_model(False), "h", np.zeros((2, 4)))
    with pytest.raises(UserError, match="keep its shape"):
        replace_constant(_model(False), "w", np.zeros((4, 3)))


def test_insert_qdq_quantizes_what_every_reader_sees():
    m = _model(False)
    x = np.random.default_rng(0).normal(0, 1, (2, 3)).astype(np.float32)
    scale, zp = asymmetric_params(0.0, 1.0)
    out = insert_qdq(m, {"g": (scale, zp)})
    onnx.checker.check_model(out)
    assert [n.op_type for n in out.graph.node] == ["MatMul", "HardSigmoid", "QuantizeLinear", "DequantizeLinear", "Mul"]
    w = numpy_helper.to_array(m.graph.initializer[0])
    h = x @ w
    g = np.clip(0.2 * h + 0.5, 0, 1)
    np.testing.assert_allclose(_run(out, x), fake_quant(g, np.float32(scale), zp) * h, rtol=1e-5, atol=1e-6)
    assert len(m.graph.node) == 3           # the input model is untouched


def test_insert_qdq_on_a_graph_input_and_unknown_tensor():
    out = insert_qdq(_model(False), {"x": (0.1, 0)})
    assert [n.op_type for n in out.graph.node][:2] == ["QuantizeLinear", "DequantizeLinear"]
    with pytest.raises(UserError, match="No tensor"):
        insert_qdq(_model(False), {"nope": (0.1, 0)})
