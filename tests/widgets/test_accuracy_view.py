from __future__ import annotations

import numpy as np

from trtwidgets.core.accuracy.layer_errors import layer_errors
from trtwidgets.core.engine.latency import latency_stats
from trtwidgets.core.accuracy.metrics import compare_outputs
from trtwidgets.widgets.accuracy import AccuracyView

from ..accuracy.models import tiny_chain


def test_view_shows_metrics_bench_and_ranking_escaped():
    ref = {"<b>out</b>": np.array([[0.1, 0.9], [0.8, 0.2]])}
    cand = {"<b>out</b>": np.array([[0.2, 0.8], [0.3, 0.7]])}
    metrics = compare_outputs(ref, cand)
    bench = {"int8": latency_stats(np.linspace(1, 2, 200), batch=32, shapes={"x": (32, 3, 48, 192)})}
    a = np.ones((2, 4), np.float32)
    report = layer_errors(tiny_chain(), {"a": a, "b": a * 2, "y": a * 3}, {"a": a, "b": a * 2.1, "y": a * 3.1})
    view = AccuracyView(metrics=metrics, bench=bench, report=report)
    assert "&lt;b&gt;out&lt;/b&gt;" in view.metrics_html.value and "<b>out</b>" not in view.metrics_html.value
    assert "0.5000" in view.metrics_html.value  # top-1: one of two rows agrees
    assert "x:32x3x48x192" in view.bench_html.value and "1.5000" in view.bench_html.value
    assert view.layer_chart is not None and "mul" in view.layers_html.value
    before = view.metrics_html.value
    view.show(bench={"fp16": bench["int8"]})
    assert view.metrics_html.value == before and "fp16" in view.bench_html.value


def test_several_builds_get_one_table_each():
    ref = {"y": np.arange(4.0)}
    view = AccuracyView(metrics={"fp16": compare_outputs(ref, ref), "int8": compare_outputs(ref, {"y": ref["y"] + 1})})
    assert view.metrics_html.value.count("<table") == 2 and "int8 vs ONNX Runtime FP32" in view.metrics_html.value
