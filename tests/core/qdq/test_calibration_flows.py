"""The fitted Calibration is what flows into the export: its method, percentile and overrides (issues 20, 30)."""

from __future__ import annotations

import onnx
import pytest

import trtwidgets as tw
from trtwidgets import demo
from trtwidgets.core.calibration.calibration import Calibration
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


def test_a_statistics_file_exports_as_an_auto_calibration(model, cal_max, tmp_path):
    from trtwidgets.core.calibration.stats import save_stats

    ex = tw.export_qdq(model, save_stats(cal_max.stats, tmp_path / "stats.npz"))
    # auto, the default (issue 34): each tensor's method from its statistics and role, not the max calibration's.
    assert ex.report.ranges.startswith("auto ranges")
    assert sum(_off(a.scale, cal_max.amax[a.tensor]) for a in ex.report.activations) > 0
    ex_max = tw.export_qdq(model, Calibration.load(tmp_path / "stats.npz", method="max"))
    assert ex_max.report.ranges.startswith("max ranges")
    assert [a.tensor for a in ex_max.report.activations if _off(a.scale, cal_max.amax[a.tensor])] == []


def test_bare_statistics_are_refused_saying_how_to_make_a_calibration(model, cal_max):
    with pytest.raises(QdqExportError) as err:
        tw.export_qdq(model, cal_max.stats)
    assert "which range method" in err.value.why and "Calibration.fit(stats, method=" in err.value.fix


def test_a_saved_calibration_exports_the_same_scales_as_the_object(model, cal_max, quantized, tmp_path):
    cal = cal_max.refit(overrides={quantized[0]: 0.375})
    path = cal.save(tmp_path / "cal.npz")
    from_object = tw.export_qdq(model, cal).report.activations
    from_file = tw.export_qdq(model, path).report.activations
    assert [(a.tensor, a.scale, a.amax) for a in from_file] == [(a.tensor, a.scale, a.amax) for a in from_object]
    assert {a.tensor: a.amax for a in from_file}[quantized[0]] == 0.375


def test_the_recipes_overrides_reach_the_export(model, cal_max, quantized):
    tensor = quantized[0]
    cal = cal_max.refit(overrides={tensor: 0.125})
    assert cal.amax[tensor] == 0.125 and cal.method == "max"
    ex = export_qdq(model, cal)
    hit = [a for a in ex.report.activations if a.tensor == tensor]
    assert hit and hit[0].amax == 0.125
    assert "1 amax overrides" in ex.report.ranges


def test_overrides_from_a_recipe_calibration(model, quantized):
    from trtwidgets.core.calibrate.step import calibrate_recipe
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
    ex = tw.export_qdq(model, cal.refit(method="entropy"))
    amax = {a.tensor: a.amax for a in ex.report.activations}
    assert amax[tensor] == 0.25
    other = next(t for t in amax if t != tensor)
    assert amax[other] == pytest.approx(cal.ranges[other]["entropy"].amax)


def test_a_percentile_refit_reaches_the_export(model, cal_max):
    pct = cal_max.refit(method="percentile")
    ex = tw.export_qdq(model, pct.refit(percentile=99.0))
    written = {a.tensor: a.amax for a in ex.report.activations}
    assert written == pytest.approx({t: pct.refit(percentile=99.0).amax[t] for t in written})
    # The demo's input (text lines on a flat background) has a few distinct values, so its 99th and
    # 99.99th percentiles may coincide: most other tensors' ranges move.
    moved = [t for t in written if written[t] != pytest.approx(pct.amax[t])]
    assert len(moved) > len(written) // 2
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
    sparse = tw.export_qdq(model, cal_max, options=QdqOptions(dense_int8=False))
    assert QdqOptions().dense_int8 is True
    assert len(dense.report.activations) > len(sparse.report.activations)


def test_something_that_is_not_a_calibration_is_a_clear_error(model):
    with pytest.raises(QdqExportError, match="Cannot export ranges from a int"):
        export_qdq(model, 3)


def test_a_calibration_fits_from_statistics_alone(cal_max):
    cal = Calibration.fit(cal_max.stats, "max")
    assert cal.amax == cal_max.amax and cal.describe() == "max ranges from the calibration"


def test_an_override_for_a_tensor_without_statistics_is_exported_too(model, cal_max):
    # A tensor the placement quantizes, left out of the statistics: its override is written all the same.
    tensor = next(a.tensor for a in tw.export_qdq(model, cal_max).report.activations)
    stats = cal_max.stats
    fewer = type(stats)(tensors={k: v for k, v in stats.tensors.items() if k != tensor}, samples=stats.samples,
                        model_sha256=stats.model_sha256, input_shapes=stats.input_shapes,
                        model_inputs=stats.model_inputs)
    cal = Calibration.fit(fewer, "max", overrides={tensor: 0.5})
    assert tensor not in fewer.tensors and cal.amax[tensor] == 0.5
    amax = {a.tensor: a.amax for a in tw.export_qdq(model, cal).report.activations}
    assert amax[tensor] == 0.5
