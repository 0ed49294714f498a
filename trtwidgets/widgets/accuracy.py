"""Accuracy view: output metrics, latency, per-layer error ranking and sweep results.

Thin: the numbers come from :mod:`trtwidgets.core.accuracy.metrics`,
:mod:`trtwidgets.core.engine.latency` and :mod:`trtwidgets.core.accuracy.layer_errors`; the charts
from :mod:`trtwidgets.plots.accuracy`. Every name from a model is escaped.
"""

from __future__ import annotations

import math
from typing import Any, Mapping

import ipywidgets as widgets

from .html import esc, html_table

METRIC_COLUMNS = ("output", "cosine", "SNR dB", "max abs", "mean abs", "top-1", "top-5", "NaN/inf mismatch")
BENCH_COLUMNS = ("build", "shapes", "median ms", "p90 ms", "p99 ms", "samples/s", "runs")


def _num(v: Any, fmt: str) -> str:
    if v is None:
        return "-"
    v = float(v)
    return format(v, fmt) if math.isfinite(v) else str(v)


def metric_rows(metrics: Mapping[str, Any]) -> list:
    """Table rows for ``{output: OutputMetrics}``."""
    return [{"output": name, "cosine": _num(m.cosine, ".6f"), "SNR dB": _num(m.snr_db, ".1f"),
             "max abs": _num(m.max_abs, ".3g"), "mean abs": _num(m.mean_abs, ".3g"),
             "top-1": _num(m.topk_agreement.get(1), ".4f"), "top-5": _num(m.topk_agreement.get(5), ".4f"),
             "NaN/inf mismatch": m.nonfinite_mismatch} for name, m in metrics.items()]


def bench_rows(results: Mapping[str, Any]) -> list:
    """Table rows for ``{build label: BenchResult}``."""
    return [{"build": label, "shapes": ", ".join(f"{k}:{'x'.join(map(str, v))}" for k, v in r.shapes.items()),
             "median ms": _num(r.median_ms, ".4f"), "p90 ms": _num(r.p90_ms, ".4f"), "p99 ms": _num(r.p99_ms, ".4f"),
             "samples/s": _num(r.throughput, ",.0f"), "runs": r.runs} for label, r in results.items()]


class AccuracyView(widgets.VBox):
    """Shows what :func:`~trtwidgets.core.accuracy.metrics.compare_outputs`, the benchmark,
    :func:`~trtwidgets.core.accuracy.layer_errors.layer_errors` and :func:`~trtwidgets.core.accuracy.sweep.run_sweep` returned.

    Parameters
    ----------
    metrics : mapping, optional
        ``{output: OutputMetrics}`` (or ``{build: {output: OutputMetrics}}`` for several builds).
    bench : mapping, optional
        ``{build label: BenchResult}``.
    report : ErrorReport, optional
    sweep : SweepResult, optional
    top : int
        Layers shown in the error-growth chart.
    """

    def __init__(self, metrics=None, bench=None, report=None, sweep=None, top: int = 25, **kwargs):
        self.top = int(top)
        self.metrics_html = widgets.HTML()
        self.bench_html = widgets.HTML()
        self.layers_box = widgets.Box()
        self.layers_html = widgets.HTML()
        self.sweep_box = widgets.Box()
        self.layer_chart = None
        self.sweep_chart = None
        super().__init__([self.metrics_html, self.bench_html, self.layers_box, self.layers_html, self.sweep_box],
                         **kwargs)
        self.show(metrics=metrics, bench=bench, report=report, sweep=sweep)

    def show(self, metrics=None, bench=None, report=None, sweep=None) -> None:
        """Replace the parts given; parts left as None keep what they showed."""
        if metrics is not None:
            self.metrics_html.value = self._metrics_html(metrics)
        if bench is not None:
            # An empty mapping clears the table (no build recorded a latency).
            self.bench_html.value = (html_table(bench_rows(bench), BENCH_COLUMNS, caption="Latency (CUDA events)")
                                     if bench else "")
        if report is not None:
            from ..plots.accuracy import LayerErrorDisplay

            self.layer_chart = LayerErrorDisplay.from_report(report, self.top).figure(widget=True)
            self.layers_box.children = [self.layer_chart]
            rows = [{k: (_num(v, ".2f") if isinstance(v, float) else v) for k, v in r.items()}
                    for r in report.to_rows()[: self.top]]
            cols = ("rank", "layer", "op_type", "tensor", "growth_db", "error_db", "input_error_db", "cosine")
            missing = (f"<div>{len(report.missing)} tensor(s) not compared (absent on one side): "
                       f"{esc(', '.join(report.missing[:10]))}{' ...' if len(report.missing) > 10 else ''}</div>"
                       if report.missing else "")
            if getattr(report, "incomparable", ()):
                missing += (f"<div>{len(report.incomparable)} tensor(s) of different sizes on the two sides: "
                            f"{esc(', '.join(report.incomparable[:10]))}</div>")
            self.layers_html.value = html_table(rows, cols, caption="Per-layer error growth") + missing
        if sweep is not None:
            from ..plots.accuracy import SweepDisplay

            self.sweep_chart = SweepDisplay.from_sweep(sweep).figure(widget=True)
            self.sweep_box.children = [self.sweep_chart]

    @staticmethod
    def _metrics_html(metrics: Mapping[str, Any]) -> str:
        first = next(iter(metrics.values()), None)
        if isinstance(first, Mapping):  # several builds
            return "".join(html_table(metric_rows(m), METRIC_COLUMNS, caption=f"{label} vs ONNX Runtime FP32")
                           for label, m in metrics.items())
        return html_table(metric_rows(metrics), METRIC_COLUMNS, caption="Engine vs ONNX Runtime FP32")
