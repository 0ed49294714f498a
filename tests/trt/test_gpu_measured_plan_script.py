"""``scripts/gpu_measured_plan.py`` on the CPU: its record of a measured plan, its input plan, its no-GPU exit."""

from __future__ import annotations

import shutil

import pytest

from tests.conftest import ROOT, load_file_module
from trtwidgets import trt
from trtwidgets.core.plan.measured.measurement import FP16, QDQ, Measurement
from trtwidgets.core.plan.measured.repick import apply_measurements, candidate_job_name, measure_targets
from trtwidgets.core.plan.plan_artifact import Plan


@pytest.fixture(scope="module")
def script():
    mod = load_file_module(ROOT / "scripts" / "gpu_measured_plan.py", "gpu_measured_plan")
    return mod


def test_the_committed_cpu_plan_is_the_demo_classifier_at_batch_32_with_int8_candidates(script):
    plan = Plan.load(script.CPU_PLAN)
    assert (ROOT / plan.model).is_file() and list(plan.input_shapes.values())[0][0] == 32
    assert plan.latency_status == "estimate" and len(measure_targets(plan)) >= 1


def test_the_record_holds_each_build_with_its_rounds_spread_and_layer_precisions(script, tmp_path):
    plan = Plan.load(script.CPU_PLAN)
    i = measure_targets(plan)[0]
    # A committed real build stands in for the cache folder of the candidate's key.
    shutil.copytree(ROOT / "tests" / "fixtures" / "trt86" / "cls_static_qdq_int8", tmp_path / "k2")
    ms = [Measurement("fp16", FP16, (0.6, 0.61, 0.59, 0.6, 0.6), key="k1", estimate_ms=0.27),
          Measurement(candidate_job_name(i, plan.candidates[i]), QDQ, (0.5, 0.52, 0.51, 0.5, 0.51), key="k2",
                      estimate_ms=0.26, int8_layers=frozenset(plan.candidates[i].quantized))]
    new = apply_measurements(plan, ms, rounds=5, built=2, settings={"gpu": "G", "trt": "8.6.0"})
    rec = script.measurements_record(new, tmp_path, 12.0)
    by = {b["name"]: b for b in rec["builds"]}
    assert by["fp16"]["rounds"] == 5 and by["fp16"]["spread_ms"] == pytest.approx(0.02) and by["fp16"]["layers"] == {}
    cand = by[candidate_job_name(i, plan.candidates[i])]
    assert cand["layers"]["precisions"].get("INT8", 0) > 0 and cand["layers"]["layers"] > 10
    assert rec["pick"]["candidate_name"] == plan.candidates[i].name and rec["estimate_pick"]
    assert not list(tmp_path.glob("*.graph.json"))


@pytest.mark.skipif(trt.available(), reason="TensorRT is installed here")
def test_without_tensorrt_the_script_exits_2_and_writes_nothing(script, tmp_path, capsys):
    assert script.main(["--out", str(tmp_path / "o")]) == 2
    assert "cannot build and time engines" in capsys.readouterr().err and not (tmp_path / "o").exists()


def test_the_gpu_fixture_once_committed_obeys_the_rules(script):
    """``tests/fixtures/trt86/cls_b32_measured/`` (written on the GPU by the script): the pick is the measured one."""
    import json

    from trtwidgets.core.plan.measured.pick import pick_measured

    folder = script.FIXTURE
    if not (folder / "measurements.json").is_file():
        pytest.skip("no GPU run committed yet: run scripts/gpu_measured_plan.py on the GPU machine")
    rec = json.loads((folder / "measurements.json").read_text())
    plan = Plan.load(folder)
    assert rec["rounds"] >= 3 and rec["status"] == "measured"
    ok = [b for b in rec["builds"] if not b["error"]]
    assert all(b["rounds"] == rec["rounds"] and b["layers"].get("layers", 0) > 0 for b in ok)
    ms = plan.measured.measurements
    meets = {m.name: plan.candidates[int(m.name[1:].split(" ")[0])].meets_target for m in ms if m.kind == QDQ}
    again = pick_measured(ms, meets)
    assert again.name == plan.measured.pick.name
    fp16 = next(m for m in ms if m.kind == FP16)
    chosen = next((m for m in ms if m.name == again.name), fp16)
    assert chosen.median_ms <= fp16.median_ms + again.noise_ms  # never slower than FP16 beyond the noise
