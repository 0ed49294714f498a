"""What to quantize is one value (core/qdq/spec.py), a candidate is a node set, and the report records what
the export wrote (issue 30, "A Q/DQ spec")."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from tests.core import qdq_models as qm
from trtwidgets import demo
from trtwidgets.core.common.errors import StatsError, UserError
from trtwidgets.core.model.load import load_model
from trtwidgets.core.model.onnx_graph import WEIGHTED_OPS
from trtwidgets.core.qdq.exclusions import KEPT_BY_PLAN, QdqExclusionError
from trtwidgets.core.qdq.export import QdqExportError, QdqOptions, QdqSpec, build_qdq, save_qdq_model
from trtwidgets.core.model.graph_patterns import node_label


@pytest.fixture(scope="module")
def residual():
    model = qm.residual_cnn()
    return model, qm.max_amax(model, qm.random_feeds(model, 4))


# ---------------------------------------------------------------------------- the spec's own checks


@pytest.mark.parametrize("value, words", [(float("nan"), "NaN is not a range"), (-1.0, "negative"),
                                          (float("inf"), "not a finite range"), ("3", "is not a number")])
def test_an_amax_that_cannot_be_a_scale_is_refused_when_the_spec_is_made(residual, value, words):
    _, amax = residual
    with pytest.raises(StatsError, match=re.escape(words)) as err:
        QdqSpec({**amax, "t": value}, source="cal.npz")
    assert "cal.npz: 1 of" in err.value.message and "'t'" in err.value.message


def test_a_scale_fp16_cannot_hold_is_refused_only_for_an_fp16_float_part(residual):
    _, amax = residual
    big = {**amax, "t": 65504.0 * 127 * 2}
    assert QdqSpec(big, QdqOptions(high_precision="fp32")).amax["t"] == big["t"]
    with pytest.raises(StatsError, match="float16"):
        QdqSpec(big, QdqOptions(high_precision="fp16"))


def test_a_spec_is_frozen_and_does_not_share_the_callers_mapping(residual):
    _, amax = residual
    given = dict(amax)
    spec = QdqSpec(given, nodes=["convA", "convB"])
    given["t"] = 123.0
    assert spec.amax["t"] == amax["t"] and spec.nodes == frozenset({"convA", "convB"})
    with pytest.raises(TypeError):
        spec.amax["t"] = 1.0  # type: ignore[index]
    with pytest.raises(AttributeError):
        spec.nodes = None  # type: ignore[misc]


@pytest.mark.parametrize("kwargs, words", [({"options": {"precision": "int8"}}, "is not a QdqOptions"),
                                           ({"nodes": "convA"}, "is not a set of layer labels"),
                                           ({"nodes": [1, 2]}, "not a node label")])
def test_a_spec_of_the_wrong_kinds_is_a_user_error(residual, kwargs, words):
    with pytest.raises(UserError, match=words):
        QdqSpec(residual[1], **kwargs)


def test_build_qdq_takes_only_a_spec(residual):
    model, amax = residual
    with pytest.raises(QdqExportError, match="takes a QdqSpec"):
        build_qdq(model, amax)


def test_a_node_set_naming_layers_the_model_lacks_is_refused(residual):
    model, amax = residual
    with pytest.raises(QdqExclusionError) as err:
        build_qdq(model, QdqSpec(amax, nodes={"convA", "conv_of_another_model"}))
    assert "'conv_of_another_model'" in err.value.message and "convA" in err.value.why
    relu = next(node_label(n) for n in model.graph.node if n.op_type not in WEIGHTED_OPS)
    with pytest.raises(QdqExclusionError, match="not weighted layers"):
        QdqSpec(amax, nodes={relu}).check_fits(model)


def test_from_calibration_takes_the_calibrations_amax_and_says_so():
    import trtwidgets as tw

    model = tw.load(demo.MODEL_PATH)
    cal = tw.calibrate(model, "demo", method="max", progress=False, max_samples=4)
    spec = QdqSpec.from_calibration(cal, QdqOptions(high_precision="fp32"))
    assert dict(spec.amax) == {k: float(v) for k, v in cal.amax.items()} and spec.nodes is None
    assert "max ranges" in spec.source and build_qdq(model, spec).report.ranges == spec.source
    assert len(repr(spec)) < 300 and "QdqSpec(" in repr(spec)


# ---------------------------------------------------------------------------- candidates are node sets


def _old_plan_export(model, amax, quantized, opts):
    """How a plan's candidate was exported before: regex exclusions of every other weighted layer."""
    weighted = [n for n in model.graph.node if n.op_type in WEIGHTED_OPS]
    exclude = [re.escape(n.name or n.output[0]) for n in weighted if node_label(n) not in quantized]
    return build_qdq(model, QdqSpec(amax, opts.replace(exclude=tuple(opts.exclude) + tuple(exclude))))


@pytest.mark.parametrize("dense", [True, False])
def test_a_node_set_writes_the_model_the_complements_exclusions_wrote(dense):
    from trtwidgets.core.calibration.collect import collect_stats
    from trtwidgets.core.calibration.ranges import amax_from_stats

    loaded = load_model(demo.MODEL_PATH)
    model = loaded.proto
    amax = amax_from_stats(collect_stats(loaded, demo.sample_inputs(4), progress=False), "max")
    opts = QdqOptions(high_precision="fp16", dense_int8=dense, skip_matrix_vector=False)
    every = build_qdq(model, QdqSpec(amax, opts)).report.quantized_layers
    for quantized in (every[::2], every[:5], every[-3:], ()):
        new = build_qdq(model, QdqSpec(amax, opts, nodes=quantized))
        old = _old_plan_export(model, amax, set(quantized), opts)
        assert new.model.SerializeToString() == old.model.SerializeToString()
        assert new.report.quantized_layers == old.report.quantized_layers
        assert set(new.report.quantized_layers) <= set(quantized)
        assert new.report.excluded == (), "the plan's choice is not the user's exclusion"
        kept = {s.node_label for s in new.report.skipped if s.reason == KEPT_BY_PLAN}
        weighted = {node_label(n) for n in model.graph.node if n.op_type in WEIGHTED_OPS}
        assert kept == weighted - set(quantized)


def test_the_users_exclusions_still_apply_inside_a_node_set(residual):
    model, amax = residual
    ex = build_qdq(model, QdqSpec(amax, QdqOptions(exclude=["convB"]), nodes={"convA", "convB"}))
    assert ex.report.quantized_layers == ("convA",) and ex.report.excluded == ("convB",)
    reasons = {s.node_label: s.reason for s in ex.report.skipped}
    assert "excluded by the user" in reasons["convB"] and reasons["convC"] == KEPT_BY_PLAN


# ---------------------------------------------------------------------------- the report records what was written


def _value(model: onnx.ModelProto, name: str) -> np.ndarray:
    return numpy_helper.to_array(next(t for t in model.graph.initializer if t.name == name))


@pytest.mark.parametrize("hp", ["fp32", "fp16", "bf16"])
def test_every_activation_record_is_what_the_model_holds(residual, hp):
    model, amax = residual
    ex = build_qdq(model, QdqSpec(amax, QdqOptions(high_precision=hp)))
    nodes = {n.name: n for n in ex.model.graph.node}
    assert ex.report.activations
    for a in ex.report.activations:
        q, dq = nodes[a.quantize_node], nodes[a.dequantize_node]
        assert q.op_type == "QuantizeLinear" and dq.op_type == "DequantizeLinear" and q.input[1] == dq.input[1]
        written = _value(ex.model, q.input[1])
        assert float(written.astype(np.float32)) == a.scale and a.scale_type == hp
        assert a.scale_fp32 == float(np.float32(a.amax / 127.0))
        assert int(_value(ex.model, q.input[2])) == a.zero_point == 0 and a.zero_point_type == "int8"
        assert a.rounded == (a.scale != a.scale_fp32) and (hp != "fp32" or not a.rounded)


def test_every_weight_record_says_where_its_scales_are_and_what_the_fp16_part_changed():
    from tests.core.qdq.test_float_part_weight_scales import _conv_with_tiny_channels

    model = _conv_with_tiny_channels()
    w = numpy_helper.to_array(model.graph.initializer[0])
    fp32 = build_qdq(model, QdqSpec({"x": 3.0}, QdqOptions(high_precision="fp32")))
    fp16 = build_qdq(model, QdqSpec({"x": 3.0}, QdqOptions(high_precision="fp16")))
    (w32,), (w16,) = fp32.report.weights, fp16.report.weights
    assert (w32.scale_type, w32.scales_rounded, w32.requantized_channels) == ("fp32", 0, 0)
    assert w16.scale_type == "fp16" and w16.requantized_channels == 1  # the channel whose scale rounds to 0
    assert w16.scales_rounded == int(np.count_nonzero(fp32.weight_scales("w") != fp16.weight_scales("w")))
    scales = fp16.weight_scales("w")
    assert scales.shape == (4,) and (w16.scale_min, w16.scale_max) == (scales.min(), scales.max())
    stored = _value(fp16.model, w16.values_name)
    assert stored.dtype == np.int8 and w16.stored == "int8"
    back = stored.astype(np.float32) * scales.reshape(4, 1, 1, 1)
    assert w16.max_rel_error == pytest.approx(float(np.abs(back - w).max() / np.abs(w).max()), rel=1e-6)
    with pytest.raises(KeyError):
        fp16.weight_scales("x")


def test_the_check_reads_the_report_not_the_names(residual, tmp_path):
    # The conversion's record travels in the report; the check gives the reference exactly those values.
    model, amax = residual
    ex = build_qdq(model, QdqSpec(amax, QdqOptions(high_precision="fp16")))
    hp = ex.report.high_precision
    assert hp.qdq_values and all(ex.float32_model.graph.node[v.node_index].op_type in ("QuantizeLinear",
                                                                                       "DequantizeLinear")
                                 for v in hp.qdq_values)
    seen = []
    feeds = qm.random_feeds(model, 2)
    save_qdq_model(ex, tmp_path / "m.onnx", feeds=feeds, on_check=seen.append)
    assert any("carries the export's FP16 values" in n for n in seen[0].notes), seen[0].notes
    assert seen[0].cosines and min(seen[0].cosines.values()) > 0.999


# ---------------------------------------------------------------------------- short reprs


def _wide_model(layers: int = 400) -> onnx.ModelProto:
    """``layers`` 1x1 convs in a chain, each named at length: a model whose report would print a wall."""
    rng = np.random.default_rng(0)
    nodes, inits, t = [], [], "x"
    for i in range(layers):
        name = f"backbone.stage{i // 50}.block{i}.conv_with_a_long_export_name"
        inits.append(numpy_helper.from_array(rng.standard_normal((8, 8, 1, 1)).astype(np.float32), f"{name}.weight"))
        nodes += [helper.make_node("Conv", [t, f"{name}.weight"], [f"{name}.out"], name=name),
                  helper.make_node("Relu", [f"{name}.out"], [f"{name}.relu"], name=f"{name}.act")]
        t = f"{name}.relu"
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 4, 4])],
                          [helper.make_tensor_value_info(t, TensorProto.FLOAT, [1, 8, 4, 4])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_the_reprs_are_a_few_lines_whatever_the_model():
    model = _wide_model()
    amax = {"x": 1.0, **{f"backbone.stage{i // 50}.block{i}.conv_with_a_long_export_name.relu": 2.0
                         for i in range(400)}}
    ex = build_qdq(model, QdqSpec(amax, QdqOptions(high_precision="fp16"), source="entropy ranges " + "x" * 3000))
    assert len(ex.report.activations) == 400 and len(ex.report.weights) == 400
    for text in (repr(ex), repr(ex.report), repr(ex.report.high_precision), repr(QdqSpec(amax))):
        assert len(text) < 2000 and text.count("\n") <= 8, text
    assert "400 layers in INT8" in repr(ex) and "float part FP16" in repr(ex) and ".summary()" in repr(ex.report)
    assert "activation Q/DQ     400 tensors" in ex.report.summary()
