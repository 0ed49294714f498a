"""Which float tensors must stay FP32, read from the ONNX operator schemas."""

from __future__ import annotations

from onnx import TensorProto

from tests.core.qdq import dynamic_models as dm
from trtwidgets.core.model.type_constraints import allowed_input_types, low_precision_blockers, output_type_ties


def test_schema_answers_for_range_resize_and_cast():
    m = dm.anchor_head(opset=19)
    nodes = {n.name: n for n in m.graph.node}
    opsets = {"": 19}
    assert "tensor(float16)" not in allowed_input_types(nodes["range_w"], 1, opsets)
    assert allowed_input_types(nodes["up"], 2, opsets) == frozenset({"tensor(float)"})
    assert "tensor(float16)" in allowed_input_types(nodes["decode"], 0, opsets)
    assert output_type_ties(nodes["decode"], 0, opsets) == (0, 1)
    assert output_type_ties(nodes["cast_w"], 0, opsets) == ()  # Cast's output type is its own: the walk stops


def test_blockers_walk_back_through_tied_producers_only():
    m = dm.anchor_head(opset=19)
    b = low_precision_blockers(m, TensorProto.FLOAT16)
    names = {m.graph.node[i].name for i in b.kept_nodes}
    # Range's inputs: the start Constant, the Cast of the Shape; Range itself (its output is tied to them).
    assert {"start_const", "cast_w", "range_w", "scale_mul"} <= names
    # Not the feature map, not the anchors computed from Range's output, not the Shape/Gather (integers).
    assert not names & {"conv", "silu_mul", "anchor_center", "decode", "shape", "gather_w"}
    assert {"w_len_f", "start", "one", "scales", "s0", "two"} <= set(b.pinned)
    assert "f" not in b.pinned


def test_bfloat16_blocks_what_the_schema_refuses_at_this_opset():
    # Conv admits bfloat16 only from opset 22: at 19 it must stay FP32 under a BF16 float part.
    m = dm.anchor_head(opset=19)
    b = low_precision_blockers(m, TensorProto.BFLOAT16)
    assert "conv" in {m.graph.node[i].name for i in b.kept_nodes} or any(
        m.graph.node[i].name == "conv" for i, _ in b.reads)
