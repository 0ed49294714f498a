"""Figures for the HTML report, as fragments that work offline.

plotly.js is embedded once, in the document's ``<head>`` (:func:`plotly_js_head`);
every figure is then a ``<div>`` plus a small script (:func:`figure_html`).
A CDN link would leave the report blank on a machine without network (a GPU
box, a plane), so it is never used. Plotly's JSON encoder escapes ``</``, so
model-provided names inside figures cannot end the script.
"""

from __future__ import annotations

from typing import Any, Dict, Iterable, Mapping, Optional, Sequence

from ..core.recipe.report import Section, esc, section


def plotly_js_head() -> str:
    """``<script>`` holding the whole plotly.js (about 4.6 MB), for the report's ``<head>``."""
    from plotly.offline import get_plotlyjs

    return f'<script type="text/javascript">{get_plotlyjs()}</script>'


def figure_html(fig, div_id: Optional[str] = None) -> str:
    """One figure as a ``<div class="plotly-graph-div">`` and its drawing script (no plotly.js)."""
    return fig.to_html(full_html=False, include_plotlyjs=False, div_id=div_id,
                       config={"displaylogo": False, "responsive": True})


def figures_section(title: str, figures: Iterable, captions: Sequence[str] = ()) -> Section:
    """A report section of figures, each with an optional (escaped) caption."""
    parts = []
    captions = list(captions)
    for i, fig in enumerate(figures):
        if i < len(captions) and captions[i]:
            parts.append(f"<div class='trtw-note'>{esc(captions[i])}</div>")
        parts.append(figure_html(fig))
    return section(title, *parts)


def histogram_figures(stats, ranges: Mapping[str, Mapping], names: Sequence[str], percentile: float = 99.99,
                      active: str = "entropy", amax_overrides: Optional[Mapping[str, float]] = None,
                      chosen: Optional[Mapping[str, str]] = None) -> list:
    """The |x| histogram with every method's amax, for each tensor in ``names`` (``chosen``: tensor -> the
    method ``auto`` exports for it, the active line where given)."""
    from .histogram import TensorHistogramDisplay

    out = []
    for name in names:
        line = (chosen or {}).get(name, active)
        kw: Dict[str, Any] = {}
        if amax_overrides and name in amax_overrides:

            kw["override"] = amax_overrides[name]
        try:
            display = TensorHistogramDisplay.from_stats(stats, name, percentile=percentile, active=line, **kw)
        except TypeError:
            display = TensorHistogramDisplay.from_stats(stats, name, percentile=percentile, active=line)
        out.append(display.figure(height=320))
    return out


def overview_figure(ranges: Mapping[str, Mapping], top: int = 30):
    """Tensors ranked by how much the range methods disagree."""
    from .overview import TensorOverviewDisplay

    return TensorOverviewDisplay.from_ranges(ranges, by="disagreement", top=top).figure()


def precision_figure(tables: Mapping[str, object]):
    """Layers per precision: one bar group per build (``label -> layer table``)."""
    from ..core.engine.inspector_json import PRECISIONS
    from ..core.engine.layer_table import precision_summary
    from .precision import PrecisionBarDisplay

    items = list(tables.items())
    if len(items) == 1:
        label, tbl = items[0]
        return PrecisionBarDisplay.from_table(tbl, build=label).figure()
    summaries = {label: precision_summary(tbl) for label, tbl in items}
    seen = {str(p) for s in summaries.values() for p in s.index}
    precisions = tuple(p for p in PRECISIONS if p in seen) + tuple(sorted(seen - set(PRECISIONS)))
    counts = tuple(tuple(int(s["layers"].get(p, 0)) for p in precisions) for s in summaries.values())
    return PrecisionBarDisplay(precisions, tuple(summaries), counts, (None,) * len(summaries),
                               "Layers per precision, per build").figure()
