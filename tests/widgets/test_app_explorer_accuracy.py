"""The App's calibration explorer (Q/DQ export, TensorRT's amax) and its latency/accuracy section,
on the demo model and the real TensorRT 8.6 builds committed under tests/fixtures/trt86."""

from __future__ import annotations

import importlib
import inspect
import json
import pkgutil
from pathlib import Path

import ipywidgets
import onnx
import pytest

from tests.core.inspector_samples import synthetic_fp16, trt_text
from trtwidgets import demo
from trtwidgets.core.calibration.cache import read_cache
from trtwidgets.widgets.app import EXPLORE, INSPECT, QDQ_NAME, App

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "trt86"
ENTROPY2 = FIXTURES / "cls_static_int8_entropy2"
QDQ_BUILD = FIXTURES / "cls_static_qdq_int8"


def _lines(fig):
    return {s.legendgroup: s.x0 for s in fig.layout.shapes if s.type == "line"}


@pytest.fixture
def app(tmp_path):
    a = App(model_path=demo.MODEL_PATH, out_dir=str(tmp_path / "out"))
    assert a.calibrate(max_samples=4, progress=False)
    return a


def _shared_tensor(app, cache):
    return next(n for n in app.session.stats.tensors if n in cache.amax)


def test_explorer_exports_qdq_into_the_out_dir_and_draws_tensorrts_amax(app, tmp_path):
    assert app.load_saved_build(str(ENTROPY2))
    app.tabs.selected_index = EXPLORE
    ex = app.explorer
    assert ex is not None and not ex.qdq_button.disabled
    ex.qdq_button.click()
    path = tmp_path / "out" / QDQ_NAME
    assert path.is_file() and ex.last_export["qdq"] == str(path)
    ops = {n.op_type for n in onnx.load(str(path)).graph.node}
    assert {"QuantizeLinear", "DequantizeLinear"} <= ops
    assert "Q/DQ model written" in ex.status.value and ex.error_message == ""
    # TensorRT's own Entropy2 amax (the saved build's calibration.cache) is a line of the histogram.
    cache = read_cache(ENTROPY2 / "calibration.cache")
    name = _shared_tensor(app, cache)
    ex.select(name)
    assert _lines(ex.hist_fig)["tensorrt"] == pytest.approx(cache.amax[name], rel=1e-6)


def test_the_explorers_export_is_checked_on_the_held_back_folder(app, tmp_path):
    import numpy as np

    held = tmp_path / "held"
    held.mkdir()
    for i, feed in enumerate(demo.iter_skimage_inputs(4, seed=12345)):
        np.save(held / f"h{i}.npy", feed["x"])
    ex = app.explore()
    assert ex.export_qdq() and ex.validation is None  # no held-back folder: written, not checked
    assert "Validation" not in ex.status.value
    assert app.use_held_back(str(held))
    assert ex.export_qdq()
    v = ex.validation
    assert v is not None and v.samples == 4 and "Validation on 4 held-back samples" in ex.status.value
    assert ("PASSED" if v.passed else "FAILED") in ex.status.value


def test_explorer_opened_first_gets_tensorrts_line_when_the_build_arrives(app):
    ex = app.explore()
    assert ex is not None and ex.trt_cache is None and "tensorrt" not in _lines(ex.hist_fig)
    # The Q/DQ build was not calibrated by TensorRT: still no line.
    assert app.load_saved_build(str(QDQ_BUILD))
    assert app.explorer is ex and ex.trt_cache is None
    assert app.load_saved_build(str(ENTROPY2))
    cache = read_cache(ENTROPY2 / "calibration.cache")
    name = _shared_tensor(app, cache)
    ex.select(name)
    assert _lines(ex.hist_fig)["tensorrt"] == pytest.approx(cache.amax[name], rel=1e-6)


def test_a_toolkit_cache_is_not_drawn_as_tensorrts(app, tmp_path):
    d = tmp_path / "toolkit_int8"
    d.mkdir()
    (d / "engine.graph.json").write_text(trt_text(synthetic_fp16()), encoding="utf-8")
    (d / "recipe.json").write_text(app.session.recipe.to_json(), encoding="utf-8")  # calibrator kind: toolkit
    (d / "calibration.cache").write_bytes((ENTROPY2 / "calibration.cache").read_bytes())
    assert app.load_saved_build(str(d))
    assert app.explore().trt_cache is None


def test_inspect_shows_recorded_latency_and_says_accuracy_needs_tensorrt(app):
    assert app.load_saved_build(str(ENTROPY2))
    assert app.inspect_choice.value == "cls_static_int8_entropy2"
    median = json.loads((ENTROPY2 / "timings.json").read_text())["latency"]["median_ms"]
    note = app.inspect_step.accuracy_note.value
    assert f"{median:.4f} ms" in note and "NVIDIA H200" in note
    assert "Accuracy needs TensorRT to run the engine" in note
    assert "cls_static_int8_entropy2" in app.inspect_step.accuracy.bench_html.value
    assert f"{median:.4f}" in app.inspect_step.accuracy.bench_html.value
    # A second build: both side by side; the note follows the inspected one.
    assert app.load_saved_build(str(FIXTURES / "cls_static_fp16"))
    bench = app.inspect_step.accuracy.bench_html.value
    assert "cls_static_int8_entropy2" in bench and "cls_static_fp16" in bench and bench.count("<tr>") == 3
    fp16 = json.loads((FIXTURES / "cls_static_fp16" / "timings.json").read_text())["latency"]["median_ms"]
    assert f"{fp16:.4f} ms" in app.inspect_step.accuracy_note.value
    app.inspect("cls_static_int8_entropy2")
    assert f"{median:.4f} ms" in app.inspect_step.accuracy_note.value
    assert app.tabs.children[INSPECT].children.count(app.inspect_step.accuracy) == 1


def test_a_build_without_timings_says_so(app, tmp_path):
    d = tmp_path / "<i>fp16"
    d.mkdir()
    (d / "engine.graph.json").write_text(trt_text(synthetic_fp16()), encoding="utf-8")
    assert app.load_saved_build(str(d))
    assert "recorded no latency" in app.inspect_step.accuracy_note.value
    assert "<i>fp16" not in app.inspect_step.accuracy_note.value and "&lt;i&gt;fp16" in app.inspect_step.accuracy_note.value
    assert app.inspect_step.accuracy.bench_html.value == ""


def test_every_public_widget_is_exported():
    import trtwidgets.widgets as pkg

    defined = set()
    for info in pkgutil.iter_modules(pkg.__path__):
        mod = importlib.import_module(f"trtwidgets.widgets.{info.name}")
        defined |= {name for name, obj in vars(mod).items()
                    if inspect.isclass(obj) and obj.__module__ == mod.__name__ and not name.startswith("_")
                    and issubclass(obj, ipywidgets.Widget)}
    assert {"AccuracyView", "CalibrationExplorer"} <= defined
    assert defined <= set(pkg.__all__)
    assert all(getattr(pkg, n) is not None for n in pkg.__all__)
