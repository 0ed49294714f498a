"""The precision bar chart, checked through fig.to_dict()."""

from __future__ import annotations

import json

import pytest

from trtwidgets.core.engine.build_compare import compare_builds
from trtwidgets.core.engine.layer_table import PRECISION_COLORS, layer_table
from trtwidgets.plots.precision import PrecisionBarDisplay

from ..core import inspector_samples as s


def test_single_build_counts_and_colours():
    table = layer_table(s.trt_text(s.synthetic_int8_implicit()))
    fig = PrecisionBarDisplay.from_table(table).figure().to_dict()
    (bar,) = fig["data"]
    assert list(bar["x"]) == ["INT8", "FP16"]
    assert list(bar["y"]) == [5, 4]
    assert list(bar["marker"]["color"]) == [PRECISION_COLORS["INT8"], PRECISION_COLORS["FP16"]]
    assert "9 layers" in fig["layout"]["title"]["text"]
    assert "yaxis2" not in fig["layout"]


def test_time_share_bars_with_a_profile():
    text = s.trt_text(s.synthetic_int8_implicit())
    table = layer_table(text)
    profile = {name: (1.0 if prec == "INT8" else 3.0) for name, prec in zip(table["name"], table["precision"])}
    table = layer_table(text, profile=profile)
    fig = PrecisionBarDisplay.from_table(table, build="int8").figure().to_dict()
    layers, time = fig["data"]
    assert time["name"] == "int8 time %" and time["yaxis"] == "y2"
    assert list(time["y"]) == pytest.approx([100 * 5 / 17, 100 * 12 / 17])
    assert fig["layout"]["yaxis2"]["side"] == "right"


def test_comparison_has_one_trace_per_build():
    cmp = compare_builds({"fp16": s.trt_text(s.synthetic_fp16()), "int8": s.trt_text(s.synthetic_int8_implicit())})
    fig = PrecisionBarDisplay.from_comparison(cmp).figure().to_dict()
    assert [t["name"] for t in fig["data"]] == ["fp16 layers", "int8 layers"]
    by_build = {t["name"]: dict(zip(t["x"], t["y"])) for t in fig["data"]}
    assert by_build["fp16 layers"] == {"INT8": 0, "FP16": 7, "FP32": 1}
    assert by_build["int8 layers"]["INT8"] == 5
    assert fig["layout"]["barmode"] == "group"


def test_figure_is_json_serialisable():
    table = layer_table(s.trt_text(s.synthetic_fp32()))
    json.dumps(PrecisionBarDisplay.from_table(table).figure().to_dict(), default=str)
