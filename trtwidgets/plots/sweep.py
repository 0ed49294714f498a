"""Line charts of a quantization sweep: one panel per metric, one line per choice.

:class:`SweepDisplay` is a plain data object (numpy only); :meth:`SweepDisplay.figure`
imports plotly. The teaching notebooks use it to show a choice (range method, sample
count, amax scale, per-channel or not) by its effect on SQNR and on a task metric
side by side, the two panels sharing the x axis.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence, Tuple

from .layout import clear_title

__all__ = ["SweepDisplay"]


@dataclass(frozen=True)
class SweepDisplay:
    """Metrics of a sweep: ``panels[i] = (y title, ((series name, y values), ...))``.

    Attributes
    ----------
    x : tuple
        The swept values (shared by every series).
    x_title : str
    panels : tuple
        One ``(y_title, series)`` per panel; ``series`` is a tuple of ``(name, ys)``
        with one y per x (None where a value is missing).
    title : str
    log_x : bool
        A log2 x axis (sample counts, amax scales).
    """

    x: Tuple
    x_title: str
    panels: Tuple[Tuple[str, Tuple[Tuple[str, Tuple], ...]], ...]
    title: str = ""
    log_x: bool = False

    @classmethod
    def from_metrics(cls, x: Sequence, x_title: str, panels: Mapping[str, Mapping[str, Sequence]],
                     title: str = "", log_x: bool = False) -> "SweepDisplay":
        """From ``{y title: {series name: ys}}`` (dict order is kept)."""
        n = len(x)
        out = []
        for y_title, series in panels.items():
            rows = []
            for name, ys in series.items():
                ys = tuple(None if v is None else float(v) for v in ys)
                if len(ys) != n:
                    raise ValueError(f"series {name!r} of {y_title!r} has {len(ys)} values for {n} x values")
                rows.append((str(name), ys))
            out.append((str(y_title), tuple(rows)))
        return cls(tuple(x), str(x_title), tuple(out), str(title), bool(log_x))

    def figure(self):
        """The plotly figure: panels stacked, x shared, one colour per series name across panels."""
        import plotly.graph_objects as go
        from plotly.colors import qualitative
        from plotly.subplots import make_subplots

        fig = make_subplots(rows=len(self.panels), cols=1, shared_xaxes=True, vertical_spacing=0.08,
                            subplot_titles=[p[0] for p in self.panels])
        names = list(dict.fromkeys(name for _, series in self.panels for name, _ in series))
        colors = {name: qualitative.Plotly[i % len(qualitative.Plotly)] for i, name in enumerate(names)}
        for row, (y_title, series) in enumerate(self.panels, start=1):
            for name, ys in series:
                fig.add_trace(go.Scatter(x=list(self.x), y=list(ys), name=name, mode="lines+markers",
                                         legendgroup=name, showlegend=row == 1, line={"color": colors[name]}),
                              row=row, col=1)
            fig.update_yaxes(title_text=y_title, row=row, col=1)
        fig.update_xaxes(title_text=self.x_title, row=len(self.panels), col=1)
        if self.log_x:
            fig.update_xaxes(type="log")
        fig.update_layout(title=self.title or None, template="plotly_white", height=220 + 200 * len(self.panels))
        clear_title(fig)  # the title under Plotly's toolbar, not beneath its icons
        return fig
