"""A plan picked again by measured latency; the estimate's own record; unknown estimates never picked."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
from trtwidgets.core.common.errors import UserError

from trtwidgets.core.plan.judge import Judge
from trtwidgets.core.plan.measured.measurement import FP16, INT8_IMPLICIT, QDQ, Measurement
from trtwidgets.core.plan.measured.repick import (apply_measurements, candidate_job_name, finish_latency,
                                                  measure_targets, measurement_source)
from trtwidgets.core.plan.measured.standing import EstimateStanding, estimate_error_entries, estimate_text
from trtwidgets.core.plan.plan_artifact import Plan
from trtwidgets.core.plan.plan_table import measured_rows_by_candidate, plan_table
from trtwidgets.core.plan.plan_values import Candidate, PlanAccuracy, PlanRanges, PlanTarget

GOOD = PlanAccuracy(0.999, 30.0)
BAD = PlanAccuracy(0.95, 10.0)
TARGET = PlanTarget(cosine=0.99)


def cand(name, layers, us, acc=GOOD, fp16_us=100.0, source="estimate"):
    return Candidate(name, tuple(layers), (), acc, us, fp16_us, source, acc.meets(TARGET))


def make_plan(cands):
    best, reason = Judge(TARGET).pick(cands)
    return Plan(model="m.onnx", target=TARGET, candidates=tuple(cands), recommended=best, reason=reason,
                input_shapes={"x": (32, 3, 64, 64)}, ranges=PlanRanges(amax={"x": 1.0}))


# FP16, everything in INT8 (estimated fastest, measured slow, like issue 24's detector), a smaller region
# with ranges tuned (same placement as the region: one build), a region that misses the target, and one more.
CANDS = [cand("FP16 (no INT8)", (), 100.0), cand("INT8 everywhere", ("a", "b", "c", "d"), 68.0),
         cand("INT8 where it pays", ("a", "b"), 90.0), cand("INT8 where it pays (tuned ranges)", ("b", "a"), 90.0),
         cand("too lossy", ("a", "b", "c"), 70.0, acc=BAD), cand("INT8 in the 1 layers most worth it", ("a",), 95.0)]


def ms(name, times, kind=QDQ, layers=(), est=float("nan")):
    return Measurement(name, kind, tuple(times), estimate_ms=est, int8_layers=frozenset(layers))


def test_targets_are_the_estimate_pick_then_the_fastest_distinct_placements_that_meet_the_target():
    p = make_plan(CANDS)
    assert p.recommended == 1
    assert measure_targets(p) == [1, 2, 5]  # 3 is 2's placement; 4 misses the target
    assert measure_targets(p, top=1) == [1]
    assert measure_targets(make_plan(CANDS[:1])) == []  # FP16 alone: nothing to build but FP16


def test_the_pick_goes_by_measurement_and_a_slower_candidate_falls_back_to_fp16_saying_so():
    p = make_plan(CANDS)
    names = {i: candidate_job_name(i, p.candidates[i]) for i in (1, 2, 5)}
    slow = [ms("fp16", (0.631, 0.628, 0.634, 0.630, 0.629), FP16, est=0.1),
            ms("int8_implicit", (0.629, 0.633, 0.630, 0.631, 0.628), INT8_IMPLICIT),
            ms(names[1], (1.15, 1.22, 1.13, 1.14, 1.16), est=0.068),
            ms(names[2], (0.70, 0.71, 0.69, 0.70, 0.70), est=0.09),
            ms(names[5], (0.64, 0.65, 0.64, 0.65, 0.64), est=0.095)]
    out = apply_measurements(p, slow, rounds=5, built=5)
    assert out.recommended == 0 and out.reason.startswith("FP16 is best here (measured)")
    assert "The estimate had picked INT8 everywhere" in out.reason
    assert any("slower than FP16" in n and "never recommended" in n for n in out.notes)
    assert out.latency_status == "measured" and out.measured.estimate_pick == 1 and out.estimate is None
    # The fastest candidate that wins FP16's paired rounds wins, even if the estimate ranked it lower.
    fast = slow[:2] + [ms(names[1], (1.15, 1.22, 1.13, 1.14, 1.16)), ms(names[2], (0.55, 0.56, 0.555, 0.55, 0.56)),
                       ms(names[5], (0.60, 0.61, 0.60, 0.61, 0.60))]
    out = apply_measurements(p, fast, rounds=5)
    assert out.recommended == 2
    assert out.reason.startswith("INT8 where it pays: measured 0.8") and "5 interleaved rounds" in out.reason
    assert "faster in 5 of 5 paired rounds (one-sided sign test p = 0.031)" in out.reason
    assert out.measured.pick.candidate == 2 and p.recommended == 1  # the input is not changed


def test_measurements_sit_beside_estimates_and_round_trip_through_plan_json(tmp_path):
    p = make_plan(CANDS)
    name = candidate_job_name(2, p.candidates[2])
    out = apply_measurements(p, [ms("fp16", (1.0, 1.02, 0.99, 1.01, 1.0), FP16, est=0.1),
                                 ms(name, (0.80, 0.81, 0.79, 0.80, 0.80), layers=("a", "b"), est=0.09)],
                             rounds=5, built=2, cached=0, shapes={"x": (32, 3, 64, 64)}, settings={"gpu": "X"})
    out.save(tmp_path)
    back = Plan.load(tmp_path)
    rows = measured_rows_by_candidate(back)
    assert set(rows) == {0, 2}
    assert rows[2].vs_fp16 == pytest.approx(0.80 / 1.0) and rows[2].estimate_vs_fp16 == pytest.approx(0.9)
    assert rows[2].estimate_error == pytest.approx(0.9 / 0.8 - 1)
    m = back.measured.measurements[1]
    assert m.round_ms == (0.80, 0.81, 0.79, 0.80, 0.80) and m.median_ms == pytest.approx(0.80)
    assert back.measured.pick.paired == out.measured.pick.paired and back.measured.pick.paired.won == 5
    odd = json.loads(json.dumps(out.to_dict()))
    odd["measured"]["pick"]["paired"]["won"] = "most"
    with pytest.raises(UserError, match="measured.pick.paired"):
        Plan.from_dict(odd)
    assert back.measured.shapes == {"x": (32, 3, 64, 64)} and back.measured.settings == {"gpu": "X"}
    assert back.measured == out.measured and back.to_dict() == json.loads(json.dumps(out.to_dict()))
    doc = json.loads((tmp_path / "plan.json").read_text())  # the file's record: rows for readers without the package
    assert doc["measured"]["rows"][1]["vs_fp16"] == pytest.approx(0.8) and doc["measured"]["pick"]["candidate"] == 2
    table = plan_table(back)
    assert "meas. x FP16" in table and "0.800" in table
    assert table.splitlines()[3].startswith("->")  # candidate 2 is the pick


def test_an_interrupted_run_keeps_what_was_measured_as_partial():
    p = make_plan(CANDS)
    name = candidate_job_name(2, p.candidates[2])
    out = apply_measurements(p, [ms("fp16", (1.0,) * 5, FP16), ms(name, (0.7,) * 5),
                                 Measurement(candidate_job_name(5, p.candidates[5]), QDQ,
                                             error="interrupted before its build")],
                             rounds=5, interrupted=True, built=2)
    assert out.measured.status == "partial" and out.measured.interrupted
    assert out.reason.startswith("Partial measurement (interrupted; 5 rounds)")
    assert out.recommended == 2
    assert any("interrupted before its build" in n for n in out.notes)
    # One round cannot tell a gain from chance: FP16, and the reason says how many rounds can.
    one = apply_measurements(p, [ms("fp16", (1.0,), FP16), ms(name, (0.7,))], rounds=1, interrupted=True)
    assert one.recommended == 0 and one.reason.startswith("Partial measurement (interrupted; 1 round): FP16")
    assert "1 cannot reach p < 0.05, 5 can" in one.reason
    # Interrupted before FP16 had a time: nothing is judged, the estimate's pick stays and says so.
    none = apply_measurements(p, [Measurement("fp16", FP16, error="interrupted before its build")], rounds=0,
                              interrupted=True)
    assert none.recommended == 1 and none.measured.status == "partial" and none.measured.pick is None
    assert "Not measured" in none.reason and "plan measure" in none.reason
    back = Plan.from_dict(json.loads(json.dumps(none.to_dict())))
    assert back.measured.pick is None and back.to_dict() == json.loads(json.dumps(none.to_dict()))


def test_an_unknown_estimate_is_never_a_reason_to_pick():
    nan = [cand("FP16 (no INT8)", (), 100.0), cand("INT8 everywhere (max)", ("a", "b"), math.nan)]
    best, reason = Judge(TARGET).pick(nan)
    assert best == 0 and "Cannot estimate the latency" in reason and "plan measure" in reason
    assert "nan" not in reason.lower().replace("cannot", "")
    # Unknown FP16 too: every speed-up is unknown.
    best, reason = Judge(TARGET).pick([cand("FP16 (no INT8)", (), math.nan, fp16_us=math.nan),
                                       cand("q", ("a",), 50.0, fp16_us=math.nan)])
    assert best == 0 and "Cannot estimate" in reason
    # A known candidate still wins over an unknown one; the plan names the unknown one.
    mixed = nan + [cand("INT8 where it pays", ("a",), 80.0)]
    p = finish_latency(make_plan(mixed), "m.onnx", None)
    assert p.recommended == 2 and any("Cannot estimate INT8 everywhere (max)" in n for n in p.notes)
    # Measured, the unknown candidate can win: its estimate was never needed.
    unknown = make_plan(nan)
    out = apply_measurements(unknown, [ms("fp16", (1.0,) * 5, FP16),
                                       ms(candidate_job_name(1, unknown.candidates[1]), (0.5,) * 5)], rounds=5)
    assert measure_targets(unknown) == [1] and out.recommended == 1


def test_a_plan_that_was_not_measured_says_it_is_an_estimate_and_how_far_estimates_were_off(tmp_path):
    p = finish_latency(make_plan(CANDS), "m.onnx", None)
    assert p.latency_status == "estimate" and p.measured is None and "Not measured" in p.reason
    assert Plan.from_dict(json.loads(json.dumps(p.to_dict()))).estimate == p.estimate
    entries = estimate_error_entries("estimate")
    assert entries and all(e["latency_source"] == "estimate" for e in entries)
    text = estimate_text("estimate")
    # One line (issue 32: the zoo's cases made a 1,700-character sentence); the cases are the standing's rows.
    printed = [e for e in entries if not e.get("cannot_estimate")]
    assert len(text) < 300 and "\n" not in text and f"on {len(printed)} zoo engines" in text
    rows = p.estimate.rows()
    assert len(rows) == len(entries)
    for e, row in zip(entries, rows):  # the committed zoo ratios, as a table's rows
        estimated = "cannot estimate" if e.get("cannot_estimate") else f"{e['estimated_x_fp16']:.2f}"
        assert row[1:3] == (estimated, f"{e['measured_x_fp16']:.2f}")
    assert p.notes[-1] == text and "plan measure PLAN_DIR" in text
    odd = EstimateStanding("estimate", ({"model": "m", "estimated_x_fp16": "fast", "measured_x_fp16": None}, 3))
    assert odd.rows() == [("m b?", "-", "-", "?, TensorRT ?")]  # a plan.json's entries, as they are
    empty = tmp_path / "estimate_error.json"
    empty.write_text(json.dumps({"entries": []}))
    assert "not yet measured" in estimate_text("estimate", empty)
    assert EstimateStanding.of("oracle", empty).zoo == () and estimate_error_entries(path=tmp_path / "none") == []


def test_the_committed_estimate_errors_are_what_the_zoo_results_say():
    import subprocess
    import sys

    from tests.conftest import ROOT

    proc = subprocess.run([sys.executable, "benchmarks/estimate_error.py", "--check"], cwd=ROOT, capture_output=True,
                          text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_a_measurement_source_is_used_as_given_and_skipped_after_an_interrupt():
    seen = []

    def source(plan, model):
        seen.append(model)
        return plan

    p = make_plan(CANDS)
    assert measurement_source(False) is None and measurement_source(source) is source
    assert finish_latency(p, "m.onnx", source) is not None and seen == ["m.onnx"]
    cut = finish_latency(dataclasses.replace(p, interrupted=True), "m.onnx", source)
    assert seen == ["m.onnx"] and any("not measured: the search was interrupted" in n for n in cut.notes)


def test_candidates_as_fast_by_the_paired_rounds_go_to_the_more_accurate():
    lossy = PlanAccuracy(0.992, 19.0)
    cands = [cand("FP16 (no INT8)", (), 100.0), cand("all", ("a", "b"), 60.0, acc=lossy), cand("some", ("a",), 70.0)]
    p = make_plan(cands)
    n1, n2 = candidate_job_name(1, p.candidates[1]), candidate_job_name(2, p.candidates[2])
    fp16 = ms("fp16", (1.0, 1.01, 0.99, 1.0, 1.02), FP16)
    # "all" is faster by median but wins only 3 of the 5 pairs against "some": as fast, and less accurate.
    n1_ms, n2_ms = (0.80, 0.81, 0.79, 0.80, 0.81), (0.805, 0.80, 0.805, 0.81, 0.80)
    tied = apply_measurements(p, [fp16, ms(n1, n1_ms), ms(n2, n2_ms)], rounds=5)
    assert tied.recommended == 2 and "more accurate" in tied.measured.pick.reason
    assert "faster in 3 of 5 paired rounds" in tied.measured.pick.reason and tied.measured.pick.paired.won == 5
    clear = apply_measurements(p, [fp16, ms(n1, (0.70, 0.705, 0.70, 0.70, 0.71)), ms(n2, n2_ms)], rounds=5)
    assert clear.recommended == 1  # it wins every pair against the other: the faster wins


def test_core_takes_a_source_and_leaves_measure_true_to_the_api():
    # Core never imports TensorRT's side: True is turned into a source by trtwidgets.plan.
    with pytest.raises(UserError, match="measure=True") as err:
        measurement_source(True)
    assert "trtwidgets.plan" in err.value.fix


def test_fp16_is_judged_like_every_candidate_and_a_plan_may_recommend_nothing(tmp_path):
    """Issue 42: an FP16 engine that outputs NaN was recommended because FP16 was the fallback. FP16 that misses
    the target is no baseline: an accurate INT8 candidate is picked whatever its speed, and without one nothing is."""
    nan_fp16 = cand("FP16 (no INT8)", (), 100.0, acc=PlanAccuracy(0.9999, 60.0, non_finite=7))
    slow_int8 = cand("INT8 where it pays", ("a",), 120.0)  # slower than FP16 by the estimate, but accurate
    p = make_plan([nan_fp16, slow_int8])
    assert p.recommended == 1 and "FP16 misses it (7 output values are NaN or Inf" in p.reason
    lossy = cand("INT8 everywhere", ("a", "b"), 60.0, acc=BAD)
    p = make_plan([nan_fp16, lossy])
    assert p.recommended is None and p.pick is None and not p.fp16_is_best
    assert p.reason.startswith("No candidate meets the target, not even FP16") and "--keep-fp32" in p.reason
    # plan.json says null, and reads back as such; its table marks no row.
    p.save_json(tmp_path / "plan.json")
    assert json.loads((tmp_path / "plan.json").read_text())["recommended"] is None
    back = Plan.load(tmp_path / "plan.json")
    assert back.recommended is None and "->" not in back.table()
    # Measured: FP16's engine misses the target (its verdict), and so does every candidate: nothing is picked.
    names = {1: candidate_job_name(1, p.candidates[1])}
    out = apply_measurements(make_plan([nan_fp16, slow_int8]), [ms("fp16", (0.5, 0.5, 0.5), FP16),
                                                                 ms(names[1], (0.7, 0.7, 0.7))], rounds=3)
    assert out.recommended == 1 and "misses the target" in " ".join(out.measured.pick.notes)


def test_plan_export_refuses_a_plan_that_recommends_nothing(tmp_path):
    from tests.core.plan.plan_models import conv_stack
    from trtwidgets.core.plan.plan_export import export_plan

    nan_fp16 = cand("FP16 (no INT8)", (), 100.0, acc=PlanAccuracy(0.9999, 60.0, non_finite=7))
    p = make_plan([nan_fp16, cand("INT8 everywhere", ("a", "b"), 60.0, acc=BAD)])
    with pytest.raises(UserError, match="recommends nothing") as err:
        export_plan(conv_stack(), p)
    assert "--candidate N" in err.value.fix
