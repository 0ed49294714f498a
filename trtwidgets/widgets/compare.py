"""Compare view: two or more builds side by side.

Thin: matching and tables come from :func:`trtwidgets.core.engine.build_compare.compare_builds`,
the chart from :class:`trtwidgets.plots.precision.PrecisionBarDisplay`.
"""

from __future__ import annotations

import html
from typing import Any, Optional, Sequence

import ipywidgets as widgets

from ..core.common.errors import UserError
from ..core.engine.layer_table import table_html
from .html import error_html


class CompareView(widgets.VBox):
    """Precision counts per build, total latency, and the layers whose precision or tactic differ.

    Parameters
    ----------
    builds : mapping label -> source, or sequence of sources
        EngineGraphs, build results, or inspector JSON paths/texts (two or more).
    labels : sequence of str, optional
    profiles : mapping or sequence, optional
        Per-layer timings per build.
    max_rows : int, default 200
    """

    def __init__(self, builds: Any = None, labels: Optional[Sequence[str]] = None, profiles: Any = None,
                 max_rows: int = 200, **kwargs):
        self.max_rows = int(max_rows)
        self.comparison: Any = None
        self.message = widgets.HTML()
        self.totals = widgets.HTML()
        self.only_differences = widgets.Checkbox(value=True, description="only layers that differ")
        self.count = widgets.HTML()
        self.table_view = widgets.HTML(layout=widgets.Layout(max_height="480px", overflow="auto"))
        self.chart = None
        self.chart_box = widgets.Box()
        super().__init__([self.message, self.chart_box, self.totals, self.only_differences, self.count,
                          self.table_view], **kwargs)
        self.only_differences.observe(lambda _: self.refresh(), names="value")
        if builds is not None:
            self.load(builds, labels, profiles)

    def load(self, builds: Any, labels: Optional[Sequence[str]] = None, profiles: Any = None) -> bool:
        """Compare new builds; on bad input explain it and keep the previous comparison."""
        from ..core.engine.build_compare import compare_builds
        from ..plots.precision import PrecisionBarDisplay

        try:
            comparison = compare_builds(builds, labels, profiles)
        except UserError as err:
            self.message.value = error_html(err)
            return False
        self.comparison = comparison
        self.message.value = ""
        fig = PrecisionBarDisplay.from_comparison(comparison).figure(widget=True)
        self.chart = fig
        self.chart_box.children = [fig]
        totals = comparison.total_latency_ms()
        if any(v is not None for v in totals.values()):
            self.totals.value = ("<div><b>Total layer time</b>: " + ", ".join(
                f"{html.escape(k)} {v:.4f} ms" if v is not None else f"{html.escape(k)} (no profile)"
                for k, v in totals.items()) + "</div>")
        else:
            self.totals.value = ""
        self.refresh()
        return True

    def refresh(self) -> None:
        """Re-render the layer table (all layers, or only those that differ)."""
        if self.comparison is None:
            return
        table = self.comparison.table(only_differences=self.only_differences.value)
        precision_columns = [f"{label} precision" for label in self.comparison.labels]
        shown = min(len(table), self.max_rows)
        with self.hold_sync():
            self.count.value = (f'<div class="trtw-count">showing {shown} of {len(table)} layers'
                                + (" that differ" if self.only_differences.value else "") + "</div>")
            self.table_view.value = table_html(table, self.max_rows, precision_columns=precision_columns)
