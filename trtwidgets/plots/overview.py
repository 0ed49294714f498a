"""All tensors at once, ranked so the ones that matter come first.

:class:`TensorOverviewDisplay` shows a :class:`~trtwidgets.core.calibration.explorer_data.TensorRanking`
either as horizontal bars (the top ``n`` tensors by disagreement between range
methods, or by quantization error) or as a scatter of every tensor (x:
disagreement, y: SQNR), where the tensors that want attention sit bottom right.
Every point's ``customdata`` is its tensor name, so a click handler (wired in
the explorer widget) knows which tensor was chosen.

Trace layout: ``data[0]`` all tensors, ``data[1]`` the selected tensor (highlight).
"""

from __future__ import annotations

import html
import math
from dataclasses import dataclass
from typing import Mapping, Optional, Sequence

from ..core.calibration.explorer_data import TensorRanking, rank_tensors
from .layout import clear_title

_KINDS = ("bar", "scatter")


@dataclass(frozen=True)
class TensorOverviewDisplay:
    """A ranking of tensors ready to draw.

    Attributes
    ----------
    ranking : TensorRanking
    kind : str
        ``"bar"`` or ``"scatter"``.
    top : int or None
        Bars drawn (``None``: all); the scatter always shows every tensor.
    selected : str or None
        Tensor drawn highlighted.
    """

    ranking: TensorRanking
    kind: str = "bar"
    top: Optional[int] = 40
    selected: Optional[str] = None

    @classmethod
    def from_ranges(cls, ranges: Mapping[str, Mapping[str, object]], by: str = "disagreement",
                    method: Optional[str] = None, methods: Optional[Sequence[str]] = None, kind: str = "bar",
                    top: Optional[int] = 40, selected: Optional[str] = None) -> "TensorOverviewDisplay":
        """Rank the output of :func:`trtwidgets.core.calibration.ranges.compute_ranges` (see :func:`rank_tensors`)."""
        if kind not in _KINDS:
            from ..core.common.errors import StatsError

            raise StatsError(f"unknown overview kind {kind!r}", None, f"use one of {', '.join(_KINDS)}")
        return cls(rank_tensors(ranges, by=by, method=method, methods=methods), kind, top, selected)

    def with_selected(self, name: Optional[str]) -> "TensorOverviewDisplay":
        return TensorOverviewDisplay(self.ranking, self.kind, self.top, name)

    @property
    def shown(self) -> TensorRanking:
        r = self.ranking
        return r.top(self.top) if self.kind == "bar" and self.top else r

    @property
    def axis_title(self) -> str:
        if self.ranking.by == "disagreement":
            return "disagreement between methods: log2(max amax / min amax)"
        return f"SQNR at {self.ranking.method or 'the worst method'} (dB, lower is worse)"

    def figure(self, widget: bool = False, height: Optional[int] = None):
        """A new plotly figure (``go.FigureWidget`` when ``widget`` is true)."""
        import plotly.graph_objects as go

        from .live_figure import live_figure

        fig = go.Figure()
        if self.kind == "bar":
            fig.add_bar(orientation="h", name="tensors", marker=dict(color="#1f77b4"))
            fig.add_bar(orientation="h", name="selected", marker=dict(color="#ff7f0e"), showlegend=False)
            fig.update_layout(barmode="overlay", yaxis=dict(autorange="reversed", type="category",
                                                            automargin=True, tickfont=dict(size=10)))
        else:
            fig.add_scattergl(mode="markers", name="tensors", marker=dict(color="#1f77b4", size=7, opacity=0.7))
            fig.add_scatter(mode="markers", name="selected", showlegend=False,
                            marker=dict(color="#ff7f0e", size=14, symbol="circle-open", line=dict(width=3)))
            fig.update_layout(xaxis=dict(title="disagreement: log2(max amax / min amax)"),
                              yaxis=dict(title=f"SQNR at {self.ranking.method or 'worst method'} (dB)"))
        n = len(self.shown)
        fig.update_layout(height=height or (max(300, 18 * n + 90) if self.kind == "bar" else 380),
                          template="plotly_white", showlegend=False, margin=dict(l=10, r=20, t=40, b=40),
                          title=dict(font=dict(size=13)),
                          clickmode="event")
        self.update(fig)
        # a FigureWidget made from the finished figure starts with all of it in its initial state
        clear_title(fig)  # the title under Plotly's toolbar, not beneath its icons
        return live_figure(fig) if widget else fig

    def update(self, fig) -> None:
        """Redraw ``fig`` (made by :meth:`figure` with the same ``kind``) in place."""
        r = self.shown
        names = list(r.names)
        hover = [_hover(n, d, s) for n, d, s in zip(r.names, r.disagreement, r.sqnr_db)]
        sel = self.selected if self.selected in r.names else None
        with fig.batch_update():
            main, mark = fig.data[0], fig.data[1]
            if self.kind == "bar":
                main.y = names
                main.x = [_number_or_none(v) for v in r.scores]
                main.customdata = names
                main.hovertext = hover
                main.hoverinfo = "text"
                mark.y = [sel] if sel else []
                mark.x = [_number_or_none(r.scores[r.names.index(sel)])] if sel else []
                mark.customdata = [sel] if sel else []
                mark.hoverinfo = "skip"
                fig.layout.xaxis.title.text = self.axis_title
            else:
                main.x = list(r.disagreement)
                main.y = [_number_or_none(v) for v in r.sqnr_db]
                main.customdata = names
                main.hovertext = hover
                main.hoverinfo = "text"
                i = r.names.index(sel) if sel else -1
                mark.x = [r.disagreement[i]] if i >= 0 else []
                mark.y = [_number_or_none(r.sqnr_db[i])] if i >= 0 else []

                mark.customdata = [sel] if sel else []
                mark.hoverinfo = "skip"
            title = (f"{len(self.ranking)} tensors by {self.ranking.by}"
                     + (f", top {len(r)}" if len(r) < len(self.ranking) else "") + " (click to open)")
            fig.layout.title.text = title


def _number_or_none(v: float):
    # JSON has no NaN/Inf; plotly leaves None out, which is what an unknown value should do.
    return v if v is not None and math.isfinite(v) else None


def _hover(name: str, dis: float, sqnr: float) -> str:
    sq = "n/a" if sqnr is None or math.isnan(sqnr) else ("∞" if math.isinf(sqnr) else f"{sqnr:.1f}")
    return (f"<b>{html.escape(name)}</b><br>methods differ ×{2 ** dis:.3g} (log2 {dis:.2f})"
            f"<br>SQNR {sq} dB")
