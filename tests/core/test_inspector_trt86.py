"""Real TensorRT 8.6 inspector JSON (tests/fixtures/trt86/<build>/), made on the GPU machine.

Every committed build folder is checked for what holds whatever the build was:
the JSON parses (or is refused with the DETAILED advice when it lists names
only), the recipe's flags agree with the precisions found, and the dynamic
engine inspected without a context yields the warning. Build-specific checks
follow below the generic ones.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trtwidgets.core.errors import InspectorError
from trtwidgets.core.inspector import parse_inspector_json
from trtwidgets.core.why_not_int8 import why_not_int8

ROOT = Path(__file__).resolve().parents[1] / "fixtures" / "trt86"
GRAPHS = sorted(ROOT.glob("*/*.graph.json")) if ROOT.is_dir() else []


def _ids(paths):
    return [f"{p.parent.name}/{p.name}" for p in paths]


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
