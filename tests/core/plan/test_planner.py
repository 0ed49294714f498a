"""The quantization planner: where INT8 pays, what accuracy costs, and FP16 as an answer."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import onnx
import pytest

from tests.core.plan.plan_models import conv_stack, feeds
from trtwidgets import demo
from trtwidgets.core.common.errors import UserError
from trtwidgets.core.plan.cost_model import layer_costs
from trtwidgets.core.plan.latency_oracle import node_aliases, read_oracle
from trtwidgets.core.plan.plan_artifact import Plan
from trtwidgets.core.plan.plan_values import PlanTarget
from trtwidgets.core.plan.planner import export_plan, plan
from trtwidgets.core.qdq.options import QdqOptions

TRT86 = Path(__file__).resolve().parents[2] / "fixtures" / "trt86"


def test_cost_model_int8_pays_only_for_large_work():
    model = conv_stack()
    big = layer_costs(model, {"x": (32, 64, 56, 56)})
    small = layer_costs(model, {"x": (1, 64, 8, 8)})
    assert set(big) == {"conv0", "conv1", "conv2", "conv3"}
    assert all(c.gain_us > 0.3 * c.fp16_us for c in big.values())  # compute bound: INT8 ~2x
    assert all(c.gain_us < 0.3 for c in small.values())  # launch bound: nothing to gain
    assert big["conv0"].macs == 32 * 56 * 56 * 64 * 64 * 9


def test_cost_model_charges_int8_for_the_channel_padding_of_an_image_stem():
    from onnx import helper, numpy_helper

    rng = np.random.default_rng(0)
    stem = helper.make_model(helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="stem", kernel_shape=[3, 3], pads=[1, 1, 1, 1])], "stem",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [32, 3, 224, 224])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [32, 64, 224, 224])],
        [numpy_helper.from_array(rng.standard_normal((64, 3, 3, 3)).astype(np.float32), "w")]))
    cost = layer_costs(stem, {"x": (32, 3, 224, 224)})["stem"]
    # 3 input channels run padded to 32 in INT8 (to 8 in FP16): INT8 does not pay for an RGB stem.
    assert cost.int8_us >= cost.fp16_us
    wide = layer_costs(conv_stack(), {"x": (32, 64, 56, 56)})["conv0"]
    assert wide.int8_us < 0.7 * wide.fp16_us


def test_plan_keeps_transformer_matmuls_float_for_tensorrt_8():
    from tests.core import qdq_blocks as qb
    from trtwidgets.core.qdq.myelin import MYELIN_REASON

    model = qb.encoder_layer(batch=1, seq=64, d=256)
    data = qb.feeds(model, n=6)
    old = plan(model, data, options=QdqOptions(trt_version="8.6"), batch_size=32, progress=False,
               target=PlanTarget(cosine=0.9))
    # All eight MatMuls (projections, MLP, and attention's two activation x activation products) go to Myelin.
    assert f"8 batched MatMuls kept in high precision: {MYELIN_REASON}" in old.notes
    # INT8 MatMuls in a transformer are outside what the cost model's zoo calibration supports (the zoo's ViT ran
    # 2.5-5.2x FP16 where it estimated 1.1x): "cannot estimate", never a number and never the reason for the pick.
    assert old.fp16_is_best and np.isnan(old.candidates[1].latency_us) and np.isfinite(old.candidates[0].latency_us)
    assert any(n.startswith("cannot estimate INT8 everywhere") and "transformer" in n for n in old.notes)
    assert "cannot est." in old.table() and "x FP16, estimate" not in old.reason
    # TensorRT 10+ runs them with its own kernels: the planner may quantize them.
    new = plan(model, data, options=QdqOptions(trt_version="10.16"), batch_size=32, progress=False,
               target=PlanTarget(cosine=0.9))
    assert not any(MYELIN_REASON in n for n in new.notes)
    assert not any(r == MYELIN_REASON for c in new.candidates for _, r in c.kept)


def test_export_plan_uses_the_placement_the_plan_was_scored_with():
    model = onnx.load(demo.MODEL_PATH)
    data = list(demo.iter_skimage_inputs(12))
    p = plan(model, data, shapes={"x": (32, 3, 48, 192)}, progress=False, target=PlanTarget(cosine=0.5))
    doc = p.to_dict()
    assert doc["placement"] == {"dense_int8": True}
    dense = export_plan(model, p, candidate=1)

    def rules(ex):
        return {r.split(" (")[0] for a in ex.report.activations for r in a.rules}

    def read(d):  # a plan.json's data, as Plan.load reads the file
        return Plan.from_dict(json.loads(json.dumps(d)))

    assert "grouped conv output" in rules(dense)
    assert p.options.dense_int8 is True and p.options.skip_matrix_vector is False
    assert doc["options"]["dense_int8"] is True and doc["options"]["skip_matrix_vector"] is False
    # The options win over the older fields: a plan scored without dense INT8 exports without it.
    sparse_doc = dict(doc, options=dict(doc["options"], dense_int8=False))
    assert "grouped conv output" not in rules(export_plan(model, read(sparse_doc), candidate=1))
    # A plan.json from before the options were recorded exports as it was scored: its placement field ...
    del doc["options"]
    assert rules(export_plan(model, read(doc), candidate=1)) == rules(dense)
    # ... and before the placement was recorded, with rule 6 (grouped convs float).
    del doc["placement"]
    old = export_plan(model, read(doc), candidate=1)
    assert "grouped conv output" not in rules(old)
    assert len(old.report.quantized_layers) < len(dense.report.quantized_layers)
    for bad in (["dense"], {"dense_int8": "yes"}):
        with pytest.raises(UserError, match="placement"):
            read(dict(doc, placement=bad))
    for bad in (["dense"], {"dense": True}, {"dense_int8": True, "precision": "int4"}):
        with pytest.raises(UserError, match="options|precision"):
            read(dict(doc, options=bad))
    with pytest.raises(UserError, match="takes a Plan, not a dict"):  # data is checked once, as a Plan
        export_plan(model, doc, candidate=1)


def test_plan_picks_int8_where_it_pays_and_meets_the_target():
    model = conv_stack()
    p = plan(model, feeds(), shapes={"x": (16, 64, 56, 56)}, progress=False, options=QdqOptions(trt_version="10.16"))
    pick = p.pick
    assert pick.quantized and pick.meets_target and pick.speedup > 1.3
    assert p.candidates[0].name.startswith("FP16") and not p.candidates[0].quantized
    assert p.high_precision == "fp16" and "faster than FP16" in p.reason
    ex = export_plan(model, p)
    assert ex is not None and set(ex.report.quantized_layers) == set(pick.quantized)
    assert ex.report.high_precision_dtype == "fp16"


def test_plan_says_fp16_when_int8_gains_nothing():
    model = conv_stack()
    p = plan(model, feeds(), shapes={"x": (1, 64, 8, 8)}, progress=False)
    assert p.fp16_is_best and p.reason.startswith("FP16 is best here")
    assert any("estimate" in n for n in p.notes)
    # Every INT8 candidate's layers that stay float say why.
    for c in p.candidates[1:]:
        assert all(reason for _, reason in c.kept)
    assert export_plan(model, p) is None


def test_plan_keeps_sensitive_layers_float_to_meet_a_strict_target():
    model = conv_stack()
    loose = plan(model, feeds(), shapes={"x": (16, 64, 56, 56)}, progress=False,
                 target=PlanTarget(cosine=0.9))
    strict_cos = max(c.accuracy.cosine for c in loose.candidates[1:3]) + 1e-5
    strict = plan(model, feeds(), shapes={"x": (16, 64, 56, 56)}, progress=False,
                  target=PlanTarget(cosine=min(strict_cos, 0.999999)))
    kept_for_accuracy = [c for c in strict.candidates if any("for accuracy" in r for _, r in c.kept)]
    assert kept_for_accuracy, strict.table()
    # Keeping layers float buys accuracy: the last such candidate beats the all-INT8 one.
    assert kept_for_accuracy[-1].accuracy.cosine > strict.candidates[1].accuracy.cosine


def test_plan_with_a_task_metric_factory():
    calls = {}

    def factory(reference, summary, samples):
        calls["samples"] = samples
        ref = reference["y"]
        return (lambda out: float(np.mean(np.sign(out["y"] - ref.mean()) == np.sign(ref - ref.mean())))), "sign agr."

    p = plan(conv_stack(), feeds(), shapes={"x": (16, 64, 56, 56)}, progress=False,
             target=PlanTarget(cosine=None, metric_factory=factory, max_metric_drop=0.5))
    assert calls["samples"] == 6
    assert p.target.metric_name == "sign agr." and p.candidates[1].accuracy.metric is not None


def test_plan_json_round_trip(tmp_path):
    p = plan(conv_stack(), feeds(), shapes={"x": (16, 64, 56, 56)}, progress=False)
    path = p.save(tmp_path)
    back = Plan.load(tmp_path)
    assert back.recommended == p.recommended and [c.name for c in back.candidates] == [c.name for c in p.candidates]
    assert back.to_dict() == json.loads(path.read_text())  # loaded and written again: the same file
    assert back.ranges.method == p.ranges.method in ("auto", "entropy", "percentile", "mse", "max")
    assert back.ranges.amax == p.ranges.amax and back.options == p.options and back.fingerprint == p.fingerprint
    assert back.target == p.target and back.estimate == p.estimate and back.measured is None
    assert back.pick.quantized == p.pick.quantized and back.pick.accuracy.cosine == pytest.approx(p.pick.accuracy.cosine)
    assert (tmp_path / "held_back.npz").is_file()  # what `plan measure` judges the engines by
    ex = export_plan(conv_stack(), back)
    assert ex is not None and set(ex.report.quantized_layers) == set(p.pick.quantized)
    # A field the planner does not write (a newer version's) is kept as it was.
    (tmp_path / "plan.json").write_text(json.dumps(dict(back.to_dict(), future={"x": [1]})))
    assert Plan.load(tmp_path).to_dict()["future"] == {"x": [1]}


def test_a_plan_prints_a_short_summary():
    p = plan(conv_stack(), feeds(), shapes={"x": (16, 64, 56, 56)}, progress=False)
    text = repr(p)
    assert len(text) < 2000 and text.count("\n") < 16
    assert f"pick {p.recommended} ({p.pick.name}" in text and "latency estimate" in text
    assert "->" in text and p.reason[:40] in text and "plan.table()" in text
    many = dataclasses.replace(p, candidates=p.candidates * 20)  # a long search: a few rows and a count
    assert len(repr(many)) < 2000 and "more candidates" in repr(many)


def test_plan_refuses_too_little_data_and_bad_targets():
    with pytest.raises(UserError, match="at least 2 samples"):
        plan(conv_stack(), feeds(1), progress=False)
    with pytest.raises(UserError, match="no accuracy target"):
        PlanTarget(cosine=None)
    with pytest.raises(UserError, match="outside"):
        PlanTarget(cosine=2.0)


def test_oracle_from_real_trt86_builds_names_the_demo_layers():
    proto = onnx.load(demo.MODEL_PATH)
    aliases = node_aliases(proto)
    assert aliases["Conv@0"] == aliases["Conv@0"] and "Conv@52" in aliases
    oracle = read_oracle(TRT86 / "cls_static_int8_entropy2", proto)
    # TensorRT 8.6 timed FP16 faster for every layer of this batch-1 build (a real H200 build).
    assert oracle.layers and not [n for n, layer in oracle.layers.items() if layer.precision == "INT8"]
    assert all(layer.latency_ms is None or layer.latency_ms >= 0 for layer in oracle.layers.values())


def test_plan_with_the_oracle_follows_tensorrt():
    data = list(demo.iter_skimage_inputs(16))
    p = plan(demo.MODEL_PATH, data, oracle=TRT86 / "cls_static_int8_entropy2", progress=False)
    assert p.fp16_is_best
    assert p.candidates[0].latency_source == "oracle"
    assert any("implicit INT8 build" in n for n in p.notes)


def test_oracle_of_another_model_is_refused():
    with pytest.raises(UserError, match="names a weighted node"):
        read_oracle(TRT86 / "cls_static_int8_entropy2", conv_stack())


def test_an_interrupted_search_keeps_the_candidates_it_measured():
    def on_event(e):
        if e.kind == "start" and e.phase.startswith("measuring"):  # Ctrl-C while layers are being ranked
            raise KeyboardInterrupt

    p = plan(conv_stack(), feeds(), shapes={"x": (16, 64, 56, 56)}, progress=on_event,
             target=PlanTarget(cosine=0.9999999))
    assert p.interrupted and len(p.candidates) >= 3
    assert any(n.startswith("interrupted") for n in p.notes)
    assert p.to_dict()["interrupted"] is True and p.latency_status == "estimate"


def test_an_interrupt_before_any_candidate_propagates():
    def on_event(e):
        if e.kind == "start" and e.phase.startswith("choosing"):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        plan(conv_stack(), feeds(), progress=on_event)


def test_plan_takes_the_calibration_and_writes_the_pick(tmp_path):
    import trtwidgets as tw

    model = tw.load(demo.MODEL_PATH)
    data = list(demo.iter_skimage_inputs(12))
    cal = tw.calibrate(model, "demo", method="max", progress=False, max_samples=8)
    tensor = tw.export_qdq(model, cal).report.activations[3].tensor
    cal = cal.refit(overrides={tensor: 0.75})
    p = tw.plan(model, data, calibration=cal, shapes={"x": (32, 3, 48, 192)}, progress=False,
                target=tw.PlanTarget(cosine=0.5))
    # The calibration's statistics, its own method first, its overrides in every method.
    assert p.ranges.statistics.startswith("the given calibration (max ranges from the calibration, 1 amax")
    assert list(p.ranges.per_method)[0] == "max" and p.ranges.overrides == {tensor: 0.75}
    assert p.ranges.amax[tensor] == 0.75
    assert any(n.startswith("ranges: the given calibration") for n in p.notes)
    # The pick (here: candidate 1, INT8 everywhere) written to disk, as it was scored.
    out = tmp_path / "pick.qdq.onnx"
    ex = tw.export_plan(model, p, out, candidate=1)
    assert out.is_file() and {a.tensor: a.amax for a in ex.report.activations}[tensor] == 0.75
    p.save_json(tmp_path / "plan.json")
    again = tw.export_plan(model, tmp_path / "plan.json", candidate=1)
    assert again.report.quantized_layers == ex.report.quantized_layers
    assert tw.export_plan(model, p, tmp_path / "fp16.onnx", candidate=0) is None
    assert not (tmp_path / "fp16.onnx").exists()


def test_the_search_stops_when_every_layer_alone_misses_the_target():
    """Issue 42: a ViT-S plan under a task metric ranked every layer, tuned ranges and bisected (100 s) to find
    what its least costly layer alone already said: no INT8 candidate meets the target."""
    steps = []
    p = plan(conv_stack(), feeds(), shapes={"x": (16, 64, 56, 56)}, target=PlanTarget(cosine=0.99999), regions=False,
             progress=lambda e: steps.append(e.phase) if e.kind == "start" else None)
    names = [c.name for c in p.candidates]
    assert "INT8 in the 1 layer costing least" in names and not any("most worth it" in n for n in names)
    assert any(n.startswith("every layer alone misses the target in INT8") for n in p.notes)
    assert not any(s.startswith("choosing per-tensor ranges") or s.startswith("finding how many") for s in steps)
    assert all(not c.meets_target for c in p.candidates if c.quantized)


def test_the_early_stop_gives_the_decision_the_whole_search_gives(monkeypatch):
    """Issue 42: the stop when every layer alone misses skips per-tensor ranges and the bisection, and only them:
    the search carried on to the end (the stop turned off) picks the same candidate for the same reason."""
    import trtwidgets.core.plan.accuracy_search as search

    kw = dict(shapes={"x": (16, 64, 56, 56)}, progress=False, target=PlanTarget(cosine=0.99999), regions=False)
    stopped = plan(conv_stack(), feeds(), **kw)
    monkeypatch.setattr(search, "every_layer_misses", lambda *args: None)
    carried_on = plan(conv_stack(), feeds(), **kw)
    assert any("most worth it" in c.name for c in carried_on.candidates)  # the bisection ran, and found nothing
    assert not any(c.meets_target for c in carried_on.candidates if c.quantized)
    pick = [(p.pick.name if p.pick is not None else None, p.reason) for p in (stopped, carried_on)]
    assert pick[0] == pick[1]
    assert len(stopped.candidates) < len(carried_on.candidates)
