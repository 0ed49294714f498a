"""Comparing builds: precision counts, matched layers, differences and latency."""

from __future__ import annotations

import json

import pytest

from trtwidgets.core.engine.build_compare import compare_builds
from trtwidgets.core.common.errors import InspectorError
from trtwidgets.core.engine.inspector_json import parse_inspector_json

from tests.core import inspector_samples as s


def _graph(doc):
    return parse_inspector_json(s.trt_text(doc))


def test_fp16_vs_int8():
    cmp = compare_builds({"fp16": _graph(s.synthetic_fp16()), "int8": _graph(s.synthetic_int8_implicit())})
    counts = cmp.precision_counts()
    assert list(counts.columns) == ["fp16", "int8"]
    assert counts.loc["FP16", "fp16"] == 7 and counts.loc["INT8", "int8"] == 5
    assert counts.loc["INT8", "fp16"] == 0
    rows = {r.key: r for r in cmp.rows}
    conv = rows["conv1 + relu1"]
    assert conv.match == "name"
    assert conv.precisions == ("FP16", "INT8")
    assert conv.precision_differs and conv.tactic_differs
    assert rows["softmax"].precisions == ("FP16", "FP16") and not rows["softmax"].precision_differs
    # The reformat in front of the pooling exists only in the INT8 build.
    only = rows["Reformatting CopyNode for Input Tensor 0 to gap"]
    assert only.match == "unmatched" and only.layers[0] is None
    diffs = cmp.table(only_differences=True)
    assert "conv1 + relu1" in set(diffs["layer"])
    assert "softmax" not in set(diffs["layer"])
    assert {"fp16 precision", "int8 precision", "fp16 tactic", "int8 tactic"} <= set(diffs.columns)


def test_matching_by_fused_nodes_when_names_differ():
    qdq = s.synthetic_int8_implicit()
    for layer in qdq["Layers"]:
        if layer["Name"] == "conv2 + relu2":
            layer["Name"] = "conv2.weight + QuantizeLinear_7 + conv2 + relu2"
            layer["Metadata"] = s.metadata("QuantizeLinear_7", "conv2", "relu2")
        if layer["Name"] == "conv1 + relu1":
            layer["Name"] = "fused_conv1"  # same nodes in Metadata, new name
    cmp = compare_builds([_graph(s.synthetic_fp16()), _graph(qdq)], labels=["fp16", "qdq"])
    rows = {r.key: r for r in cmp.rows}
    assert rows["conv1 + relu1"].match == "onnx_nodes"
    assert rows["conv1 + relu1"].layers[1].name == "fused_conv1"
    assert rows["conv2 + relu2"].match == "overlap"
    assert rows["conv2 + relu2"].layers[1].name.startswith("conv2.weight")


def test_latency_where_profiles_exist():
    fp16, int8 = _graph(s.synthetic_fp16()), _graph(s.synthetic_int8_implicit())
    prof = [{"count": 1}] + [{"name": l.name, "timeMs": 1, "averageMs": 0.5, "percentage": 1} for l in int8.layers]
    cmp = compare_builds({"fp16": fp16, "int8": int8}, profiles={"int8": json.dumps(prof)})
    assert cmp.has_latency == (False, True)
    totals = cmp.total_latency_ms()
    assert totals["fp16"] is None and totals["int8"] == pytest.approx(0.5 * len(int8.layers))
    table = cmp.table()
    assert "int8 ms" in table.columns and "fp16 ms" not in table.columns


def test_three_builds_and_sources(tmp_path):
    path = tmp_path / "fp32.graph.json"
    path.write_text(s.trt_text(s.synthetic_fp32()))
    cmp = compare_builds([path, s.trt_text(s.synthetic_fp16()), _graph(s.synthetic_int8_implicit())])
    assert cmp.labels == ("build 1", "build 2", "build 3")
    conv = {r.key: r for r in cmp.rows}["conv1 + relu1"]
    assert conv.precisions == ("FP32", "FP16", "INT8")


def test_needs_two_builds():
    with pytest.raises(InspectorError):
        compare_builds([_graph(s.synthetic_fp16())])
