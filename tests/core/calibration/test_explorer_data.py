from __future__ import annotations

from collections import namedtuple

import numpy as np
import pytest

from trtwidgets.core.calibration import explorer_data as ed
from trtwidgets.core.common.errors import StatsError
from tests.plots.synthetic_stats import gaussian_with_outliers, tensor_stats

R = namedtuple("R", "method amax mse sqnr_db clipped_fraction")


def _r(method, amax, sqnr):
    return R(method, amax, 0.0, sqnr, 0.0)


def test_hist_geometry_matches_stats():
    t = gaussian_with_outliers()
    e = ed.hist_edges(t)
    assert len(e) == len(t.hist) + 1 and e[0] == 0 and e[-1] == t.hist_max
    assert e[1] == pytest.approx(t.hist_max / 2048)


def test_int8_levels_full_and_thinned():
    lv = ed.int8_levels(2.54)
    assert len(lv) == 128 and lv[0] == 0 and lv[-1] == pytest.approx(2.54)
    assert np.allclose(np.diff(lv), 0.02)
    thin = ed.int8_levels(2.54, max_lines=20)
    assert len(thin) <= 21 and thin[-1] == pytest.approx(2.54) and thin[0] == 0
    # every thinned level is a real level
    assert np.allclose(np.round(thin / 0.02), thin / 0.02)


def test_int8_levels_zoomed_range():
    lv = ed.int8_levels(1.27, x_range=(0.1, 0.2))
    assert lv[0] == pytest.approx(0.1) and lv[-1] == pytest.approx(0.2) and len(lv) == 11
    assert len(ed.int8_levels(1.27, x_range=(5.0, 6.0))) == 0


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan"), float("inf"), "abc", None])
def test_bad_amax_is_a_user_error(bad):
    with pytest.raises(StatsError):
        ed.int8_step(bad)


def test_error_split_rounding_vs_clipping():
    t = gaussian_with_outliers(outliers=0)
    tight = ed.error_split(t, t.absmax / 8)   # clips a lot of the bulk
    loose = ed.error_split(t, t.absmax * 4)   # clips nothing, coarse grid
    assert tight.clipping_share > 0.9
    assert loose.clipping_total == 0 and loose.rounding_share == 1.0
    # uniform rounding error: step^2 / 12 per value
    step = ed.int8_step(t.absmax * 4)
    assert loose.rounding_total / t.count == pytest.approx(step ** 2 / 12, rel=0.05)
    assert tight.clipping_share + tight.rounding_share == pytest.approx(1.0)


def test_error_split_clipping_matches_direct_computation():
    rng = np.random.default_rng(3)
    x = rng.normal(size=50_000)
    t = tensor_stats("t", x)
    amax = 1.5
    direct = float(np.sum(np.maximum(np.abs(x) - amax, 0) ** 2))
    assert ed.error_split(t, amax).clipping_total == pytest.approx(direct, rel=0.02)


RANGES = {
    "a": {"max": _r("max", 8.0, 30.0), "entropy": _r("entropy", 1.0, 40.0)},   # log2 8 = 3
    "b": {"max": _r("max", 2.0, 20.0), "entropy": _r("entropy", 2.0, 20.0)},   # 0
    "c": {"max": _r("max", 4.0, 35.0), "entropy": _r("entropy", 1.0, 10.0)},   # 2
}


def test_rank_by_disagreement():
    r = ed.rank_tensors(RANGES, by="disagreement")
    assert r.names == ("a", "c", "b")
    assert r.scores == pytest.approx((3.0, 2.0, 0.0))
    assert r.position("c") == 1


def test_rank_by_error_at_method_and_worst():
    assert ed.rank_tensors(RANGES, by="error", method="max").names == ("b", "a", "c")
    worst = ed.rank_tensors(RANGES, by="error")
    assert worst.names == ("c", "b", "a") and worst.scores == pytest.approx((10.0, 20.0, 30.0))
    assert ed.rank_tensors(RANGES, by="disagreement", methods=["entropy"]).scores == (0.0, 0.0, 0.0)


def test_rank_errors():
    with pytest.raises(StatsError):
        ed.rank_tensors(RANGES, by="speed")
    with pytest.raises(StatsError):
        ed.rank_tensors(RANGES, by="error", method="mse")
    with pytest.raises(StatsError):
        ed.rank_tensors(RANGES).position("zzz")


def test_disagreement_ignores_unusable():
    assert ed.disagreement([1.0, 4.0, 0.0, float("nan")]) == 2.0
    assert ed.disagreement([3.0]) == 0.0


def test_search():
    names = ["conv1/out", "Conv2/Out", "relu_7", "conv10/bias_out"]
    assert ed.search_tensors(names, "conv out") == ("conv1/out", "Conv2/Out", "conv10/bias_out")
    assert ed.search_tensors(names, "relu") == ("relu_7",)
    assert ed.search_tensors(names, "", limit=2) == ("conv1/out", "Conv2/Out")


def test_amax_log2_ratio():
    before = {"a": {"max": _r("max", 2.0, 1)}, "b": {"max": _r("max", 1.0, 1)}, "z": {"max": _r("max", 0.0, 1)}}
    after = {"a": {"max": _r("max", 4.0, 1)}, "b": {"max": _r("max", 1.0, 1)}, "z": {"max": _r("max", 1.0, 1)}}
    assert ed.amax_log2_ratio(before, after, "max") == {"a": 1.0, "b": 0.0}
    assert ed.amax_log2_ratio(before, after, "entropy") == {}
