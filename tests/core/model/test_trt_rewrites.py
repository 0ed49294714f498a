"""The exact graph rewrites (trtwidgets.core.model.trt_rewrites): same outputs in ONNX Runtime, labels kept, only where
the pattern is whole. The GPU side (fewer layers, same engine outputs) is tests/gpu/test_trt_rewrites.py."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.core import qdq_family_blocks as fb
from tests.core import region_models as rm
from trtwidgets.core.model.trt_rewrites import (DEFAULT_REWRITES, EXPECTATION_FORMS, REWRITES, apply_rewrites,
                                                expectation_heads, fold_split_concat)
from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq
from trtwidgets.core.qdq.options import QdqExportError


def _run(model: onnx.ModelProto, seed: int = 0) -> list:
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(seed)
    feeds = {i.name: rng.standard_normal([d.dim_value for d in i.type.tensor_type.shape.dim]).astype(np.float32)
             for i in model.graph.input}
    return sess.run(None, feeds)


def _labels(model: onnx.ModelProto) -> set:
    return {n.name for n in model.graph.node}


@pytest.mark.parametrize("make", [fb.c2f, lambda: rm.c2f_stack(c=16, hw=8)], ids=["c2f", "c2f_stack"])
def test_split_concat_reads_the_split_input_and_gives_the_same_outputs(make):
    model = make()
    out = fold_split_concat(model)
    assert out.changes and all(kind == "split_concat" for kind, _ in out.changes)
    for node in out.model.graph.node:
        if node.op_type == "Concat":
            split_outs = {o for n in out.model.graph.node if n.op_type == "Split" for o in n.output}
            assert not split_outs & set(node.input)
    onnx.checker.check_model(out.model)
    for a, b in zip(_run(model), _run(out.model)):
        np.testing.assert_array_equal(a, b)
    # Every node it keeps keeps its name (a plan's node sets name them); the Split stays for the bottleneck.
    assert _labels(out.model) <= _labels(model) and any(n.op_type == "Split" for n in out.model.graph.node)
    assert len(model.graph.node) == len(out.model.graph.node)


def _concat_model(order) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 3])
    nodes = [helper.make_node("Split", ["x"], ["a", "b"], name="split", axis=1),
             helper.make_node("Concat", [dict(a="a", b="b")[k] for k in order], ["y"], name="cat", axis=1)]
    return helper.make_model(helper.make_graph(nodes, "g", [x], [y]), opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("order", [("b", "a"), ("a",)], ids=["swapped", "one_half"])
def test_split_concat_leaves_a_concat_that_is_not_the_whole_split_in_order(order):
    model = _concat_model(order)
    if len(order) == 1:  # a Concat of one half only: the output shape differs from the input's
        model.graph.output[0].type.tensor_type.shape.dim[1].dim_value = 2
    assert fold_split_concat(model).changes == ()


def test_split_concat_drops_a_split_nothing_else_reads():
    out = fold_split_concat(_concat_model(("a", "b")))
    assert [n.op_type for n in out.model.graph.node] == ["Concat"] and list(out.model.graph.node[0].input) == ["x"]


def test_split_concat_drops_only_what_it_unwired():
    # A node the model already had unread (its name may be in a plan) stays; so does a Split a subgraph reads.
    model = _concat_model(("a", "b"))
    model.graph.node.append(helper.make_node("Relu", ["x"], ["dead"], name="already_dead"))
    out = fold_split_concat(model)
    assert {n.name for n in out.model.graph.node} == {"cat", "already_dead"}
    body = helper.make_graph([helper.make_node("Identity", ["a"], ["o"])], "body", [],
                             [helper.make_tensor_value_info("o", TensorProto.FLOAT, None)])
    model = _concat_model(("a", "b"))
    model.graph.node.append(helper.make_node("If", ["cond"], ["z"], name="branch", then_branch=body, else_branch=body))
    assert "split" in {n.name for n in fold_split_concat(model).model.graph.node}


@pytest.mark.parametrize("form", EXPECTATION_FORMS)
def test_every_expectation_form_gives_the_same_outputs(form):
    head = rm.exported_dfl_head(batch=2, anchors=50)
    out = expectation_heads(head, form)
    assert len(out.changes) == 1
    onnx.checker.check_model(out.model)
    (a,), (b,) = _run(head), _run(out.model)
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
    assert not any(n.op_type == "Conv" for n in out.model.graph.node) or form == "softmax_first"


def test_the_default_expectation_rewrite_moves_the_transpose_before_the_softmax():
    head = rm.exported_dfl_head(batch=2, anchors=50)
    out = apply_rewrites(head, ("expectation_head",))
    ops = [n.op_type for n in out.model.graph.node]
    assert ops == ["Reshape", "Transpose", "Transpose", "Softmax", "Conv", "Reshape"]
    softmax = next(n for n in out.model.graph.node if n.op_type == "Softmax")
    assert helper.get_attribute_value(softmax.attribute[0]) == 1
    # The Conv keeps its name: placement rule 10 still keeps it float, as without the rewrite.
    assert "dfl/conv/Conv" in _labels(out.model)


def test_the_export_rewrites_an_exported_dfl_head_and_keeps_rule_10():
    model = rm.exported_dfl_head(batch=1, anchors=8)
    ex = build_qdq(model, QdqSpec({t: 2.0 for n in model.graph.node for t in n.output}, QdqOptions(trt_version="8.6")))
    assert ex.report.rewrites == (("expectation_head", "dfl/Softmax"),)
    assert [s.node_label for s in ex.report.skipped if s.rule == 10] == ["dfl/conv/Conv"]
    assert "graph rewrites" in ex.report.summary() and ex.report.to_dict()["rewrites"]


def test_a_head_whose_softmax_already_runs_on_the_conv_layout_is_left_by_default():
    # The family block's DFL transposes first and takes the softmax over the channel axis: the fast form already.
    assert apply_rewrites(fb.dfl_head(), DEFAULT_REWRITES).changes == ()


def test_an_opset_12_softmax_over_a_leading_axis_is_not_a_per_axis_softmax_and_is_left():
    # Before opset 13 Softmax(axis=1) normalises over every axis from 1 on, not over axis 1: no rewrite may assume it.
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 16, 4, 5])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 1, 4, 5])
    w = numpy_helper.from_array(np.arange(16, dtype=np.float32).reshape(1, 16, 1, 1), "w")
    nodes = [helper.make_node("Softmax", ["x"], ["s"], name="sm", axis=1), helper.make_node("Conv", ["s", "w"], ["y"])]
    model = helper.make_model(helper.make_graph(nodes, "g", [x], [y], [w]), opset_imports=[helper.make_opsetid("", 12)])
    assert expectation_heads(model).changes == ()
    model.opset_import[0].version = 13
    assert len(expectation_heads(model).changes) == 1


def test_a_softmax_with_another_reader_or_a_conv_with_more_outputs_is_left():
    head = rm.exported_dfl_head(batch=1, anchors=8)
    two = onnx.ModelProto()
    two.CopyFrom(head)
    two.graph.output.append(helper.make_tensor_value_info("s", TensorProto.FLOAT, None))
    assert expectation_heads(two).changes == ()
    wide = onnx.ModelProto()
    wide.CopyFrom(head)
    w = next(t for t in wide.graph.initializer if t.name == "dfl.w")
    w.CopyFrom(numpy_helper.from_array(np.ones((2, 16, 1, 1), dtype=np.float32), "dfl.w"))
    assert expectation_heads(wide).changes == ()


def test_models_without_the_patterns_are_unchanged():
    for make in (fb.sppf, fb.upsample_neck, lambda: rm.resnet_stack(c=8, hw=8)):
        model = make()
        out = apply_rewrites(model, DEFAULT_REWRITES)
        assert out.changes == () and out.model.SerializeToString() == model.SerializeToString()


def test_rewrites_are_options_checked_by_name_and_old_plans_keep_the_graph_as_written():
    assert QdqOptions().rewrites == DEFAULT_REWRITES and set(DEFAULT_REWRITES) <= set(REWRITES)
    with pytest.raises(QdqExportError, match="Unknown graph rewrite"):
        QdqOptions(rewrites=("fuse_everything",))
    assert QdqOptions.from_dict(QdqOptions().to_dict()).rewrites == DEFAULT_REWRITES
    old = {k: v for k, v in QdqOptions().to_dict().items() if k != "rewrites"}
    assert QdqOptions.from_dict(old).rewrites == ()
    with pytest.raises(ValueError, match="unknown rewrite"):
        apply_rewrites(fb.c2f(), ("nope",))


def test_a_plan_says_when_its_candidates_carry_rewrites_that_fp16_would_gain_too():
    import trtwidgets as tw

    model = rm.c2f_stack(c=16, hw=8)
    samples = rm.feeds(model, n=6)
    for rewrites, said in ((None, True), ((), False)):
        opts = tw.QdqOptions(trt_version="8.6") if rewrites is None else tw.QdqOptions(trt_version="8.6", rewrites=())
        plan = tw.plan(model, samples[:4], held_back=samples[4:], options=opts, progress=False, regions=False)
        notes = [n for n in plan.notes if "exact graph rewrites" in n]
        assert bool(notes) == said, plan.notes
        if said:
            assert "2 exact graph rewrites (split_concat" in notes[0]

