from __future__ import annotations

import json

import numpy as np
import pytest

from trtwidgets.core.common.errors import UserError
from trtwidgets.core.engine.latency import MIN_RUNS, BenchResult, latency_stats


def test_stats_match_numpy_percentiles():
    rng = np.random.default_rng(0)
    times = rng.gamma(4.0, 0.25, size=257)
    r = latency_stats(times, batch=32, shapes={"x": (32, 3, 48, 192)}, warmup=20, min_runs=MIN_RUNS)
    assert r.median_ms == pytest.approx(np.percentile(times, 50))
    assert r.p90_ms == pytest.approx(np.percentile(times, 90))
    assert r.p99_ms == pytest.approx(np.percentile(times, 99))
    assert r.mean_ms == pytest.approx(times.mean())
    assert r.min_ms == times.min() and r.max_ms == times.max()
    assert r.throughput == pytest.approx(32 / (np.median(times) / 1000))
    assert r.min_ms <= r.median_ms <= r.p90_ms <= r.p99_ms <= r.max_ms
    assert r.runs == 257 and r.shapes == {"x": (32, 3, 48, 192)}


def test_json_round_trip():
    r = latency_stats([1.0, 2.0, 3.0, 4.0], batch=1)
    back = BenchResult.from_dict(json.loads(json.dumps(r.to_dict(), allow_nan=False)))
    assert back == r
    assert r.median_ms == 2.5 and r.throughput == pytest.approx(400.0)


@pytest.mark.parametrize("times,batch,match", [
    ([], 1, "too few"),
    ([1.0] * 10, 1, "too few"),
    ([1.0, -1.0] * 200, 1, "negative"),
    ([1.0, float("nan")] * 200, 1, "not finite"),
    ([1.0] * 300, 0, "Batch"),
])
def test_bad_input(times, batch, match):
    with pytest.raises(UserError, match=match):
        latency_stats(times, batch=batch, min_runs=MIN_RUNS)
