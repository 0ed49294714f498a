"""Placement rules on tiny models: weighted ops, residual add, pooling, protected patterns, exclusions."""

from __future__ import annotations

import pytest

from trtwidgets.core.qdq_placement import QdqExclusionError, find_protected_patterns, plan_qdq

from . import qdq_models as qm


def _edges(plan):
    return {(e.node_label, e.tensor, e.input_index): e.rule for e in plan.edges}


def test_weighted_inputs_residual_skip_and_pool_input_are_quantized():
    plan = plan_qdq(qm.residual_cnn())
    edges = _edges(plan)
    assert edges[("convA", "x", 0)] == "weighted-op input"
    assert edges[("convB", "t", 0)] == "weighted-op input"
    assert edges[("convC", "pool", 0)] == "weighted-op input"
    # Residual add: the skip input t is quantized, the fused conv branch (convB -> BN) is not.
    assert edges[("residual", "t", 0)].startswith("residual add: skip input (fuses into convB")
    assert not any(label == "residual" and idx == 1 for label, _, idx in edges)
    # MaxPool feeds the quantized convC: it runs in INT8, so its input gets a Q/DQ.
    assert edges[("pool", "r", 0)].startswith("pooling input")
    # Outputs of weighted layers are never quantized by themselves.
    assert not any(t in ("convA", "convB", "bnB") for _, t, _ in edges)
    assert {(w.tensor, w.axis) for w in plan.weights} == {("wA", 0), ("wB", 0), ("wC", 0)}


def test_pool_whose_output_is_a_graph_output_is_left_alone():
    plan = plan_qdq(qm.residual_cnn())
    assert not any(e.node_label == "gap" for e in plan.edges)
    (skip,) = [s for s in plan.skipped if s.node_label == "gap"]
    assert "not read quantized" in skip.reason


def test_two_conv_residual_quantizes_the_shortcut_not_the_longer_main_branch():
    plan = plan_qdq(qm.two_conv_residual())
    adds = [e for e in plan.edges if e.node_label == "add"]
    assert [(e.tensor, e.input_index) for e in adds] == [("cs", 0)]
    assert "main2" in adds[0].rule


def test_add_whose_conv_branch_also_feeds_another_layer_is_not_a_residual_fusion():
    # In residual_cnn, t = Relu(convA) feeds both convB and the Add: convA cannot be
    # fused into the add, so only convB's branch counts as the fused one.
    plan = plan_qdq(qm.residual_cnn())
    adds = [e for e in plan.edges if e.node_label == "residual"]
    assert len(adds) == 1 and "convB" in adds[0].rule


def test_layernorm_gelu_and_softmax_patterns_are_found():
    model = qm.transformer_block()
    pats = find_protected_patterns(model.graph)
    kinds = [p.kind for p in pats]
    assert kinds == ["layernorm", "gelu", "gelu", "softmax"]
    ln, erf, tanh, sm = (set(p.node_labels) for p in pats)
    assert ln == {"ln_mean", "ln_sub", "ln_pow", "ln_var", "ln_add_eps", "ln_sqrt", "ln_div", "ln_gamma", "ln_beta"}
    assert erf == {"ge_div", "ge_erf", "ge_add", "ge_mul", "ge_half"}
    assert tanh == {"gt_pow", "gt_mulk", "gt_add_inner", "gt_muls", "gt_tanh", "gt_add1", "gt_halfx", "gt_join"}
    assert sm == {"sm_max", "sm_sub", "sm_exp", "sm_sum", "sm_div"}


def test_no_qdq_inside_protected_patterns():
    model = qm.transformer_block()
    plan = plan_qdq(model)
    inside = {i for p in plan.patterns for i in p.nodes}
    internal = {t for p in plan.patterns for t in p.internal_tensors}
    assert not any(e.node in inside for e in plan.edges)
    assert not any(e.tensor in internal for e in plan.edges)
    # The MatMuls around them are quantized, reading the patterns' outputs.
    assert {e.node_label for e in plan.edges} == {"fc0", "fc1", "fc2", "fc3"}
    assert {e.tensor for e in plan.edges} == {"x", "ln_out", "ge_out", "gt_out"}


def test_single_op_patterns_are_protected():
    model = qm.residual_cnn()
    pats = find_protected_patterns(model.graph)
    assert pats == ()
    from trtwidgets import demo
    import onnx

    demo_pats = find_protected_patterns(onnx.load(str(demo.MODEL_PATH)).graph)
    assert [p.kind for p in demo_pats] == ["softmax"]


@pytest.mark.parametrize("pattern, excluded", [
    ("convB", {"convB"}),            # exact node name
    ("conv[AB]", {"convA", "convB"}),  # regular expression (full match)
    ("conv.*", {"convA", "convB", "convC"}),
])
def test_exclusion_by_name_and_regex(pattern, excluded):
    plan = plan_qdq(qm.residual_cnn(), exclude=[pattern])
    quantized_layers = {e.node_label for e in plan.edges if e.rule == "weighted-op input"}
    assert quantized_layers == {"convA", "convB", "convC"} - excluded
    assert set(plan.excluded) == excluded
    assert {w.tensor for w in plan.weights} == {"wA", "wB", "wC"} - {"w" + n[-1] for n in excluded}
    for name in excluded:
        assert any(s.node_label == name and "excluded by the user" in s.reason for s in plan.skipped)


def test_excluding_the_fused_conv_drops_the_residual_rule():
    plan = plan_qdq(qm.residual_cnn(), exclude=["convB"])
    assert not any(e.node_label == "residual" for e in plan.edges)


def test_exclusion_by_output_tensor_name_and_op_type():
    model = qm.weighted_ops()
    plan = plan_qdq(model, exclude=["m"])  # "m" is the MatMul's output tensor, not a node name
    assert "matmul" in plan.excluded
    plan = plan_qdq(model, exclude_op_types=["Gemm"])
    assert set(plan.excluded) == {"gemm_tb", "gemm_nt"}
    assert {e.node_label for e in plan.edges} == {"matmul", "deconv"}


def test_bad_exclusions_are_explained():
    with pytest.raises(QdqExclusionError) as err:
        plan_qdq(qm.residual_cnn(), exclude=["convZ"])
    assert "matches no node" in err.value.what and "convA" in err.value.why
    with pytest.raises(QdqExclusionError) as err:
        plan_qdq(qm.residual_cnn(), exclude_op_types=["conv"])
    assert "not an ONNX operator" in err.value.what
    plan = plan_qdq(qm.residual_cnn(), exclude_op_types=["LSTM"])
    assert plan.warnings and "LSTM" in plan.warnings[0]


def test_weight_axes_follow_each_layout():
    plan = plan_qdq(qm.weighted_ops())
    axes = {w.tensor: w.axis for w in plan.weights}
    assert axes == {"wg1": 0, "wg2": 1, "wm": 1, "wt": 1}
    # The Gemm bias stays float.
    assert "bg1" not in axes


def test_matrix_vector_layers_stay_float():
    model = qm.squeeze_excite()
    plan = plan_qdq(model)
    assert {e.node_label for e in plan.edges if e.rule == "weighted-op input"} == {"convA", "convB"}
    reasons = {s.node_label: s.reason for s in plan.skipped}
    assert "1x1 spatially" in reasons["convSE"]
    assert "dimension of 1" in reasons["score"]
    # The pool then feeds a float layer: no INT8 pooling.
    assert "not read quantized" in reasons["gap"]
    plan = plan_qdq(model, skip_matrix_vector=False)
    assert {e.node_label for e in plan.edges} == {"convA", "convB", "convSE", "score", "gap"}


def test_conv_on_1x1_input_with_a_static_batch_is_a_matrix_product():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    from resnet50 import resnet50

    # The classifier is a 1x1 conv after the global pool: a GEMV at batch 1, a GEMM at batch 32.
    assert any("1x1 spatially" in s.reason for s in plan_qdq(resnet50(batch=1)).skipped if s.node_label == "conv54")
    plan = plan_qdq(resnet50(batch=32))
    assert any(e.node_label == "conv54" for e in plan.edges)
    # Every bottleneck's add quantizes its skip input; downsampling blocks fuse the main branch's
    # last conv and quantize the (shorter) shortcut conv's output.
    adds = {e.node_label: e for e in plan.edges if e.op_type == "Add"}
    assert len(adds) == 16
    assert adds["block1_1_add"].tensor == "conv5.out" and "conv4" in adds["block1_1_add"].rule
    assert adds["block1_2_add"].tensor == "block1_1.out"


def test_demo_model_placement():
    import onnx

    from trtwidgets import demo

    model = onnx.load(str(demo.MODEL_PATH))
    plan = plan_qdq(model)
    # The 18 squeeze-excite 1x1 convolutions (two per SE block) are matrix-vector products.
    se = [s for s in plan.skipped if s.op_type == "Conv" and "1x1 spatially" in s.reason]
    assert len(se) == 18
    plan = plan_qdq(model, skip_matrix_vector=False)
    ops = [e.op_type for e in plan.edges]
    assert ops.count("Conv") == 53 and ops.count("MatMul") == 1
    # 7 residual blocks, each quantizing the skip input.
    assert sum(1 for e in plan.edges if e.rule.startswith("residual")) == 7
    # The ten SE / head pools feed quantized layers; MaxPool -> GAP -> Reshape -> MatMul resolves too.
    assert ops.count("GlobalAveragePool") == 10 and ops.count("MaxPool") == 1
    assert len(plan.weights) == 54
