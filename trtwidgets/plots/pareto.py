"""The planner's candidates as a Pareto chart: accuracy against latency.

One point per candidate (x: latency relative to FP16, y: the target's accuracy
measure), the recommended one ringed, the Pareto front drawn as a line, and the
target as a dashed rule. Each point's hover (and ``customdata``, for a widget's
click handler) holds the layers it keeps in high precision. A measured plan shows each
measured candidate twice, side by side: its estimate (the round point) and its
measurement (a diamond; the round spread in its hover), joined by a dotted line.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import List, Optional, Tuple

from .layout import clear_title

__all__ = ["PlanParetoDisplay", "plan_html"]


@dataclass(frozen=True)
class PlanParetoDisplay:
    """Data of the chart (scikit-learn Display style: compute in ``from_plan``, draw in ``figure``).

    Attributes
    ----------
    names : tuple of str
    x : tuple of float
        Latency relative to FP16 (1.0 = FP16).
    y : tuple of float
        The accuracy measure shown (``y_label``).
    kept : tuple of tuple of str
        Layers each candidate keeps in high precision.
    meets : tuple of bool
    recommended : int
    y_label : str
    target : float or None
    latency_source : str
    """

    names: Tuple[str, ...]
    x: Tuple[float, ...]
    y: Tuple[float, ...]
    kept: Tuple[Tuple[str, ...], ...]
    meets: Tuple[bool, ...]
    recommended: int
    y_label: str
    target: Optional[float]
    latency_source: str
    measured_x: Tuple[float, ...] = ()
    measured_spread: Tuple[float, ...] = ()
    #: Implicit INT8's engine where it was measured and judged: (x measured, y on its engine, meets, is the pick).
    implicit: Optional[Tuple[float, float, bool, bool]] = None

    @classmethod
    def from_plan(cls, plan) -> "PlanParetoDisplay":
        """From a :class:`~trtwidgets.core.plan.plan_artifact.Plan` (``Plan.load(path)`` for a saved one)."""
        cands = plan.candidates
        tgt = plan.target
        if tgt.has_metric and all(c.accuracy.metric is not None for c in cands):
            key, label, target = "metric", str(tgt.metric_name or tgt.metric_spec or "metric"), None
        elif tgt.cosine is None and tgt.snr_db is not None:
            key, label, target = "snr_db", "output SNR (dB)", tgt.snr_db
        else:
            key, label, target = "cosine", "output cosine vs FP32", tgt.cosine
        ys = tuple(_number(getattr(c.accuracy, key)) for c in cands)
        xs = tuple(c.vs_fp16 for c in cands)
        mx, spread = _measured(plan)
        return cls(measured_x=mx, measured_spread=spread, implicit=_implicit(plan, key),
                   names=tuple(c.name for c in cands), x=xs, y=ys, kept=tuple(tuple(k for k, _ in c.kept) for c in cands),
                   meets=tuple(c.meets_target for c in cands), recommended=plan.recommended, y_label=label,
                   target=target, latency_source=cands[0].latency_source or "estimate" if cands else "estimate")

    def front(self) -> List[int]:
        """Indices on the Pareto front (no other candidate is both faster and more accurate), by latency."""
        idx = [i for i in range(len(self.x)) if self.x[i] == self.x[i] and self.y[i] == self.y[i]]
        out = []
        for i in idx:
            dominated = any(self.x[j] <= self.x[i] and self.y[j] >= self.y[i] and
                            (self.x[j] < self.x[i] or self.y[j] > self.y[i]) for j in idx)
            if not dominated:
                out.append(i)
        return sorted(out, key=lambda i: self.x[i])

    def hover(self, i: int, max_layers: int = 12) -> str:
        kept = self.kept[i]
        shown = "<br>".join(html.escape(k) for k in kept[:max_layers])
        more = f"<br>... {len(kept) - max_layers} more" if len(kept) > max_layers else ""
        measured = (f"<br>measured {self.measured_x[i]:.3f}x FP16 (spread {self.measured_spread[i]:.4f} ms)"
                    if i < len(self.measured_x) and self.measured_x[i] == self.measured_x[i] else "")
        return (f"<b>{html.escape(self.names[i])}</b><br>{self.x[i]:.3f}x FP16 ({self.latency_source}){measured}<br>"
                f"{html.escape(self.y_label)}: {self.y[i]:.4f}<br>kept in high precision: {len(kept)}"
                + (f"<br>{shown}{more}" if kept else ""))

    @property
    def is_measured(self) -> bool:
        """Whether any candidate was measured."""
        return any(v == v for v in self.measured_x)

    def _add_measured(self, fig) -> None:
        """Measurements beside the estimates: a diamond per measured candidate, a dotted line from its estimate."""
        import plotly.graph_objects as go

        idx = [i for i, v in enumerate(self.measured_x) if v == v]
        if not idx:
            return
        for i in idx:
            fig.add_trace(go.Scatter(x=[self.x[i], self.measured_x[i]], y=[self.y[i], self.y[i]], mode="lines",
                                     line=dict(color="#90a4ae", dash="dot", width=1), hoverinfo="skip",
                                     showlegend=False))
        fig.add_trace(go.Scatter(
            x=[self.measured_x[i] for i in idx], y=[self.y[i] for i in idx], mode="markers", name="measured",
            marker=dict(symbol="diamond", size=12, color=["#2e7d32" if self.meets[i] else "#c62828" for i in idx],
                        line=dict(width=[3 if i == self.recommended else 1 for i in idx], color="#1565c0")),
            hovertext=[self.hover(i) for i in idx], hoverinfo="text", customdata=[[i] for i in idx]))

    def _add_implicit(self, fig) -> None:
        """Implicit INT8's engine, judged on the held-back samples: a star (outlined when it is the measured pick)."""
        import plotly.graph_objects as go

        if self.implicit is None:
            return
        x, y, meets, pick = self.implicit
        text = (f"<b>implicit INT8 (TensorRT calibrator)</b><br>measured {x:.3f}x FP16<br>"
                f"{html.escape(self.y_label)} on its engine: {y:.4f}<br>"
                + ("the measured pick" if pick else ("meets the target" if meets else "misses the target")))
        fig.add_trace(go.Scatter(x=[x], y=[y], mode="markers", name="implicit INT8",
                                 marker=dict(symbol="star", size=16 if pick else 12,
                                             color="#2e7d32" if meets else "#c62828",
                                             line=dict(width=3 if pick else 1, color="#1565c0")),
                                 hovertext=[text], hoverinfo="text"))

    def figure(self, height: int = 420):
        """The Plotly figure (a ``go.Figure``)."""
        import plotly.graph_objects as go

        fig = go.Figure()
        colors = ["#2e7d32" if m else "#c62828" for m in self.meets]
        fig.add_trace(go.Scatter(
            x=list(self.x), y=list(self.y), mode="markers+text", name="candidates",
            text=[str(i) for i in range(len(self.x))], textposition="top center",
            marker=dict(size=[18 if i == self.recommended else 11 for i in range(len(self.x))], color=colors,
                        line=dict(width=[3 if i == self.recommended else 0 for i in range(len(self.x))],
                                  color="#1565c0")),
            hovertext=[self.hover(i) for i in range(len(self.x))], hoverinfo="text",
            customdata=[list(k) for k in self.kept]))
        self._add_measured(fig)
        self._add_implicit(fig)
        front = self.front()
        if len(front) > 1:
            fig.add_trace(go.Scatter(x=[self.x[i] for i in front], y=[self.y[i] for i in front], mode="lines",
                                     name="Pareto front", line=dict(color="#90a4ae", dash="dot"), hoverinfo="skip"))
        if self.target is not None:
            fig.add_hline(y=self.target, line=dict(color="#616161", dash="dash"),
                          annotation_text=f"target {self.target:g}", annotation_position="bottom right")
        fig.add_vline(x=1.0, line=dict(color="#bdbdbd"), annotation_text="FP16", annotation_position="top")
        fig.update_layout(height=height, margin=dict(l=60, r=20, t=40, b=50), showlegend=False,
                          title="Candidates: accuracy against latency ("
                          + ("estimate and measurement" if self.is_measured else self.latency_source) + ")",
                          xaxis_title="latency relative to FP16 (lower is faster)", yaxis_title=self.y_label)
        clear_title(fig)  # the title under Plotly's toolbar, not beneath its icons
        return fig


def _number(v) -> float:
    return float(v) if isinstance(v, (int, float)) else float("nan")


def _measured(plan) -> Tuple[Tuple[float, ...], Tuple[float, ...]]:
    """Per candidate: measured time relative to FP16 and the round spread in ms (NaN where not measured)."""
    from ..core.plan.plan_table import measured_rows_by_candidate

    rows = measured_rows_by_candidate(plan)
    if not rows:
        return (), ()
    n = len(plan.candidates)
    return (tuple(_number(rows[i].vs_fp16) if i in rows else float("nan") for i in range(n)),
            tuple(_number(rows[i].spread_ms) if i in rows else float("nan") for i in range(n)))


def _implicit(plan, key: str) -> Optional[Tuple[float, float, bool, bool]]:
    """Implicit INT8's point where its engine was timed and judged (its accuracy by the chart's own measure)."""
    row = plan.measured.implicit_row() if plan.measured is not None else None
    verdict = row.engine if row is not None else None
    if row is None or verdict is None or verdict.meets is None or verdict.accuracy is None:

        return None
    x, y = row.vs_fp16, getattr(verdict.accuracy, key)
    if not isinstance(y, (int, float)) or not math.isfinite(x) or not math.isfinite(y):
        return None
    return float(x), float(y), bool(verdict.meets), plan.measured.implicit_is_pick


_RIGHT = "<td style='text-align:right'>"


def candidates_table_html(plan) -> str:
    """The plan's table (:func:`~trtwidgets.core.plan.plan_table.table_rows`) as an HTML table, every name escaped."""
    from ..core.plan.plan_table import table_rows

    columns, rows = table_rows(plan)
    head = "<tr><th></th>" + "".join(f"<th>{html.escape(h)}</th>" for _, h, _, _, _ in columns) + "</tr>"
    body = []
    for mark, cells in rows:
        tds = "".join((_RIGHT if right else "<td>") + html.escape(cells.get(k, "")) + "</td>"
                      for k, _, _, _, right in columns)
        bold = " style='font-weight:bold'" if mark else ""
        body.append(f"<tr{bold}><td>{html.escape(mark)}</td>{tds}</tr>")
    return ("<table class='candidates' border='1' cellpadding='4' style='border-collapse:collapse'>" + head
            + "".join(body) + "</table>")


def plan_html(plan, title: str = "Quantization plan") -> str:
    """A self-contained ``plan.html``: the reason, the Pareto chart (plotly.js embedded), the candidates as a table,
    the latency's standing, the notes."""
    from .plan_latency import latency_section_html
    from .report_html import figure_html, plotly_js_head

    try:
        head, chart = plotly_js_head(), figure_html(PlanParetoDisplay.from_plan(plan).figure())
    except ImportError:  # a headless install, or `plan measure` on the GPU machine's Python 3.9: no chart
        head, chart = "", ("<p><i>The accuracy/latency chart needs plotly, which is not installed where this page "
                           "was written: <code>pip install 'trtwidgets[lab]'</code> there draws it.</i></p>")
    rows: List[str] = []
    for i, c in enumerate(plan.candidates):
        kept = "".join(f"<li>{html.escape(k)}: {html.escape(r)}</li>" for k, r in c.kept[:200])
        pick = i == plan.recommended
        rows.append(f"<details{' open' if pick else ''}><summary>{i}. {html.escape(c.name)}"
                    f"{' (recommended)' if pick else ''}: {len(c.quantized)} INT8 layers, "
                    f"{len(c.kept)} kept in high precision</summary><ul>{kept}</ul></details>")
    standing = plan.estimate.text if plan.estimate is not None else None  # shown once, in the latency section
    notes = "".join(f"<li>{html.escape(n)}</li>" for n in plan.notes if n != standing)
    return ("<!doctype html><html><head><meta charset='utf-8'><title>" + html.escape(title) + "</title>"
            + head + "</head><body style='font-family:sans-serif;max-width:1100px;margin:auto'>"
            f"<h1>{html.escape(title)}</h1><p><b>{html.escape(plan.reason)}</b></p>"
            f"<p>Model: {html.escape(plan.model)}. Target: {html.escape(_target_text(plan.target))}. "
            f"Float part: {html.escape(plan.high_precision.upper())}.</p>"
            + chart + candidates_table_html(plan) + latency_section_html(plan) + "".join(rows)
            + (f"<h2>Notes</h2><ul>{notes}</ul>" if notes else "") + "</body></html>")


def _target_text(target) -> str:
    parts = []
    if target.cosine is not None:
        parts.append(f"output cosine >= {target.cosine:g}")
    if target.snr_db is not None:
        parts.append(f"SNR >= {target.snr_db:g} dB")
    if target.has_metric:
        parts.append(f"{target.metric_name or target.metric_spec or 'metric'} within {target.metric_drop:g} of FP32")
    return ", ".join(parts) or "none"
