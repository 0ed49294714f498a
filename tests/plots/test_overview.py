from __future__ import annotations

import math

import numpy as np
import pytest

from trtwidgets.core.common.errors import StatsError
from trtwidgets.core.calibration.ranges import compute_amax, compute_ranges
from trtwidgets.plots.overview import TensorOverviewDisplay
from tests.plots.synthetic_stats import activation_stats, arr


@pytest.fixture(scope="module")
def stats():
    return activation_stats(12)


@pytest.fixture(scope="module")
def ranges(stats):
    return compute_ranges(stats)


def _disagreement(t):
    amax = [compute_amax(t, m) for m in ("max", "entropy", "percentile", "mse")]
    return math.log2(max(amax) / min(amax))


def test_bar_ranks_by_disagreement_computed_independently(stats, ranges):
    fig = TensorOverviewDisplay.from_ranges(ranges, top=5).figure().to_dict()
    bar = fig["data"][0]
    expected = sorted(stats.tensors, key=lambda n: -_disagreement(stats.tensors[n]))[:5]
    assert list(bar["y"]) == expected
    assert arr(bar["x"]) == pytest.approx([_disagreement(stats.tensors[n]) for n in expected])
    assert list(bar["customdata"]) == expected
    assert "top 5" in fig["layout"]["title"]["text"] and "12 tensors" in fig["layout"]["title"]["text"]


def test_rank_by_error_lowest_sqnr_first(ranges):
    d = TensorOverviewDisplay.from_ranges(ranges, by="error", method="entropy", top=None)
    fig = d.figure().to_dict()
    x = [v for v in arr(fig["data"][0]["x"])]
    assert len(x) == 12 and x == sorted(x)
    assert x[0] == pytest.approx(min(r["entropy"].sqnr_db for r in ranges.values()))
    assert "SQNR" in fig["layout"]["xaxis"]["title"]["text"]


def test_scatter_every_tensor_and_selection(stats, ranges):
    name = list(stats.tensors)[3]
    d = TensorOverviewDisplay.from_ranges(ranges, kind="scatter", selected=name)
    fig = d.figure().to_dict()
    pts, sel = fig["data"]
    assert len(pts["customdata"]) == 12
    assert list(sel["customdata"]) == [name]
    assert arr(sel["x"])[0] == pytest.approx(_disagreement(stats.tensors[name]))
    assert arr(sel["y"])[0] == pytest.approx(min(r.sqnr_db for r in ranges[name].values()))


def test_update_in_place_moves_highlight(stats, ranges):
    d = TensorOverviewDisplay.from_ranges(ranges, top=None)
    fig = d.figure(widget=True)
    trace = fig.data[1]
    target = d.ranking.names[7]
    d.with_selected(target).update(fig)
    assert fig.data[1] is trace and tuple(fig.data[1].y) == (target,)
    d.with_selected(None).update(fig)
    assert len(fig.data[1].y) == 0


def test_unknown_kind(ranges):
    with pytest.raises(StatsError):
        TensorOverviewDisplay.from_ranges(ranges, kind="pie")


def test_names_escaped_in_hover():
    stats = activation_stats(2, names=["<img src=x>", "ok"])
    d = TensorOverviewDisplay.from_ranges(compute_ranges(stats))
    fig = d.figure().to_dict()
    assert all("<img" not in h for h in fig["data"][0]["hovertext"])
    assert np.isfinite(arr(fig["data"][0]["x"])).all()
