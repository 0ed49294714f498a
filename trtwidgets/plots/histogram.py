"""One tensor's activation histogram with every range method's amax on it.

:class:`TensorHistogramDisplay` follows scikit-learn's Display pattern: a plain
data object, :meth:`TensorHistogramDisplay.from_stats` which computes, and
:meth:`~TensorHistogramDisplay.figure` which imports plotly and draws. The
explorer widget keeps one ``go.FigureWidget`` and calls
:meth:`~TensorHistogramDisplay.update` to redraw it in place, which is what
makes switching tensors fast.

Figure layout (stable, so that it can be updated in place):

- ``data[0]``: bar trace, count per |x| bin (log y axis);
- ``data[1]``: one marker per amax line at the top of the plot, carrying the hover text;
- ``layout.shapes``: the shaded clipped region (``x > amax`` of the active line)
  first, then one vertical line per amax, named for the legend.
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Any, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..core.common.errors import StatsError
from ..core.calibration.explorer_data import hist_edges
from ..core.calibration.fake_quant import symmetric_scale
from .layout import clear_title

#: Colour and dash of each line kind; TensorRT's own and the override stand out.
LINE_STYLES = {
    "max": ("#d62728", "solid"),
    "entropy": ("#1f77b4", "solid"),
    "percentile": ("#2ca02c", "solid"),
    "mse": ("#9467bd", "solid"),
    "tensorrt": ("#111111", "dash"),
    "override": ("#ff7f0e", "dot"),
}
_CLIP_FILL = "rgba(214, 39, 40, 0.10)"


@dataclass(frozen=True)
class AmaxLine:
    """One candidate clipping threshold and how well it quantizes the tensor.

    Attributes
    ----------
    kind : str
        A range method (``"max"``, ``"entropy"``, ``"percentile"``, ``"mse"``),
        ``"tensorrt"`` (read from a cache TensorRT wrote) or ``"override"``.
    label : str
        Legend label, e.g. ``"percentile 99.99"``.
    amax : float
    sqnr_db : float
        Signal-to-quantization-noise ratio at this amax (higher is better).
    clipped_fraction : float
        Fraction of the values above amax.
    """

    kind: str
    label: str
    amax: float
    sqnr_db: float
    clipped_fraction: float

    @property
    def legend_name(self) -> str:
        return (f"{html.escape(self.label)}: {self.amax:.4g} · SQNR {_fmt_db(self.sqnr_db)}"
                f" · clipped {_fmt_frac(self.clipped_fraction)}")

    @property
    def hover(self) -> str:
        return (f"<b>{html.escape(self.label)}</b><br>amax {self.amax:.6g}<br>scale {float(symmetric_scale(self.amax)):.4g}"
                f"<br>SQNR {_fmt_db(self.sqnr_db)}<br>clipped {_fmt_frac(self.clipped_fraction)}")


def _fmt_db(v: float) -> str:
    if v is None or math.isnan(v):
        return "n/a"
    return "∞ dB" if math.isinf(v) else f"{v:.1f} dB"


def _fmt_frac(v: float) -> str:
    if v is None or math.isnan(v):
        return "n/a"
    return f"{100 * v:.3g}%"


@dataclass(frozen=True)
class TensorHistogramDisplay:
    """The |x| histogram of one tensor and its candidate amax lines.

    Attributes
    ----------
    tensor : str
    edges : numpy.ndarray
        ``len(counts) + 1`` bin edges from 0 to the histogram's upper edge.
    counts : numpy.ndarray
        Count of |x| per bin.
    lines : tuple of AmaxLine
    active : str or None
        ``kind`` of the line whose clipped region (x > amax) is shaded.
    count, nan_count, inf_count : int
    min, max : float
        Signed extremes seen during collection.
    """

    tensor: str
    edges: np.ndarray
    counts: np.ndarray
    lines: Tuple[AmaxLine, ...]
    active: Optional[str]
    count: int = 0
    nan_count: int = 0
    inf_count: int = 0
    min: float = float("nan")
    max: float = float("nan")

    @classmethod
    def from_stats(cls, stats_or_tensor_stats, tensor: Optional[str] = None, methods: Optional[Sequence[str]] = None,
                   percentile: float = 99.99, trt_cache=None, override: Optional[float] = None,
                   active: Optional[str] = None, results: Optional[Mapping[str, Any]] = None

                   ) -> "TensorHistogramDisplay":
        """Compute the amax of each method for one tensor.

        Parameters
        ----------
        stats_or_tensor_stats : ActivationStats or TensorStats
        tensor : str, optional
            Which tensor, when ``ActivationStats`` is given.
        methods : sequence of str, optional
            Range methods to draw (default: all of :data:`trtwidgets.core.calibration.ranges.METHODS`).
        percentile : float
            For the ``"percentile"`` method.
        trt_cache : CalibrationCache, mapping or path, optional
            A calibration cache; its amax for this tensor is drawn as ``"tensorrt"``.
        override : float, optional
            A user-set amax, drawn as ``"override"`` and shaded.
        active : str, optional
            Line kind whose clipped region is shaded (default: the override,
            else the first method).
        results : mapping, optional
            Precomputed ``method -> RangeResult`` for this tensor, computed at
            ``percentile`` (the widget passes cached ones; methods missing there
            are computed).
        """
        from ..core.calibration.ranges import METHODS, compute_amax, evaluate_amax

        t = pick_tensor_stats(stats_or_tensor_stats, tensor)
        methods = tuple(METHODS if methods is None else methods)
        unknown = [m for m in methods if m not in METHODS]
        if unknown:
            raise StatsError(f"unknown range method {unknown[0]!r}", None, f"use some of {', '.join(METHODS)}")
        lines = []
        for m in methods:
            r = None if results is None else results.get(m)
            if r is not None:
                amax, sqnr, clipped = float(r.amax), float(r.sqnr_db), float(r.clipped_fraction)
            else:
                amax = float(compute_amax(t, m, percentile=percentile) if m == "percentile" else compute_amax(t, m))
                sqnr, clipped = _quality(evaluate_amax, t, amax)
            label = f"percentile {percentile:g}" if m == "percentile" else m
            lines.append(AmaxLine(m, label, amax, sqnr, clipped))
        trt_amax = _cache_amax(trt_cache, t.name)
        if trt_amax is not None:
            lines.append(AmaxLine("tensorrt", "TensorRT cache", trt_amax, *_quality(evaluate_amax, t, trt_amax)))
        if override is not None:
            lines.append(AmaxLine("override", "override", float(override),
                                  *_quality(evaluate_amax, t, float(override))))
        if active is None:
            active = "override" if override is not None else (lines[0].kind if lines else None)
        # an all-zero tensor has hist_max 0: give its single bar a nominal width so it can be seen
        edges = hist_edges(t) if t.hist_max > 0 else np.linspace(0.0, 1.0, len(t.hist) + 1)
        return cls(t.name, edges, np.asarray(t.hist, dtype=np.float64), tuple(lines), active,
                   int(t.count), int(t.nan_count), int(t.inf_count), float(t.min), float(t.max))

    # ----------------------------------------------------------------- geometry

    @property
    def centers(self) -> np.ndarray:
        return 0.5 * (self.edges[:-1] + self.edges[1:])

    @property
    def active_line(self) -> Optional[AmaxLine]:
        for line in self.lines:
            if line.kind == self.active:
                return line
        return None

    @property
    def x_max(self) -> float:
        """Right end of the x axis: the histogram's upper edge or the largest amax, a little padded."""
        top = max([float(self.edges[-1])] + [ln.amax for ln in self.lines if math.isfinite(ln.amax)])
        return top * 1.03 if top > 0 else 1.0

    @property
    def title(self) -> str:
        extra = ""
        if self.nan_count or self.inf_count:
            extra = f", <span style='color:#d62728'>NaN {self.nan_count:,}, Inf {self.inf_count:,}</span>"
        return (f"{html.escape(self.tensor)} — |x| over {self.count:,} values "
                f"(min {self.min:.4g}, max {self.max:.4g}{extra})")

    # ----------------------------------------------------------------- drawing

    def figure(self, widget: bool = False, height: int = 440):
        """A new plotly figure (``go.FigureWidget`` when ``widget`` is true)."""
        import plotly.graph_objects as go

        from .live_figure import live_figure

        fig = go.Figure()
        fig.add_bar(name="|x| count", marker=dict(color="#7f7f7f", line=dict(width=0)),
                    hovertemplate="|x| %{x:.4g}<br>count %{y:,}<extra></extra>")
        fig.add_scatter(name="amax", mode="markers", showlegend=False, hoverinfo="text",
                        marker=dict(symbol="triangle-down", size=11))
        fig.update_layout(height=height, bargap=0, margin=dict(l=60, r=20, t=50, b=40),
                          legend=dict(orientation="h", y=-0.18, x=0), template="plotly_white",
                          xaxis=dict(title="|x|"), yaxis=dict(title="count (log)", type="log"),
                          title=dict(font=dict(size=13)))
        self.update(fig)
        # a FigureWidget made from the finished figure starts with all of it in its initial state
        clear_title(fig)  # the title under Plotly's toolbar, not beneath its icons
        return live_figure(fig) if widget else fig

    def update(self, fig) -> None:
        """Redraw ``fig`` (made by :meth:`figure`) with this display's data, in place.

        Only data and shapes change, in one batch, so a FigureWidget sends one
        message to the browser and keeps its zoom-independent settings.
        """
        from .bins import set_uniform_bars

        counts = self.counts
        positive = counts[counts > 0]
        top = float(positive.max()) if positive.size else 1.0
        lines = [ln for ln in self.lines if math.isfinite(ln.amax)]
        with fig.batch_update():
            set_uniform_bars(fig.data[0], self.edges, counts)
            marks = fig.data[1]
            marks.x = [ln.amax for ln in lines]
            marks.y = [top] * len(lines)
            marks.hovertext = [ln.hover for ln in lines]
            marks.marker.color = [LINE_STYLES.get(ln.kind, ("#333", "solid"))[0] for ln in lines]
            fig.layout.shapes = self._shapes(lines)
            fig.layout.xaxis.range = [0.0, self.x_max]
            fig.layout.title.text = self.title

    def _shapes(self, lines) -> list:
        shapes = []
        active = self.active_line
        if active is not None and math.isfinite(active.amax):
            shapes.append(dict(type="rect", xref="x", yref="paper", x0=active.amax, x1=self.x_max, y0=0, y1=1,
                               fillcolor=_CLIP_FILL, line=dict(width=0), layer="below",
                               name=f"clipped: |x| > {active.amax:.4g} ({html.escape(active.label)})",
                               showlegend=True))
        for ln in lines:
            color, dash = LINE_STYLES.get(ln.kind, ("#333333", "solid"))
            shapes.append(dict(type="line", xref="x", yref="paper", x0=ln.amax, x1=ln.amax, y0=0, y1=1,
                               line=dict(color=color, dash=dash, width=2), name=ln.legend_name,
                               showlegend=True, legendgroup=ln.kind))
        return shapes


# --------------------------------------------------------------------------- helpers

def pick_tensor_stats(stats, tensor):
    """The TensorStats of ``tensor`` from ActivationStats, or ``stats`` itself when it is one tensor's.

    Raises StatsError when the tensor is not named (many tensors) or was not collected.
    """
    tensors = getattr(stats, "tensors", None)
    if tensors is None:
        if tensor is not None and tensor != stats.name:
            raise StatsError(f"asked for tensor {tensor!r} but was given the statistics of {stats.name!r}")
        return stats
    if tensor is None:
        raise StatsError("no tensor named", "the statistics hold many tensors",
                         "pass tensor=<name>, e.g. one of " + ", ".join(list(tensors)[:3]))
    try:
        return tensors[tensor]
    except KeyError:
        raise StatsError(f"no statistics for tensor {tensor!r}",
                         "it was not collected (not a float activation, or excluded)",
                         "pick one of the collected tensors") from None


def _quality(evaluate_amax, t, amax: float):
    if not math.isfinite(amax) or amax <= 0:
        return float("nan"), float("nan")
    q = evaluate_amax(t, amax)
    return float(q.sqnr_db), float(q.clipped_fraction)


def _cache_amax(trt_cache, name: str) -> Optional[float]:
    if trt_cache is None:
        return None
    if isinstance(trt_cache, Mapping):
        amax = trt_cache
    elif hasattr(trt_cache, "amax"):
        amax = trt_cache.amax
    else:
        from ..core.calibration.cache import read_cache

        amax = read_cache(trt_cache).amax
    value = amax.get(name)
    return None if value is None else float(value)
