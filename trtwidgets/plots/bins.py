"""Histogram bars that stay small in a page and in a widget's state.

A tensor's histogram has 8,192 uniform bins. Written as plotly writes numpy arrays, an
``x`` of bin centres and a ``y`` of float64 counts take 175 KB of base64 per trace, in
every figure, every FigureWidget state and every in-place update (the calibration
notebook's page held 2.4 MB of them). Uniform bins need no ``x``: ``x0`` and ``dx``
build it in the browser. Counts are whole numbers, exact in float32 below 2**24; errors
(sums of squares, drawn on a log axis) need no more than float32's seven digits. So a
trace is a quarter of what it was, and every value drawn is the value computed.
"""

from __future__ import annotations

import numpy as np

#: Whole numbers up to this are exact in float32.
FLOAT32_EXACT = 2 ** 24


def compact(values) -> np.ndarray:
    """``values`` as float32 where that is exact (whole numbers below 2**24) or only display precision is lost
    (fractional values); float64 for whole numbers at or above 2**24."""
    v = np.asarray(values, dtype=np.float64)
    finite = v[np.isfinite(v)]
    whole = finite.size == 0 or bool(np.all(finite == np.round(finite)))
    if whole and finite.size and float(np.abs(finite).max()) >= FLOAT32_EXACT:
        return v
    return v.astype(np.float32)


def set_uniform_bars(trace, edges, values) -> None:
    """Give a bar ``trace`` one bar per uniform bin of ``edges`` (``len(values) + 1`` of them), without an ``x`` array."""
    edges = np.asarray(edges, dtype=np.float64)
    width = float(edges[1] - edges[0]) if len(edges) > 1 else 1.0
    trace.x = None
    trace.x0 = float(edges[0]) + width / 2
    trace.dx = width
    trace.y = compact(values)
    trace.width = width
