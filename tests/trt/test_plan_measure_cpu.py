"""Measuring a plan, on the CPU: the jobs a real plan asks for, the re-pick, Ctrl-C and the no-GPU errors.

TensorRT is absent here, so the measurement source (the edge: ``measure_fn``, which on
the GPU machine is :func:`trtwidgets.trt.measure.measure`) is a stand-in that returns
times; everything on either side of it is the real code. ``tests/gpu/test_plan_measure.py``
runs the same path on TensorRT.
"""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import onnx
import pytest

from tests.core.plan.plan_models import conv_stack, feeds
from trtwidgets import trt
from trtwidgets.cli import main
from trtwidgets.core.plan.measured.measurement import FP16, INT8_IMPLICIT, QDQ, Measurement
from trtwidgets.core.plan.plan_artifact import Plan
from trtwidgets.core.plan.plan_values import EngineVerdict
from trtwidgets.core.plan.planner import plan
from trtwidgets.core.qdq.options import QdqOptions
from trtwidgets.trt.build_phases.result import ENGINE_FILE
from trtwidgets.trt.measure import MeasureJob, MeasureProgress, MeasureReport, measure
from trtwidgets.trt.measure_builds import build_all, build_specs
from trtwidgets.trt.plan_measure import measure_plan

pytestmark = pytest.mark.skipif(trt.available(), reason="TensorRT is installed: tests/gpu measure for real")

BIG = {"x": (16, 64, 56, 56)}  # compute bound: INT8 pays, so the plan has INT8 candidates


class StandIn:
    """A measurement source that times each job as told (ms per job kind / candidate), and records the jobs."""

    def __init__(self, times, interrupted=False, accuracy=None):
        self.times, self.interrupted, self.jobs, self.kw = times, interrupted, [], {}
        self.accuracy = accuracy or {}  # job kind -> the engine's verdict, as a judged run records it

    def __call__(self, jobs, cache_dir, **kw):
        self.jobs, self.kw = list(jobs), dict(kw, cache_dir=cache_dir)
        out = []
        for j in jobs:
            t = self.times.get(j.name, self.times.get(j.kind))
            out.append(Measurement(j.name, j.kind, tuple(t or ()), _key(j), j.estimate_ms,
                                   j.int8_layers, error="" if t else "interrupted before its build",
                                   accuracy=self.accuracy.get(j.kind)))
        if callable(kw.get("progress")):
            kw["progress"](MeasureProgress.of("build", 1, len(jobs), jobs[0].name))
        return MeasureReport(tuple(out), rounds=min((len(t) for t in self.times.values()), default=0),
                             interrupted=self.interrupted, built=len(jobs), shapes=dict(kw.get("shapes") or {}))


def _key(job):
    """A build key per distinct build: the model for FP16 and the candidates, the kind for implicit INT8."""
    return f"key-{job.kind}" if job.kind == INT8_IMPLICIT else f"key-{job.model_path}"


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("m") / "stack.onnx"
    onnx.save(conv_stack(), path)
    return path


@pytest.fixture(scope="module")
def cpu_plan(model_path):
    return plan(model_path, feeds(16), shapes=BIG, options=QdqOptions(trt_version="8.6"), progress=False)


def test_a_plan_measured_builds_fp16_implicit_and_its_candidates_and_picks_by_time(cpu_plan, model_path, tmp_path):
    assert cpu_plan.latency_status == "estimate" and cpu_plan.measured is None and not cpu_plan.fp16_is_best
    events = []
    source = StandIn({FP16: (1.0, 1.01, 0.99, 1.0, 1.0), INT8_IMPLICIT: (0.8,) * 5, QDQ: (1.3, 1.31, 1.29, 1.3, 1.3)})
    out = measure_plan(cpu_plan, model_path, work_dir=tmp_path / "w", cache_dir=tmp_path / "engines",
                       measure_fn=source, progress=events.append)
    kinds = [j.kind for j in source.jobs]
    assert kinds[:2] == [FP16, INT8_IMPLICIT] and set(kinds[2:]) == {QDQ} and len(kinds) >= 3
    assert source.kw["shapes"] == BIG and source.kw["rounds"] == 5 and source.kw["cache_dir"] == tmp_path / "engines"
    implicit = source.jobs[1]
    assert implicit.model_path == str(model_path) and (tmp_path / "w" / "implicit_int8.cache").is_file()
    placements = set()
    for j in source.jobs[2:]:  # each candidate exported as it was scored, one per distinct placement
        q = onnx.load(j.model_path)
        assert any(n.op_type == "QuantizeLinear" for n in q.graph.node)
        assert j.int8_layers not in placements and np.isfinite(j.estimate_ms)
        placements.add(j.int8_layers)
    # Every candidate measured slower than FP16: FP16 is the pick, and the plan says why.
    assert out.recommended == 0 and out.reason.startswith("FP16 is best here (measured)")
    assert out.measured.status == "measured" and out.measured.settings["gpu"] == "unknown" and out.estimate is None
    assert [e.stage for e in events] == ["build"] and "builds 1/" in events[0].text()
    # The same plan measured faster: its estimate's pick wins by measurement.
    faster = measure_plan(cpu_plan, model_path, work_dir=tmp_path / "w",
                          measure_fn=StandIn({FP16: (1.0,) * 5, QDQ: (0.6, 0.61, 0.6, 0.6, 0.6)}), implicit=False)
    assert faster.recommended != 0 and "measured 0.6" in faster.reason


def test_the_plan_hands_its_held_back_check_to_the_measurement(cpu_plan, model_path, tmp_path):
    """Every engine measured is judged on the plan's held-back samples; one that cannot run is timed, not judged."""
    check = cpu_plan.engine_check
    assert check is not None and len(check.feeds) == len(cpu_plan.held_back.held_back)
    source = StandIn({FP16: (1.0,) * 5, INT8_IMPLICIT: (0.5,) * 5, QDQ: (0.7,) * 5})
    out = measure_plan(cpu_plan, model_path, work_dir=tmp_path / "w", measure_fn=source)
    verdict = source.kw["check"](str(tmp_path / "no-engine"))  # no TensorRT here: a result saying why, not a raise
    assert isinstance(verdict, EngineVerdict) and verdict.meets is None and verdict.error
    assert out.measured.check.to_dict() == {"samples": len(check.feeds), "judged": True, "notes": []}
    # The stand-in judged nothing: implicit INT8 stays a reference, the Q/DQ candidate is the pick.
    assert out.recommended != 0 and not out.measured.implicit_is_pick
    assert any("implicit INT8 (reference, not a candidate: its accuracy was not checked" in n for n in out.notes)


def test_an_implicit_pick_names_the_calibration_cache_kept_beside_its_engine(cpu_plan, model_path, tmp_path):
    """The work folder of tw.plan(measure=True) is temporary; the engine cache keeps the implicit build's folder."""
    engines = tmp_path / "engines"
    (engines / f"key-{INT8_IMPLICIT}").mkdir(parents=True)
    (engines / f"key-{INT8_IMPLICIT}" / "calibration.cache").write_text("TRT-8600-EntropyCalibration2\n")
    meets = EngineVerdict.from_dict({"meets": True, "cosine": 0.999, "metric": None, "metric_reference": None,
                                     "samples": 4})
    source = StandIn({FP16: (1.0,) * 5, INT8_IMPLICIT: (0.5,) * 5, QDQ: (0.7,) * 5},
                     accuracy={FP16: meets, INT8_IMPLICIT: meets, QDQ: meets})
    out = measure_plan(cpu_plan, model_path, cache_dir=engines, measure_fn=source)
    cache = str(engines / f"key-{INT8_IMPLICIT}" / "calibration.cache")
    assert out.measured.implicit_is_pick and out.measured.pick.name == "int8_implicit"
    assert out.measured.implicit_cache == cache and out.reason.startswith("Implicit INT8") and cache in out.reason
    assert out.recommended != 0  # the fastest Q/DQ export stays what plan export writes


def _builds_only(jobs, cache_dir, shapes=None, opt_level=None, **_):
    """The build side of :func:`measure` as it is (build keys, the engine cache, builds that fail here for want of
    TensorRT), without the timing, which needs a GPU."""
    key_of, specs = build_specs(jobs, cache_dir, shapes or {}, opt_level, {})
    built, _ = build_all(specs, False, 0, cache_dir)
    return MeasureReport(tuple(Measurement(j.name, j.kind, (), key_of[j.name], cached=built[key_of[j.name]]["cached"],
                                           error=built[key_of[j.name]]["error"]) for j in jobs), rounds=0)


def test_a_plan_measured_again_after_its_ranges_changed_rebuilds_its_candidates(cpu_plan, model_path, tmp_path):
    """Issue 44: an engine is found in the cache only for the export that made it, Q/DQ scales included.

    The first measurement's engines are put in the cache as a GPU run leaves them (a published build folder per
    key); the same plan measured again finds every one, and the plan with other ranges finds FP16's only: each of
    its candidates is built again, so its held-back check judges its own engine.
    """
    engines = tmp_path / "engines"
    kw = dict(cache_dir=engines, measure_fn=_builds_only, implicit=False, regions=False)
    first = measure_plan(cpu_plan, model_path, work_dir=tmp_path / "w1", **kw).measured.measurements
    assert len(first) >= 2 and all(not m.cached and "TensorRT" in m.error for m in first)
    for m in first:
        (engines / m.key).mkdir(parents=True, exist_ok=True)
        (engines / m.key / ENGINE_FILE).write_bytes(b"engine")
    again = measure_plan(cpu_plan, model_path, work_dir=tmp_path / "w2", **kw).measured.measurements
    assert [m.key for m in again] == [m.key for m in first] and all(m.cached and not m.error for m in again)
    ranges = dataclasses.replace(cpu_plan.ranges, amax={t: 1.25 * a for t, a in cpu_plan.ranges.amax.items()})
    wider = dataclasses.replace(cpu_plan, ranges=ranges)
    after = measure_plan(wider, model_path, work_dir=tmp_path / "w3", **kw).measured.measurements
    assert [m.name for m in after] == [m.name for m in first]
    assert after[0].kind == FP16 and after[0].cached and after[0].key == first[0].key
    assert all(m.kind == QDQ and not m.cached and m.key not in {f.key for f in first} for m in after[1:])


def test_plan_measure_true_through_the_planner_and_the_interrupted_run(model_path, tmp_path):
    source = StandIn({FP16: (1.0,) * 5, QDQ: (0.5,) * 5}, interrupted=True)
    p = plan(model_path, feeds(16), shapes=BIG, options=QdqOptions(trt_version="8.6"), progress=False,
             measure=lambda pl, m: measure_plan(pl, m, work_dir=tmp_path / "w", measure_fn=source))
    assert p.measured.status == "partial" and p.measured.interrupted and p.measured.rounds == 5
    assert p.reason.startswith("Partial measurement") and p.recommended != 0
    doc = json.loads(json.dumps(p.to_dict()))
    assert doc["measured"]["measurements"][0]["round_ms"] == [1.0] * 5
    assert Plan.from_dict(doc).measured.measurements[0].round_ms == (1.0,) * 5


def test_ctrl_c_during_the_builds_keeps_what_was_built(model_path, tmp_path):
    """The real :func:`measure`: Ctrl-C (here raised from the progress callback) ends the builds; the report is kept."""
    jobs = [MeasureJob("fp16", FP16, str(model_path)), MeasureJob("again", FP16, str(model_path)),
            MeasureJob("other", QDQ, str(model_path))]

    def ctrl_c(event):
        raise KeyboardInterrupt

    rep = measure(jobs, tmp_path / "engines", shapes=BIG, gpus=1, progress=ctrl_c)
    assert rep.interrupted and rep.rounds == 0 and len(rep.measurements) == 3
    assert rep.measurements[0].key == rep.measurements[1].key  # one build per placement and settings
    assert all(not m.ok for m in rep.measurements)
    assert "interrupted before its build" in rep.measurements[2].error


def test_measure_without_tensorrt_is_exit_2_and_changes_no_file(cpu_plan, model_path, tmp_path, capsys):
    out = tmp_path / "plan"
    code = main(["plan", str(model_path), "--data", "demo", "--out", str(out), "--measure"])
    err = capsys.readouterr().err
    assert code == 2 and "cannot build and time engines" in err and "plan measure PLAN_DIR" in err
    assert not out.exists()
    out.mkdir()
    cpu_plan.save_json(out / "plan.json")  # and held_back.npz beside it
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert sorted(before) == ["held_back.npz", "plan.json"]
    assert main(["plan", "measure", str(out)]) == 2
    err = capsys.readouterr().err
    assert "plan measure cannot build and time engines" in err and "GPU machine" in err
    assert main(["plan", "measure", str(out), "--rounds", "2"]) == 2
    assert "--rounds 2 is too few" in capsys.readouterr().err
    assert main(["plan", "measure", str(out), "--build-limit", "-5"]) == 2
    assert "--build-limit -5.0 is not a number of seconds" in capsys.readouterr().err
    assert main(["plan", "measure", str(tmp_path / "nothing")]) == 2
    assert "No plan at" in capsys.readouterr().err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before


def test_a_moved_model_is_a_clear_error(cpu_plan, tmp_path):
    from trtwidgets.core.common.errors import UserError

    moved = dataclasses.replace(cpu_plan, model=str(tmp_path / "gone.onnx"))
    with pytest.raises(UserError, match="float model is not at"):
        measure_plan(moved, work_dir=tmp_path / "w", measure_fn=StandIn({}))


def test_progress_counts_builds_done_and_left_and_a_failed_build_is_a_result(model_path, tmp_path):
    """The real :func:`measure` without TensorRT: every build fails with the reason, progress still counts them."""
    other = tmp_path / "other.onnx"
    onnx.save(conv_stack(channels=32), other)
    jobs = [MeasureJob("fp16", FP16, str(model_path)), MeasureJob("other", FP16, str(other))]
    events = []
    rep = measure(jobs, tmp_path / "engines", shapes={}, gpus=1, progress=events.append)
    assert [(e.stage, e.done, e.total) for e in events] == [("build", 1, 2), ("build", 2, 2)]
    assert events[0].text() == "builds 1/2 done, 1 left (fp16 failed)"
    assert not rep.interrupted and rep.rounds == 0 and rep.built == 0
    assert all("TensorRT" in m.error for m in rep.measurements)
