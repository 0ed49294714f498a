"""Placement rules on tiny models: weighted ops, residual add, pooling, protected patterns, exclusions."""

from __future__ import annotations

import pytest

from trtwidgets.core.qdq.placement import QdqExclusionError, find_protected_patterns, place_qdq

from tests.core import qdq_models as qm


def _edges(plan):
    return {(e.node_label, e.tensor, e.input_index): e.rule for e in plan.edges}


def test_weighted_inputs_residual_skip_and_pool_input_are_quantized():
    plan = place_qdq(qm.residual_cnn())
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
    plan = place_qdq(qm.residual_cnn())
    assert not any(e.node_label == "gap" for e in plan.edges)
    (skip,) = [s for s in plan.skipped if s.node_label == "gap"]
    assert "not read quantized" in skip.reason


def test_two_conv_residual_quantizes_the_shortcut_not_the_longer_main_branch():
    plan = place_qdq(qm.two_conv_residual())
    adds = [e for e in plan.edges if e.node_label == "add"]
    assert [(e.tensor, e.input_index) for e in adds] == [("cs", 0)]
    assert "main2" in adds[0].rule


def test_add_whose_conv_branch_also_feeds_another_layer_is_not_a_residual_fusion():
    # In residual_cnn, t = Relu(convA) feeds both convB and the Add: convA cannot be
    # fused into the add, so only convB's branch counts as the fused one.
    plan = place_qdq(qm.residual_cnn())
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
    plan = place_qdq(model)
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
    plan = place_qdq(qm.residual_cnn(), exclude=[pattern])
    quantized_layers = {e.node_label for e in plan.edges if e.rule == "weighted-op input"}
    assert quantized_layers == {"convA", "convB", "convC"} - excluded
    assert set(plan.excluded) == excluded
    assert {w.tensor for w in plan.weights} == {"wA", "wB", "wC"} - {"w" + n[-1] for n in excluded}
    for name in excluded:
        assert any(s.node_label == name and "excluded by the user" in s.reason for s in plan.skipped)


def test_excluding_the_fused_conv_drops_the_residual_rule():
    plan = place_qdq(qm.residual_cnn(), exclude=["convB"])
    assert not any(e.node_label == "residual" for e in plan.edges)


def test_exclusion_by_output_tensor_name_and_op_type():
    model = qm.weighted_ops()
    plan = place_qdq(model, exclude=["m"])  # "m" is the MatMul's output tensor, not a node name
    assert "matmul" in plan.excluded
    plan = place_qdq(model, exclude_op_types=["Gemm"])
    assert set(plan.excluded) == {"gemm_tb", "gemm_nt"}
    assert {e.node_label for e in plan.edges} == {"matmul", "deconv"}


def test_bad_exclusions_are_explained():
    with pytest.raises(QdqExclusionError) as err:
        place_qdq(qm.residual_cnn(), exclude=["convZ"])
    assert "matches no node" in err.value.what and "convA" in err.value.why
    with pytest.raises(QdqExclusionError) as err:
        place_qdq(qm.residual_cnn(), exclude_op_types=["conv"])
    assert "not an ONNX operator" in err.value.what
    plan = place_qdq(qm.residual_cnn(), exclude_op_types=["LSTM"])
    assert plan.warnings and "LSTM" in plan.warnings[0]


def test_weight_axes_follow_each_layout():
    plan = place_qdq(qm.weighted_ops())
    axes = {w.tensor: w.axis for w in plan.weights}
    assert axes == {"wg1": 0, "wg2": 1, "wm": 1, "wt": 1}
    # The Gemm bias stays float.
    assert "bg1" not in axes


def test_matrix_vector_layers_stay_float():
    model = qm.squeeze_excite()
    plan = place_qdq(model)
    assert {e.node_label for e in plan.edges if e.rule == "weighted-op input"} == {"convA", "convB"}
    reasons = {s.node_label: s.reason for s in plan.skipped}
    assert "1x1 spatially" in reasons["convSE"]
    assert "dimension of 1" in reasons["score"]
    # The pool then feeds a float layer: no INT8 pooling.
    assert "not read quantized" in reasons["gap"]
    plan = place_qdq(model, skip_matrix_vector=False)
    assert {e.node_label for e in plan.edges} == {"convA", "convB", "convSE", "score", "gap"}


def test_conv_on_1x1_input_with_a_static_batch_is_a_matrix_product():
    import sys
    from pathlib import Path

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "benchmarks"))
    from resnet50 import resnet50

    # The classifier is a 1x1 conv after the global pool: a GEMV at batch 1, a GEMM at batch 32.
    assert any("1x1 spatially" in s.reason for s in place_qdq(resnet50(batch=1)).skipped if s.node_label == "conv54")
    plan = place_qdq(resnet50(batch=32))
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
    plan = place_qdq(model)
    # The 18 squeeze-excite 1x1 convolutions (two per SE block) are matrix-vector products.
    se = [s for s in plan.skipped if s.op_type == "Conv" and "1x1 spatially" in s.reason]
    assert len(se) == 18
    # Rules 1-3 alone (rule 6 is tested below).
    plan = place_qdq(model, skip_matrix_vector=False, keep_float_output_grouped_convs=False)
    ops = [e.op_type for e in plan.edges]
    assert ops.count("Conv") == 53 and ops.count("MatMul") == 1
    # 7 residual blocks, each quantizing the skip input.
    assert sum(1 for e in plan.edges if e.rule.startswith("residual")) == 7
    # The ten SE / head pools feed quantized layers; MaxPool -> GAP -> Reshape -> MatMul resolves too.
    assert ops.count("GlobalAveragePool") == 10 and ops.count("MaxPool") == 1
    assert len(plan.weights) == 54


# ---------------------------------------------------------------------------- rule 6: grouped convs, float output


def _grouped_skips(plan):
    return {s.node_label: s.reason for s in plan.skipped if "grouped" in s.reason}


@pytest.mark.parametrize("activation", ["relu", "hardswish"])
def test_depthwise_conv_read_in_float_by_squeeze_excite_stays_float(activation):
    plan = place_qdq(qm.depthwise_block("se", activation))
    assert {e.node_label for e in plan.edges if e.rule == "weighted-op input"} == {"convP", "convOut"}
    assert "wDW" not in {w.tensor for w in plan.weights}
    reason = _grouped_skips(plan)["convDW"]
    # The readers are named (a decomposed HardSwish is itself a float reader: see the next test), and the
    # reason says what TensorRT 8.6 does and what it cost.
    assert ("(by gap, scale)" if activation == "relu" else "(by hs_add, hs_mul)") in reason
    assert "TensorRT 8.6 cannot fuse" in reason and "FP16" in reason and "wrong results" in reason
    assert "0.75" in reason and "0.993" in reason
    assert "keep_float_output_grouped_convs=False" in reason


def test_depthwise_conv_feeding_a_quantized_conv_is_quantized():
    # BN and Relu fuse into the conv: its output is read only through convOut's Q.
    plan = place_qdq(qm.depthwise_block("conv", "relu"))
    assert {e.node_label for e in plan.edges} == {"convP", "convDW", "convOut"}
    assert ("wDW", 0) in {(w.tensor, w.axis) for w in plan.weights}
    assert not _grouped_skips(plan)


def test_depthwise_conv_with_a_decomposed_hardswish_stays_float():
    # x * Clip(x + 3, 0, 6) / 6 after a depthwise conv is a pointwise layer of its own in TensorRT 8.6:
    # quantized, the conv ran unfused in FP32 on an H100 (tests/gpu/test_qdq_blocks.py, depthwise_hardswish).
    plan = place_qdq(qm.depthwise_block("conv", "hardswish"))
    assert {e.node_label for e in plan.edges} == {"convP", "convOut"}
    assert "(by hs_add, hs_mul)" in _grouped_skips(plan)["convDW"]


def test_grouped_rule_reaches_a_fixed_point_through_chained_depthwise_convs():
    # convDW2 writes the graph output (float): it stays float, so its input loses its Q,
    # and then convDW's output is read in float too.
    plan = place_qdq(qm.depthwise_block("dw"))
    skips = _grouped_skips(plan)
    assert set(skips) == {"convDW", "convDW2"}
    assert "(by the graph output)" in skips["convDW2"] and "(by convDW2)" in skips["convDW"]
    assert {e.node_label for e in plan.edges} == {"convP"}


@pytest.mark.parametrize("tail", ["se", "dw"])
def test_grouped_rule_can_be_turned_off(tail):
    plan = place_qdq(qm.depthwise_block(tail), keep_float_output_grouped_convs=False)
    assert not _grouped_skips(plan)
    assert {"convDW"} <= {e.node_label for e in plan.edges}


def test_user_exclusion_wins_over_the_grouped_rule():
    plan = place_qdq(qm.depthwise_block("se"), exclude=["convDW"])
    assert [s.reason for s in plan.skipped if s.node_label == "convDW"] == [
        "excluded by the user (pattern 'convDW')"]


# ---------------------------------------------------------------------------- rule 6, quantized outputs


def _output_edges(plan):
    return {(e.tensor, e.node_label) for e in plan.edges if e.rule.startswith("grouped conv output")}


@pytest.mark.parametrize("activation, end, readers", [
    ("relu", "d", {"gap", "scale"}),
    # Before a decomposed HardSwish: the gate is a pointwise layer of its own in TensorRT 8.6, which then
    # reads INT8 (its Add and Mul both read the conv's output).
    ("hardswish", "bn", {"hs_add", "hs_mul"})])
def test_quantized_grouped_outputs_give_the_conv_a_qdq_on_what_it_writes(activation, end, readers):
    plan = place_qdq(qm.depthwise_block("se", activation), dense_int8=True)
    assert not _grouped_skips(plan)
    assert "convDW" in {e.node_label for e in plan.edges if e.rule == "weighted-op input"}
    assert ("wDW", 0) in {(w.tensor, w.axis) for w in plan.weights}
    assert _output_edges(plan) == {(end, r) for r in readers}
    assert all("convDW" in e.rule for e in plan.edges if e.tensor == end)


def test_quantized_grouped_outputs_add_nothing_where_the_output_is_already_read_quantized():
    plain = place_qdq(qm.depthwise_block("conv", "relu"))
    dense = place_qdq(qm.depthwise_block("conv", "relu"), dense_int8=True)
    assert not _output_edges(dense) and dense.edges == plain.edges and dense.weights == plain.weights


def test_a_grouped_conv_writing_the_graph_output_stays_float_even_with_quantized_outputs():
    # No Q/DQ can go on a graph output: convDW2 stays float (rule 6), and convDW, now read by a float
    # conv, gets its output quantized instead of being left float.
    plan = place_qdq(qm.depthwise_block("dw"), dense_int8=True)
    assert set(_grouped_skips(plan)) == {"convDW2"}
    assert "(by the graph output)" in _grouped_skips(plan)["convDW2"]
    assert {label for _, label in _output_edges(plan)} == {"convDW2"}
    assert "convDW" in {e.node_label for e in plan.edges if e.rule == "weighted-op input"}


def test_quantized_grouped_outputs_win_over_turning_rule_6_off():
    plan = place_qdq(qm.depthwise_block("se", "hardswish"), dense_int8=True, keep_float_output_grouped_convs=False)
    assert _output_edges(plan) == {("bn", "hs_add"), ("bn", "hs_mul")}


def test_an_excluded_grouped_conv_gets_no_output_qdq():
    plan = place_qdq(qm.depthwise_block("se", "hardswish"), dense_int8=True, exclude=["convDW"])
    assert not _output_edges(plan)
    assert "convDW" not in {e.node_label for e in plan.edges}


def test_demo_model_with_quantized_grouped_outputs_quantizes_every_grouped_conv():
    import onnx

    from trtwidgets import demo
    from trtwidgets.core.model.onnx_graph import attribute

    model = onnx.load(str(demo.MODEL_PATH))
    grouped = {n.name for n in model.graph.node if n.op_type == "Conv" and (attribute(n, "group", 1) or 1) > 1}
    plan = place_qdq(model, dense_int8=True)
    assert not _grouped_skips(plan)
    assert grouped <= {e.node_label for e in plan.edges if e.rule == "weighted-op input"}
    # Exactly the nine squeeze-excite depthwise convs (read in float otherwise) get an output Q/DQ.
    owners = {e.rule.split("fuses ")[1].split(" ")[0] for e in plan.edges if e.rule.startswith("grouped conv output")}
    assert owners == _demo_se_depthwise(model)


def test_dense_squeeze_excite_gate_is_written_quantized_for_its_mul():
    # The SE conv's HardSigmoid output is read only by the Mul (a point-wise INT8 reader): rule 8 quantizes it,
    # since TensorRT 8.6 left a DequantizeLinear unfused before a point-wise layer whose other input was float.
    from tests.core import qdq_blocks as qb

    plan = place_qdq(qb.squeeze_excite(), dense_int8=True, skip_matrix_vector=False)
    gate = [e for e in plan.edges if e.rule.startswith("layer output read by INT8 layers")]
    assert [(e.tensor, e.node_label) for e in gate] == [("s", "se_mul")] and "se2" in gate[0].rule
    # The conv output chain into a Concat is quantized for the Concat, and a graph output never is.
    cat = place_qdq(qb.concat_resize(), dense_int8=True)
    assert {(e.tensor, e.node_label) for e in cat.edges if e.rule.startswith("layer output")} >= {
        ("ar", "cat"), ("br", "cat")}
    assert not {e.tensor for e in cat.edges} & {o.name for o in qb.concat_resize().graph.output}


def test_dense_shared_reads_make_every_pointwise_reader_of_a_quantized_tensor_read_it_quantized():
    import onnx

    from trtwidgets import demo

    model = onnx.load(str(demo.MODEL_PATH))
    plan = place_qdq(model, dense_int8=True, skip_matrix_vector=False)
    shared = [e for e in plan.edges if e.rule.startswith("shared read")]
    assert shared and all(e.op_type in ("Mul", "GlobalAveragePool", "Add") for e in shared)
    quantized = {e.tensor for e in plan.edges}
    reads = {(e.node, e.input_index) for e in plan.edges}
    for i, node in enumerate(model.graph.node):
        if node.op_type in ("Mul", "GlobalAveragePool"):
            for k, t in enumerate(node.input):
                if t in quantized:
                    assert (i, k) in reads, (node.name, t)


def test_dense_int8_leave_a_transformer_layer_as_rules_1_to_4_place_it():
    # Rule 8's evidence is convolutional engines: a transformer's residual stream and attention keep their placement.
    from tests.core import qdq_blocks as qb

    model = qb.encoder_layer()
    assert place_qdq(model, dense_int8=True, skip_matrix_vector=False).edges == \
        place_qdq(model, skip_matrix_vector=False).edges


def _demo_se_depthwise(model):
    """Grouped convs of the demo from which a GlobalAveragePool is reached without crossing another Conv."""
    from trtwidgets.core.model.onnx_graph import GraphIndex, attribute

    index = GraphIndex(model.graph)
    found = set()
    for node in model.graph.node:
        if node.op_type != "Conv" or (attribute(node, "group", 1) or 1) <= 1:
            continue
        todo, seen = [node.output[0]], set()
        while todo:
            t = todo.pop()
            for c in index.consumers.get(t, []):
                if c.op_type == "GlobalAveragePool":
                    found.add(node.name)
                elif c.op_type not in ("Conv", "MatMul") and c.output[0] not in seen:
                    seen.add(c.output[0])
                    todo.append(c.output[0])
    return found


def test_demo_model_keeps_exactly_its_squeeze_excite_depthwise_convs_float():
    import onnx

    from trtwidgets import demo
    from trtwidgets.core.model.onnx_graph import attribute

    model = onnx.load(str(demo.MODEL_PATH))
    grouped = {n.name for n in model.graph.node if n.op_type == "Conv" and (attribute(n, "group", 1) or 1) > 1}
    se = _demo_se_depthwise(model)
    assert len(se) == 9 and len(grouped) == 11
    plan = place_qdq(model)
    skips = _grouped_skips(plan)
    assert set(skips) == se
    # Read by the SE pool and Mul, or first by a decomposed HardSwish (its Add and Mul) that feeds them.
    assert all(("GlobalAveragePool" in r or "Add@" in r) and "Mul" in r for r in skips.values())
    # The other depthwise convs (Relu -> pointwise conv) stay quantized.
    assert grouped - se <= {e.node_label for e in plan.edges}
    # The plan is the one measured on the GPU (engine cosine 0.993): the float plan with these
    # convs excluded by name.
    by_name = place_qdq(model, exclude=sorted(se), keep_float_output_grouped_convs=False)
    assert [(e.tensor, e.node, e.input_index) for e in plan.edges] == \
        [(e.tensor, e.node, e.input_index) for e in by_name.edges]
    assert plan.weights == by_name.weights
    off = place_qdq(model, keep_float_output_grouped_convs=False)
    assert se <= {e.node_label for e in off.edges} and not _grouped_skips(off)


def test_every_skip_names_its_rule():
    import onnx

    from trtwidgets import demo

    plan = place_qdq(onnx.load(str(demo.MODEL_PATH)))
    rules = {s.node_label: s.rule for s in plan.skipped}
    assert {rules[n] for n in _grouped_skips(plan)} == {6}
    assert {s.rule for s in plan.skipped if "1x1 spatially" in s.reason} == {5}
    assert all(1 <= s.rule <= 7 for s in plan.skipped)
    assert plan.skipped[0].to_dict()["rule"] == plan.skipped[0].rule
