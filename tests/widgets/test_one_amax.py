"""One derivation of the exported amax: the explorer, tw.export_qdq and the plan write the same scales (issue 30)."""

from __future__ import annotations

import onnx
import pytest
from onnx import numpy_helper

import trtwidgets as tw
from trtwidgets import demo
from trtwidgets.widgets.calib_explorer import CalibrationExplorer


def _scales(path) -> dict:
    """Activation tensor -> the scale its QuantizeLinear holds in the written file."""
    model = onnx.load(str(path))
    inits = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    return {n.input[0]: float(inits[n.input[1]]) for n in model.graph.node
            if n.op_type == "QuantizeLinear" and n.input[1] in inits and inits[n.input[1]].size == 1}


@pytest.fixture(scope="module")
def model():
    return tw.load(demo.MODEL_PATH)


def test_the_explorer_the_api_and_the_plan_write_the_same_scales(model, tmp_path):
    cal = tw.calibrate(model, "demo", method="max", progress=False, max_samples=8)
    first = tw.export_qdq(model, cal).report.activations
    overridden, other = first[2].tensor, first[5].tensor

    # The App's explorer: an override set by hand, the Q/DQ model re-exported on the spot.
    ex = CalibrationExplorer(calibration=cal, model=model, qdq_path=str(tmp_path / "explorer.qdq.onnx"))
    ex.select(overridden)
    assert ex.apply_override(0.625)
    ex.select(other)
    assert ex.apply_override(3.5)
    app_cal = ex.calibration
    assert dict(app_cal.overrides) == {overridden: 0.625, other: 3.5}

    # The same calibration through the API, and through a plan made with it (overrides included).
    api = tw.export_qdq(model, app_cal, tmp_path / "api.qdq.onnx")
    plan = tw.plan(model, list(demo.iter_skimage_inputs(12)), calibration=app_cal, progress=False,
                   target=tw.PlanTarget(cosine=0.5), max_ranked=4)
    assert dict(plan.ranges.overrides) == {overridden: 0.625, other: 3.5}
    assert dict(plan.ranges.amax) == app_cal.refit(method=plan.ranges.method).amax
    picked = tw.export_plan(model, plan, tmp_path / "plan.qdq.onnx", candidate=1)  # INT8 everywhere
    assert picked is not None

    explorer_scales, api_scales = _scales(tmp_path / "explorer.qdq.onnx"), _scales(tmp_path / "api.qdq.onnx")
    plan_scales = _scales(tmp_path / "plan.qdq.onnx")
    assert explorer_scales == api_scales and len(api_scales) == len(api.report.activations)
    # FP16 scales (written for TensorRT 10/11 when none is installed): FP16 holds three significant digits.
    assert explorer_scales[overridden] == pytest.approx(0.625 / 127, rel=1e-3)
    assert explorer_scales[other] == pytest.approx(3.5 / 127, rel=1e-3)
    # The plan writes its own placement (it decides matrix-vector layers itself) with the range method it
    # found best: the calibration at that method, exported through the API, writes the same scales.
    kept = tw.export_qdq(model, app_cal.refit(method=plan.ranges.method), tmp_path / "kept.qdq.onnx")
    kept_scales = _scales(tmp_path / "kept.qdq.onnx")
    common = set(plan_scales) & set(kept_scales)
    assert {overridden, other} <= common and len(common) >= 0.8 * len(kept.report.activations)
    assert {t: plan_scales[t] for t in common} == {t: kept_scales[t] for t in common}
    assert plan_scales[overridden] == explorer_scales[overridden] and plan_scales[other] == explorer_scales[other]
