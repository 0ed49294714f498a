"""Range algorithms: entropy equals the published loop, percentile/mse/max, and the error at an amax."""

from __future__ import annotations

import math

import numpy as np
import pytest

from tests.core.calib_reference import entropy_bin_reference
from trtwidgets.core.common.errors import StatsError
from trtwidgets.core.calibration.histogram import HistogramAccumulator
from trtwidgets.core.calibration.ranges import (METHODS, compute_amax, compute_ranges, entropy_amax, entropy_bin, evaluate_amax,
                                    resample, trt_histogram_range)
from trtwidgets.core.calibration.stats import ActivationStats


def _stats(x, bins=8192, name="t"):
    acc = HistogramAccumulator(name, bins)
    acc.update(np.asarray(x, np.float32))
    return acc.to_stats()


@pytest.mark.parametrize("seed,n,relu", [(0, 300, False), (1, 512, True), (2, 777, False), (3, 1024, True)])
def test_vectorised_entropy_equals_the_published_loop(seed, n, relu):
    rng = np.random.default_rng(seed)
    x = np.abs(rng.standard_t(3 + seed, 50000))
    if relu:
        x[rng.random(x.size) < 0.4] = 0
    hist, _ = np.histogram(x, n, range=(0, x.max()))
    assert entropy_bin(hist) == entropy_bin_reference(hist)


def test_entropy_clips_long_tails_and_keeps_bounded_data():
    rng = np.random.default_rng(0)
    heavy = rng.standard_t(2, 200000)
    t = _stats(heavy)
    amax = compute_amax(t, "entropy")
    assert amax < 0.5 * t.absmax
    q = evaluate_amax(t, amax)
    assert 0 < q.clipped_fraction < 0.01
    # Uniform data has no tail: entropy keeps (nearly) all of it.
    u = _stats(rng.uniform(-3, 3, 200000))
    assert compute_amax(u, "entropy") > 0.95 * u.absmax


def test_max_and_percentile():
    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, 400000).astype(np.float32)
    t = _stats(x)
    assert compute_amax(t, "max") == float(np.abs(x).max())
    for p in (50.0, 90.0, 99.0):
        got = compute_amax(t, "percentile", p)
        assert got == pytest.approx(np.percentile(np.abs(x), p), rel=2e-3)
    with pytest.raises(StatsError, match="out of range"):
        compute_amax(t, "percentile", 0)
    with pytest.raises(StatsError, match="Unknown range method"):
        compute_amax(t, "kl")


def test_mse_minimises_the_error_it_reports():
    rng = np.random.default_rng(2)
    t = _stats(rng.laplace(0, 1, 300000))
    amax = compute_amax(t, "mse")
    best = evaluate_amax(t, amax).mse
    for other in (0.7 * amax, 0.9 * amax, 1.15 * amax, t.absmax):
        assert evaluate_amax(t, other).mse >= best * 0.999


def test_error_on_the_histogram_matches_quantizing_the_data():
    rng = np.random.default_rng(3)
    x = rng.normal(0, 1, 200000).astype(np.float32)
    t = _stats(x)
    for amax in (1.5, 3.0, float(np.abs(x).max())):
        s = amax / 127
        q = np.clip(np.round(x / s), -127, 127) * s
        mse = float(np.mean((x - q) ** 2))
        got = evaluate_amax(t, amax)
        assert got.mse == pytest.approx(mse, rel=0.05)
        assert got.sqnr_db == pytest.approx(10 * math.log10(np.mean(x.astype(np.float64) ** 2) / mse), abs=0.3)
        assert got.clipped_fraction == pytest.approx(np.mean(np.abs(x) > amax), abs=1e-4)


def test_resample_keeps_mass_and_range():
    rng = np.random.default_rng(4)
    t = _stats(rng.exponential(1.0, 100000))
    h = resample(t, 2048)
    assert len(h) == 2048 and h.sum() == pytest.approx(t.count)
    # the last bin ends at absmax: the largest value's bin is not empty
    assert h[-1] > 0


def test_compute_ranges_for_every_tensor_and_method():
    rng = np.random.default_rng(5)
    tensors = {n: _stats(rng.normal(0, s, 20000), name=n) for n, s in (("a", 1.0), ("b", 5.0))}
    tensors["empty"] = HistogramAccumulator("empty", 8192).to_stats()
    stats = ActivationStats(tensors=tensors, samples=1, model_sha256="")
    ranges = compute_ranges(stats)
    assert set(ranges) == {"a", "b"}
    for per in ranges.values():
        assert tuple(per) == METHODS
        assert per["max"].clipped_fraction == 0 and per["max"].amax >= per["entropy"].amax
        assert all(r.sqnr_db > 20 for r in per.values())
    assert ranges["b"]["max"].amax > 4 * ranges["a"]["max"].amax


def test_tensorrt_histogram_range_doubles_from_the_first_batch():
    acc = HistogramAccumulator("t", 8192)
    acc.update(np.array([0.5, -0.3], np.float32))   # TensorRT's histogram starts at [0, 0.5]
    acc.update(np.array([1.7], np.float32))         # ... and doubles to 1.0, then 2.0
    t = acc.to_stats()
    assert t.first_absmax == 0.5 and t.absmax == pytest.approx(1.7)
    assert trt_histogram_range(t) == 2.0
    acc.update(np.array([2.0], np.float32))         # not larger than 2.0: no doubling
    assert trt_histogram_range(acc.to_stats()) == 2.0
    # The same values in another order give another TensorRT range (the order dependence TensorRT documents).
    other = HistogramAccumulator("t", 8192)
    other.update(np.array([1.7, 2.0], np.float32))
    other.update(np.array([0.5, -0.3], np.float32))
    assert trt_histogram_range(other.to_stats()) == 2.0 and other.to_stats().first_absmax == 2.0


def test_entropy_on_the_tensorrt_range_differs_only_by_resolution():
    rng = np.random.default_rng(6)
    acc = HistogramAccumulator("t", 8192)
    acc.update(rng.normal(0, 1, 20000).astype(np.float32) * 0.6)
    for _ in range(9):
        acc.update(rng.normal(0, 1, 20000).astype(np.float32))
    t = acc.to_stats()
    assert trt_histogram_range(t) > t.absmax
    a, b = entropy_amax(t, trt_range=True), entropy_amax(t, trt_range=False)
    assert a == compute_amax(t, "entropy")
    assert a == pytest.approx(b, rel=0.15)


@pytest.mark.parametrize("method", METHODS)
def test_a_methods_amax_counted_in_threads_is_each_tensors_own(monkeypatch, method):
    # The planner refits every method: tensors go to threads, and each keeps its own amax, in the stats' order.
    from trtwidgets.core.calibration import ranges

    rng = np.random.default_rng(11)
    tensors = {f"t{i}": _stats(np.maximum(rng.normal(0, 1 + i, 3000 + 100 * i), -0.5 * i), name=f"t{i}")
               for i in range(12)}
    tensors["empty"] = HistogramAccumulator("empty", 8192).to_stats()
    stats = ActivationStats(tensors=tensors, samples=1, model_sha256="")
    monkeypatch.setattr(ranges, "_range_threads", lambda n: 3)
    threaded = ranges.amax_from_stats(stats, method)
    assert list(threaded) == [f"t{i}" for i in range(12)]
    assert threaded == {n: compute_amax(t, method) for n, t in tensors.items() if n != "empty"}
    assert threaded == {n: per[method].amax for n, per in compute_ranges(stats).items()}
