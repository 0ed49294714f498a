"""Placement choices in a QdqSpec (residual skip/both, float) and a region cut out of the written model."""

from __future__ import annotations

import numpy as np
import onnx
import pytest

from tests.core import region_models as rm
from trtwidgets.core.common.errors import UserError
from trtwidgets.core.qdq.exclusions import QdqExclusionError
from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq
from trtwidgets.core.qdq.placement import place_qdq
from trtwidgets.core.qdq.region_cut import RegionCutError, cut_region
from trtwidgets.core.qdq.repeated_patterns import find_regions

OPTS = QdqOptions(high_precision="fp32", trt_version="8.6")


def _amax(model, value=4.0):
    return {t: value for n in model.graph.node for t in list(n.input) + list(n.output)}


def _reads(model) -> set:
    """``(tensor, reader)`` of every read through a Q/DQ pair in a written model."""
    prod = {o: n for n in model.graph.node for o in n.output}
    out = set()
    for n in model.graph.node:
        for t in n.input:
            dq = prod.get(t)
            if dq is not None and dq.op_type == "DequantizeLinear":
                q = prod.get(dq.input[0])
                if q is not None and q.op_type == "QuantizeLinear":
                    out.add((q.input[0], n.name))
    return out


def test_a_gated_residual_add_reads_both_inputs_quantized_by_default_and_skip_is_rule_2_as_it_was():
    model = rm.c2f_stack()
    both = _reads(build_qdq(model, QdqSpec(_amax(model), OPTS)).model)
    skip = _reads(build_qdq(model, QdqSpec(_amax(model), OPTS, choices={"c2f1/m.0/Add": "skip"})).model)
    assert {("c2f1.b", "c2f1/m.0/Add"), ("c2f1.m2", "c2f1/m.0/Add")} <= both
    assert ("c2f1.b", "c2f1/m.0/Add") in skip and ("c2f1.m2", "c2f1/m.0/Add") not in skip
    assert ("c2f2.m2", "c2f2/m.0/Add") in skip  # the other instance keeps the default
    assert not any(r == "c2f1/m.0/cv2/act/Sigmoid" for _, r in both | skip)  # never inside the SiLU


@pytest.mark.parametrize("make,add", [(rm.resnet_stack, "layer0/add"), (rm.inverted_residuals, "ir0/add")])
def test_an_add_after_a_bn_or_linear_branch_keeps_skip_by_default_and_both_is_a_choice(make, add):
    model = make()
    plan = place_qdq(model)
    assert sum(1 for e in plan.edges if e.node_label == add) == 1
    chosen = place_qdq(model, choices={add: "both"})
    assert sum(1 for e in chosen.edges if e.node_label == add) == 2


def test_float_keeps_a_concat_and_its_split_reading_float():
    model = rm.c2f_stack()
    joins = {"c2f1/Split": "float", "c2f1/Concat": "float"}
    placed = place_qdq(model, dense_int8=True, choices=joins)
    assert not [e for e in placed.edges if e.node_label in joins]
    assert [e for e in place_qdq(model, dense_int8=True).edges if e.node_label in joins]
    assert any(e.node_label == "c2f2/Concat" for e in placed.edges)  # only the nodes named


@pytest.mark.parametrize("choices,error", [
    ({"nope": "both"}, QdqExclusionError), ({"c2f1/Concat": "both"}, QdqExclusionError),
    ({"c2f1/m.0/cv2/conv": "float"}, QdqExclusionError), ({"c2f1/m.0/Add": "maybe"}, UserError),
    (["c2f1/m.0/Add"], UserError)])
def test_a_choice_the_export_cannot_apply_is_refused_saying_why(choices, error):
    model = rm.c2f_stack()
    with pytest.raises(error):
        build_qdq(model, QdqSpec(_amax(model), OPTS, choices=choices))


def test_the_spec_checks_its_choices_against_the_model_and_says_them_in_its_repr():
    model = rm.c2f_stack()
    spec = QdqSpec(_amax(model), OPTS, choices={"c2f1/m.0/Add": "skip"})
    assert spec.check_fits(model) is spec and "1 placement choices" in repr(spec)
    with pytest.raises(QdqExclusionError):
        QdqSpec(_amax(model), OPTS, choices={"other/Add": "skip"}).check_fits(model)


def test_a_cut_region_computes_what_it_computes_in_the_whole_model():
    ort = pytest.importorskip("onnxruntime")
    model = rm.c2f_stack()
    (res,) = [p for p in find_regions(model) if p.kind == "residual"]
    inst = res.instances[0]
    qdq = build_qdq(model, QdqSpec(_amax(model), OPTS)).model
    shapes = {"c2f1.b": [1, 16, 16, 16]}
    sub = cut_region(qdq, inst.nodes, inst.inputs, inst.outputs, shapes)
    ops = sorted(n.op_type for n in sub.graph.node if n.op_type not in ("QuantizeLinear", "DequantizeLinear"))
    assert ops == ["Add", "Conv", "Conv", "Mul", "Mul", "Sigmoid", "Sigmoid"]
    # Its output is written as its readers outside read it: through their Q/DQ (the Concat, the next block).
    assert [o.name for o in sub.graph.output] == [t for t in (o for o in _dq_of(qdq, "c2f1.d"))]
    whole = onnx.ModelProto()
    whole.CopyFrom(qdq)
    for t in ("c2f1.b", sub.graph.output[0].name):
        whole.graph.output.add().name = t
    x = np.random.default_rng(0).standard_normal((1, 3, 16, 16)).astype(np.float32)
    sess = ort.InferenceSession(whole.SerializeToString(), providers=["CPUExecutionProvider"])
    b, d = sess.run(["c2f1.b", sub.graph.output[0].name], {"x": x})
    got = ort.InferenceSession(sub.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"c2f1.b": b})[0]
    np.testing.assert_allclose(got, d, rtol=1e-5, atol=1e-5)


def _dq_of(model, tensor):
    qs = [n.output[0] for n in model.graph.node if n.op_type == "QuantizeLinear" and n.input[0] == tensor]
    return [n.output[0] for n in model.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in qs]


def test_a_cut_without_an_inputs_shape_or_past_its_inputs_is_refused():
    model = rm.c2f_stack()
    inst = next(p for p in find_regions(model) if p.kind == "residual").instances[0]
    qdq = build_qdq(model, QdqSpec(_amax(model), OPTS)).model
    with pytest.raises(RegionCutError, match="No shape"):
        cut_region(qdq, inst.nodes, inst.inputs, inst.outputs, {})
    with pytest.raises(RegionCutError, match="outside it"):
        cut_region(qdq, inst.nodes[1:], inst.inputs, inst.outputs, {"c2f1.b": [1, 16, 16, 16]})
