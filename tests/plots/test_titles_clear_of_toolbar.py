"""Every titled figure keeps its title out of the band Plotly's toolbar takes at the top (issue 34).

The toolbar (modebar) is drawn over the figure's top right corner; a long title at Plotly's default
place runs under its icons. The titles sit on the plot area's top edge instead, below a top margin that
holds the toolbar band and the title line. (The real browser test measures the drawn boxes.)
"""

from __future__ import annotations

import pytest

from trtwidgets.core.calibration.ranges import compute_ranges
from trtwidgets.core.engine.layer_table import layer_table
from trtwidgets.plots.histogram import TensorHistogramDisplay
from trtwidgets.plots.int8_grid import Int8GridDisplay
from trtwidgets.plots.layout import TOOLBAR_PX, clear_title
from trtwidgets.plots.overview import TensorOverviewDisplay
from trtwidgets.plots.precision import PrecisionBarDisplay

from ..core import inspector_samples as s
from .synthetic_stats import activation_stats


def _figures():
    stats = activation_stats(6)
    name = next(iter(stats.tensors))
    yield "histogram", TensorHistogramDisplay.from_stats(stats, name).figure()
    yield "overview", TensorOverviewDisplay.from_ranges(compute_ranges(stats)).figure()
    yield "int8 grid", Int8GridDisplay.from_stats(stats, 1.0, tensor=name).figure()
    yield "precision", PrecisionBarDisplay.from_table(layer_table(s.trt_text(s.synthetic_int8_implicit()))).figure()


@pytest.mark.parametrize("kind, fig", list(_figures()), ids=lambda v: v if isinstance(v, str) else "")
def test_the_title_sits_on_the_plot_area_under_the_toolbar_band(kind, fig):
    layout = fig.to_dict()["layout"]
    title = layout["title"]
    assert title.get("text"), f"{kind}: no title drawn"
    assert title["yref"] == "paper" and title["y"] == 1.0 and title["yanchor"] == "bottom", kind
    assert layout["margin"]["t"] >= TOOLBAR_PX + 24, kind


def test_a_margin_already_taller_is_kept_and_more_lines_get_more_room():
    import plotly.graph_objects as go

    assert clear_title(go.Figure(layout=dict(margin=dict(t=120)))).layout.margin.t == 120
    one, two = clear_title(go.Figure()).layout.margin.t, clear_title(go.Figure(), lines=2).layout.margin.t
    assert two > one >= TOOLBAR_PX + 24
