"""Recipes shared by the recipe tests: a fake model hash and a recipe with every field set."""

from __future__ import annotations

from trtwidgets.core.calibration.data import CalibrationDataSpec
from trtwidgets.core.recipe.recipe import CalibratorSpec, LayerPrecision, Recipe

SHA = "a" * 64


def full_recipe(demo) -> Recipe:
    return Recipe.for_model(
        demo, flags=("int8", "fp16"), precision_constraints="prefer",
        layer_precisions=(LayerPrecision("Softmax.*", "fp32", regex=True), LayerPrecision("conv1", "fp16")),
        calibrator=CalibratorSpec(kind="toolkit", method="percentile", percentile=99.9, cache_path="calib.cache",
                                  amax_overrides={"x": 1.0}),
        calibration_data=CalibrationDataSpec(kind="demo", batch_size=1, opt_shapes={"x": [1, 3, 48, 192]}),
        builder_optimization_level=3, workspace_mib=1024, timing_cache="timing.cache", trt_version="8.6.0")
