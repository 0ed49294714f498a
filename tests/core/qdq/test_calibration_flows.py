"""The fitted Calibration is what flows into the export: its method, percentile and overrides (issue 20)."""

from __future__ import annotations

import onnx
import pytest

import trtwidgets as tw
from trtwidgets import demo
from trtwidgets.core.calibration.recipe_step import Calibration
from trtwidgets.core.qdq.export import QdqExportError, export_qdq
from trtwidgets.core.qdq.options import QdqOptions


@pytest.fixture(scope="module")
def model():
    return tw.load(demo.MODEL_PATH)


@pytest.fixture(scope="module")
def cal_max(model):
    return tw.calibrate(model, "demo", method="max", progress=False, max_samples=16)


@pytest.fixture(scope="module")
def quantized(model, cal_max):
    """Two tensors the export quantizes."""
    acts = export_qdq(model, cal_max).report.activations
    return acts[1].tensor, acts[2].tensor


def _off(scale: float, amax: float) -> bool:
    return abs(scale - amax / 127) > 0.05 * amax / 127


def test_the_exported_scales_are_the_calibrations_own(model, cal_max, tmp_path):
    out = tmp_path / "q.onnx"
    ex = tw.export_qdq(model, cal_max, out)
    assert out.is_file() and ex.report.activations
    assert [a.tensor for a in ex.report.activations if _off(a.scale, cal_max.amax[a.tensor])] == []
    assert "max ranges from the calibration" in ex.report.ranges and "ranges" in ex.report.summary()
    # The scales written into the file are those of the report.
    saved = onnx.load(str(out))
    inits = {t.name for t in saved.graph.initializer}
    assert sum(n.op_type == "QuantizeLinear" for n in saved.graph.node) >= len(ex.report.activations)
    assert any(name.endswith("_scale") for name in inits)


def test_bare_statistics_still_export_and_say_which_method(model, cal_max):
    ex = tw.export_qdq(model, cal_max.stats)
    assert ex.report.ranges.startswith("entropy ranges") and "without a Calibration" in ex.report.ranges
    # Entropy clips the max calibration's outliers: this is the bug the issue measured (24 of 29 scales).
    assert sum(_off(a.scale, cal_max.amax[a.tensor]) for a in ex.report.activations) > 0
    ex_max = tw.export_qdq(model, cal_max.stats, method="max")
    assert ex_max.report.ranges.startswith("max ranges")
    assert [a.tensor for a in ex_max.report.activations if _off(a.scale, cal_max.amax[a.tensor])] == []


def test_the_recipes_overrides_reach_the_export(model, cal_max, quantized):
    tensor = quantized[0]
    cal = cal_max.refit(overrides={tensor: 0.125})
    assert cal.amax[tensor] == 0.125 and cal.method == "max"
    ex = export_qdq(model, cal)
    hit = [a for a in ex.report.activations if a.tensor == tensor]
    assert hit and hit[0].amax == 0.125
    assert "1 amax overrides" in ex.report.ranges


def test_overrides_from_a_recipe_calibration(model, quantized):
    from trtwidgets.core.calibration.recipe_step import calibrate_recipe
    from trtwidgets.core.recipe.recipe import CalibratorSpec, Recipe

    tensor = quantized[1]
    recipe = Recipe.for_model(model, calibrator=CalibratorSpec(kind="toolkit", method="mse",
                                                               amax_overrides={tensor: 0.5}))
    cal = calibrate_recipe(recipe, model, data="demo", max_samples=4)
    assert cal.method == "mse" and cal.overrides == {tensor: 0.5}
    ex = tw.export_qdq(model, cal)
    assert {a.tensor: a.amax for a in ex.report.activations}[tensor] == 0.5
    assert ex.report.ranges.startswith("mse ranges from the calibration")


def test_another_method_of_a_calibration_keeps_its_overrides(model, cal_max, quantized):
    tensor = quantized[0]
    cal = cal_max.refit(overrides={tensor: 0.25})
    ex = tw.export_qdq(model, cal, method="entropy")
    amax = {a.tensor: a.amax for a in ex.report.activations}
    assert amax[tensor] == 0.25
    other = next(t for t in amax if t != tensor)
    assert amax[other] == pytest.approx(cal.ranges[other]["entropy"].amax)


def test_a_percentile_given_to_the_export_refits_the_calibration(model, cal_max):
    pct = cal_max.refit(method="percentile")
    ex = tw.export_qdq(model, pct, percentile=99.0)
    t = ex.report.activations[0].tensor
    assert ex.report.activations[0].amax == pytest.approx(pct.refit(percentile=99.0).amax[t])
    assert ex.report.activations[0].amax != pytest.approx(pct.amax[t])
    assert "percentile 99" in ex.report.ranges


def test_refit_at_another_percentile_recomputes_only_then(cal_max):
    same = cal_max.refit(method="entropy")
    assert same.ranges is cal_max.ranges and same.method == "entropy"
    other = cal_max.refit(percentile=99.0, method="percentile")
    assert other.ranges is not cal_max.ranges and other.percentile == 99.0
    t = sorted(other.amax)[0]
    assert other.amax[t] == pytest.approx(other.ranges[t]["percentile"].amax)


def test_dense_int8_is_on_by_default_and_can_be_turned_off(model, cal_max):
    dense = tw.export_qdq(model, cal_max)
    sparse = tw.export_qdq(model, cal_max, dense_int8=False)
    assert QdqOptions().dense_int8 is True
    assert len(dense.report.activations) > len(sparse.report.activations)


def test_something_that_is_not_a_calibration_is_a_clear_error(model):
    with pytest.raises(QdqExportError, match="Cannot export ranges from a int"):
        export_qdq(model, 3)


def test_a_calibration_fits_from_statistics_alone(cal_max):
    cal = Calibration.fit(cal_max.stats, "max")
    assert cal.amax == cal_max.amax and cal.describe() == "max ranges from the calibration"
