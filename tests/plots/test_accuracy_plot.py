"""Accuracy figures checked through fig.to_dict()."""

from __future__ import annotations

import math

import numpy as np

from trtwidgets.core.accuracy.layer_errors import layer_errors
from trtwidgets.core.accuracy.sweep import SweepResult, SweepStep, SweepStepResult
from trtwidgets.core.accuracy.metrics import compare_tensor
from trtwidgets.plots.accuracy import GROWTH_CAP_DB, LayerErrorDisplay, SweepDisplay

from ..accuracy.models import tiny_chain


def _report():
    a = np.linspace(-1, 1, 8, dtype=np.float32).reshape(2, 4)
    r = np.maximum(a, 0)
    ref = {"a": r, "b": r * 2, "y": r * 2 + 1}
    cand = {"a": r, "b": r * 2 + 0.01, "y": r * 2 + 1.01}
    cand["y"] = cand["y"].copy()
    return layer_errors(tiny_chain(), ref, cand)


def test_layer_error_bars_ranked_and_coloured_by_op():
    report = _report()
    fig = LayerErrorDisplay.from_report(report).figure().to_dict()
    names = [t["name"] for t in fig["data"]]
    assert set(names) == {"Relu", "Mul", "Add"}
    mul = next(t for t in fig["data"] if t["name"] == "Mul")
    assert list(mul["y"]) == ["1. mul"]
    assert mul["base"] + mul["x"][0] == report.ranked()[0].growth_db
    assert all(x >= 0 for t in fig["data"] for x in t["x"])  # longer bar = more growth
    assert fig["layout"]["yaxis"]["categoryarray"][-1] == "1. mul"  # top of the chart


def test_infinite_growth_is_capped_and_names_escaped():
    a = np.ones((2, 4), np.float32)
    cand = {"a": a, "b": a * 2, "y": a * 3}
    cand["b"] = cand["b"].copy()
    cand["b"][0, 0] = np.nan
    report = layer_errors(tiny_chain(), {"a": a, "b": a * 2, "y": a * 3}, cand)
    d = LayerErrorDisplay.from_report(report)
    assert math.isinf(d.growth_db[0])
    fig = d.figure().to_dict()
    ends = [t["base"] + x for t in fig["data"] for x in t["x"]]
    assert max(ends) == GROWTH_CAP_DB


def test_sweep_two_axes_and_failed_step():
    ref = np.arange(10.0)
    steps = (
        SweepStepResult(SweepStep(0, (), "qdq_exclude"), {"y": compare_tensor(ref, ref + 0.1)}, 1.0),
        SweepStepResult(SweepStep(1, ("c<1>",), "qdq_exclude"), error="build failed <x>"),
        SweepStepResult(SweepStep(2, ("c<1>", "c2"), "qdq_exclude"), {"y": compare_tensor(ref, ref + 0.01)}, 1.2),
    )
    fig = SweepDisplay.from_sweep(SweepResult(steps)).figure().to_dict()
    snr, ms = fig["data"]
    assert list(snr["x"]) == [0, 1, 2] and snr["y"][1] is None and snr["y"][2] > snr["y"][0]
    assert ms["yaxis"] == "y2" and list(ms["y"]) == [1.0, None, 1.2]
    assert "&lt;x&gt;" in snr["text"][1]
