"""The build panel without a GPU: what it says without TensorRT, how it shows progress, logs and errors."""

from __future__ import annotations

import pytest

from tests.gpu import models
from trtwidgets.core.common.errors import BuildError
from trtwidgets.core.model.load import load_model
from trtwidgets.core.recipe.recipe import Recipe
from trtwidgets.trt import available
from trtwidgets.trt.logger import LogLine
from trtwidgets.trt.progress import ProgressEvent
from trtwidgets.widgets.build_panel import BuildPanel, build_error_html, log_html

EVIL = "<img src=x onerror=alert(1)>"


@pytest.fixture
def recipe(tmp_path):
    return Recipe.for_model(load_model(models.save(models.conv_relu(), tmp_path / "m.onnx")), flags=("fp16",))


@pytest.mark.skipif(available(), reason="TensorRT is installed here")
def test_without_tensorrt_button_is_off_and_panel_says_what_to_install(recipe):
    panel = BuildPanel(recipe=recipe)
    assert panel.button.disabled and not panel.available
    assert "pip install" in panel.result.value and "trtwidgets[trt]" in panel.result.value


@pytest.mark.skipif(available(), reason="TensorRT is installed here")
def test_building_anyway_shows_the_real_error_and_keeps_the_recipe(recipe):
    panel = BuildPanel(recipe=recipe)
    panel.start(wait=True)
    assert panel.last_result is None and type(panel.last_error).__name__ == "TensorRTUnavailable"
    assert "TensorRT is not available" in panel.result.value
    assert panel.recipe is recipe
    assert panel.cancel_button.disabled and panel.button.disabled  # still nothing to build with


def test_no_recipe_is_explained():
    panel = BuildPanel()
    panel.start()
    assert "no recipe" in panel.result.value.lower() and not panel.running


def test_progress_events_move_bar_and_label():
    panel = BuildPanel()
    panel.on_progress(ProgressEvent("start", "Calibration", total=4))
    panel.on_progress(ProgressEvent("step", "Calibration", step=3, total=4, detail="batch 3"))
    assert (panel.bar.max, panel.bar.value) == (4, 3)
    assert panel.phase.value == "Calibration 3/4 - batch 3"
    panel.on_progress(ProgressEvent("start", "Tactic selection"))
    panel.on_progress(ProgressEvent("step", "Tactic selection", step=7, detail="conv1"))
    assert panel.phase.value == "Tactic selection 7 - conv1"
    panel.on_progress(ProgressEvent("finish", "Tactic selection", step=7))
    assert panel.phase.value == "Tactic selection done"


def test_log_and_errors_are_escaped():
    html = log_html([LogLine("ERROR", f"layer {EVIL} failed"), LogLine("INFO", "fine")])
    assert EVIL not in html and "&lt;img" in html and "[E] layer" in html
    err = BuildError(f"TensorRT could not build {EVIL}.", "why", "fix",
                     log_lines=[f"[E] Int8 precision has been set for {EVIL}"], codes=["QDQ_REQUIRES_INT8"])
    out = build_error_html(err)
    assert EVIL not in out and "QDQ_REQUIRES_INT8" in out and "TensorRT said" in out


def test_on_log_collects_lines():
    panel = BuildPanel()
    panel.on_log(LogLine("WARNING", "Missing scale and zero-point for tensor c1"))
    assert "Missing scale" in panel.log_view.value
