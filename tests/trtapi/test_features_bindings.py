"""features() read from real TensorRT 10.16, 11.4 and (locally) 8.6 modules."""

from __future__ import annotations

import pytest

from trtwidgets.core.recipe.recipe import CalibratorSpec, LayerPrecision, Recipe, validate_recipe
from trtwidgets.core.common.errors import RecipeError
from trtwidgets.trt.features import TrtFeatures

from . import stubs

SHA = "0" * 64


def test_stub_plan_covers_only_tensorrt_symbols(bindings10):
    so = sorted((bindings10.site / "tensorrt_bindings").glob("tensorrt*.so"))[0]
    plan = stubs.stub_plan(so)
    assert set(plan) == {"libnvinfer.so.10", "libnvinfer_plugin.so.10", "libnvonnxparser.so.10"}
    names = {s.name for syms in plan.values() for s in syms}
    assert "createInferBuilder_INTERNAL" in {s.name for s in plan["libnvinfer.so.10"]}
    assert "createNvOnnxParser_INTERNAL" in {s.name for s in plan["libnvonnxparser.so.10"]}
    # Python's C API and libc must come from the real process, never from a stub.
    assert not any(n.startswith(("Py", "_Py")) for n in names)
    assert "malloc" not in names and "dlopen" not in names


def test_bindings_import_and_report_their_version(bindings10, bindings11):
    code = "import json, tensorrt_bindings as p, tensorrt_bindings.tensorrt as trt; print(json.dumps([p.__version__, trt.__name__]))"
    assert bindings10.run_json(code) == ["10.16.1.11", "tensorrt_bindings.tensorrt"]
    assert bindings11.run_json(code) == ["11.4.0.106", "tensorrt_bindings.tensorrt"]


def test_features_10_16(features10):
    f = TrtFeatures.from_dict(features10)
    assert f.available and f.version == "10.16.1.11" and f.major == 10
    assert set(f.precision_flags) == {"fp16", "bf16", "int8", "fp8", "tf32"}
    assert f.precision_constraints and f.constraint_modes == ("obey", "prefer")
    assert f.layer_precision
    assert f.calibrators == ("entropy2", "minmax", "entropy", "legacy")
    assert f.calibration_profile
    assert "deprecated" in f.deprecated["calibrators"] and "10.1" in f.deprecated["calibrators"]
    assert "10.12" in f.deprecated["int8"]
    # Strong typing is offered but optional: the weak-typing flags still exist.
    assert f.strong_typing and not f.strongly_typed_only
    assert f.progress_monitor and f.builder_optimization_level and f.timing_cache and f.inspector
    assert f.explanations == {}


def test_features_11_4(features11):
    f = TrtFeatures.from_dict(features11)
    assert f.available and f.version == "11.4.0.106" and f.major == 11
    for flag in ("fp16", "int8", "fp8", "bf16"):
        assert flag not in f.precision_flags
        assert "precision comes from the model" in f.explanations[flag]
    assert "Q/DQ" in f.explanations["int8"] and "cast the ONNX model" in f.explanations["fp16"]
    assert f.precision_flags == ("tf32",)
    assert not f.precision_constraints and not f.layer_precision and not f.calibration_profile
    assert f.calibrators == ()
    assert "Q/DQ" in f.explanations["calibrators"]
    assert "ILayer.precision" in f.explanations["layer_precision"]
    assert f.strong_typing and f.strongly_typed_only
    assert f.progress_monitor and f.builder_optimization_level and f.timing_cache and f.inspector


def test_features_local_8_6(features86):
    f = TrtFeatures.from_dict(features86)
    assert f.major == 8 and f.version.startswith("8.6")
    assert {"fp16", "int8", "tf32"} <= set(f.precision_flags) and "bf16" not in f.precision_flags
    assert "TensorRT 9" in f.explanations["bf16"]
    assert f.calibrators == ("entropy2", "minmax", "entropy", "legacy") and f.deprecated == {}
    assert not f.strong_typing and not f.progress_monitor
    assert "spinner" in f.explanations["progress_monitor"]
    assert f.layer_precision and f.precision_constraints and f.inspector


def _int8_recipe(**kw) -> Recipe:
    base = dict(model_path="m.onnx", model_sha256=SHA, flags=("fp16", "int8"), precision_constraints="prefer",
                layer_precisions=(LayerPrecision("conv1", "fp32"),),
                calibrator=CalibratorSpec(kind="trt_entropy2", cache_path="/nonexistent/calib.cache"))
    base.update(kw)
    return Recipe(**base)


def test_recipe_checked_against_real_features(features10, features11):
    recipe = _int8_recipe()
    problems10 = [p for p in _problems(recipe, features10) if "TensorRT 10" in p]
    assert problems10 == []
    with pytest.raises(RecipeError) as info:
        validate_recipe(recipe, None, TrtFeatures.from_dict(features11))
    text = str(info.value)
    for needle in ("no fp16 flag", "no int8 flag", "no precision constraints", "cannot pin layer precisions",
                   "no entropy2 calibrator"):
        assert needle in text, needle


def _problems(recipe, features_dict):
    from trtwidgets.core.recipe.recipe import recipe_problems

    return recipe_problems(recipe, None, TrtFeatures.from_dict(features_dict))
