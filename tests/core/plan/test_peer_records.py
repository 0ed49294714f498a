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


def test_yolo_b1_the_measured_pick_is_fp16_because_the_rounds_spread_more_than_int8_gains():
    """The pick is made again from the rounds: at batch 1 one slow round (~0.23 ms spread) outweighs a 10% gain,
    so FP16 stays the pick; it is no slower than ModelOpt's engine beyond the noise, and scores FP32's F1."""
    rec = _record("yolo320-b1")
    ms = [Measurement.from_dict(m) for m in rec["plan"]["measured"]["measurements"]]
    pick = pick_measured(ms, meets={m.name: bool(m.accuracy and m.accuracy.meets) for m in ms})
    assert pick.name == rec["plan"]["measured"]["pick"]["name"] == "fp16"
    peer = Measurement.from_dict(rec["peers"][0])
    noise = max(pick.noise_ms, peer.spread_ms)
    assert pick.median_ms - peer.median_ms <= noise
    assert _engines(rec)["fp16"]["accuracy"]["metric"] >= peer.accuracy.accuracy.metric


@pytest.mark.parametrize("name, said", [
    ("peer_modelopt", "Scale coefficients must all be positive"),  # its default FP16 scales: the 8.6 parser
    ("peer_modelopt_fp32", "illegal memory access"),  # FP32 float part: the 8.6 builder crashes
])
def test_cls_b32_modelopts_files_do_not_build_on_tensorrt_86(name, said):
    m = Measurement.from_dict(_engines(_record("cls-b32"))[name])
    assert not m.ok and not m.round_ms and said in m.error
