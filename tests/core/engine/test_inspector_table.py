"""The per-layer table, the precision summary, the Styler and the pre-build view."""

from __future__ import annotations

import json
import math

import pytest

from trtwidgets.core.common.errors import InspectorError
from trtwidgets.core.engine.inspector_json import parse_inspector_json
from trtwidgets.core.engine.layer_table import (
    COLUMNS,
    filter_table,
    layer_table,
    prebuild_table,
    precision_summary,
    styled,
    summary_dict,
)
from trtwidgets.core.engine.layer_times import read_profile

from tests.core import inspector_samples as s

RECIPE = {"flags": ["fp16", "int8"], "calibrator": {"kind": "toolkit"}}


@pytest.fixture()
def int8_table():
    return layer_table(s.trt_text(s.synthetic_int8_implicit()), recipe=RECIPE, calibration=s.SYNTHETIC_CACHE)


def test_columns_and_rows(int8_table):
    assert tuple(int8_table.columns) == COLUMNS
    assert len(int8_table) == 9
    row = int8_table.set_index("name").loc["conv1 + relu1"]
    assert row["type"] == "Convolution" and row["layer_type"] == "CaskConvolution"
    assert row["onnx_nodes"] == "conv1, relu1"
    assert (row["input_precision"], row["output_precision"]) == ("INT8", "INT8")
    assert (row["input_format"], row["output_format"]) == ("CHW4", "CHW32")
    assert (row["weights_type"], row["bias_type"]) == ("INT8", "FP32")
    assert row["why_not_int8"] == "BIAS_FLOAT"
    reformat = int8_table.set_index("name").loc["Reformatting CopyNode for Input Tensor 0 to gap"]
    assert (reformat["input_precision"], reformat["output_precision"]) == ("INT8", "FP16")
    assert int8_table["latency_ms"].isna().all()


def test_summary_counts_and_shares(int8_table):
    summary = precision_summary(int8_table)
    assert list(summary.index) == ["INT8", "FP16"]
    assert summary.loc["INT8", "layers"] == 5 and summary.loc["FP16", "layers"] == 4
    assert summary["share"].sum() == pytest.approx(1.0)
    assert summary["time_share"].isna().all()


def test_profile_json_fills_latency_and_time_share():
    graph = parse_inspector_json(s.trt_text(s.synthetic_int8_implicit()))
    names = [layer.name for layer in graph.layers]
    profile = [{"count": 100}] + [
        {"name": n, "timeMs": 1.0 * (i + 1), "averageMs": 0.01 * (i + 1), "percentage": 0.0}
        for i, n in enumerate(names[:-1])]  # the softmax was not timed
    table = layer_table(graph, profile=json.dumps(profile))
    assert table["latency_ms"].iloc[0] == pytest.approx(0.01)
    assert math.isnan(table["latency_ms"].iloc[-1])
    summary = precision_summary(table)
    int8_ms = sum(0.01 * (i + 1) for i, l in enumerate(graph.layers[:-1]) if l.precision == "INT8")
    fp16_ms = sum(0.01 * (i + 1) for i, l in enumerate(graph.layers[:-1]) if l.precision == "FP16")
    assert summary.loc["INT8", "time_ms"] == pytest.approx(int8_ms)
    assert summary.loc["INT8", "time_share"] == pytest.approx(int8_ms / (int8_ms + fp16_ms))
    d = summary_dict(table)
    assert d["precisions"]["FP16"]["time_ms"] == pytest.approx(fp16_ms)
    assert json.loads(json.dumps(d)) == d


def test_read_profile_forms(tmp_path):
    assert read_profile({"a": 1}) == {"a": 1.0}
    # timeMs only: divided by the run count of the header record.
    assert read_profile([{"count": 4}, {"name": "a", "timeMs": 2.0}]) == {"a": 0.5}
    path = tmp_path / "p.json"
    path.write_text(json.dumps([{"count": 1}, {"name": "a", "timeMs": 1, "averageMs": 0.25, "percentage": 100}]))
    assert read_profile(path) == {"a": 0.25}
    assert read_profile(str(path)) == {"a": 0.25}
    with pytest.raises(InspectorError):
        read_profile([{"count": 3}])
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    with pytest.raises(InspectorError):
        read_profile(bad)


def test_filter_and_sort(int8_table):
    assert list(filter_table(int8_table, text="RELU2")["name"]) == ["conv2 + relu2"]
    assert list(filter_table(int8_table, text="hswish_mul")["type"]) == ["PointWise"]  # matched by ONNX node
    assert set(filter_table(int8_table, precision="FP16")["precision"]) == {"FP16"}
    assert len(filter_table(int8_table, layer_type="Reformat")) == 2
    assert len(filter_table(int8_table, precision="INT8", layer_type="Convolution")) == 2
    by_name = filter_table(int8_table, sort_by="name")
    assert list(by_name["name"]) == sorted(int8_table["name"])
    assert list(filter_table(int8_table, sort_by="name", ascending=False)["name"]) == sorted(int8_table["name"])[::-1]


def test_styled_escapes_names_and_colours_precisions():
    doc = s.synthetic_fp16()
    doc["Layers"][1]["Name"] = "<script>alert(1)</script> + relu1"
    table = layer_table(json.dumps(doc))
    html = styled(table).to_html()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "background-color: #d6e6f5" in html  # FP16
    assert styled(table, max_rows=3).to_html().count("<tr>") == 4  # header + 3 rows


def test_warnings_travel_with_the_table():
    table = layer_table(s.trt_text(s.synthetic_dynamic_na()))
    assert "N/A due to dynamic shapes" in table.attrs["warnings"][0]
    assert set(table["why_not_int8"]) == {"PRECISION_UNKNOWN"}


def test_prebuild_table_from_network_layers_rows():
    rows = [
        {"index": 0, "name": "conv1", "type": "CONVOLUTION", "precision": "FLOAT", "precision_is_set": False,
         "inputs": ["x", None], "outputs": [{"name": "y", "dtype": "FLOAT", "shape": [1, 16, 24, 96],
                                             "type_is_set": False}]},
        {"index": 1, "name": "softmax", "type": "SOFTMAX", "precision": "HALF", "precision_is_set": True,
         "inputs": ["y"], "outputs": [{"name": "p", "dtype": "HALF", "shape": [1, 2], "type_is_set": True}]},
        {"index": 2, "name": "relu", "type": "ACTIVATION", "inputs": ["p"],  # TensorRT 11: no layer precision
         "outputs": [{"name": "q", "dtype": "FLOAT", "shape": [1, 2]}]},
    ]
    table = prebuild_table(rows)
    assert list(table["requested_precision"]) == ["FLOAT", "HALF", ""]
    assert list(table["precision_is_set"]) == [False, True, False]
    assert list(table["output_types"]) == ["FLOAT", "HALF", "FLOAT"]
    assert list(table["output_type_is_set"]) == [False, True, False]
    assert table.loc[0, "inputs"] == "x"
