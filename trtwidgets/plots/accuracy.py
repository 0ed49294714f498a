"""Figures of where accuracy is lost and what keeping layers out of INT8 buys.

Display objects in scikit-learn's pattern: plain data built by ``from_*``
constructors, and :meth:`figure`, which imports plotly.

- :class:`LayerErrorDisplay`: horizontal bars of per-layer error growth (dB),
  most sensitive layer on top, coloured by op type; hover shows the tensor,
  its error, its inputs' error and the cosine similarity.
- :class:`SweepDisplay`: worst output SNR (left axis) and median latency (right
  axis) against the number of layers kept out of INT8.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Optional, Tuple

from .layout import clear_title

__all__ = ["LayerErrorDisplay", "SweepDisplay"]

_PALETTE = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22",
            "#17becf")
#: Bars are clipped here so that a NaN/inf layer (infinite growth) still draws.
GROWTH_CAP_DB = 200.0


def _capped_db(v: float, cap: float = GROWTH_CAP_DB) -> float:
    if math.isnan(v):
        return 0.0
    return max(-cap, min(cap, v))


@dataclass(frozen=True)
class LayerErrorDisplay:
    """Per-layer error growth, ranked.

    Attributes
    ----------
    layers, op_types, tensors : tuple of str
        Most sensitive first.
    growth_db, error_db, input_error_db, cosine : tuple of float
    title : str
    """

    layers: Tuple[str, ...]
    op_types: Tuple[str, ...]
    tensors: Tuple[str, ...]
    growth_db: Tuple[float, ...]
    error_db: Tuple[float, ...]
    input_error_db: Tuple[float, ...]
    cosine: Tuple[float, ...]
    title: str = "Where accuracy is lost: error growth per layer"

    @classmethod
    def from_report(cls, report, top: int = 25, title: Optional[str] = None) -> "LayerErrorDisplay":
        """From an :class:`~trtwidgets.core.accuracy.layer_errors.ErrorReport`, its ``top`` largest growths."""
        ranked = report.ranked()[: max(1, int(top))]
        return cls(
            layers=tuple(e.layer for e in ranked), op_types=tuple(e.op_type for e in ranked),
            tensors=tuple(e.tensor for e in ranked), growth_db=tuple(e.growth_db for e in ranked),
            error_db=tuple(e.error_db for e in ranked), input_error_db=tuple(e.input_error_db for e in ranked),
            cosine=tuple(e.metrics.cosine for e in ranked),
            title=title or f"Where accuracy is lost: error growth of the top {len(ranked)} of {len(report.layers)} tensors",
        )

    def figure(self, widget: bool = False):
        """The plotly figure (a ``go.FigureWidget`` when ``widget``); one bar trace per op type."""
        import plotly.graph_objects as go

        from .live_figure import live_figure

        fig = go.Figure()
        ops = list(dict.fromkeys(self.op_types))
        # Reverse so that the largest growth is at the top of a horizontal bar chart.
        order = list(range(len(self.layers)))[::-1]
        labels = [f"{i + 1}. {self.layers[i]}" for i in range(len(self.layers))]
        # Growth in dB can be far below zero (a layer adding almost no noise): bars start
        # at the lowest value shown, so that longer always means more growth.
        base = min([0.0] + [_capped_db(g) for g in self.growth_db])
        for k, op in enumerate(ops):
            idx = [i for i in order if self.op_types[i] == op]
            fig.add_trace(go.Bar(
                orientation="h", name=op, marker_color=_PALETTE[k % len(_PALETTE)],
                x=[_capped_db(self.growth_db[i]) - base for i in idx], base=base, y=[labels[i] for i in idx],
                customdata=[[html.escape(self.tensors[i]), self.error_db[i], self.input_error_db[i], self.cosine[i],
                             _capped_db(self.growth_db[i])] for i in idx],
                hovertemplate=("%{y}<br>tensor %{customdata[0]}<br>growth %{customdata[4]:.1f} dB"
                               "<br>error %{customdata[1]:.1f} dB (inputs %{customdata[2]:.1f} dB)"
                               "<br>cosine %{customdata[3]:.6f}<extra></extra>"),
            ))
        fig.update_layout(
            title=self.title, barmode="overlay", xaxis_title="error growth (dB): noise this layer adds, relative to its output",
            yaxis=dict(categoryorder="array", categoryarray=[labels[i] for i in order], automargin=True),
            height=max(260, 22 * len(self.layers) + 120), margin=dict(l=10, r=20, t=50, b=40),
            legend=dict(title="op type"),
        )
        clear_title(fig)  # the title under Plotly's toolbar, not beneath its icons
        return live_figure(fig) if widget else fig


@dataclass(frozen=True)
class SweepDisplay:
    """Accuracy and latency per sensitivity-sweep step.

    Attributes
    ----------
    n : tuple of int
        Layers kept out of INT8 at each step.
    worst_snr_db, median_ms : tuple of float
        ``nan`` where a step failed or was not timed.
    errors : tuple of str
        Empty string for steps that worked.
    """

    n: Tuple[int, ...]
    worst_snr_db: Tuple[float, ...]
    median_ms: Tuple[float, ...]
    errors: Tuple[str, ...]
    title: str = "Sensitivity sweep: accuracy and latency"

    @classmethod
    def from_sweep(cls, result) -> "SweepDisplay":
        """From a :class:`~trtwidgets.core.accuracy.sweep.SweepResult`."""
        steps = result.steps
        return cls(
            n=tuple(r.step.n for r in steps),
            worst_snr_db=tuple(r.worst_snr_db for r in steps),
            median_ms=tuple(float("nan") if r.median_ms is None else r.median_ms for r in steps),
            errors=tuple(r.error or "" for r in steps),
        )

    def figure(self, widget: bool = False):
        import plotly.graph_objects as go

        from .live_figure import live_figure

        fig = go.Figure()
        snr = [None if not math.isfinite(v) else v for v in self.worst_snr_db]
        ms = [None if not math.isfinite(v) else v for v in self.median_ms]
        fig.add_trace(go.Scatter(x=list(self.n), y=snr, name="worst output SNR (dB)", mode="lines+markers",
                                 text=[html.escape(e) for e in self.errors],
                                 hovertemplate="%{x} layers kept: SNR %{y:.1f} dB %{text}<extra></extra>"))
        fig.add_trace(go.Scatter(x=list(self.n), y=ms, name="median latency (ms)", mode="lines+markers", yaxis="y2",
                                 line=dict(dash="dash"),
                                 hovertemplate="%{x} layers kept: %{y:.4f} ms<extra></extra>"))
        fig.update_layout(title=self.title, xaxis_title="most sensitive layers kept out of INT8",
                          yaxis_title="worst output SNR (dB)",
                          yaxis2=dict(title="median latency (ms)", overlaying="y", side="right"),
                          height=320, margin=dict(l=50, r=60, t=50, b=40), legend=dict(orientation="h", y=-0.25))
        clear_title(fig)  # the title under Plotly's toolbar, not beneath its icons
        return live_figure(fig) if widget else fig
