"""Estimates from real shapes, and "cannot estimate" outside what the zoo measured the cost model to be right on."""

from __future__ import annotations

import json
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from tests.core.plan.plan_models import conv_stack, feeds
from trtwidgets.core.plan.cost_model import layer_costs, static_shapes
from trtwidgets.core.plan.estimate_support import EstimateSupport, SupportedLatency, attention_matmuls
from trtwidgets.core.plan.observed_shapes import observed_shapes
from trtwidgets.core.plan.phases import latency_model
from trtwidgets.core.plan.plan_values import PlanTarget
from trtwidgets.core.plan.planner import plan


def _opaque_matmul(batch="N") -> onnx.ModelProto:
    """x[N, 64] -> a Reshape to a shape computed through a ConstantOfShape/Range chain inference cannot fold -> MatMul."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((64, 256)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("ReduceSum", ["s"], ["total"], keepdims=1),  # N + 64: data the shape pass cannot follow
        helper.make_node("Sub", ["total", "c64"], ["n"]),
        helper.make_node("Concat", ["n", "c64"], ["shape"], axis=0),
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("MatMul", ["r", "w"], ["y"], name="fc"),
    ]
    graph = helper.make_graph(nodes, "opaque", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [batch, 64])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                              [w, numpy_helper.from_array(np.array([64], np.int64), "c64")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def test_shapes_inference_leaves_open_come_from_a_sample_scaled_to_the_engine_batch():
    model = _opaque_matmul()
    assert "fc" not in layer_costs(model, {"x": (32, 64)})  # shape inference alone cannot price the layer
    assert "y" not in static_shapes(model, {"x": (32, 64)})
    feed = {"x": np.ones((1, 64), np.float32)}
    shapes, notes = observed_shapes(model, {"x": (32, 64)}, feed, {"x": 0})
    assert shapes["y"] == (32, 256) and shapes["r"] == (32, 64)  # the sample's batch 1, scaled to the engine's 32
    assert any("taken from a sample run" in n for n in notes)
    costs = layer_costs(model, {"x": (32, 64)}, shapes=shapes)
    assert costs["fc"].macs == 32 * 64 * 256


def test_a_sample_of_another_size_fills_in_nothing():
    model = _opaque_matmul()
    shapes, notes = observed_shapes(model, {"x": (32, 128)}, {"x": np.ones((1, 64), np.float32)}, {"x": 0})
    assert "y" not in shapes and "beyond the batch" in notes[0]


def _record(tmp_path, pairs):
    path = tmp_path / "estimate_error.json"
    path.write_text(json.dumps({"entries": [{"model": f"m{i}", "latency_source": "estimate", "estimated_x_fp16": e,
                                             "measured_x_fp16": m} for i, (e, m) in enumerate(pairs)]}))
    return path


def test_support_is_the_span_of_estimates_the_zoo_measured_within_30_percent(tmp_path):
    sup = EstimateSupport.from_record(_record(tmp_path, [(0.6, 0.7), (0.9, 0.95), (1.15, 2.5), (0.4, 1.0)]))
    assert (sup.lo, sup.hi, sup.entries, sup.within) == (0.6, 0.9, 4, 2)  # 1.15 vs 2.5 and 0.4 vs 1.0 are off
    assert sup.why_not(0.75) is None
    assert "outside 0.60-0.90x" in sup.why_not(0.5) and "outside" in sup.why_not(51.2)
    for bad in (0.0, math.inf, math.nan, -1.0):
        assert sup.why_not(bad)
    assert "no measurement" in EstimateSupport.from_record(tmp_path / "missing.json").why_not(0.8)


def test_an_estimate_outside_the_span_is_nan_and_fp16_stays_a_number(tmp_path):
    model = conv_stack()
    raw = latency_model(model, {"x": (32, 64, 112, 112)}, "h100")
    layers = ["conv0", "conv1", "conv2", "conv3"]
    ratio = raw.estimate(layers) / raw.estimate(())
    lat = SupportedLatency(raw, EstimateSupport(0.57, 1.19, 10, 9))
    assert ratio < 0.57 and math.isnan(lat.estimate(layers)) and "outside" in lat.why_cannot(layers)
    assert lat.estimate(()) == raw.estimate(()) and lat.why_cannot(()) is None
    inside = SupportedLatency(raw, EstimateSupport(0.5, 1.19, 10, 9))
    assert inside.estimate(layers) == raw.estimate(layers)
    unpriced = SupportedLatency(raw, EstimateSupport(0.5, 1.19, 10, 9), unpriced=("conv9",))
    assert math.isnan(unpriced.estimate(())) and "cannot see" in unpriced.why_cannot(layers)


def test_attention_marks_every_matmul_of_a_transformer_and_none_of_a_convnet():
    from tests.core import qdq_blocks as qb

    enc = qb.encoder_layer(batch=1, seq=16, d=64)
    assert len(attention_matmuls(enc)) >= 6
    assert attention_matmuls(conv_stack()) == ()


def test_plan_shows_cannot_estimate_outside_the_span_and_never_picks_by_it():
    p = plan(conv_stack(), feeds(), shapes={"x": (32, 64, 112, 112)}, progress=False, target=PlanTarget(cosine=0.9))
    int8 = [c for c in p.candidates if c.quantized]
    assert int8 and all(math.isnan(c.latency_us) for c in int8)
    assert math.isfinite(p.candidates[0].latency_us)
    assert p.fp16_is_best and "Cannot estimate" in p.reason
    assert any(n.startswith("cannot estimate") and "outside" in n for n in p.notes)
    assert "cannot est." in p.table()
    doc = p.to_dict()
    assert all(c["latency_us"] is None for c in doc["candidates"][1:])
