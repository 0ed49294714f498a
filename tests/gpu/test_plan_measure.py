"""``trtwidgets plan measure PLAN_DIR`` on real TensorRT 8.6: built, timed interleaved, picked by measurement, cached.

Python 3.9 with numpy, onnx and tensorrt only (no ONNX Runtime there, so the plans are
made on the CPU: a committed plan of the demo classifier at batch 32, and a plan of a
tiny conv stack written from the planner's own values). Run on the GPU machine with::

    source /tmp/trtb/env.sh && TRTWIDGETS_ARTIFACTS=$OUT EXTRA_PYTHONPATH=$PWD \\
        $PY39 -m pytest tests/gpu/test_plan_measure.py -v -s

Builder optimization level 0 (the builds are what costs GPU time). Each test measures
twice: the second run must find every engine in the cache and build nothing.
Artifacts: ``$TRTWIDGETS_ARTIFACTS/plan_measure/<name>/plan.json``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time

import pytest

from tests.conftest import ROOT
from tests.gpu import models
from tests.gpu.build_helpers import artifacts_dir, fresh_dir
from trtwidgets.cli import main

pytestmark = pytest.mark.usefixtures("no_cublas_cudnn")

OPTS = ["--opt-level", "0", "--rounds", "5", "--runs", "50", "--no-progress"]


def _stack_plan(work):
    """A plan of a compute-bound conv stack (where INT8 should pay), written from the planner's values."""
    from trtwidgets.core.plan.judge import Judge
    from trtwidgets.core.plan.measured.repick import finish_latency
    from trtwidgets.core.plan.plan_artifact import Plan
    from trtwidgets.core.plan.plan_values import Candidate, PlanAccuracy, PlanRanges, PlanTarget
    from trtwidgets.core.qdq.options import QdqOptions

    path = models.save(models.conv_stack((8, 128, 64, 64), depth=4), work / "stack.onnx")
    acc, target = PlanAccuracy(0.999, 35.0), PlanTarget(cosine=0.99)  # accuracy is not what this test measures
    convs = ("conv1", "conv2", "conv3", "conv4")
    cands = (Candidate("FP16 (no INT8)", (), (), acc, 100.0, 100.0, "estimate", True),
             Candidate("INT8 everywhere", convs, (), acc, 55.0, 100.0, "estimate", True),
             Candidate("INT8 in conv1-conv2", convs[:2], tuple((c, "for the test") for c in convs[2:]), acc, 80.0,
                       100.0, "estimate", True))
    best, reason = Judge(target).pick(cands)
    opts = QdqOptions(trt_version="8.6", high_precision="fp32")
    plan = Plan(model=str(path), target=target, candidates=cands, recommended=best, reason=reason,
                ranges=PlanRanges(amax=models.amax_for(models.conv_stack_tensors(4), 4.0)), options=opts,
                input_shapes={models.INPUT: (8, 128, 64, 64)})
    return finish_latency(plan, str(path), None)


def _measure_twice(plan_dir, cache, extra=()):
    t0 = time.perf_counter()
    assert main(["plan", "measure", str(plan_dir), "--engine-cache", str(cache), *OPTS, *extra]) == 0
    first = json.loads((plan_dir / "plan.json").read_text())
    t1 = time.perf_counter()
    assert main(["plan", "measure", str(plan_dir), "--engine-cache", str(cache), *OPTS, *extra]) == 0
    second = json.loads((plan_dir / "plan.json").read_text())
    print(f"first run {t1 - t0:.1f} s, second (cached) {time.perf_counter() - t1:.1f} s")
    return first, second


def _check(doc):
    """Measured in 5 rounds; a candidate is picked only when it wins FP16's paired rounds; estimates sit beside times."""
    measured = doc["measured"]
    assert measured["status"] == "measured" and measured["rounds"] == 5, doc["reason"]
    rows = {r["name"]: r for r in measured["rows"]}
    fp16 = rows["fp16"]
    for r in measured["rows"]:
        print(f"{r['name'][:50]:50s} est {r['estimate_vs_fp16']} meas {r['measured_ms']} spread {r['spread_ms']} "
              f"x {r['vs_fp16']} {r['error']}")
    for m in measured["measurements"]:
        if not m["error"]:
            assert len(m["round_ms"]) == 5 and all(t > 0 for t in m["round_ms"])
    pick = measured["pick"]
    assert pick["candidate"] == doc["recommended"]
    if doc["recommended"]:
        chosen = next(r for r in measured["rows"] if r["candidate"] == doc["recommended"] and r["kind"] == "qdq")
        # Picked only when it wins FP16's paired rounds by the one-sided sign test (issue 44).
        assert chosen["measured_ms"] < fp16["measured_ms"] and pick["paired"]["p"] < 0.05, pick
    else:
        assert doc["reason"].startswith("FP16 is best here (measured)")
    for r in measured["rows"]:
        if r["kind"] == "qdq" and r["error"] == "":
            assert math.isfinite(r["estimate_vs_fp16"]) and math.isfinite(r["vs_fp16"])
    print(doc["reason"])


def test_plan_measure_a_tiny_conv_stack_picks_by_measurement_and_reuses_the_cache(tmp_path_factory):
    work = artifacts_dir(tmp_path_factory, "plan_measure") / "stack"
    work.mkdir(parents=True, exist_ok=True)
    plan_dir = fresh_dir(work, "plan")
    plan_dir.mkdir(parents=True)
    _stack_plan(work).save_json(plan_dir / "plan.json")
    first, second = _measure_twice(plan_dir, fresh_dir(work, "engines"))
    _check(first)
    _check(second)
    builds = first["measured"]["built"]
    assert builds >= 3 and first["measured"]["cached"] == 0  # FP16 and two placements (+ implicit INT8)
    assert second["measured"]["built"] == 0 and second["measured"]["cached"] == builds
    assert (plan_dir / "model.qdq.onnx").exists() == bool(second["recommended"])


def test_plan_measure_the_demo_classifier_at_batch_32(tmp_path_factory):
    """The committed CPU plan (tests/fixtures/plans/cls_b32_cpu); shares the default engine cache with
    scripts/gpu_measured_plan.py, so running the script first makes this test build nothing."""
    from trtwidgets.trt.plan_measure import default_cache_dir

    work = artifacts_dir(tmp_path_factory, "plan_measure") / "cls_b32"
    plan_dir = fresh_dir(work, "plan")
    plan_dir.mkdir(parents=True)
    shutil.copy(ROOT / "tests" / "fixtures" / "plans" / "cls_b32_cpu" / "plan.json", plan_dir / "plan.json")
    model = ROOT / "trtwidgets" / "demo" / "ch_ppocr_mobile_v2.0_cls_infer.onnx"
    first, second = _measure_twice(plan_dir, default_cache_dir(), ["--model", str(model)])
    _check(first)
    _check(second)
    assert second["measured"]["built"] == 0 and second["measured"]["cached"] >= 2


def test_plan_measure_judges_every_engine_on_the_held_back_samples(tmp_path_factory):
    """The plan's held-back check (a committed CPU plan of the demo classifier at batch 32, with its
    held_back.npz) runs through every engine built: each measurement carries its engine's accuracy,
    FP16's meets the task metric, and implicit INT8 is picked only when its engine meets it too."""
    from trtwidgets.core.plan.engine_check import CHECK_FILE

    work = artifacts_dir(tmp_path_factory, "plan_measure") / "cls_b32_check"
    plan_dir = fresh_dir(work, "plan")
    shutil.copytree(ROOT / "tests" / "fixtures" / "plans" / "cls_b32_check", plan_dir)
    model = ROOT / "trtwidgets" / "demo" / "ch_ppocr_mobile_v2.0_cls_infer.onnx"
    before = (plan_dir / CHECK_FILE).read_bytes()
    assert main(["plan", "measure", str(plan_dir), "--model", str(model), *OPTS]) == 0
    doc = json.loads((plan_dir / "plan.json").read_text())
    _check_judged(doc)
    assert (plan_dir / CHECK_FILE).read_bytes() == before  # the plan keeps its check for the next measurement


def _check_judged(doc):
    measured = doc["measured"]
    assert measured["engine_check"]["judged"] and measured["engine_check"]["samples"] >= 8
    for m in measured["measurements"]:
        if m["error"]:
            continue
        acc = m["accuracy"]
        print(f"{m['name'][:40]:40s} {m['median_ms']:.4f} ms  engine: {acc}")
        assert "error" not in acc, acc
        assert acc["meets"] in (True, False) and acc["samples"] == measured["engine_check"]["samples"]
        if m["kind"] == "fp16":
            assert acc["meets"] and acc["metric"] >= acc["metric_reference"] - 0.01
    pick = measured["pick"]
    if pick.get("kind") == "int8_implicit":
        assert pick["accuracy"]["meets"] and os.path.isfile(pick["calibration_cache"])
        assert doc["reason"].startswith("Implicit INT8")
    print(doc["reason"])
