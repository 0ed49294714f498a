"""Issue 21's whole-model target at batch 1, judged from every recorded TensorRT 8.6 build of YOLOv8n (H100).

At batch 1 a rebuild moves either engine by up to 7% (TensorRT's tactic choice at builder level 1, and the
shared GPU), so one build pair cannot say "no slower". These tests read every build pair on record (the first
whole-model run, the zoo's judged run, and scripts/gpu_yolo_layers.py's four build sets, each timed in
interleaved rounds) and hold the target over all of them: the all-INT8 export is not shown slower than
implicit INT8 (the mean time ratio is within two standard errors of 1 or below), and it leaves no more
reformat, standalone PointWise or Scale layers in total.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

RESULTS = Path(__file__).resolve().parents[3] / "benchmarks" / "results"


def _pairs():
    """``(source, export ms, implicit ms, export layer summary, implicit layer summary)`` per build pair."""
    out = []
    first = {e["kind"] if e["kind"] != "qdq" else "qdq": e
             for e in json.loads((RESULTS / "yolo_placement_gpu_b1.json").read_text())["engines"]}
    out.append(("yolo_placement_gpu_b1", first["qdq"]["median_ms"], first["int8_implicit"]["median_ms"],
                first["qdq"], first["int8_implicit"]))
    zoo = {b["name"]: b for b in json.loads((RESULTS / "trust/zoo_gpu/yolo-b1.json").read_text())["builds"]}
    export = next(b for n, b in zoo.items() if n.startswith("#1 INT8 everywhere"))
    out.append(("zoo yolo-b1", export["median_ms"], zoo["int8_implicit"]["median_ms"], export["layers"],
                zoo["int8_implicit"]["layers"]))
    for first_file, second_file in (("a", "b"), ("c", "d")):
        runs = [json.loads((RESULTS / f"trust/yolo_b1/yolo_b1_layers_{f}.json").read_text())["builds"]
                for f in (first_file, second_file)]
        for k in (0, 1):
            def times(name, runs=runs):
                return [s["median_ms"] for r in runs for s in (r[name].get("sessions")
                                                               or [{"median_ms": r[name]["median_ms"]}])]
            q, i = f"qdq#{k}", f"implicit#{k}"
            out.append((f"yolo_b1_layers_{first_file}{second_file} set {k}", float(np.mean(times(q))),
                        float(np.mean(times(i))), runs[0][q].get("summary"), runs[0][i].get("summary")))
    return out


def test_every_build_pair_was_read():
    pairs = _pairs()
    assert len(pairs) == 6 and all(0.5 < e < 1.0 and 0.5 < i < 1.0 for _, e, i, _, _ in pairs), pairs


def test_the_export_is_not_shown_slower_than_implicit_int8_over_the_builds():
    ratios = np.array([e / i for _, e, i, _, _ in _pairs()])
    se = ratios.std(ddof=1) / np.sqrt(len(ratios))
    assert ratios.mean() - 2 * se <= 1.0, (ratios.round(4), ratios.mean(), se)


@pytest.mark.parametrize("kind", ["reformats", "pointwise", "scale"])
def test_no_more_unfused_layers_than_implicit_int8_in_total(kind):
    counted = [(e[kind], i[kind]) for _, _, _, e, i in _pairs() if e and i and kind in e and kind in i]
    assert len(counted) >= 4
    assert sum(e for e, _ in counted) <= sum(i for _, i in counted), counted
    if kind != "reformats":  # PointWise and Scale: in every build, not only in total
        assert all(e <= i for e, i in counted), counted
