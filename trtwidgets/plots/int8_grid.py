"""The int8 grid at a given amax, drawn over a tensor's |x| histogram.

Symmetric int8 quantization maps ``x`` to ``round(x / s)`` with the scale
``s = amax / 127`` and clamps to ``[-127, 127]``. Every value lands on one of
the grid lines ``k * s``: values between lines pay a *rounding* error (at most
``s / 2``), values beyond ``amax`` pay a *clipping* error (``|x| - amax``, no
bound). The top panel shows the histogram with the grid and the clipped region;
the bottom panel shows, per bin, how much squared error each kind contributes,
so a too-small amax (clipping dominates) and a too-large one (coarse grid,
rounding dominates) can be told apart at a glance. Zoom in to see single levels.

Figure layout: ``data[0]`` histogram (row 1), ``data[1]`` rounding error and
``data[2]`` clipping error per bin (row 2); ``layout.shapes``: the clipped
region (first), then one vertical line per grid level drawn (``yref="y domain"``).
"""

from __future__ import annotations

import html
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from ..core.calibration.explorer_data import ErrorSplit, error_split, hist_edges, int8_levels, int8_step
from .layout import clear_title

_GRID_COLOR = "rgba(31, 119, 180, 0.45)"
_CLIP_FILL = "rgba(214, 39, 40, 0.10)"


@dataclass(frozen=True)
class Int8GridDisplay:
    """A histogram, the int8 levels at ``amax`` and the error split.

    Attributes
    ----------
    tensor : str
    edges, counts : numpy.ndarray
        The |x| histogram.
    amax : float
    levels : numpy.ndarray
        Grid levels drawn (all 128 non-negative ones unless thinned).
    split : ErrorSplit
        Rounding and clipping squared error per bin.
    label : str
        Where the amax came from (e.g. ``"entropy"``), for the title.
    """

    tensor: str
    edges: np.ndarray
    counts: np.ndarray
    amax: float
    levels: np.ndarray
    split: ErrorSplit
    label: str = ""

    @classmethod
    def from_stats(cls, stats_or_tensor_stats, amax: float, tensor: Optional[str] = None, label: str = "",
                   max_lines: Optional[int] = None, x_range: Optional[Tuple[float, float]] = None
                   ) -> "Int8GridDisplay":
        """The grid at ``amax`` over one tensor's histogram.

        Parameters
        ----------
        stats_or_tensor_stats : ActivationStats or TensorStats
        amax : float
            Clipping threshold (> 0); e.g. ``compute_amax(t, "entropy")``.
        tensor : str, optional
            Which tensor, when ``ActivationStats`` is given.
        label : str
            Name of the amax's origin, shown in the title.
        max_lines, x_range
            Passed to :func:`trtwidgets.core.calibration.explorer_data.int8_levels`: thin the grid, or
            keep only the levels in a zoomed interval.
        """
        from .histogram import pick_tensor_stats

        t = pick_tensor_stats(stats_or_tensor_stats, tensor)
        levels = int8_levels(amax, max_lines=max_lines, x_range=x_range)
        return cls(t.name, hist_edges(t), np.asarray(t.hist, dtype=np.float64), float(amax), levels,
                   error_split(t, amax), label)

    @property
    def step(self) -> float:
        return int8_step(self.amax)

    @property
    def title(self) -> str:
        s = self.split
        origin = f" ({html.escape(self.label)})" if self.label else ""
        return (f"{html.escape(self.tensor)}: int8 grid at amax {self.amax:.4g}{origin}, step {self.step:.3g} — "
                f"rounding {100 * s.rounding_share:.1f}% / clipping {100 * s.clipping_share:.1f}% of squared error")

    def figure(self, widget: bool = False, height: int = 520):
        """A new two-row plotly figure (``go.FigureWidget`` when ``widget`` is true)."""

        from .live_figure import live_figure
        from plotly.subplots import make_subplots

        base = make_subplots(rows=2, cols=1, shared_xaxes=True, row_heights=[0.62, 0.38], vertical_spacing=0.06)
        fig = base
        fig.add_bar(name="|x| count", marker=dict(color="#7f7f7f", line=dict(width=0)), row=1, col=1,
                    hovertemplate="|x| %{x:.4g}<br>count %{y:,}<extra></extra>")
        fig.add_bar(name="rounding error", marker=dict(color="#1f77b4", line=dict(width=0)), row=2, col=1,
                    hovertemplate="|x| %{x:.4g}<br>rounding Σerr² %{y:.3g}<extra></extra>")
        fig.add_bar(name="clipping error", marker=dict(color="#d62728", line=dict(width=0)), row=2, col=1,
                    hovertemplate="|x| %{x:.4g}<br>clipping Σerr² %{y:.3g}<extra></extra>")
        fig.update_layout(height=height, bargap=0, barmode="stack", template="plotly_white",
                          margin=dict(l=60, r=20, t=50, b=40), legend=dict(orientation="h", y=-0.1, x=0),
                          title=dict(font=dict(size=13)))
        fig.update_yaxes(type="log", title_text="count (log)", row=1, col=1)
        fig.update_yaxes(type="log", title_text="Σ squared error", row=2, col=1)
        fig.update_xaxes(title_text="|x|", row=2, col=1)
        self.update(fig)
        # a FigureWidget made from the finished figure starts with all of it in its initial state
        clear_title(fig)  # the title under Plotly's toolbar, not beneath its icons
        return live_figure(fig) if widget else fig

    def update(self, fig) -> None:
        """Redraw ``fig`` (made by :meth:`figure`) in place."""
        from .bins import set_uniform_bars

        x_max = max(float(self.edges[-1]), self.amax) * 1.03
        shapes = [dict(type="rect", xref="x", yref="y domain", x0=self.amax, x1=x_max, y0=0, y1=1,
                       fillcolor=_CLIP_FILL, line=dict(width=0), layer="below",
                       name=f"clipped: |x| > {self.amax:.4g}", showlegend=True)]
        shapes += [dict(type="line", xref="x", yref="y domain", x0=v, x1=v, y0=0, y1=1,
                        line=dict(color=_GRID_COLOR, width=1)) for v in self.levels]
        with fig.batch_update():
            for trace, y in zip(fig.data, (self.counts, self.split.rounding, self.split.clipping)):
                set_uniform_bars(trace, self.edges, y)
            fig.layout.shapes = shapes
            fig.layout.xaxis.range = [0.0, x_max]
            fig.layout.title.text = self.title
