"""Real TensorRT builds through ``trtwidgets.trt.build.build`` (GPU machine, TensorRT 8.6, Python 3.9).

Run there with::

    source /tmp/trtb/env.sh && EXTRA_PYTHONPATH=$PWD $PY39 -m pytest tests/gpu/test_build.py -v -s

Every build prints its summary and, on failure, its whole log. Builds land under
``$TRTWIDGETS_ARTIFACTS/test_build/`` when that is set (else pytest's tmp dir), and
share one timing cache. cuBLAS/cuDNN tactic sources are off (stubs on that machine).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Dict

import numpy as np
import pytest

from tests.gpu import models
from tests.gpu.build_helpers import artifacts_dir, build_or_explain, fresh_dir, model_recipe
from trtwidgets.core.common.errors import BuildError
from trtwidgets.core.engine.inspector_json import precision_from_format
from trtwidgets.core.model.load import load_model
from trtwidgets.core.recipe.profiles import Profile, ShapeRange
from trtwidgets.core.recipe.recipe import CalibratorSpec, LayerPrecision, Recipe

STATIC = (1, 3, 16, 16)


pytestmark = pytest.mark.usefixtures("no_cublas_cudnn")


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return artifacts_dir(tmp_path_factory, "test_build")


def _recipe(work: Path, model, **kw) -> Recipe:
    # Level 1 times the top tactics (and uses the timing cache); at level 0 TensorRT takes the first tactic
    # that runs, so which precision it picks says nothing about speed.
    kw.setdefault("builder_optimization_level", 1)
    return model_recipe(work, model, **kw)


def _graph(result) -> dict:
    return json.loads(Path(result.inspector_json_path).read_text(), strict=False)


def _precisions(graph: dict) -> str:
    # The inspector spells tensor types inside "Format/Datatype" strings ("Row major linear FP32", "Int8 ...").
    return json.dumps(graph.get("Layers", []))


def _check_files(result):
    out = Path(result.out_dir)
    for name in ("engine.plan", "engine.graph.json", "recipe.json", "build.log.jsonl", "build.json"):
        assert (out / name).is_file(), f"{name} missing in {out}: {sorted(p.name for p in out.iterdir())}"
    assert not [p for p in out.parent.iterdir() if p.name.endswith(".partial")], "a staging folder was left behind"
    assert result.engine_bytes == (out / "engine.plan").stat().st_size > 0
    assert result.gpu_name, "the GPU name was not read"
    assert result.trt_version.split(".")[0].isdigit()
    graph = _graph(result)
    assert graph.get("Layers"), f"inspector JSON has no layers (DETAILED verbosity?): {result.inspector_json[:300]}"
    assert "N/A due to dynamic shapes" not in result.inspector_json
    return graph


def _conv_precisions(graph: dict) -> Dict[str, str]:
    """Conv layer name -> the precision of its first input ("FP32", "Half", "Int8"), from the inspector JSON."""
    out = {}
    for layer in graph["Layers"]:
        if layer.get("ParameterType") != "Convolution":
            continue
        # The toolkit's own parser: formats read "Channel major FP16 format where channel % 8 == 0",
        # "Four wide channel vectorized row major Int8 format", "Row major linear FP32".
        fmt = str(layer["Inputs"][0].get("Format/Datatype", ""))
        out[layer["Name"]] = {"INT8": "Int8", "FP16": "Half", "FP32": "FP32"}.get(precision_from_format(fmt), fmt)
    return out


def _no_errors(result) -> None:
    errors = [line.format() for line in result.log if line.is_error]
    assert not errors, errors


def _run(result, x):
    from trtwidgets.trt.runner import EngineRunner

    with EngineRunner(result.engine_path) as runner:
        return runner.infer({"x": x})["y"]


def test_fp32_build_computes_the_model(work):
    r = build_or_explain(_recipe(work, models.conv_relu()), fresh_dir(work, "fp32"))
    _check_files(r)
    x = models.feeds(STATIC, 1, seed=5)[0]["x"]
    y = _run(r, x)
    ref = models.conv_relu_reference(x)
    assert np.abs(y - ref).max() < 1e-3 * max(1.0, np.abs(ref).max()), np.abs(y - ref).max()
    assert Path(work / "timing.cache").stat().st_size > 0, "the timing cache was not saved"
    recipe_back = json.loads(Path(r.recipe_path).read_text())
    assert recipe_back["flags"] == []
    _no_errors(r)


def test_fp16_build_is_close_to_fp32(work):
    r = build_or_explain(_recipe(work, models.conv_relu(), flags=("fp16",)), fresh_dir(work, "fp16"))
    _check_files(r)
    # A build after the first reads the shared timing cache: no [E] lines (TensorRT 8.6 logged
    # "[E] ... The timing cache will not be used!" for the empty cache a level-0 build had written).
    _no_errors(r)
    print("\n".join(line.message for line in r.log if "timing cache" in line.message.lower()))
    x = models.feeds(STATIC, 1, seed=5)[0]["x"]
    ref = models.conv_relu_reference(x)
    assert np.abs(_run(r, x) - ref).max() < 0.05 * max(1.0, np.abs(ref).max())


def test_int8_fp16_with_tensorrt_entropy2(work):
    # conv2 preferred in INT8: TensorRT then runs it in INT8 if it has ranges, so the check below can fail.
    recipe = _recipe(work, models.conv_relu(), flags=("fp16", "int8"), calibrator=CalibratorSpec(kind="trt_entropy2"),
                     precision_constraints="prefer", layer_precisions=(LayerPrecision("conv2", "int8"),))
    data = models.feeds(STATIC, 6, seed=2)
    r = build_or_explain(recipe, fresh_dir(work, "int8_entropy2"), calibration_data=data)
    graph = _check_files(r)
    assert r.calibration_batches == 6, r.calibration_batches
    assert all(s == {"x": STATIC} for s in r.calibration_shapes), r.calibration_shapes
    cache = Path(r.calibration_cache_path).read_bytes()
    assert cache.startswith(b"TRT-") and b"EntropyCalibration2" in cache.splitlines()[0], cache[:80]
    assert re.search(r"Int8|INT8", _precisions(graph)), _precisions(graph)[:2000]
    x = models.feeds(STATIC, 1, seed=5)[0]["x"]
    ref = models.conv_relu_reference(x)
    err = np.abs(_run(r, x) - ref).max()
    assert err < 0.25 * np.abs(ref).max(), err  # INT8, but still the same function


def test_int8_from_toolkit_cache_requests_no_batches(work):
    from trtwidgets.core.calibration.cache import write_cache

    cache_path = work / "toolkit_conv_relu.cache"
    write_cache(models.amax_for(models.CONV_RELU_TENSORS, 6.0), cache_path)
    # obey: conv2 must run in INT8 (TensorRT fails the build rather than fall back), whatever is faster.
    recipe = _recipe(work, models.conv_relu(), flags=("fp16", "int8"),
                     calibrator=CalibratorSpec(kind="toolkit", cache_path=str(cache_path)),
                     precision_constraints="obey", layer_precisions=(LayerPrecision("conv2", "int8"),))
    r = build_or_explain(recipe, fresh_dir(work, "int8_toolkit_cache"))
    graph = _check_files(r)
    assert r.calibration_get_batch_calls == 0, f"TensorRT asked for {r.calibration_get_batch_calls} batch(es)"
    assert r.calibration_batches == 0
    assert Path(r.calibration_cache_path).read_bytes() == cache_path.read_bytes()
    assert _conv_precisions(graph)[_layer_name(graph, "conv2")] == "Int8", _conv_precisions(graph)


def _layer_name(graph: dict, onnx_node: str) -> str:
    names = [layer["Name"] for layer in graph["Layers"] if re.search(rf"\b{onnx_node}\b", str(layer["Name"]))]
    assert names, [layer["Name"] for layer in graph["Layers"]]
    return names[0]


def test_tiny_model_keeps_fp32_with_fp16_allowed_at_level_0(work):
    """Real behaviour (H200, TensorRT 8.6.0, 2026-11-21): flags allow a precision, they do not force it.

    The 3->8-channel 16x16 model built with the FP16 flag at builder optimization level 0
    came out all FP32: at level 0 TensorRT takes the first tactic that runs, and for this
    tiny conv that is an FP32 one (no reformatting of the FP32 input needed). The
    conv-stack tests below show FP16/INT8 winning where the work is large enough, and
    the constraint tests force a precision.
    """
    r = build_or_explain(_recipe(work, models.conv_relu(channels=8), flags=("fp16",), builder_optimization_level=0),
                      fresh_dir(work, "tiny_fp16_level0"))
    graph = _check_files(r)
    precisions = _conv_precisions(graph)
    print(precisions)
    assert set(precisions.values()) == {"FP32"}, precisions
    assert any("not used at builder optimization level 0" in line.message for line in r.log)


def test_tiny_model_int8_allowed_fp32_layers_are_explained(work):
    """With INT8+FP16 allowed and every range given, an FP32 conv is TensorRT's choice: HIGHER_PRECISION_FASTER."""
    from trtwidgets.core.calibration.cache import write_cache
    from trtwidgets.core.engine.inspector_json import parse_inspector_json
    from trtwidgets.core.engine.why_not_int8 import why_not_int8

    cache_path = work / "toolkit_conv_relu8.cache"
    write_cache(models.amax_for(models.CONV_RELU_TENSORS, 6.0), cache_path)
    recipe = _recipe(work, models.conv_relu(channels=8), flags=("fp16", "int8"),
                     calibrator=CalibratorSpec(kind="toolkit", cache_path=str(cache_path)))
    r = build_or_explain(recipe, fresh_dir(work, "tiny_int8_toolkit"))
    graph = parse_inspector_json(r.inspector_json_path)
    reasons = why_not_int8(graph, json.loads(Path(r.recipe_path).read_text()), calibration=r.calibration_cache_path)
    convs = [(layer.name, layer.precision, reason) for layer, reason in zip(graph.layers, reasons)
             if layer.parameter_type == "Convolution"]
    for row in convs:
        print(row)
    assert len(convs) == 2
    for name, precision, reason in convs:
        if precision in ("FP32", "FP16"):
            assert reason is not None and reason.code == "HIGHER_PRECISION_FASTER", (name, reason)


def _stack_recipe(work: Path, **kw) -> Recipe:
    return _recipe(work, models.conv_stack(), **kw)


def test_fp16_wins_on_a_conv_stack(work):
    """Where the work is large, TensorRT's timing picks Half for most convs with FP16 merely allowed."""
    r = build_or_explain(_stack_recipe(work, flags=("fp16",)), fresh_dir(work, "stack_fp16"))
    precisions = _conv_precisions(_check_files(r))
    print(precisions)
    assert sum(p == "Half" for p in precisions.values()) > len(precisions) / 2, precisions


def test_int8_wins_on_a_conv_stack_from_toolkit_cache(work):
    """INT8 merely allowed (ranges from a toolkit cache, no constraints): most convs run INT8 on an H200."""
    from trtwidgets.core.calibration.cache import write_cache

    cache_path = work / "toolkit_conv_stack.cache"
    write_cache(models.amax_for(models.conv_stack_tensors(), 4.0), cache_path)
    recipe = _stack_recipe(work, flags=("fp16", "int8"), calibrator=CalibratorSpec(kind="toolkit", cache_path=str(cache_path)))
    r = build_or_explain(recipe, fresh_dir(work, "stack_int8_toolkit"))
    precisions = _conv_precisions(_check_files(r))
    print(precisions)
    assert r.calibration_get_batch_calls == 0
    assert sum(p == "Int8" for p in precisions.values()) > len(precisions) / 2, precisions


def test_dynamic_model_calibrates_at_the_profiles_opt_shape(work):
    opt = (1, 3, 16, 24)
    profile = Profile({"x": ShapeRange((1, 3, 16, 8), opt, (1, 3, 16, 32))})
    recipe = _recipe(work, models.conv_relu((1, 3, 16, "W")), flags=("fp16", "int8"), profiles=(profile,),
                     calibrator=CalibratorSpec(kind="trt_entropy2"))
    r = build_or_explain(recipe, fresh_dir(work, "dynamic_int8"), calibration_data=models.feeds(opt, 4, seed=3))
    _check_files(r)  # also: the inspector saw concrete shapes (an execution context at opt)
    assert r.calibration_batches == 4
    assert r.calibration_shapes and all(s == {"x": opt} for s in r.calibration_shapes), r.calibration_shapes
    assert any("calibrating at profile 0's opt shapes" in line.message for line in r.log)
    meta = json.loads((Path(r.out_dir) / "build.json").read_text())
    assert meta["calibration"]["shapes"] == [{"x": list(opt)}] * 4


def test_qdq_model_with_fp16_only_fails_clearly(work):
    recipe = _recipe(work, models.qdq_conv(), flags=("fp16",))
    out = fresh_dir(work, "qdq_fp16_only")
    from trtwidgets.trt.build import build

    with pytest.raises(BuildError) as info:
        build(recipe, out_dir=out, progress=False)
    err = info.value
    print(err.message)
    assert "QDQ_REQUIRES_INT8" in err.codes, err.codes
    assert any("int8 is not configured in the builder" in line for line in err.log_lines), err.log_lines
    assert err.log_lines[0].startswith(("[E]", "[F]")), "errors must come first"
    # Lint said it before TensorRT ran.
    assert any(line.source == "trtwidgets" and "QDQ_REQUIRES_INT8" in line.message for line in err.log)
    assert not out.exists(), "a failed build must not leave a build folder"


def test_qdq_model_with_int8_builds(work):
    r = build_or_explain(_recipe(work, models.qdq_conv(), flags=("fp16", "int8")), fresh_dir(work, "qdq_int8"))
    graph = _check_files(r)
    assert re.search(r"Int8|INT8", _precisions(graph))


def _layer(graph: dict, name: str) -> str:
    # Not the reformat layers TensorRT names after their consumer ("Reformatting CopyNode for Input
    # Tensor 0 to conv2 + relu2").
    hits = [json.dumps(layer) for layer in graph["Layers"]
            if name in str(layer.get("Name", "")) and layer.get("LayerType") != "Reformat"]
    assert hits, sorted(str(layer.get("Name")) for layer in graph["Layers"])
    return hits[0]


def test_layer_precision_overrides_are_applied(work):
    # conv1 and relu1 fused stay FP32; conv2 computes in FP16, so TensorRT feeds it a Half input.
    recipe = _recipe(work, models.conv_relu(), flags=("fp16",), precision_constraints="obey",
                     layer_precisions=(LayerPrecision("conv1|relu1", "fp32", regex=True), LayerPrecision("conv2", "fp16")))
    r = build_or_explain(recipe, fresh_dir(work, "fp16_conv1_fp32_conv2_fp16"))
    graph = _check_files(r)
    conv1, conv2 = _layer(graph, "conv1"), _layer(graph, "conv2")
    assert re.search(r"FP32|Float", conv1) and not re.search(r"Half|FP16", conv1), conv1[:1500]
    assert re.search(r"Half|FP16", conv2.split('"Outputs"')[0]), conv2[:1500]
    assert any("pinned the precision of 3 layer(s)" in line.message for line in r.log)


def test_existing_out_dir_is_never_overwritten(work):
    out = fresh_dir(work, "taken")
    out.mkdir()
    (out / "keep.txt").write_text("earlier build")
    recipe = _recipe(work, models.conv_relu())
    from trtwidgets.trt.build import build

    with pytest.raises(BuildError, match="already exists"):
        build(recipe, out_dir=out, progress=False)
    assert (out / "keep.txt").read_text() == "earlier build"


@pytest.mark.slow
def test_demo_cls_model_fp16_static(work, cls_model_path):
    from trtwidgets import demo

    model = load_model(cls_model_path)
    shape = tuple(demo.INPUT_SHAPE)
    recipe = Recipe.for_model(model, flags=("fp16",), profiles=(Profile({"x": ShapeRange.fixed(shape)}),),
                              builder_optimization_level=0, timing_cache=str(work / "timing.cache"))
    r = build_or_explain(recipe, fresh_dir(work, "demo_cls_fp16"))
    _check_files(r)
    # x is [-1, 3, "?", "?"]: TensorRT got a copy with H and W named apart (it failed on 48 != 192 before).
    meta = json.loads((Path(r.out_dir) / "build.json").read_text())
    assert meta["dim_renames"] == [["x", 2, "x_dim2"], ["x", 3, "x_dim3"]], meta["dim_renames"]
    assert "SHARED_DIM_NAME" in r.lint_codes
    x = demo.sample_inputs(1)[0]["x"]
    from trtwidgets.trt.runner import EngineRunner

    with EngineRunner(r.engine_path) as runner:
        out = runner.infer({"x": x})
    probs = next(iter(out.values()))
    assert probs.shape == (1, 2) and abs(float(probs.sum()) - 1.0) < 1e-2, probs
