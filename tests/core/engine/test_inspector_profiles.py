"""Per-layer timings beside real TensorRT 8.6 builds: every form ``read_profile`` accepts, and clear refusals.

The committed ``tests/fixtures/trt86/cls_*/timings.json`` files were written by
``tests/gpu/make_fixtures.py`` on the H200: ``{"shape", "latency", "layers":
{"runs", ..., "layers": [{"name", "mean_ms", ...}]}, "build_seconds", "phases"}``.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from trtwidgets.core.common.errors import InspectorError
from trtwidgets.core.engine.build_context import build_context
from trtwidgets.core.engine.inspector_json import parse_inspector_json
from trtwidgets.core.engine.layer_table import layer_table
from trtwidgets.core.engine.layer_times import read_profile

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "trt86"
CLS = ["cls_static_fp32", "cls_static_fp16", "cls_static_int8_entropy2", "cls_static_qdq_int8",
       "cls_dynamic_int8_entropy2", "cls_dynamic_fp16"]


def _raw_means(folder: Path) -> dict:
    doc = json.loads((folder / "timings.json").read_text())
    return {r["name"]: r["mean_ms"] for r in doc["layers"]["layers"]}


@pytest.mark.parametrize("name", CLS)
def test_real_timings_file_gives_each_layer_its_mean(name):
    folder = ROOT / name
    expected = _raw_means(folder)
    times = read_profile(folder / "timings.json")
    assert times == pytest.approx(expected)
    # The same file as text (a notebook passes what it read) and as the decoded object.
    assert read_profile((folder / "timings.json").read_text()) == pytest.approx(expected)
    assert read_profile(json.loads((folder / "timings.json").read_text())) == pytest.approx(expected)


@pytest.mark.parametrize("name", ["cls_static_int8_entropy2", "cls_static_fp16", "cls_static_qdq_int8",
                                  "cls_dynamic_int8_entropy2"])
def test_sibling_timings_fill_the_latency_column(name):
    graph_path = ROOT / name / "engine.graph.json"
    context = build_context(graph_path)
    assert context["profile"] == str(ROOT / name / "timings.json")
    table = layer_table(parse_inspector_json(graph_path), **context)
    expected = _raw_means(ROOT / name)
    timed = table[table["name"].isin(list(expected))]
    # Every engine layer TensorRT's profiler reported is timed in the table, with the file's mean.
    assert len(timed) >= 0.9 * len(table)
    for layer, ms in zip(timed["name"], timed["latency_ms"]):
        assert ms == pytest.approx(expected[layer])
    assert not math.isnan(float(table["latency_ms"].sum()))


def test_plain_mapping_and_layer_timings_dict_are_read():
    assert read_profile({"conv": 1, "relu": "0.5"}) == {"conv": 1.0, "relu": 0.5}
    # LayerTimings.to_dict() written on its own, without the build's wrapper.
    doc = json.loads((ROOT / "cls_static_fp16" / "timings.json").read_text())["layers"]
    assert read_profile(doc) == pytest.approx(_raw_means(ROOT / "cls_static_fp16"))


@pytest.mark.parametrize("doc, expected", [
    ({"conv": [1.0, 2.0]}, "per-layer"),
    ({"shape": [1, 3], "latency": {"mean_ms": 1.0}}, "no per-layer times"),
    ({"layers": {"runs": 3, "layers": []}}, "no per-layer times"),
    ({"layers": [{"name": "conv", "mean_ms": "fast"}]}, "per-layer"),
    (42, "per-layer"),
])
def test_unknown_profile_shapes_are_refused_clearly(tmp_path, doc, expected):
    path = tmp_path / "timings.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InspectorError, match=expected) as info:
        read_profile(path)
    err = info.value
    assert str(path) in err.what and err.why and err.fix
