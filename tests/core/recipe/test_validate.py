from __future__ import annotations

import pytest

from trtwidgets.core.calibration.data import CalibrationDataSpec
from trtwidgets.core.common.errors import RecipeError
from trtwidgets.core.recipe.fields import CalibratorSpec, LayerPrecision
from trtwidgets.core.recipe.profiles import Profile, ShapeRange
from trtwidgets.core.recipe.recipe import Recipe
from trtwidgets.core.recipe.validate import recipe_problems, validate_recipe

from tests.core.recipe_models import qdq_model, summary_of, two_input_model

from .recipe_samples import SHA, full_recipe


def test_validate_names_input_and_dimension():
    summary = summary_of(two_input_model(), sha256=SHA)
    r = Recipe(model_path="m.onnx", model_sha256=SHA, profiles=(Profile({
        "x": ShapeRange((1, 3, 32, 32), (1, 3, 64, 64), (1, 3, 48, 128)),
        "mask": ShapeRange((1, 16), (1, 16), (1, 16))}),))
    with pytest.raises(RecipeError) as info:
        validate_recipe(r, summary)
    assert info.value.what == "Profile 0: input 'x' dimension 2 (H): opt 64 is outside [min, max] = [32, 48]."


def test_validate_detects_changed_model():
    summary = summary_of(two_input_model(), sha256="b" * 64)
    r = Recipe(model_path="m.onnx", model_sha256=SHA, profiles=(Profile({
        "x": ShapeRange.fixed((1, 3, 8, 8)), "mask": ShapeRange.fixed((1, 16))}),))
    assert any("model file has changed" in p for p in recipe_problems(r, summary))


def test_precision_logic(demo):
    base = Recipe.for_model(demo)
    problems = recipe_problems(base.replace(layer_precisions=(LayerPrecision("conv1", "int8"),)), demo.summary)
    assert any("int8 flag is off" in p for p in problems)
    assert any("precision_constraints is 'none'" in p for p in problems)
    problems = recipe_problems(base.replace(flags=("int8",)), demo.summary)
    assert any("no calibrator is chosen" in p for p in problems)
    problems = recipe_problems(base.replace(flags=("fp16",), calibrator=CalibratorSpec(kind="trt_entropy2")), demo.summary)
    assert any("int8 flag is off" in p for p in problems) and any("needs calibration data" in p for p in problems)


def test_qdq_model_with_fp16_only_is_caught_before_build():
    summary = summary_of(qdq_model(), sha256=SHA)
    r = Recipe(model_path="q.onnx", model_sha256=SHA, flags=("fp16",), trt_version="8.6.0")
    problems = recipe_problems(r, summary)
    assert len(problems) == 1 and "int8 is not configured in the builder" in problems[0]
    assert recipe_problems(r.replace(flags=("fp16", "int8")), summary) == []
    # On TensorRT 11 a Q/DQ model needs no flag at all.
    assert recipe_problems(Recipe(model_path="q.onnx", model_sha256=SHA, trt_version="11.4.0"), summary) == []


def test_trt_version_table_used_without_features(demo):
    r = Recipe.for_model(demo, flags=("fp16", "bf16"), trt_version="8.6.0")
    assert recipe_problems(r, demo.summary) == ["TensorRT 8.6.0 has no bf16 flag."]
    with pytest.raises(RecipeError, match="not a version"):
        r.replace(trt_version="eight")


def test_calibration_data_must_match_calibration_profile_opt(demo):
    r = full_recipe(demo).replace(calibration_data=CalibrationDataSpec(kind="demo", opt_shapes={"x": [4, 3, 48, 192]}))
    problems = recipe_problems(r, demo.summary)
    assert any("prepared at 4x3x48x192" in p and "opt 1x3x48x192" in p for p in problems)
