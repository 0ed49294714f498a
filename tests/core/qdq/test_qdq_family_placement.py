"""Placement rules for the model families users bring (issue 21), on small block models (CPU)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import numpy_helper

from tests.core import qdq_blocks as qb
from tests.core import qdq_family_blocks as fb
from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq
from trtwidgets.core.qdq.placement import place_qdq


def _edges(plan):
    return {(e.tensor, e.node_label) for e in plan.edges}


def _quantized_tensors(plan):
    return {e.tensor for e in plan.edges}


def _scales(model):
    """Tensor -> the scale its activation Q/DQ uses, read from the written model."""
    inits = {t.name: numpy_helper.to_array(t) for t in model.graph.initializer}
    return {n.input[0]: float(inits[n.input[1]]) for n in model.graph.node
            if n.op_type == "QuantizeLinear" and n.input[1] in inits and inits[n.input[1]].ndim == 0}


@pytest.mark.parametrize("dense", [False, True])
def test_silu_fuses_as_the_conv_epilogue_and_is_quantized_after_the_mul(dense):
    plan = place_qdq(fb.conv_silu(), dense_int8=dense)
    q = _quantized_tensors(plan)
    # Nothing between a conv and its Sigmoid/Mul (nor BN): the Q sits on the Mul's output, read by the next conv.
    assert not q & {"a", "ab", "act1_s", "c2_o", "c2_act_s"}
    assert {("s1", "c2"), ("s2", "c3")} <= _edges(plan)


@pytest.mark.parametrize("dense", [False, True])
def test_leaky_relu_and_prelu_fuse_as_the_conv_epilogue(dense):
    plan = place_qdq(fb.leaky_prelu(), dense_int8=dense)
    assert not _quantized_tensors(plan) & {"a", "b"}
    assert {("al", "c2"), ("bp", "c3")} <= _edges(plan)


@pytest.mark.parametrize("dense", [False, True])
def test_c2f_quantizes_before_the_split_once_and_the_concat_shares_its_scale(dense):
    model = fb.c2f()
    plan = place_qdq(model, dense_int8=dense)
    edges = _edges(plan)
    # The tensor before the Split is quantized once (the Split reads it quantized); every Concat input too.
    assert ("t", "split") in edges
    assert {("a", "cat"), ("b", "cat"), ("d", "cat")} <= edges
    # The bottleneck's second conv ends in a SiLU: both add inputs are read quantized (rule 2's default for a gated
    # branch), so the conv keeps its SiLU and writes INT8; nothing inside the SiLU is quantized.
    assert {("m2", "m_add"), ("b", "m_add")} <= edges
    assert ("m_cv2_o", "m_cv2_act_sig") not in edges
    # The add's placement choice "skip" is rule 2 as it was: the add fuses into the conv, its SiLU output read float.
    skip = _edges(place_qdq(model, dense_int8=dense, choices={"m_add": "skip"}))
    assert ("b", "m_add") in skip and not {("m2", "m_add"), ("m_cv2_o", "m_cv2_act_sig")} & skip
    group = next(g for g in plan.shared_scales if "t" in g)
    assert {"t", "a", "b", "d"} <= set(group)
    # One scale for the whole group in the written model, the group's largest range (the graph as written: the
    # split_concat rewrite, below, takes the halves out of the Concat).
    amax = qb.simple_amax(model)
    amax.update({"t": 3.0, "d": 5.0, "a": 2.0, "b": 2.5})
    scales = _scales(build_qdq(model, QdqSpec(amax, QdqOptions(high_precision="fp32", rewrites=()))).model)
    assert len({scales[t] for t in ("t", "a", "b", "d")}) == 1 and scales["t"] == pytest.approx(5.0 / 127)
    # By default the Concat reads the tensor before the Split (the same values): it shares the scale with "t" and
    # "d", and the halves the Split still hands on ("b", to the bottleneck) keep that one scale through the Split.
    ex = build_qdq(model, QdqSpec(amax, QdqOptions(high_precision="fp32")))
    cat = next(n for n in ex.model.graph.node if n.op_type == "Concat")
    assert ("split_concat", "cat") in ex.report.rewrites and "a" not in {i.split("_")[0] for i in cat.input}
    rewritten = _scales(ex.model)
    assert len({rewritten[t] for t in ("t", "b", "d")}) == 1 and rewritten["t"] == pytest.approx(5.0 / 127)


@pytest.mark.parametrize("dense", [False, True])
def test_sppf_pools_run_between_quantized_tensors_with_one_scale(dense):
    model = fb.sppf()
    plan = place_qdq(model, dense_int8=dense)
    edges = _edges(plan)
    assert {("x1", "pool1"), ("p1", "pool2"), ("p2", "pool3")} <= edges
    assert {("x1", "cat"), ("p1", "cat"), ("p2", "cat"), ("p3", "cat")} <= edges
    assert not [s for s in plan.skipped if s.op_type == "MaxPool"]
    amax = qb.simple_amax(model)
    amax.update({"x1": 6.0, "p1": 5.0, "p2": 4.5, "p3": 4.0})
    scales = _scales(build_qdq(model, QdqSpec(amax, QdqOptions(high_precision="fp32"))).model)
    assert len({scales[t] for t in ("x1", "p1", "p2", "p3")}) == 1 and scales["p3"] == pytest.approx(6.0 / 127)


def test_upsample_neck_quantizes_the_resize_input_and_shares_the_concat_scale():
    model = fb.upsample_neck()
    plan = place_qdq(model)
    edges = _edges(plan)
    assert {("s", "up"), ("up", "cat"), ("l", "cat")} <= edges
    assert {"s", "up", "l"} <= set(next(g for g in plan.shared_scales if "up" in g))


def test_a_linear_resize_is_not_data_movement():
    model = fb.upsample_neck()
    next(n for n in model.graph.node if n.name == "up").attribute[0].s = b"linear"
    plan = place_qdq(model)
    assert ("s", "up") not in _edges(plan)
    assert not any("s" in g for g in plan.shared_scales)


def test_dfl_head_keeps_softmax_and_the_dfl_conv_float_and_quantizes_both_branches():
    model = fb.dfl_head()
    ex = build_qdq(model, QdqSpec(qb.simple_amax(model), QdqOptions(high_precision="fp32")))
    assert set(ex.report.quantized_layers) == {"box1", "box2", "cls1", "cls2"}
    skipped = {s.node_label: s for s in ex.report.skipped}
    assert skipped["dfl"].rule == 10 and "Softmax" in skipped["dfl"].reason
    dq_inputs = {n.output[0] for n in ex.model.graph.node if n.op_type == "DequantizeLinear"}
    dfl = next(n for n in ex.model.graph.node if n.name == "dfl")
    assert not set(dfl.input) & dq_inputs  # neither its input nor its weights go through a DequantizeLinear


def test_attention_matmuls_read_quantized_inputs_and_softmax_stays_float():
    # TensorRT's MHA fusion pattern: Q/DQ on both inputs of Q·Kᵀ and of P·V; nothing inside Softmax or LayerNorm.
    plan = place_qdq(qb.encoder_layer())
    edges = _edges(plan)
    assert {("q", "qk"), ("kt", "qk"), ("p", "pv"), ("v", "pv")} <= edges
    assert not [e for e in plan.edges if e.node_label in ("softmax", "ln1", "ln2")]
    assert not [s for s in plan.skipped if s.node_label == "pv"]  # no weights, but not rule 10's business


def test_multi_head_attention_quantizes_both_matmul_inputs_through_the_head_reshapes():
    plan = place_qdq(fb.vit_attention())
    reads = {(e.node_label, e.input_index) for e in plan.edges}
    assert {("qk", 0), ("qk", 1), ("pv", 0), ("pv", 1)} <= reads
    assert {("q_proj", 0), ("k_proj", 0), ("v_proj", 0), ("o_proj", 0)} <= reads
    assert not [e for e in plan.edges if e.node_label == "softmax"]
    assert not [s for s in plan.skipped if s.rule == 10]


@pytest.mark.parametrize("maker, first, reader", [(qb.encoder_layer, "m1", "fc2"), (fb.mlp_gelu_tanh, "m1", "fc2"),
                                                  (fb.conv_gelu, "a", "c2")])
def test_gelu_after_a_gemm_or_conv_fuses_as_its_epilogue(maker, first, reader):
    # Erf form (encoder_layer, conv_gelu) and tanh form: no Q/DQ inside GELU or between the layer and it;
    # the next layer reads its output quantized.
    plan = place_qdq(maker())
    gelu = next(p for p in plan.patterns if p.kind == "gelu")
    assert not [e for e in plan.edges if e.tensor in set(gelu.internal_tensors)]
    assert ("g", reader) in _edges(plan)
    assert not [e for e in plan.edges if e.tensor == first]


def test_every_family_block_exports_and_runs_in_onnx_runtime():
    from trtwidgets.core.qdq.validate import run_model

    for name, (maker, _) in fb.FAMILY_BLOCKS.items():
        model = maker()
        for hp in ("fp32", "fp16"):
            ex = build_qdq(model, QdqSpec(qb.simple_amax(model), QdqOptions(high_precision=hp)))
            out, _ = run_model(ex.model, qb.feeds(model, 1))
            out = list(out.values())
            assert np.isfinite(out[0]).all(), (name, hp)


def test_excluding_the_movement_ops_turns_rule_9_off():
    plan = place_qdq(fb.c2f(), exclude_op_types=["Split", "Concat"])
    assert not [e for e in plan.edges if e.op_type in ("Split", "Concat")]
    assert not plan.shared_scales
