"""Synthetic activation statistics built from real samples of known distributions.

The histograms are made exactly as the statistics module defines them (counts
of |x| in equal bins over [0, hist_max) with hist_max a power of two above the
largest |x|), so the range algorithms see what they would after collection.
"""

from __future__ import annotations

import math
from typing import Dict, Optional

import numpy as np

from trtwidgets.core.calibration.stats import ActivationStats, TensorStats


def tensor_stats(name: str, x: np.ndarray, bins: int = 2048) -> TensorStats:
    """TensorStats of the values ``x`` (NaN/Inf counted apart)."""
    x = np.asarray(x, dtype=np.float64).ravel()
    nan = int(np.isnan(x).sum())
    inf = int(np.isinf(x).sum())
    f = x[np.isfinite(x)]
    absmax = float(np.abs(f).max()) if f.size else 0.0
    hist_max = 2.0 ** (math.floor(math.log2(absmax)) + 1) if absmax > 0 else 0.0
    if hist_max:
        idx = np.minimum((np.abs(f) * (bins / hist_max)).astype(np.int64), bins - 1)
        hist = np.bincount(idx, minlength=bins).astype(np.int64)
    else:
        hist = np.zeros(bins, np.int64)
        hist[0] = f.size
    return TensorStats(name=name, count=int(f.size), nan_count=nan, inf_count=inf,
                       min=float(f.min()) if f.size else float("nan"), max=float(f.max()) if f.size else float("nan"),
                       hist=hist, hist_max=hist_max)


def gaussian_with_outliers(name: str = "conv1_out", n: int = 200_000, outliers: int = 20, scale: float = 1.0,
                           outlier_at: float = 30.0, seed: int = 0) -> TensorStats:
    """A normal bulk and a few far outliers: the case where max and entropy disagree most."""
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, scale, n)
    if outliers:
        x[:outliers] = rng.uniform(0.8, 1.0, outliers) * outlier_at * scale * rng.choice([-1, 1], outliers)
    return tensor_stats(name, x)


def activation_stats(n_tensors: int = 20, seed: int = 0, n: int = 20_000, bins: int = 2048,
                     names: Optional[list] = None) -> ActivationStats:
    """Many tensors whose outlier strength grows with the index (so rankings are predictable)."""
    rng = np.random.default_rng(seed)
    tensors: Dict[str, TensorStats] = {}
    for i in range(n_tensors):
        name = names[i] if names else f"layer{i:03d}/out"
        x = rng.laplace(0.0, 0.5 + 0.05 * i, n)
        k = i % 7
        if k:
            x[:k * 3] = rng.uniform(5, 10, k * 3) * (1 + i % 5) * rng.choice([-1, 1], k * 3)
        tensors[name] = tensor_stats(name, x, bins)
    return ActivationStats(tensors=tensors, samples=8, model_sha256="0" * 64, input_shapes={"x": (1, 3, 48, 192)})


def arr(v) -> np.ndarray:
    """An array from ``fig.to_dict()``: plotly >= 6 writes numpy data as base64 ``{"dtype", "bdata"}``."""
    import base64

    if isinstance(v, dict) and "bdata" in v:
        out = np.frombuffer(base64.b64decode(v["bdata"]), dtype=np.dtype(v["dtype"]))
        return out.reshape(v["shape"]) if "shape" in v and isinstance(v["shape"], (list, tuple)) else out
    return np.asarray(v)


def bar_x(bar) -> np.ndarray:
    """The bin centres of a bar trace from ``fig.to_dict()``: its ``x``, or what ``x0`` and ``dx`` build."""
    if bar.get("x") is not None:
        return arr(bar["x"])
    return bar["x0"] + bar["dx"] * np.arange(len(arr(bar["y"])))
