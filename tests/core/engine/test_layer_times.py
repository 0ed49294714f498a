from __future__ import annotations

import json

import pytest

from trtwidgets.core.engine.layer_times import aggregate_layer_times, read_profile


def test_aggregate_means_and_trtexec_profile(tmp_path):
    records = [("conv1", 1.0), ("relu", 0.2), ("conv1", 3.0), ("relu", 0.4), ("conv1", 2.0), ("relu", 0.3)]
    t = aggregate_layer_times(records, runs=3)
    assert [x.name for x in t.layers] == ["conv1", "relu"]
    assert t.as_mapping() == pytest.approx({"conv1": 2.0, "relu": 0.3})
    assert t.layers[0].median_ms == 2.0 and t.layers[0].total_ms == 6.0
    assert t.total_ms == pytest.approx(2.3)
    assert t.top(1)[0].name == "conv1"
    path = t.write_trt_profile(tmp_path / "profile.json")
    data = json.loads(open(path).read())
    assert data[0] == {"count": 3}
    assert data[1]["name"] == "conv1" and data[1]["averageMs"] == pytest.approx(2.0)
    assert sum(r["percentage"] for r in data[1:]) == pytest.approx(100.0)


def test_the_exported_profile_reads_back():
    t = aggregate_layer_times([("a", 1.0), ("b", 3.0)], runs=2)
    assert read_profile(t.to_trt_profile()) == pytest.approx({"a": 0.5, "b": 1.5})
    assert read_profile(json.dumps(t.to_trt_profile())) == pytest.approx(t.as_mapping())


def test_layer_reported_twice_per_run_adds_up():
    t = aggregate_layer_times([("r", 1.0), ("r", 1.0), ("r", 1.0), ("r", 1.0)], runs=2)
    assert t.as_mapping() == {"r": 2.0}


def test_run_boundaries_give_per_run_sums_and_coverage():
    # Run 1 reports a, b; run 2 reports a, b; run 3 misses b (and a reports 0.0 once).
    records = [("a", 1.0), ("b", 0.5), ("a", 2.0), ("b", 0.5), ("a", 0.0)]
    t = aggregate_layer_times(records, runs=3, run_ends=[2, 4, 5])
    a, b = t.layers
    assert (a.count, a.runs_seen, a.zero_count) == (3, 3, 1)
    assert (b.count, b.runs_seen, b.zero_count) == (2, 2, 0)
    assert b.median_ms == 0.5 and b.mean_ms == pytest.approx(1.0 / 3)
    assert t.run_sums_ms == pytest.approx((1.5, 2.5, 0.0))
    assert t.consistent_runs is False
    same = aggregate_layer_times(records[:4], runs=2, run_ends=[2, 4])
    assert same.consistent_runs is True and same.to_dict()["run_sums_ms"] == pytest.approx([1.5, 2.5])
