"""Issue 33's zoo run beside ModelOpt (H200, TensorRT 8.6, ``scripts/gpu_zoo_measure.py --peers``), judged on the CPU.

Each ``benchmarks/results/peer/zoo_run/<job>.json`` holds the measured plan and, timed in the same interleaved
rounds and judged by the same held-back check, ModelOpt 0.47's files (``peers``). What the README and the closing
note say of them is made again here from the recorded rounds, layers and verdicts.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from tests.conftest import ROOT
from trtwidgets.core.plan.measured.measurement import Measurement
from trtwidgets.core.plan.measured.pick import pick_measured

RUN = ROOT / "benchmarks" / "results" / "peer" / "zoo_run"


def _record(job):
    return json.loads((RUN / f"{job}.json").read_text())


def _engines(rec):
    return {m["name"]: m for m in rec["builds"] + rec.get("all_int8", []) + rec["peers"]}


def test_yolo_b1_the_toolkits_export_beats_modelopt_in_every_round_with_fewer_reformats_and_the_same_f1():
    rec = _record("yolo320-b1")
    e = _engines(rec)
    ours = next(m for n, m in e.items() if n.startswith("#1 INT8 everywhere"))
    peer = e["peer_modelopt_fp32"]
    assert len(ours["round_ms"]) == len(peer["round_ms"]) == 9
    assert all(a < b for a, b in zip(ours["round_ms"], peer["round_ms"]))  # interleaved: round by round
    assert np.median(ours["round_ms"]) / np.median(e["fp16"]["round_ms"]) < 0.91
    assert ours["layers"]["reformats"] < peer["layers"]["reformats"]
    assert ours["accuracy"]["metric"] >= peer["accuracy"]["metric"] and ours["accuracy"]["meets"]


def test_yolo_b1_int8_wins_8_of_9_paired_rounds_and_is_the_pick_by_todays_rule():
    """Recorded: FP16, because one slow round (~0.23 ms spread) outweighed a 10% gain (the larger-spread rule).
    Issue 44: the rounds are interleaved pairs, and INT8 everywhere won 8 of 9 (one-sided sign test p = 0.02): made
    again from the rounds, it is the pick, at ModelOpt's F1 and faster than ModelOpt's engine in every round."""
    rec = _record("yolo320-b1")
    ms = [Measurement.from_dict(m) for m in rec["plan"]["measured"]["measurements"]]
    meets = {m.name: bool(m.accuracy and m.accuracy.meets) for m in ms}
    assert rec["plan"]["measured"]["pick"]["name"] == "fp16"  # the rule of its day
    pick = pick_measured(ms, meets=meets)
    assert pick.name.startswith("#1 INT8 everywhere") and (pick.paired.won, pick.paired.pairs) == (8, 9)
    assert pick.paired.p == pytest.approx(10 / 512) and pick.vs_fp16 < 0.91
    fp16 = next(m for m in ms if m.name == "fp16")
    assert pick.median_ms > fp16.median_ms - pick.noise_ms  # within the larger round spread: the old rule's FP16
    peer = Measurement.from_dict(rec["peers"][0])
    chosen = next(m for m in ms if m.name == pick.name)
    assert chosen.accuracy.meets and chosen.accuracy.accuracy.metric >= peer.accuracy.accuracy.metric


@pytest.mark.parametrize("name, said", [
    ("peer_modelopt", "Scale coefficients must all be positive"),  # its default FP16 scales: the 8.6 parser
    ("peer_modelopt_fp32", "illegal memory access"),  # FP32 float part: the 8.6 builder crashes
])
def test_cls_b32_modelopts_files_do_not_build_on_tensorrt_86(name, said):
    m = Measurement.from_dict(_engines(_record("cls-b32"))[name])
    assert not m.ok and not m.round_ms and said in m.error


def _peer_jobs():
    jobs = []
    for path in sorted(RUN.glob("*-b*.json")):
        rec = json.loads(path.read_text())
        if "peers" in rec and rec.get("status") == "measured":
            jobs.append(rec)
    return jobs


def test_the_zoo_run_covers_the_families_beside_modelopt():
    jobs = {rec["job"] for rec in _peer_jobs()}
    # The 4-GPU run of 2026-11-27, the YOLO's of the night before, the 2-GPU runs of 2026-11-28 (det b1; rec b1, b32
    # and cls b32 again; then the 1024x1024 YOLO at b1). Silero VAD's float model does not parse in TensorRT 8.6:
    # its If's branches differ in shape.
    assert {"captcha-b1", "captcha-b32", "cls-b1", "cls-b32", "det-b1", "det-b32", "minilm-b1", "minilm-b32",
            "rec-b1", "rec-b32", "resnet-b1", "resnet-b32", "vit-b1", "vit-b32", "yolo320-b1", "yolo-b1"} <= jobs
    for job in ("vad-b1", "vad-b32"):
        assert "IIfConditionalOutputLayer inputs must have the same shape" in _record(job)["error"]


def test_the_measured_pick_is_no_slower_than_modelopt_beyond_the_noise_and_scores_at_least_as_well():
    compared = 0
    for rec in _peer_jobs():
        ms = [Measurement.from_dict(m) for m in rec["plan"]["measured"]["measurements"]]
        pick = next(m for m in ms if m.name == rec["plan"]["measured"]["pick"]["name"])
        for peer in (Measurement.from_dict(p) for p in rec["peers"]):
            if not peer.ok:
                continue
            compared += 1
            assert pick.median_ms - peer.median_ms <= max(pick.spread_ms, peer.spread_ms), (rec["job"], peer.name)
            assert pick.accuracy.accuracy.metric >= peer.accuracy.accuracy.metric, (rec["job"], peer.name)
    assert compared >= 9  # captcha, minilm, resnet, vit at both batches; yolo320 b1, yolo b1


def test_modelopts_default_files_are_refused_by_the_86_parser_for_their_fp16_scales():
    refused = 0
    for rec in _peer_jobs():
        for p in rec["peers"]:
            if p["name"] in ("peer_modelopt", "peer_modelopt_zeroed_weights"):  # default: FP16 scales
                refused += 1
                assert "Scale coefficients must all be positive" in p["error"], rec["job"]
    assert refused >= 12


def _toolkit_exports(rec):
    return [m for m in rec["builds"] + rec.get("all_int8", []) if m["kind"] == "qdq"]


def test_every_q_dq_model_the_toolkit_wrote_built():
    """Issue 33's first target, on the records: every measured candidate and all-INT8 export of every family whose
    float model TensorRT 8.6 parses built, at batch 1 and 32."""
    built = {}
    for rec in _peer_jobs():
        for m in _toolkit_exports(rec):
            rounds = rec["plan"]["measured"]["rounds"]  # 9; 15 in the 1024 YOLO's run of 2026-11-28
            assert rounds >= 9 and not m.get("error") and len(m["round_ms"]) == rounds, \
                (rec["job"], m["name"], m.get("error", "")[:200])
            built[rec["job"]] = built.get(rec["job"], 0) + 1
    families = ("captcha", "cls", "det", "minilm", "rec", "resnet", "vit")
    assert {f"{f}-b{b}" for f in families for b in (1, 32)} <= set(built)
    # The 1024x1024 YOLO with today's export (rules 12, 13, the graph rewrites): batch 1 only, its file is a static
    # batch-1 export whose Reshape targets hold the batch (the CPU plan at batch 32 refuses it and says so).
    assert built.get("yolo-b1", 0) >= 2  # its two measured candidates; the all-INT8 export is one of them
    assert sum(built.values()) >= 22


def test_recs_exports_failed_on_myelins_int8_weights_before_rule_13_and_build_with_it():
    """The first run (``superseded/``): rec's exports failed on Myelin's INT8 weight constants. Rebuilt with
    placement rule 13 (docs/placement.md: those weights in FP32 on the INT8 grid), its all-INT8 exports built, and
    the GPU block test built the rule's form and saw INT8 constants hit the same assertion."""
    failed = []
    for job in ("rec-b1", "rec-b32"):
        old = json.loads((RUN / "superseded" / f"{job}.json").read_text())
        for m in _toolkit_exports(old):
            if m.get("error"):
                failed.append((job, m["name"]))
                assert "convertMyelinWeightsToFp32" in m["error"] and "kINT8" in m["error"], (job, m["name"])
        # The all-INT8 export (the most INT8 the rules allow, so every SVTR projection) failed then and builds now.
        name = next(m["name"] for m in _toolkit_exports(old) if m["name"].startswith("all-INT8"))
        assert (job, name) in failed
        again = Measurement.from_dict(_engines(_record(job))[name])
        assert again.ok and len(again.round_ms) == 9, job
    assert {job for job, _ in failed} == {"rec-b1", "rec-b32"}
    report = json.loads((RUN / "myelin_weights_report.json").read_text())
    by = {m["name"]: Measurement.from_dict(m) for m in report["measurements"]}
    assert by["fp16"].ok and by["toolkit_86"].ok and len(by["toolkit_86"].round_ms) == 3
    assert not by["int8_constants"].ok and "convertMyelinWeightsToFp32" in by["int8_constants"].error


def test_a_build_that_breaks_the_cuda_context_leaves_the_next_build_alone():
    """tests/gpu/test_measure_restart.py's report (H200, TensorRT 8.6): ModelOpt's FP32-float-part file of the
    demo classifier at batch 32 crashed the builder; the toolkit's export after it, in a new worker, built."""
    report = json.loads((RUN / "measure_restart_report.json").read_text())
    by = {m["name"]: Measurement.from_dict(m) for m in report["measurements"]}
    assert not by["modelopt_fp32"].ok and "KERNEL_CRASHED" in by["modelopt_fp32"].error
    assert by["toolkit"].ok and len(by["toolkit"].round_ms) == 3


def test_yolo_b32_level3_same_graph_record_says_what_the_readme_says():
    """Issue 44 at builder level 3 (H100, ``benchmarks/results/peer/same_graph/gpu_h100_L3.json``): every engine
    from the rewritten graph; the toolkit's INT8 0.89x that FP16 (the <= 0.85x target missed), F1 >= 0.95, faster
    than ModelOpt's INT8 of the same graph in every paired round, fewer reformats. Made again from the rounds."""
    from trtwidgets.core.plan.measured.paired import paired_rounds

    rec = json.loads((ROOT / "benchmarks" / "results" / "peer" / "same_graph" / "gpu_h100_L3.json").read_text())
    assert rec["levels"] == [3]
    e = rec["engines"]
    assert {n: e[n]["graph"] for n in e} == {"fp16": "fp16", "toolkit": "fp16", "modelopt_rw": "fp16"}
    assert e["fp16"]["model"].endswith("float_rw_b32.onnx")  # "fp16" here is the FP16 of the rewritten graph
    med = {n: float(np.median(e[n]["round_ms"])) for n in e}
    assert all(len(e[n]["round_ms"]) == 9 for n in e)
    assert 0.85 < med["toolkit"] / med["fp16"] < 0.90  # the target missed, by this much
    assert e["toolkit"]["accuracy"]["metric"] >= 0.95 and e["modelopt_rw"]["accuracy"]["metric"] >= 0.95
    ours, peer = (Measurement(n, "qdq", tuple(e[n]["round_ms"])) for n in ("toolkit", "modelopt_rw"))
    won = paired_rounds(ours, peer)
    assert (won.won, won.lost) == (9, 0) and won.p == pytest.approx(1 / 512)
    assert e["toolkit"]["summary"]["reformats"] < e["modelopt_rw"]["summary"]["reformats"]
    assert e["toolkit"]["summary"]["int8"] > 0 and e["fp16"]["summary"]["int8"] == 0
