"""Parsing engine-inspector JSON: schemas of TensorRT 8.6/10 and 11, and bad input."""

from __future__ import annotations

import json

import pytest

from trtwidgets.core.common.errors import InspectorError
from trtwidgets.core.engine.engine_graph import EngineGraph
from trtwidgets.core.engine.inspector_json import parse_inspector_json
from trtwidgets.core.engine.tensor_formats import layout_from_format, precision_from_format

from tests.core import inspector_samples as s


@pytest.mark.parametrize("text, precision, layout", [
    ("Row major linear FP32", "FP32", "LINEAR"),
    ("Row major linear FP16 format", "FP16", "LINEAR"),
    ("Channel major FP16 format where channel % 8 == 0", "FP16", "HWC8"),
    ("Channel major FP32 format where channel % 4 == 0 with 3 spatial dimensions", "FP32", "DHWC4"),
    ("Four wide channel vectorized row major Int8 format", "INT8", "CHW4"),
    ("Thirty-two wide channel vectorized row major Int8 format.", "INT8", "CHW32"),
    ("Two wide channel vectorized row major FP16 format", "FP16", "CHW2"),
    ("Row major linear Int32", "INT32", "LINEAR"),
    ("Row major linear BOOL", "BOOL", "LINEAR"),
    ("Row major linear UInt8 format", "UINT8", "LINEAR"),
    ("Row major linear BFloat16 format", "BF16", "LINEAR"),
    ("Row major linear FP8 format", "FP8", "LINEAR"),
    ("Row major linear Int64 format", "INT64", "LINEAR"),
    ("Half", "FP16", ""),
    ("Float", "FP32", ""),
    ("kINT8", "INT8", ""),
    ("N/A due to dynamic shapes", "N/A", "N/A"),
    ("Unknown format", "UNKNOWN", ""),
])
def test_format_strings(text, precision, layout):
    assert precision_from_format(text) == precision
    assert layout_from_format(text) == layout


def test_uint8_is_not_int8():
    assert precision_from_format("Channel major UInt8 format") == "UINT8"


def test_trt86_text_with_raw_control_characters():
    text = s.trt_text(s.synthetic_int8_implicit())
    assert "\x1e" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text)  # what a strict parser does with TensorRT 8.6 output
    graph = parse_inspector_json(text)
    assert isinstance(graph, EngineGraph)
    assert graph.trt_major == 8
    assert graph.bindings == ("x", "probs")
    conv = graph.layer("conv1 + relu1")
    assert conv.onnx_nodes == ("conv1", "relu1")
    assert conv.layer_type == "CaskConvolution" and conv.type == "Convolution"
    assert conv.inputs[0].precision == "INT8" and conv.inputs[0].layout == "CHW4"
    assert conv.outputs[0].layout == "CHW32"
    assert conv.weights.precision == "INT8" and conv.weights.count == 432
    assert conv.bias.type == "Float" and conv.bias.precision == "FP32"
    assert conv.tactic.startswith("sm90_xmma_fprop_implicit_gemm_interleaved_i8i8")
    assert conv.raw["StreamId"] == 0
    assert graph.layer("gap").precision == "FP16"
    assert graph.warnings == ()


def test_reads_a_path_and_bytes(tmp_path):
    path = tmp_path / "engine.graph.json"
    path.write_text(s.trt_text(s.synthetic_fp16()), encoding="utf-8")
    by_path = parse_inspector_json(path)
    by_str = parse_inspector_json(str(path))
    by_bytes = parse_inspector_json(path.read_bytes())
    assert by_path.source == str(path)
    assert [l.name for l in by_path.layers] == [l.name for l in by_str.layers] == [l.name for l in by_bytes.layers]
    assert by_path.precision_counts() == {"FP16": 7, "FP32": 1}


def test_fp32_build_is_all_fp32():
    graph = parse_inspector_json(s.trt_text(s.synthetic_fp32()))
    assert {layer.precision for layer in graph.layers} == {"FP32"}


@pytest.mark.parametrize("datatype_key", ["Datatype", "DataType"])
def test_trt11_split_keys_and_io_tensors(datatype_key):
    doc = s.synthetic_trt11(datatype_key=datatype_key)
    graph = parse_inspector_json(json.dumps(doc))
    old = parse_inspector_json(s.trt_text(s.synthetic_int8_implicit()))
    assert graph.trt_major == 11
    assert graph.bindings == ("x", "probs")
    assert graph.io_tensors[0].mode == "Input" and graph.io_tensors[0].precision == "FP32"
    assert graph.io_tensors[1].dimensions == (1, 2)
    # The same engine in both schemas gives the same precisions and layouts.
    assert [l.precision for l in graph.layers] == [l.precision for l in old.layers]
    assert [t.layout for l in graph.layers for t in l.inputs] == [t.layout for l in old.layers for t in l.inputs]


def test_dynamic_without_context_is_a_warning_not_an_error():
    graph = parse_inspector_json(s.trt_text(s.synthetic_dynamic_na()))
    assert graph.dynamic_na
    (warning,) = graph.warnings
    assert warning.code == "DYNAMIC_SHAPES_NA"
    assert "every tensor" in warning.message
    assert "execution context" in warning.message and "opt shape" in warning.message
    assert "trtwidgets.trt" in warning.message
    assert {layer.precision for layer in graph.layers} == {"N/A"}
    assert graph.layers[1].inputs[0].dimensions[0] == -1
    # Names, types and tactics are still usable.
    assert graph.layers[1].onnx_nodes == ("conv1", "relu1")


def test_dynamic_na_in_trt11_split_form():
    graph = parse_inspector_json(json.dumps(s.synthetic_trt11(s.synthetic_dynamic_na())))
    assert graph.dynamic_na and {layer.precision for layer in graph.layers} == {"N/A"}


def test_profiles_other_than_the_first_are_dropped_with_a_warning():
    doc = s.synthetic_fp16()
    copies = json.loads(json.dumps(doc["Layers"]))
    for layer in copies:
        layer["Name"] += " [profile 1]"
    doc["Layers"] += copies
    doc["Bindings"] += ["x [profile 1]", "probs [profile 1]"]
    graph = parse_inspector_json(json.dumps(doc))
    assert len(graph.layers) == 8
    assert graph.bindings == ("x", "probs")
    assert [w.code for w in graph.warnings] == ["OTHER_PROFILES_DROPPED"]
    second = parse_inspector_json(json.dumps(doc), profile=1)
    assert len(second.layers) == 8 and second.layers[1].name == "conv1 + relu1 [profile 1]"
    assert len(parse_inspector_json(json.dumps(doc), profile=None).layers) == 16


# --------------------------------------------------------------------------- bad input


def _error(arg) -> InspectorError:
    with pytest.raises(InspectorError) as info:
        parse_inspector_json(arg)
    err = info.value
    assert err.what and err.fix  # every message says what and what to do
    return err


def test_not_json(tmp_path):
    path = tmp_path / "engine.graph.json"
    path.write_bytes(b"\x00\x01TRT engine bytes, not JSON")
    err = _error(path)
    assert "is not JSON" in err.what and str(path) in err.what
    assert "get_engine_information" in err.fix
    # Binary bytes are named, not echoed to the terminal.
    assert "binary data" in err.why and "\x00" not in err.why


def test_empty_file(tmp_path):
    path = tmp_path / "empty.json"
    path.write_text("")
    assert "empty" in _error(path).what


def test_missing_file(tmp_path):
    err = _error(tmp_path / "nope.json")
    assert "does not exist" in err.what


def test_json_of_another_shape():
    err = _error(json.dumps({"model": "cls.onnx", "layers": 3}))
    assert "not TensorRT engine-inspector output" in err.what
    assert "'model'" in err.what and "'Layers'" in err.why


def test_profile_json_given_as_graph_says_so():
    profile = [{"count": 10}, {"name": "conv1 + relu1", "timeMs": 1.0, "averageMs": 0.1, "percentage": 50.0}]
    err = _error(json.dumps(profile))
    assert "profile" in err.what and "graph.json" in err.fix


def test_names_only_says_rebuild_with_detailed():
    err = _error(json.dumps(s.synthetic_names_only()))
    assert "names only" in err.what and "conv1 + relu1" in err.what
    assert "ProfilingVerbosity.DETAILED" in err.fix
    assert "LAYER_NAMES_ONLY" in err.why


def test_no_layers():
    assert "no layers" in _error('{"Layers": [], "Bindings": []}').what


@pytest.mark.parametrize("keep", [0.3, 0.75, 0.999])
def test_truncated_file(tmp_path, keep):
    text = s.trt_text(s.synthetic_int8_implicit())
    path = tmp_path / "cut.json"
    path.write_text(text[: int(len(text) * keep)], encoding="utf-8")
    err = _error(path)
    assert "truncated" in err.what
    assert "cut off" in err.why


def test_layer_that_is_not_an_object():
    doc = s.synthetic_fp16()
    doc["Layers"].append(42)
    assert "layer 8" in _error(json.dumps(doc)).what


def test_build_context_from_a_folder_and_from_a_build_object(tmp_path):
    from trtwidgets.core.engine.build_context import build_context

    graph = tmp_path / "engine.graph.json"
    graph.write_text(s.trt_text(s.synthetic_fp16()))
    (tmp_path / "recipe.json").write_text("{}")
    (tmp_path / "calibration.cache").write_text("TRT-8600-EntropyCalibration2\n")
    assert build_context(graph) == {"recipe": str(tmp_path / "recipe.json"),
                                    "calibration": str(tmp_path / "calibration.cache")}
    assert build_context(str(graph)) == build_context(graph)
    assert build_context(s.trt_text(s.synthetic_fp16())) == {}

    class Saved:  # the attributes of core.saved_build.SavedBuild / trt.build.BuildResult
        inspector_json_path = str(graph)
        recipe = {"flags": ["fp16"]}
        calibration_cache_path = None
        timings_path = "t.json"

    ctx = build_context(Saved())
    assert ctx["recipe"] == {"flags": ["fp16"]}  # the object's own recipe wins over the file
    assert ctx["profile"] == "t.json"
    assert ctx["calibration"] == str(tmp_path / "calibration.cache")
