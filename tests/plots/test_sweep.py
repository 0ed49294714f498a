"""SweepDisplay: data checks and the figure's structure (through fig.to_dict())."""

from __future__ import annotations

import pytest

from trtwidgets.plots import SweepDisplay

pytest.importorskip("plotly")


def test_one_trace_per_series_and_panel_with_shared_colours():
    d = SweepDisplay.from_metrics([8, 16, 32], "samples", {
        "accuracy": {"max": [0.8, 0.82, 0.81], "entropy": [0.79, None, 0.8]},
        "SNR (dB)": {"max": [15, 16, 17], "entropy": [14, 15, 16]}}, title="t", log_x=True)
    fig = d.figure().to_dict()
    traces = fig["data"]
    assert [t["name"] for t in traces] == ["max", "entropy", "max", "entropy"]
    assert [t["showlegend"] for t in traces] == [True, True, False, False]
    assert traces[0]["line"]["color"] == traces[2]["line"]["color"] != traces[1]["line"]["color"]
    assert list(traces[1]["y"]) == [0.79, None, 0.8]
    assert fig["layout"]["xaxis"]["type"] == "log"
    assert [a["text"] for a in fig["layout"]["annotations"]] == ["accuracy", "SNR (dB)"]


def test_a_series_of_the_wrong_length_is_refused():
    with pytest.raises(ValueError, match="2 values for 3"):
        SweepDisplay.from_metrics([1, 2, 3], "x", {"y": {"a": [1, 2]}})
