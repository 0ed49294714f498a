from __future__ import annotations

import numpy as np
import pytest

from trtwidgets.core.common.errors import StatsError
from trtwidgets.core.calibration.ranges import compute_amax, evaluate_amax
from trtwidgets.plots.histogram import TensorHistogramDisplay
from tests.plots.synthetic_stats import activation_stats, arr, bar_x, gaussian_with_outliers


def _vlines(fig_dict):
    return [s for s in fig_dict["layout"].get("shapes", []) if s["type"] == "line"]


def _rects(fig_dict):
    return [s for s in fig_dict["layout"].get("shapes", []) if s["type"] == "rect"]


@pytest.fixture(scope="module")
def t():
    return gaussian_with_outliers()


def test_lines_at_each_methods_amax(t):
    d = TensorHistogramDisplay.from_stats(t, percentile=99.9)
    fig = d.figure().to_dict()
    lines = _vlines(fig)
    expected = [compute_amax(t, "max"), compute_amax(t, "entropy"), compute_amax(t, "percentile", percentile=99.9),
                compute_amax(t, "mse")]
    assert [ln["x0"] for ln in lines] == pytest.approx(expected)
    assert all(ln["x0"] == ln["x1"] and ln["yref"] == "paper" for ln in lines)
    # outliers at ~30 sigma: max keeps them, entropy does not
    assert lines[0]["x0"] > 5 * lines[1]["x0"]


def test_histogram_trace_is_the_stats_histogram(t):
    fig = TensorHistogramDisplay.from_stats(t, methods=["max"]).figure().to_dict()
    bar = fig["data"][0]
    assert bar["type"] == "bar"
    assert np.array_equal(arr(bar["y"]), t.hist)
    edges = np.linspace(0, t.hist_max, len(t.hist) + 1)
    assert np.allclose(bar_x(bar), (edges[:-1] + edges[1:]) / 2)
    assert "x" not in bar and arr(bar["y"]).dtype == np.float32  # a quarter of x + float64 y
    assert fig["layout"]["yaxis"]["type"] == "log"


def test_legend_and_hover_carry_sqnr_and_clipped_fraction(t):
    d = TensorHistogramDisplay.from_stats(t, methods=["entropy"])
    q = evaluate_amax(t, compute_amax(t, "entropy"))
    fig = d.figure().to_dict()
    name = _vlines(fig)[0]["name"]
    assert f"SQNR {q.sqnr_db:.1f} dB" in name
    assert f"clipped {100 * q.clipped_fraction:.3g}%" in name
    marks = fig["data"][1]
    assert marks["x"][0] == pytest.approx(compute_amax(t, "entropy"))
    assert f"SQNR {q.sqnr_db:.1f} dB" in marks["hovertext"][0]


def test_clipped_region_shaded_from_active_amax(t):
    d = TensorHistogramDisplay.from_stats(t, methods=["max", "entropy"], active="entropy")
    rect = _rects(d.figure().to_dict())
    assert len(rect) == 1
    assert rect[0]["x0"] == pytest.approx(compute_amax(t, "entropy"))
    assert rect[0]["x1"] >= t.hist_max


def test_tensorrt_cache_and_override_lines(t):
    d = TensorHistogramDisplay.from_stats(t, methods=["max"], trt_cache={t.name: 3.5, "other": 1.0}, override=2.0)
    fig = d.figure().to_dict()
    xs = [ln["x0"] for ln in _vlines(fig)]
    assert xs == pytest.approx([compute_amax(t, "max"), 3.5, 2.0])
    assert "TensorRT" in _vlines(fig)[1]["name"]
    # the override is what gets exported, so its clipped region is the one shaded
    assert _rects(fig)[0]["x0"] == 2.0
    q = evaluate_amax(t, 2.0)
    assert d.lines[-1].sqnr_db == pytest.approx(q.sqnr_db)


def test_cache_object_and_missing_tensor(t):
    class Cache:
        amax = {"someone_else": 1.0}

    d = TensorHistogramDisplay.from_stats(t, methods=["max"], trt_cache=Cache())
    assert [ln.kind for ln in d.lines] == ["max"]


def test_update_in_place_changes_same_figure():
    stats = activation_stats(5)
    names = list(stats.tensors)
    fig = TensorHistogramDisplay.from_stats(stats, names[0]).figure(widget=True)
    before = id(fig.data[0])
    d2 = TensorHistogramDisplay.from_stats(stats, names[4], methods=["max", "mse"])
    d2.update(fig)
    assert id(fig.data[0]) == before
    assert np.array_equal(np.asarray(fig.data[0].y), stats.tensors[names[4]].hist)
    xs = [s.x0 for s in fig.layout.shapes if s.type == "line"]
    t4 = stats.tensors[names[4]]
    assert xs == pytest.approx([compute_amax(t4, "max"), compute_amax(t4, "mse")])
    assert names[4] in fig.layout.title.text


def test_html_in_names_is_escaped():
    t = gaussian_with_outliers(name="<b>x</b>", n=1000, outliers=0)
    d = TensorHistogramDisplay.from_stats(t, methods=["max"])
    assert "<b>x</b>" not in d.title and "&lt;b&gt;" in d.title


def test_precomputed_results_are_used(t):
    from trtwidgets.core.calibration.ranges import RangeResult

    fake = {"max": RangeResult("max", 1.25, 0.0, 12.0, 0.5)}
    d = TensorHistogramDisplay.from_stats(t, methods=["max"], results=fake)
    assert d.lines[0].amax == 1.25 and d.lines[0].sqnr_db == 12.0


def test_bad_requests(t):
    stats = activation_stats(2)
    with pytest.raises(StatsError):
        TensorHistogramDisplay.from_stats(stats)            # which tensor?
    with pytest.raises(StatsError):
        TensorHistogramDisplay.from_stats(stats, "nope")
    with pytest.raises(StatsError):
        TensorHistogramDisplay.from_stats(t, methods=["median"])


def test_all_zero_tensor_draws():
    from tests.plots.synthetic_stats import tensor_stats

    t = tensor_stats("zeros", np.zeros(100))
    fig = TensorHistogramDisplay.from_stats(t).figure().to_dict()
    assert arr(fig["data"][0]["y"])[0] == 100
    assert bar_x(fig["data"][0])[0] > 0


def test_bar_values_are_float32_only_where_that_is_exact():
    from trtwidgets.plots.bins import compact

    assert compact([0, 3, 2 ** 24 - 1]).dtype == np.float32
    big = compact([1, 2 ** 24 + 1])  # a count float32 would round to 2**24
    assert big.dtype == np.float64 and big[1] == 2 ** 24 + 1
    assert compact([0.5, 1e-9]).dtype == np.float32  # errors on a log axis: display precision
