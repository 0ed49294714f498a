"""The inspector parser and why-not-INT8 on real TensorRT 8.6 engines (GPU machine, Python 3.9).

Run there with::

    source /tmp/trtb/env.sh && EXTRA_PYTHONPATH=$PWD $PY39 -m pytest tests/gpu/test_inspector_gpu.py -v -s

Only numpy, onnx and tensorrt are needed (the parser and why-not-INT8 are
pandas-free). Each build's folder (engine.graph.json, recipe.json,
calibration.cache, build.log.jsonl...) lands under
``$TRTWIDGETS_ARTIFACTS/test_inspector/<name>/`` when that is set, ready to be
copied to ``tests/fixtures/trt86/<name>/``; the dynamic engine's JSON inspected
without a context is written beside it as ``engine.no_context.graph.json``, and
the names-only engine's as ``names_only/engine.graph.json``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.gpu import models
from tests.gpu.build_helpers import artifacts_dir, build_or_explain, fresh_dir, model_recipe
from trtwidgets.core.common.errors import InspectorError
from trtwidgets.core.engine.inspector_json import parse_inspector_json
from trtwidgets.core.recipe.profiles import Profile, ShapeRange
from trtwidgets.core.recipe.recipe import CalibratorSpec, Recipe
from trtwidgets.core.engine.why_not_int8 import qdq_tensor_names, why_not_int8

STATIC = (1, 3, 16, 16)


pytestmark = pytest.mark.usefixtures("no_cublas_cudnn")


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return artifacts_dir(tmp_path_factory, "test_inspector")


def _recipe(work: Path, model, **kw) -> Recipe:
    kw.setdefault("builder_optimization_level", 0)
    return model_recipe(work, model, **kw)


def _build(recipe, out_dir, **kw):
    return build_or_explain(recipe, out_dir, verbose=False, **kw)


def _show(graph, reasons=None):
    reasons = reasons or (None,) * len(graph.layers)
    for layer, r in zip(graph.layers, reasons):
        print(f"  {layer.precision:<5} {layer.type:<14} {layer.name[:60]:<60} "
              f"{','.join(t.layout for t in layer.inputs)} {r.code if r else ''}")


def test_fp32_engine_is_all_fp32(work):
    r = _build(_recipe(work, models.conv_relu()), fresh_dir(work, "conv_relu_fp32"))
    graph = parse_inspector_json(r.inspector_json_path)
    reasons = why_not_int8(graph, json.loads(Path(r.recipe_path).read_text()))
    _show(graph, reasons)
    assert graph.warnings == () and graph.trt_major == 8
    compute = [layer for layer in graph.layers if layer.layer_type not in ("Reformat", "NoOp")]
    assert compute and {layer.precision for layer in compute} == {"FP32"}
    nodes = {n for layer in graph.layers for n in layer.onnx_nodes}
    assert {"conv1", "conv2"} <= nodes, nodes
    assert {r.code for r in reasons if r} == {"INT8_NOT_ENABLED"}


def test_int8_implicit_from_a_toolkit_cache(work):
    """At TensorRT's default optimization level (3) the tactics are timed: INT8 or not, the cause must fit."""
    from trtwidgets.core.calibration.cache import write_cache

    cache_path = work / "conv_relu_full.cache"
    write_cache(models.amax_for(models.CONV_RELU_TENSORS, 6.0), cache_path)
    recipe = _recipe(work, models.conv_relu(), flags=("fp16", "int8"), builder_optimization_level=3,
                     calibrator=CalibratorSpec(kind="toolkit", cache_path=str(cache_path)))
    r = _build(recipe, fresh_dir(work, "conv_relu_int8_implicit_level3"))
    graph = parse_inspector_json(r.inspector_json_path)
    reasons = why_not_int8(graph, json.loads(Path(r.recipe_path).read_text()), r.calibration_cache_path)
    _show(graph, reasons)
    print("precisions:", graph.precision_counts())
    for layer, reason in zip(graph.layers, reasons):
        if layer.type != "Convolution":
            continue
        if layer.precision == "INT8":
            assert reason is not None and reason.code == "BIAS_FLOAT", (layer.name, reason)
        else:
            # Scales were all there and tactics were timed: TensorRT preferred a float kernel.
            assert reason.code == "HIGHER_PRECISION_FASTER", (layer.name, reason)


def test_int8_at_level_0_is_explained_as_first_tactic(work):
    from trtwidgets.core.calibration.cache import write_cache

    cache_path = work / "conv_relu_full_l0.cache"
    write_cache(models.amax_for(models.CONV_RELU_TENSORS, 6.0), cache_path)
    recipe = _recipe(work, models.conv_relu(), flags=("fp16", "int8"),
                     calibrator=CalibratorSpec(kind="toolkit", cache_path=str(cache_path)))
    r = _build(recipe, fresh_dir(work, "conv_relu_int8_implicit"))
    graph = parse_inspector_json(r.inspector_json_path)
    reasons = why_not_int8(graph, json.loads(Path(r.recipe_path).read_text()), r.calibration_cache_path)
    _show(graph, reasons)
    for layer, reason in zip(graph.layers, reasons):
        if layer.type == "Convolution" and layer.precision != "INT8":
            assert reason.code == "FIRST_TACTIC", (layer.name, reason)


def test_int8_implicit_with_a_tensor_missing_from_the_cache(work):
    from trtwidgets.core.calibration.cache import write_cache

    cache_path = work / "conv_relu_without_r1.cache"
    write_cache({t: 6.0 for t in models.CONV_RELU_TENSORS if t != "r1"}, cache_path)
    recipe = _recipe(work, models.conv_relu(), flags=("fp16", "int8"),
                     calibrator=CalibratorSpec(kind="toolkit", cache_path=str(cache_path)))
    r = _build(recipe, fresh_dir(work, "conv_relu_int8_missing_r1"))
    graph = parse_inspector_json(r.inspector_json_path)
    reasons = why_not_int8(graph, json.loads(Path(r.recipe_path).read_text()), cache_path)
    _show(graph, reasons)
    conv2 = [(layer, reason) for layer, reason in zip(graph.layers, reasons) if "conv2" in layer.onnx_nodes]
    assert conv2, [layer.name for layer in graph.layers]
    layer, reason = conv2[0]
    assert layer.precision != "INT8", "conv2 cannot run INT8 without a scale for its input r1"
    assert reason.code == "NO_SCALE" and "r1" in reason.tensors, reason


def test_explicit_qdq(work):
    model = models.qdq_conv()
    r = _build(_recipe(work, model, flags=("fp16", "int8")), fresh_dir(work, "qdq_conv_int8"))
    graph = parse_inspector_json(r.inspector_json_path)
    reasons = why_not_int8(graph, json.loads(Path(r.recipe_path).read_text()), qdq_tensors=qdq_tensor_names(model))
    _show(graph, reasons)
    assert "INT8" in graph.precision_counts()
    assert any("conv" in layer.onnx_nodes for layer in graph.layers if layer.precision == "INT8")


def test_dynamic_engine_with_and_without_context(work, trt):
    opt = (1, 3, 16, 24)
    profile = Profile({"x": ShapeRange((1, 3, 16, 8), opt, (1, 3, 16, 32))})
    recipe = _recipe(work, models.conv_relu((1, 3, 16, "W")), flags=("fp16",), profiles=(profile,))
    r = _build(recipe, fresh_dir(work, "conv_relu_dynamic_fp16"))
    with_ctx = parse_inspector_json(r.inspector_json_path)
    _show(with_ctx)
    assert not with_ctx.dynamic_na and "N/A" not in with_ctx.precision_counts()

    runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
    engine = runtime.deserialize_cuda_engine(Path(r.engine_path).read_bytes())
    text = engine.create_engine_inspector().get_engine_information(trt.LayerInformationFormat.JSON)
    (Path(r.out_dir) / "engine.no_context.graph.json").write_text(text)
    without = parse_inspector_json(text)
    assert without.dynamic_na, text[:1000]
    assert [w.code for w in without.warnings] == ["DYNAMIC_SHAPES_NA"]
    assert "execution context" in without.warnings[0].message
    assert [layer.name for layer in without.layers] == [layer.name for layer in with_ctx.layers]
    assert {layer.precision for layer in without.layers} == {"N/A"}


def test_names_only_engine_is_refused_with_advice(work, trt):
    """A build with TensorRT's default verbosity, made directly (trtwidgets always builds DETAILED)."""
    path = models.save(models.conv_relu(), work / "models" / "conv_relu_names_only.onnx")
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    parser = trt.OnnxParser(network, logger)
    assert parser.parse(path.read_bytes()), [str(parser.get_error(i)) for i in range(parser.num_errors)]
    config = builder.create_builder_config()
    sources = 0
    for src in trt.TacticSource.__members__.values():
        if src.name not in ("CUBLAS", "CUBLAS_LT", "CUDNN"):
            sources |= 1 << int(src)
    config.set_tactic_sources(sources)
    config.builder_optimization_level = 0
    plan = builder.build_serialized_network(network, config)
    assert plan is not None
    engine = trt.Runtime(logger).deserialize_cuda_engine(plan)
    text = engine.create_engine_inspector().get_engine_information(trt.LayerInformationFormat.JSON)
    out = work / "names_only"
    out.mkdir(exist_ok=True)
    (out / "engine.graph.json").write_text(text)
    with pytest.raises(InspectorError) as info:
        parse_inspector_json(text)
    print(info.value.message)
    assert "ProfilingVerbosity.DETAILED" in info.value.fix
