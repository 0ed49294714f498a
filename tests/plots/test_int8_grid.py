from __future__ import annotations

import numpy as np
import pytest

from trtwidgets.core.calibration.ranges import compute_amax
from trtwidgets.plots.int8_grid import Int8GridDisplay
from tests.plots.synthetic_stats import activation_stats, arr, bar_x, gaussian_with_outliers


@pytest.fixture(scope="module")
def t():
    return gaussian_with_outliers()


def _grid_lines(fig):
    return [s["x0"] for s in fig["layout"]["shapes"] if s["type"] == "line"]


def test_grid_lines_at_k_amax_over_127(t):
    amax = compute_amax(t, "entropy")
    fig = Int8GridDisplay.from_stats(t, amax, label="entropy").figure().to_dict()
    xs = np.array(_grid_lines(fig))
    assert len(xs) == 128
    assert xs == pytest.approx(np.arange(128) * amax / 127)
    rect = [s for s in fig["layout"]["shapes"] if s["type"] == "rect"]
    assert rect[0]["x0"] == pytest.approx(amax)
    assert "entropy" in fig["layout"]["title"]["text"]


def test_thinned_grid_keeps_amax(t):
    fig = Int8GridDisplay.from_stats(t, 10.0, max_lines=16).figure().to_dict()
    xs = _grid_lines(fig)
    assert len(xs) <= 17 and xs[-1] == pytest.approx(10.0)


def test_error_panels_split_rounding_and_clipping(t):
    amax = compute_amax(t, "entropy")
    fig = Int8GridDisplay.from_stats(t, amax).figure().to_dict()
    hist, rnd, clip = fig["data"]
    centers = bar_x(hist)
    assert np.array_equal(arr(hist["y"]), t.hist)
    r, c = arr(rnd["y"]), arr(clip["y"])
    assert (c[centers < amax - t.hist_max / 2048] == 0).all()      # nothing is clipped below amax
    assert (r[centers > amax + t.hist_max / 2048] == 0).all()      # nothing is rounded above it
    assert c.sum() > 0 and r.sum() > 0                              # outliers clipped, bulk rounded
    assert rnd["yaxis"] == clip["yaxis"] != hist.get("yaxis", "y")


def test_max_amax_means_no_clipping(t):
    d = Int8GridDisplay.from_stats(t, compute_amax(t, "max"))
    assert d.split.clipping_total == 0
    assert "clipping 0.0%" in d.title


def test_update_in_place():
    stats = activation_stats(3)
    a, b = list(stats.tensors)[:2]
    fig = Int8GridDisplay.from_stats(stats, 1.0, tensor=a).figure(widget=True)
    first = fig.data[0]
    Int8GridDisplay.from_stats(stats, 2.54, tensor=b).update(fig)
    assert fig.data[0] is first
    assert np.array_equal(np.asarray(fig.data[0].y), stats.tensors[b].hist)
    lines = [s.x0 for s in fig.layout.shapes if s.type == "line"]
    assert lines[1] == pytest.approx(0.02) and lines[-1] == pytest.approx(2.54)
