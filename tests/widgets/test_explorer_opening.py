"""The explorer opens on a meaningful tensor, not the 160-value Reshape at the top of the ranking (issue 15)."""

from __future__ import annotations

from types import SimpleNamespace

from trtwidgets.widgets.explorer_opening import opening_tensor


def _stats(**counts):
    return SimpleNamespace(tensors={k: SimpleNamespace(count=v) for k, v in counts.items()})


def test_the_top_ranked_tensor_that_is_not_tiny():
    stats = _stats(reshape=160, conv1=9216, conv2=4608, fc=4)
    assert opening_tensor(stats, ["fc", "reshape", "conv2", "conv1"]) == "conv2"


def test_without_a_ranking_the_largest_and_without_tensors_none():
    assert opening_tensor(_stats(a=10, b=30, c=20)) == "b"
    assert opening_tensor(_stats()) is None


def test_the_demo_explorer_opens_on_a_large_tensor():
    from trtwidgets.widgets.session import Session
    from trtwidgets.widgets.calib_explorer import CalibrationExplorer
    from trtwidgets import demo

    s = Session()
    assert s.load(demo.MODEL_PATH) and s.calibrate(progress=False, max_samples=4)
    ex = CalibrationExplorer(session=s, ranges=s.ranges)
    counts = sorted(t.count for t in s.stats.tensors.values())
    assert s.stats.tensors[ex.tensor].count >= counts[len(counts) // 2]
    top = ex.overview.ranking.names[0]
    assert s.stats.tensors[top].count < counts[len(counts) // 2] or ex.tensor == top
