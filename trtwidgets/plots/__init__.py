"""Plotly figure builders, one Display class or function per figure.

Plotly is imported inside the drawing methods, so importing this package (and
building the Display data objects) needs only numpy.
"""

from __future__ import annotations

import importlib
from typing import Any, List

#: Public name -> (module, attribute), resolved on first use so that importing the package stays cheap.
_LAZY = {
    "TensorHistogramDisplay": ("trtwidgets.plots.histogram", "TensorHistogramDisplay"),
    "SweepDisplay": ("trtwidgets.plots.sweep", "SweepDisplay"),
    "TensorOverviewDisplay": ("trtwidgets.plots.overview", "TensorOverviewDisplay"),
    "Int8GridDisplay": ("trtwidgets.plots.int8_grid", "Int8GridDisplay"),
    "PrecisionBarDisplay": ("trtwidgets.plots.precision", "PrecisionBarDisplay"),
    # Figures that exported HTML and nbviewer draw (plotly.js embedded once per notebook).
    "shareable_figures": ("trtwidgets.plots.notebook_renderer", "shareable_figures"),
    # The layer table as escaped HTML (colour per precision), for notebooks and reports.
    "layer_table_html": ("trtwidgets.core.engine.layer_table", "table_html"),
}

__all__ = list(_LAZY)


def __getattr__(name: str) -> Any:
    try:
        module, attr = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module 'trtwidgets.plots' has no attribute {name!r}") from None
    return getattr(importlib.import_module(module), attr)


def __dir__() -> List[str]:
    return sorted(set(globals()) | set(__all__))
