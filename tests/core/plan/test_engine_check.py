"""The plan's held-back check carried to the engines: judged as the plan judges, and implicit INT8 as a pick.

What a real engine returns is exercised on the GPU (tests/gpu/test_measure.py); here the
verdicts are computed from outputs (numbers), and the file round trip is real.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from trtwidgets.core.common.errors import UserError
from trtwidgets.core.model.batch_axis import BatchAxes
from trtwidgets.core.plan.engine_check import CHECK_FILE, EngineCheck
from trtwidgets.core.plan.measured.measurement import FP16, INT8_IMPLICIT, QDQ, Measurement
from trtwidgets.core.plan.measured.repick import apply_measurements, candidate_job_name
from trtwidgets.core.plan.plan_accuracy import score_outputs
from trtwidgets.core.plan.plan_artifact import Plan
from trtwidgets.core.plan.plan_target import with_metric
from trtwidgets.core.plan.plan_values import EngineVerdict, PlanTarget

from .test_measured_plan import CANDS, make_plan


def _detector(seed=0, n=6, classes=3, anchors=64):
    """Held-back samples and a packed [N, 4+C, A] detector output with confident anchors."""
    rng = np.random.default_rng(seed)
    feeds = [{"images": rng.normal(size=(1, 3, 8, 8)).astype(np.float32)} for _ in range(n)]
    boxes = rng.uniform(10, 300, size=(n, 4, anchors)).astype(np.float32)
    boxes[:, 2:] = rng.uniform(20, 60, size=(n, 2, anchors))
    scores = rng.uniform(0, 0.1, size=(n, classes, anchors)).astype(np.float32)
    for i in range(n):
        scores[i, i % classes, rng.choice(anchors, 5, replace=False)] = 0.9
    return feeds, {"output0": np.concatenate([boxes, scores], axis=1)}


def _check(metric="detection", seed=0):
    """The check the planner makes (:func:`~trtwidgets.core.plan.phases.evaluator` builds the target the same way)."""
    feeds, ref = _detector(seed)
    target = with_metric(None, metric)
    made = target.metric_factory(ref, None, len(feeds))
    target = PlanTarget(cosine=None, metric=made.fn, metric_name=made.name, max_metric_drop=made.default_drop,
                        metric_spec=target.metric_spec)
    axes = BatchAxes({"images": 0}, {"output0": 0})
    return EngineCheck.of_plan(feeds, ref, axes, target, float(made.fn(ref)))


def _lose_scores(ref, frac=0.6):
    """The outputs with most confident class scores gone: boxes intact, so the pooled cosine stays high."""
    out = {k: v.copy() for k, v in ref.items()}
    s = out["output0"][:, 4:]
    hit = np.argwhere(s > 0.5)
    for i, c, a in hit[: int(len(hit) * frac)]:
        s[i, c, a] = 0.05
    return out


def test_an_engine_is_judged_by_the_task_metric_not_the_pooled_cosine():
    check = _check()
    assert check.judges and check.metric_reference == pytest.approx(1.0)
    same = check.verdict(check.outputs)
    assert same.meets is True and same.accuracy.metric == pytest.approx(1.0) and same.samples == 6
    lost = _lose_scores(check.outputs)
    assert score_outputs(check.outputs, lost).pooled_cosine > 0.999  # what an output cosine would have passed
    v = check.verdict(lost)
    assert v.meets is False and v.accuracy.metric < 0.95


def test_an_engine_with_nan_or_inf_outputs_fails_even_where_its_metric_does_not_see_them():
    check = _check()
    broken = {k: v.copy() for k, v in check.outputs.items()}
    broken["output0"][0, 0, :3] = np.nan  # three box coordinates of one anchor: the F1 barely moves
    broken["output0"][1, 1, 0] = np.inf
    v = check.verdict(broken)
    assert v.meets is False and v.non_finite is True and v.to_dict()["non_finite"] == 4  # counted since issue 32


def test_a_nan_metric_never_meets_the_target():
    from trtwidgets.core.plan.plan_values import PlanAccuracy

    target = PlanTarget(cosine=None, metric=lambda o: 0.0, metric_name="m", max_metric_drop=0.01)
    assert not PlanAccuracy(1.0, 60.0, metric=float("nan"), metric_reference=1.0).meets(target)
    assert PlanAccuracy(1.0, 60.0, metric=0.995, metric_reference=1.0).meets(target)


def test_the_check_file_round_trips_and_rebuilds_the_metric_from_its_spec(tmp_path):
    check = _check()
    path = check.save(tmp_path / CHECK_FILE)
    doc = make_plan(CANDS).to_dict()
    doc["target"] = dict(check.target.to_dict())
    assert doc["target"]["metric_spec"] == "detection"
    target = Plan.from_dict(json.loads(json.dumps(doc))).target  # as plan measure reads it back
    assert target.metric is None and target.metric_spec == "detection"
    loaded = EngineCheck.load(path, target)
    assert len(loaded.feeds) == 6 and loaded.axes.inputs == {"images": 0}
    np.testing.assert_array_equal(loaded.feeds[3]["images"], check.feeds[3]["images"])
    np.testing.assert_array_equal(loaded.outputs["output0"], check.outputs["output0"])
    lost = _lose_scores(check.outputs)
    assert loaded.verdict(lost).meets is False and loaded.verdict(loaded.outputs).meets is True
    assert loaded.verdict(lost).accuracy.metric == pytest.approx(check.verdict(lost).accuracy.metric)
    with np.load(path, allow_pickle=False) as z:  # plain arrays only: nothing to unpickle
        assert all(z[k].dtype != object for k in z.files)


def test_a_metric_that_cannot_travel_judges_by_the_cosine_or_not_at_all(tmp_path):
    check = _check()
    path = check.save(tmp_path / CHECK_FILE)
    metric_only = PlanTarget(cosine=None, metric_name="my_metric", max_metric_drop=0.01)  # a callable's plan, read back
    loaded = EngineCheck.load(path, metric_only)
    assert not loaded.judges and loaded.verdict(loaded.outputs).meets is None
    assert any("Python function" in n and "by nothing" in n for n in loaded.notes)
    loaded = EngineCheck.load(path, PlanTarget(cosine=0.99, metric_name="my_metric", max_metric_drop=0.01))
    assert loaded.judges and loaded.target.metric is None and not loaded.target.has_metric
    assert loaded.verdict(loaded.outputs).meets is True


@pytest.mark.parametrize("spec", ["no_such_module_here:score", "venv.__main__:x", "builtins:print", "this:x"])
def test_a_metric_the_file_names_is_looked_up_never_imported(tmp_path, spec):
    """Issue 32: plan.json's metric_spec once chose a module to import (venv.__main__:x ran venv's command line)."""
    import sys

    check = _check()
    path = check.save(tmp_path / CHECK_FILE)
    target = PlanTarget(cosine=0.99, metric_name="mine", max_metric_drop=0.01, metric_spec=spec)
    before = set(sys.modules)
    with pytest.raises(UserError, match="is not registered in this process") as err:
        EngineCheck.load(path, target)
    assert set(sys.modules) == before
    assert f"--metric {spec}" in err.value.fix and "remove held_back.npz" in err.value.fix


def test_a_registered_metric_the_file_names_judges_the_engines(tmp_path):
    from trtwidgets.core.accuracy.task_metrics import REGISTRY, register_metric

    check = _check()
    path = check.save(tmp_path / CHECK_FILE)
    register_metric("team_metrics_32:score", lambda reference, candidate: 0.5)
    try:
        target = PlanTarget(cosine=None, metric_name="mine", max_metric_drop=0.01, metric_spec="team_metrics_32:score")
        loaded = EngineCheck.load(path, target)
        assert loaded.judges and loaded.target.metric(loaded.outputs) == 0.5
    finally:
        REGISTRY.pop("team_metrics_32:score")


def test_a_file_of_another_kind_is_a_clear_error(tmp_path):
    from trtwidgets.core.plan.engine_check import folder_check

    bad = tmp_path / CHECK_FILE
    np.savez(bad, meta=np.array(json.dumps({"format": 99})))
    with pytest.raises(UserError, match="not a held-back check"):
        EngineCheck.load(bad, make_plan(CANDS).target)
    bad.write_bytes(b"PK\x03\x04 cut short")  # a corrupt file: the same clear error, not a zipfile traceback
    with pytest.raises(UserError, match="not a held-back check"):
        folder_check(tmp_path, make_plan(CANDS))
    bad.unlink()
    assert folder_check(tmp_path, make_plan(CANDS)) == (None, None)


def test_an_output_that_is_not_numbers_is_left_out_and_the_file_still_writes(tmp_path):
    feeds, ref = _detector()
    ref["labels"] = np.array([["a"], ["b"], ["c"], ["d"], ["e"], ["f"]], dtype=object)
    check = EngineCheck.of_plan(feeds, ref, BatchAxes({"images": 0}, {"output0": 0, "labels": 0}), None, None)
    assert list(check.outputs) == ["output0"]
    assert list(EngineCheck.load(check.save(tmp_path / CHECK_FILE), make_plan(CANDS).target).outputs) == ["output0"]


def test_the_check_keeps_at_most_its_size_and_says_so():
    feeds, ref = _detector()
    per_sample = feeds[0]["images"].nbytes + ref["output0"][0].nbytes  # a sample and FP32's output on it
    check = EngineCheck.of_plan(feeds, ref, BatchAxes({"images": 0}, {"output0": 0}), None, None,
                                max_bytes=3 * per_sample)
    assert len(check.feeds) == 3 and check.outputs["output0"].shape[0] == 3
    assert "first 3 of the 6" in check.notes[0]


# -- the pick, with the engines judged -----------------------------------------------------------

def _ms(name, times, kind=QDQ, accuracy=None):
    return Measurement(name, kind, tuple(times), accuracy=EngineVerdict.from_dict(accuracy) if accuracy else None)


MEETS = {"meets": True, "cosine": 0.998, "metric": 0.99, "metric_reference": 1.0, "samples": 8}
MISSES = {"meets": False, "cosine": 0.93, "metric": 0.71, "metric_reference": 1.0, "samples": 8}
# Five interleaved rounds: the fewest in which an engine can win another's paired rounds by the sign test.
FP16_MS = (0.80, 0.81, 0.80, 0.81, 0.80)
IMPLICIT_MS = (0.60, 0.61, 0.60, 0.61, 0.60)
ALL_MS = (0.70, 0.71, 0.70, 0.71, 0.70)
PAYS_MS = (0.75, 0.74, 0.75, 0.74, 0.75)


def _doc_and_names():
    p = make_plan(CANDS)
    return p, {i: candidate_job_name(i, p.candidates[i]) for i in (1, 2, 5)}


def test_implicit_int8_is_the_pick_when_its_engine_meets_the_target_and_it_is_fastest():
    doc, names = _doc_and_names()
    runs = [_ms("fp16", FP16_MS, FP16, MEETS), _ms("int8_implicit", IMPLICIT_MS, INT8_IMPLICIT, MEETS),
            _ms(names[1], ALL_MS, accuracy=MEETS), _ms(names[2], PAYS_MS, accuracy=MEETS)]
    out = apply_measurements(doc, runs, rounds=5, implicit_cache="/p/implicit_int8.cache")
    m = out.measured
    assert m.implicit_is_pick and m.implicit_cache == "/p/implicit_int8.cache" and m.pick.name == "int8_implicit"
    assert m.pick.candidate is None and m.implicit_row().engine.meets is True
    assert out.recommended == 1 and m.export.candidate == 1  # what plan export writes: the best Q/DQ
    assert out.reason.startswith("Implicit INT8") and "0.750x FP16" in out.reason
    assert "metric 0.9900 vs FP32 1.0000" in out.reason and "INT8 everywhere" in out.reason
    pick = out.to_dict()["measured"]["pick"]  # plan.json's record, as the zoo's files hold it
    assert pick["kind"] == INT8_IMPLICIT and pick["calibration_cache"] == "/p/implicit_int8.cache"
    assert pick["candidate"] is None and pick["accuracy"]["meets"] is True and pick["export"]["candidate"] == 1
    assert Plan.from_dict(json.loads(json.dumps(out.to_dict()))).measured.export == m.export


def test_implicit_int8_stays_a_reference_when_unjudged_missing_or_only_as_fast():
    doc, names = _doc_and_names()
    base = [_ms("fp16", FP16_MS, FP16), _ms(names[1], ALL_MS, accuracy=MEETS)]
    for implicit, why in ((_ms("int8_implicit", IMPLICIT_MS, INT8_IMPLICIT), "not checked on the engine"),
                          (_ms("int8_implicit", IMPLICIT_MS, INT8_IMPLICIT, MISSES), "misses the accuracy")):
        out = apply_measurements(doc, base + [implicit], rounds=5)
        assert out.measured.pick.candidate == 1 and not out.measured.implicit_is_pick
        assert "kind" not in out.to_dict()["measured"]["pick"]
        assert any(why in n for n in out.notes)
    # Fastest by median but not faster than the best Q/DQ export by the paired rounds (3 won, 1 lost, 1 tie): the
    # export wins (fixed accuracy, builds on TensorRT 10/11).
    tie = _ms("int8_implicit", (0.695, 0.69, 0.70, 0.72, 0.695), INT8_IMPLICIT, MEETS)
    out = apply_measurements(doc, base + [tie], rounds=5)
    assert out.measured.pick.candidate == 1
    assert any("not faster than" in n and "faster in 3 of 4 paired rounds" in n for n in out.notes)


def test_a_candidate_whose_engine_misses_the_target_is_not_picked_whatever_onnx_runtime_said():
    doc, names = _doc_and_names()
    runs = [_ms("fp16", FP16_MS, FP16), _ms(names[1], IMPLICIT_MS, accuracy=MISSES),
            _ms(names[2], ALL_MS, accuracy=MEETS)]
    out = apply_measurements(doc, runs, rounds=5)
    assert out.recommended == 2
    assert any(names[1] in n and "its engine misses it" in n for n in out.notes)
    assert "its engine meets the target on the held-back samples" in out.reason
    # An engine that could not be run is timed, not judged: ONNX Runtime's verdict stands.
    runs[1] = _ms(names[1], IMPLICIT_MS, accuracy={"meets": None, "error": "UserError: shape"})
    out = apply_measurements(doc, runs, rounds=5)
    assert out.recommended == 1 and any("timed, not judged" in n and "UserError: shape" in n for n in out.notes)


def test_measurements_keep_the_engine_accuracy_through_plan_json():
    m = _ms("int8_implicit", (0.6, 0.61, 0.6), INT8_IMPLICIT, MEETS)
    back = Measurement.from_dict(json.loads(json.dumps(m.to_dict())))
    assert back.accuracy.meets is True and back.accuracy.samples == 8 and back.accuracy.accuracy.metric == 0.99
    assert back.accuracy.to_dict() == m.accuracy.to_dict()
    assert Measurement.from_dict(_ms("x", (1.0,)).to_dict()).accuracy is None


def test_the_table_shows_each_engine_verdict_and_implicit_int8_as_the_measured_pick():
    from trtwidgets.core.plan.plan_table import plan_table

    doc, names = _doc_and_names()
    runs = [_ms("fp16", FP16_MS, FP16, MEETS), _ms("int8_implicit", IMPLICIT_MS, INT8_IMPLICIT, MEETS),
            _ms(names[1], ALL_MS, accuracy=MISSES), _ms(names[2], PAYS_MS, accuracy=MEETS)]
    lines = plan_table(apply_measurements(doc, runs, rounds=5)).splitlines()
    assert "on engine" in lines[0]
    assert lines[2].startswith("  INT8 everywhere") and "0.7100 miss" in lines[2]  # ONNX Runtime said it meets
    assert lines[3].startswith("->INT8 where it pays") and "0.9900   ok" in lines[3]
    assert lines[-1].startswith("=>implicit INT8") and "0.750" in lines[-1] and lines[-1].endswith("meets")
    # Unmeasured plans keep the old table: no engine column, no implicit row.
    assert "on engine" not in doc.table() and "implicit" not in doc.table()


def test_candidates_tied_by_the_paired_rounds_go_to_the_more_accurate_engine():
    """ONNX Runtime ranks the two alike; their engines do not: the engine's own accuracy decides the tie."""
    doc, names = _doc_and_names()
    better = dict(MEETS, cosine=0.9995, metric=1.0)
    runs = [_ms("fp16", FP16_MS, FP16),
            _ms(names[1], (0.600, 0.605, 0.602, 0.604, 0.603), accuracy=MEETS),
            _ms(names[2], (0.603, 0.606, 0.601, 0.603, 0.602), accuracy=better)]
    out = apply_measurements(doc, runs, rounds=5)
    assert out.recommended == 2 and "more accurate" in out.measured.pick.reason
