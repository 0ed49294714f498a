from __future__ import annotations

import math

import numpy as np
import pytest

from trtwidgets import demo
from trtwidgets.core.accuracy.intermediates import float_intermediates, run_reference, with_intermediate_outputs
from trtwidgets.core.accuracy.layer_errors import NSR_FLOOR_DB, ErrorReport, layer_errors
from trtwidgets.core.common.errors import UserError
from trtwidgets.core.accuracy.metrics import compare_outputs
from trtwidgets.core.model.load import load_model

from tests.accuracy.models import conv_nodes, tiny_chain, with_int8_rounded_weights


def test_growth_on_hand_made_errors():
    proto = tiny_chain()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(2, 4)).astype(np.float32)
    a = np.maximum(x, 0)
    ref = {"a": a, "b": a * 2, "y": a * 2 + 1}
    cand = dict(ref)
    noise = rng.normal(scale=0.05, size=a.shape).astype(np.float32) + 0.05
    cand["b"] = ref["b"] + noise        # error appears at "mul" ...
    cand["y"] = cand["b"] + 1           # ... and is only passed on by "add"
    report = layer_errors(proto, ref, cand)
    by_tensor = {e.tensor: e for e in report.layers}
    assert by_tensor["a"].error_db == NSR_FLOOR_DB and by_tensor["a"].growth_db == NSR_FLOOR_DB
    # All of b's noise is new (its input is exact) ...
    assert by_tensor["b"].growth_db == pytest.approx(by_tensor["b"].error_db, abs=1e-6)
    # ... y = b + 1 only passes it on (same noise, more signal): it adds nothing.
    assert by_tensor["y"].input_error_db == pytest.approx(by_tensor["b"].error_db)
    assert by_tensor["y"].growth_db == NSR_FLOOR_DB
    assert report.ranked_layers()[0] == "mul"
    assert [e.order for e in report.layers] == [0, 1, 2]


def test_nan_mismatch_ranks_first_and_downstream_does_not_grow():
    proto = tiny_chain()
    a = np.ones((2, 4), np.float32)
    ref = {"a": a, "b": a * 2, "y": a * 2 + 1}
    cand = {"a": a, "b": ref["b"].copy(), "y": ref["y"].copy()}
    cand["b"][0, 0] = np.nan
    cand["y"][0, 0] = np.nan
    report = layer_errors(proto, ref, cand)
    assert report.ranked_layers()[0] == "mul"
    assert math.isinf({e.tensor: e for e in report.layers}["b"].growth_db)
    assert {e.tensor: e for e in report.layers}["y"].growth_db == NSR_FLOOR_DB


def test_missing_tensors_are_listed_not_compared():
    proto = tiny_chain()
    a = np.ones((2, 4), np.float32)
    report = layer_errors(proto, {"a": a, "y": a}, {"a": a, "y": a + 1})
    assert report.missing == ("b",)
    assert [e.tensor for e in report.layers] == ["a", "y"]
    # "y" is judged against "a" (its nearest compared ancestor), which is exact.
    assert report.layers[1].input_error_db == NSR_FLOOR_DB


@pytest.fixture(scope="module")
def demo_runs():
    pytest.importorskip("onnxruntime")
    proto = load_model(demo.MODEL_PATH).proto
    convs = conv_nodes(proto)
    target = convs[len(convs) // 2].name
    perturbed = with_int8_rounded_weights(proto, target)
    names = float_intermediates(proto)
    feeds = {"x": np.concatenate([f["x"] for f in demo.sample_inputs(1)[:4]])}
    ref = run_reference(proto, feeds, names)
    cand = run_reference(perturbed, feeds, names)
    return proto, target, names, ref, cand


def test_ranking_finds_the_perturbed_conv_in_the_demo_model(demo_runs):
    proto, target, names, ref, cand = demo_runs
    assert len(names) > 20 and set(names) <= set(ref)
    # One suspect layer, everything else exact: the "ratio" view names where error first appears.
    report = layer_errors(proto, ref, cand, growth="ratio")
    assert not report.missing
    assert report.ranked_layers(1) == (target,), report.to_rows()[:3]
    # The "added" view ranks by noise contributed: the perturbed conv is among the few top layers
    # (the classifier head amplifies relative noise, so it may add as much).
    added = layer_errors(proto, ref, cand)
    assert target in added.ranked_layers(3), added.to_rows()[:3]
    assert {e.layer: e for e in added.layers}[target].growth_db > -25
    # Everything before the perturbed conv is bit-exact on both sides.
    first_bad = min(e.order for e in report.layers if e.error_db > NSR_FLOOR_DB)
    assert report.layers[[e.order for e in report.layers].index(first_bad)].layer == target
    top = report.ranked()[0]
    assert top.growth_db > 40 and math.isfinite(top.metrics.snr_db)
    with pytest.raises(UserError, match="growth"):
        layer_errors(proto, ref, cand, growth="db")
    # "local": each node re-run on the candidate's own inputs; only the perturbed conv adds noise itself.
    local = layer_errors(proto, ref, cand, growth="local")
    assert local.ranked_layers(1) == (target,), local.to_rows()[:3]
    second = local.ranked()[1]
    assert second.growth_db < local.ranked()[0].growth_db - 40, local.to_rows()[:3]
    # The final output is worse than FP32 noise but the classifier still mostly agrees.
    final = proto.graph.output[0].name
    out = compare_outputs({final: ref[final]}, cand)[final]
    assert out.snr_db < 100 and out.cosine > 0.5


def test_exposed_outputs_keep_the_original_outputs_first(demo_runs):
    proto = demo_runs[0]
    exposed = with_intermediate_outputs(proto, demo_runs[2][:3])
    assert [o.name for o in exposed.graph.output][: len(proto.graph.output)] == [o.name for o in proto.graph.output]
    assert len(exposed.graph.output) == len(proto.graph.output) + 3
    assert len(proto.graph.output) == 1  # the input model is untouched
    with pytest.raises(UserError, match="No node produces"):
        with_intermediate_outputs(proto, ["not-a-tensor"])


def test_error_report_is_json():
    import json

    proto = tiny_chain()
    a = np.ones((2, 4), np.float32)
    report = layer_errors(proto, {"a": a, "b": a, "y": a}, {"a": a, "b": a * 1.1, "y": a})
    d = json.loads(json.dumps(report.to_dict(), allow_nan=False))
    assert d["ranked_layers"][0] == "mul"
    assert isinstance(ErrorReport(layers=()).ranked(), tuple)


def test_incomparable_sizes_are_listed_not_fatal():
    proto = tiny_chain()
    a = np.ones((2, 4), np.float32)
    report = layer_errors(proto, {"a": a, "b": a, "y": a}, {"a": a, "b": np.ones((2, 8), np.float32), "y": a})
    assert report.incomparable == ("b",) and [e.tensor for e in report.layers] == ["a", "y"]
    assert report.to_dict()["incomparable"] == ["b"]


def test_a_small_early_loss_does_not_outrank_a_large_later_one():
    """The first lossy layer's inputs are exact; growth in power (not dB) still ranks the worse layer first."""
    proto = tiny_chain()
    rng = np.random.default_rng(5)
    a = np.abs(rng.normal(size=(2, 4))).astype(np.float32) + 0.5
    ref = {"a": a, "b": a * 2, "y": a * 2 + 1}
    cand = {"a": a * (1 + 1e-3), "b": a * (1 + 1e-3) * 2, "y": a * 2 + 1}
    cand["y"] = cand["b"] + 1 + rng.normal(scale=0.3, size=a.shape).astype(np.float32)
    report = layer_errors(proto, ref, cand)
    by = {e.tensor: e for e in report.layers}
    assert by["a"].error_db < by["y"].error_db
    assert report.ranked_layers()[0] == "add", report.to_rows()


def test_local_growth_on_hand_made_errors():
    proto = tiny_chain()
    rng = np.random.default_rng(2)
    a = np.abs(rng.normal(size=(2, 4))).astype(np.float32) + 0.5
    ref = {"x": a, "a": a, "b": a * 2, "y": a * 2 + 1}
    cand = {"a": a * 1.01}                 # relu output off by 1 % (as if its input were quantized)
    cand["b"] = cand["a"] * 2               # mul exact on its (noisy) input
    cand["y"] = cand["b"] + 1 + 0.05        # add introduces an offset of its own
    report = layer_errors(proto, ref, cand, growth="local")
    by = {e.tensor: e for e in report.layers}
    assert by["b"].growth_db == NSR_FLOOR_DB       # mul added nothing itself
    assert by["y"].growth_db > -40 and report.ranked_layers(1) == ("add",)
    # relu's input is the graph input x, given only on the reference side: taken from there.
    assert by["a"].growth_db == pytest.approx(by["a"].error_db, abs=1e-3)
