"""The pre-build view: network_layers.json of real TensorRT 8.6 builds, read back and summarised."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from trtwidgets.core.common.errors import InspectorError
from trtwidgets.core.engine.layer_table import prebuild_summary, prebuild_table
from trtwidgets.core.engine.saved_build import load_saved_build, network_layers_of, read_network_layers

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "trt86"
CLS = ["cls_static_fp32", "cls_static_fp16", "cls_static_int8_entropy2", "cls_static_qdq_int8",
       "cls_dynamic_int8_entropy2", "cls_dynamic_fp16"]


def _raw(name):
    return json.loads((ROOT / name / "network_layers.json").read_text())


@pytest.mark.parametrize("name", CLS)
def test_saved_build_carries_its_network_layers(name):
    raw = _raw(name)
    saved = load_saved_build(ROOT / name)
    assert saved.network_layers == tuple(raw)
    assert saved.network_layers_path == str(ROOT / name / "network_layers.json")
    # Every way of pointing at the build finds the same list.
    assert network_layers_of(saved) == tuple(raw)
    assert network_layers_of(ROOT / name) == tuple(raw)
    assert network_layers_of(str(ROOT / name / "engine.graph.json")) == tuple(raw)


@pytest.mark.parametrize("name", ["cls_static_fp16", "cls_static_qdq_int8"])
def test_prebuild_summary_of_a_real_network(name):
    raw = _raw(name)
    table = prebuild_table(read_network_layers(ROOT / name))
    assert list(table["name"]) == [r["name"] for r in raw]
    d = prebuild_summary(table)
    assert d["layers"] == len(raw)
    assert d["types"] == dict(Counter(r["type"] for r in raw))
    assert d["requested_precisions"] == dict(Counter(r["precision"] for r in raw))
    assert d["precision_set"] == [r["name"] for r in raw if r["precision_is_set"]]
    assert json.loads(json.dumps(d)) == d


def test_sources_without_a_network_list_give_none(tmp_path):
    assert network_layers_of((ROOT / "cls_static_fp16" / "engine.graph.json").read_text()) is None
    (tmp_path / "engine.graph.json").write_text("{}")
    assert network_layers_of(tmp_path / "engine.graph.json") is None
    assert load_saved_build(tmp_path).network_layers is None


@pytest.mark.parametrize("content, expected", [
    ("{not json", "Could not read"),
    (json.dumps({"layers": []}), "not a network layer list"),
    (json.dumps([1, 2]), "not a network layer list"),
])
def test_broken_network_list_is_refused_clearly(tmp_path, content, expected):
    (tmp_path / "network_layers.json").write_text(content)
    with pytest.raises(InspectorError, match=expected) as info:
        read_network_layers(tmp_path)
    assert info.value.fix
    with pytest.raises(InspectorError):
        network_layers_of(tmp_path)
    (tmp_path / "engine.graph.json").write_bytes((ROOT / "cls_static_fp16" / "engine.graph.json").read_bytes())
    assert load_saved_build(tmp_path).network_layers is None  # the engine view does not depend on it
    with pytest.raises(InspectorError, match="not an object"):
        prebuild_table([{"name": "a"}, "b"])
