"""Bar charts of an engine's layer precisions.

:class:`PrecisionBarDisplay` follows scikit-learn's Display pattern: a plain
data object built by :meth:`PrecisionBarDisplay.from_table` (one build) or
:meth:`PrecisionBarDisplay.from_comparison` (several), and :meth:`figure`,
which imports plotly. Bars show layer counts; where latency is known, a second
set of bars (right axis) shows the share of time per precision.

Figure layout (stable, so the widget can update it in place): one bar trace
per build named ``"<build> layers"`` (and ``"<build> time %"`` with latency);
x is the precision; each bar is coloured per precision for a single build.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

from ..core.engine.layer_table import PRECISION_COLORS
from .layout import clear_title

__all__ = ["PrecisionBarDisplay"]


@dataclass(frozen=True)
class PrecisionBarDisplay:
    """Layer counts (and time shares) per precision for one or more builds.

    Attributes
    ----------
    precisions : tuple of str
        x categories, in table order.
    builds : tuple of str
    counts : tuple of tuple of int
        ``counts[b][p]``: layers of build b in precision p.
    time_share : tuple of (tuple of float or None)
        Per build: share of time per precision (0-1), or None without latency.
    title : str
    """

    precisions: Tuple[str, ...]
    builds: Tuple[str, ...]
    counts: Tuple[Tuple[int, ...], ...]
    time_share: Tuple[Optional[Tuple[float, ...]], ...]
    title: str = "Layers per precision"

    @classmethod
    def from_table(cls, table, build: str = "engine", title: Optional[str] = None) -> "PrecisionBarDisplay":
        """From a :func:`~trtwidgets.core.engine.layer_table.layer_table` or its :func:`precision_summary`."""
        from ..core.engine.layer_table import precision_summary

        summary = table if "layers" in getattr(table, "columns", ()) else precision_summary(table)
        precisions = tuple(str(p) for p in summary.index)
        counts = (tuple(int(v) for v in summary["layers"]),)
        shares = summary["time_share"]
        share = None if shares.isna().all() else tuple(0.0 if math.isnan(v) else float(v) for v in shares)
        total = int(sum(counts[0]))
        return cls(precisions, (build,), counts, (share,), title or f"Layers per precision ({total} layers)")

    @classmethod
    def from_comparison(cls, comparison, title: str = "Layers per precision, per build") -> "PrecisionBarDisplay":
        """From a :class:`~trtwidgets.core.engine.build_compare.BuildComparison`."""
        frame = comparison.precision_counts()
        precisions = tuple(str(p) for p in frame.index)
        builds = tuple(str(c) for c in frame.columns)
        counts = tuple(tuple(int(v) for v in frame[c]) for c in frame.columns)
        return cls(precisions, builds, counts, (None,) * len(builds), title)

    def figure(self, widget: bool = False):
        """The plotly figure (a ``go.FigureWidget`` when ``widget``)."""
        import plotly.graph_objects as go

        from .live_figure import live_figure

        single = len(self.builds) == 1
        fig = go.Figure()
        for b, build in enumerate(self.builds):
            colors = [PRECISION_COLORS.get(p, "#7f7f7f") for p in self.precisions] if single else None
            total = max(sum(self.counts[b]), 1)
            fig.add_trace(go.Bar(
                x=list(self.precisions), y=list(self.counts[b]), name=f"{build} layers",
                marker_color=colors, text=[str(c) for c in self.counts[b]], textposition="auto",
                customdata=[c / total for c in self.counts[b]],
                hovertemplate="%{x}: %{y} layers (%{customdata:.1%})<extra>" + build.replace("<", "&lt;") + "</extra>",
                offsetgroup=f"{b}-layers"))
            share = self.time_share[b]
            if share is not None:
                fig.add_trace(go.Bar(
                    x=list(self.precisions), y=[100 * s for s in share], name=f"{build} time %",

                    yaxis="y2", marker_color=colors, marker_pattern_shape="/", opacity=0.6,
                    hovertemplate="%{x}: %{y:.1f}% of time<extra></extra>", offsetgroup=f"{b}-time"))
        layout = dict(title=self.title, barmode="group", xaxis_title="precision", yaxis_title="layers",
                      height=320, margin=dict(l=50, r=50, t=50, b=40), legend=dict(orientation="h", y=-0.25))
        if any(s is not None for s in self.time_share):
            layout["yaxis2"] = dict(title="% of time", overlaying="y", side="right", range=[0, 100])
        fig.update_layout(**layout)
        # A FigureWidget made from the finished figure: one built empty and filled trace by trace
        # kept plotly's default bar colour in the browser.
        clear_title(fig)  # the title under Plotly's toolbar, not beneath its icons
        return live_figure(fig) if widget else fig

