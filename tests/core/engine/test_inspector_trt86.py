"""Real TensorRT 8.6 inspector JSON (tests/fixtures/trt86/**/), made on the H200 with TensorRT 8.6.0.

Every committed build folder is checked for what holds whatever the build was:
the JSON parses (or is refused with the DETAILED advice when it lists names
only), the recipe's flags agree with the precisions found, and the dynamic
engine inspected without resolved shapes yields the warning. Build-specific
checks on the tiny builds (tests/fixtures/trt86/tiny/, see its README) follow.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtwidgets.core.common.errors import InspectorError
from trtwidgets.core.engine.inspector_json import parse_inspector_json
from trtwidgets.core.engine.why_not_int8 import why_not_int8

ROOT = Path(__file__).resolve().parents[2] / "fixtures" / "trt86"
GRAPHS = sorted(ROOT.rglob("*.graph.json")) if ROOT.is_dir() else []
TINY = ROOT / "tiny"


def _ids(paths):
    return [str(p.relative_to(ROOT)) for p in paths]


def _is_names_only(path: Path) -> bool:
    doc = json.loads(path.read_text(encoding="utf-8", errors="replace"), strict=False)
    return bool(doc.get("Layers")) and all(isinstance(x, str) for x in doc["Layers"])


@pytest.mark.parametrize("path", GRAPHS, ids=_ids(GRAPHS))
def test_every_real_graph_parses_or_is_refused_clearly(path):
    if _is_names_only(path):
        with pytest.raises(InspectorError, match="names only") as info:
            parse_inspector_json(path)
        assert "ProfilingVerbosity.DETAILED" in info.value.fix
        return
    graph = parse_inspector_json(path)
    assert graph.layers and graph.trt_major == 8
    assert all(layer.layer_type for layer in graph.layers)
    assert all(layer.tactic for layer in graph.layers if layer.layer_type.startswith("Cask"))
    tensors = [t for layer in graph.layers for t in layer.inputs + layer.outputs]
    if graph.dynamic_na:
        assert any(t.precision == "N/A" for t in tensors)
    else:
        assert not any(t.precision in ("N/A", "UNKNOWN") for t in tensors), \
            sorted({t.format for t in tensors if t.precision in ("N/A", "UNKNOWN")})
    # Every layer's name or metadata names at least one ONNX node, unless TensorRT made the layer itself.
    assert any(layer.onnx_nodes for layer in graph.layers)


@pytest.mark.parametrize("path", [p for p in GRAPHS if (p.parent / "recipe.json").is_file()],
                         ids=_ids([p for p in GRAPHS if (p.parent / "recipe.json").is_file()]))
def test_recipe_flags_agree_with_precisions(path):
    if _is_names_only(path):
        pytest.skip("names-only graph")
    recipe = json.loads((path.parent / "recipe.json").read_text())
    graph = parse_inspector_json(path)
    cache = path.parent / "calibration.cache"
    reasons = why_not_int8(graph, recipe, cache if cache.is_file() else None)
    precisions = set(graph.precision_counts())
    flags = set(recipe.get("flags", ()))
    if graph.dynamic_na:
        assert {r.code for r in reasons if r} == {"PRECISION_UNKNOWN"}
        return
    if "int8" not in flags:
        assert "INT8" not in precisions
        assert {r.code for r in reasons if r} <= {"INT8_NOT_ENABLED", "NOT_FLOAT"}
    if "fp16" not in flags and "int8" not in flags:
        assert precisions <= {"FP32", "INT32", "INT64", "BOOL"}, precisions
    for layer, reason in zip(graph.layers, reasons):
        if layer.precision == "INT8":
            assert reason is None or reason.code == "BIAS_FLOAT"
        elif layer.precision in ("FP32", "FP16"):
            assert reason is not None, layer.name


# --------------------------------------------------------------------------- the tiny builds


def _tiny(name: str):
    folder = TINY / name
    graph = parse_inspector_json(folder / "engine.graph.json")
    recipe = json.loads((folder / "recipe.json").read_text())
    cache = folder / "calibration.cache"
    return graph, recipe, (cache if cache.is_file() else None)


def test_real_fp32_build_runs_fp32():
    graph, recipe, _ = _tiny("conv_relu_fp32")
    assert [layer.name for layer in graph.layers] == ["conv1 + relu1", "conv2 + relu2"]
    assert [layer.precision for layer in graph.layers] == ["FP32", "FP32"]
    conv1 = graph.layers[0]
    assert conv1.onnx_nodes == ("conv1", "relu1")  # from Metadata with its raw \x1e separator
    assert "\x1e" in conv1.metadata
    assert conv1.inputs[0].layout == "LINEAR" and conv1.weights.precision == "FP32"
    assert graph.bindings == ("x", "y")
    assert {r.code for r in why_not_int8(graph, recipe)} == {"INT8_NOT_ENABLED"}


def test_real_int8_implicit_is_parsed():
    graph, recipe, cache = _tiny("conv_relu_int8_implicit")
    assert cache is not None and "int8" in recipe["flags"]
    assert [layer.precision for layer in graph.layers] == ["INT8", "INT8", "INT8"]
    reformat, conv1, conv2 = graph.layers
    assert reformat.layer_type == "Reformat" and reformat.outputs[0].layout == "CHW4"
    assert (conv1.inputs[0].layout, conv1.outputs[0].layout) == ("CHW4", "CHW32")
    assert conv2.outputs[0].precision == "FP32"  # INT8 convolution writing the FP32 engine output
    assert "i8i8_i8i32" in conv1.tactic
    reasons = why_not_int8(graph, recipe, cache)
    assert reasons[0] is None
    assert [r.code for r in reasons[1:]] == ["BIAS_FLOAT", "BIAS_FLOAT"]


def test_real_missing_scale_names_the_tensor():
    graph, recipe, cache = _tiny("conv_relu_int8_missing_r1")
    reasons = dict(zip((layer.name for layer in graph.layers), why_not_int8(graph, recipe, cache)))
    assert graph.layer("conv2 + relu2").precision == "FP32"
    assert reasons["conv2 + relu2"].code == "NO_SCALE"
    assert reasons["conv2 + relu2"].tensors == ("r1",)


def test_real_int8_recipe_that_ran_fp32_at_level_0():
    graph, recipe, cache = _tiny("int8_toolkit_cache")
    assert recipe["builder_optimization_level"] == 0 and "int8" in recipe["flags"]
    assert {layer.precision for layer in graph.layers} == {"FP32"}
    reasons = why_not_int8(graph, recipe, cache)
    assert {r.code for r in reasons} == {"FIRST_TACTIC"}
    assert "level 0" in reasons[0].sentence and "have scales" in reasons[0].sentence
    # Without the recipe the level is unknown: TensorRT preferred a float tactic.
    assert {r.code for r in why_not_int8(graph, None, cache)} == {"HIGHER_PRECISION_FASTER"}


def test_real_explicit_qdq_is_parsed():
    from tests.gpu import models
    from trtwidgets.core.engine.why_not_int8 import qdq_tensor_names

    graph, recipe, _ = _tiny("qdq_conv_int8")
    assert [layer.precision for layer in graph.layers] == ["INT8", "INT8"]
    q, conv = graph.layers
    assert q.onnx_nodes == ("q_x",) and q.metadata == ""  # no Metadata on the Q: the name says it
    assert conv.onnx_nodes == ("conv", "relu")
    reasons = why_not_int8(graph, recipe, qdq_tensors=qdq_tensor_names(models.qdq_conv()))
    assert reasons[0] is None and reasons[1].code == "BIAS_FLOAT"


def test_real_dynamic_without_resolved_shapes_gives_the_clear_message():
    graph, recipe, _ = _tiny("conv_relu_dynamic_fp16")
    assert graph.dynamic_na
    (warning,) = graph.warnings
    assert "N/A due to dynamic shapes" in warning.message and "opt shape" in warning.message
    assert graph.layers[0].inputs[0].dimensions == (1, 3, 16, -1)
    assert [layer.onnx_nodes for layer in graph.layers] == [("conv1", "relu1"), ("conv2", "relu2")]
    assert {r.code for r in why_not_int8(graph, recipe)} == {"PRECISION_UNKNOWN"}


def test_real_names_only_is_refused():
    with pytest.raises(InspectorError) as info:
        parse_inspector_json(TINY / "names_only" / "engine.graph.json")
    assert "names only" in info.value.what and "ProfilingVerbosity.DETAILED" in info.value.fix


def test_real_builds_compared():
    from trtwidgets.core.engine.build_compare import compare_builds

    cmp = compare_builds({name: TINY / name / "engine.graph.json"
                          for name in ("conv_relu_fp32", "conv_relu_int8_implicit")})
    rows = {r.key: r for r in cmp.rows}
    assert rows["conv1 + relu1"].precisions == ("FP32", "INT8") and rows["conv1 + relu1"].match == "name"
    assert rows["conv1 + relu1"].tactic_differs
    assert rows["Reformatting CopyNode for Input Tensor 0 to conv1 + relu1"].match == "unmatched"
    counts = cmp.precision_counts()
    assert counts.loc["FP32", "conv_relu_fp32"] == 2 and counts.loc["INT8", "conv_relu_int8_implicit"] == 3


def test_real_network_layers_prebuild_view():
    from trtwidgets.core.engine.layer_table import prebuild_table

    rows = json.loads((TINY / "fp16_conv2_fp32" / "network_layers.json").read_text())
    table = prebuild_table(rows)
    assert list(table["name"]) == ["conv1", "relu1", "conv2", "relu2"]
    assert list(table["type"]) == ["CONVOLUTION", "ACTIVATION", "CONVOLUTION", "ACTIVATION"]
    assert set(table["requested_precision"]) == {"FLOAT"} and set(table["output_types"]) == {"FLOAT"}
    assert list(table["outputs"]) == ["c1", "r1", "c2", "y"]


def test_the_layer_summary_counts_what_the_inspector_json_says(fixtures_dir):
    """Issue 21's counts (reformats, standalone PointWise and Scale, INT8) from a real TensorRT 8.6 Q/DQ engine."""
    import json as _json

    from trtwidgets.core.engine.inspector_json import parse_inspector_json

    path = fixtures_dir / "trt86" / "cls_static_qdq_int8" / "engine.graph.json"
    raw = _json.loads(path.read_text(), strict=False)["Layers"]  # TensorRT 8.6 writes raw control characters
    kind = [layer.get("ParameterType") or layer.get("LayerType") for layer in raw]
    summary = parse_inspector_json(path).layer_summary()
    assert summary["layers"] == len(raw) and sum(summary["precisions"].values()) == len(raw)
    assert summary["reformats"] == kind.count("Reformat") > 0
    assert summary["pointwise"] == kind.count("PointWise") and summary["scale"] == kind.count("Scale")
    assert summary["int8"] == summary["precisions"].get("INT8", 0) > 0
    assert len(summary["reformat_names"]) == summary["reformats"]
