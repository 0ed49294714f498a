"""Streaming per-tensor accumulator: min/max, NaN/Inf counts and an ``|x|`` histogram.

Memory is fixed per tensor (``num_bins`` int64 counts).  The histogram covers
``[0, 2**e)`` with the smallest ``e`` that holds every finite ``|x|`` seen; when a
larger value arrives the range doubles and neighbouring bins are merged in
pairs, which is exact because ``num_bins / 2**e`` is a power of two: a value
lands in the same (merged) bin whether it was counted before or after the
widening.  This is also what makes statistics of two halves merge into exactly
the histogram of one pass.

A second, small histogram follows TensorRT 8.6's entropy calibrators exactly:
2048 bins whose range is the first batch's ``max |x|``, doubled (bins merged in
pairs) whenever a later batch exceeds it.  Re-binning the fine histogram onto
that grid is not enough: TensorRT's bin edges rarely line up with ours, and on
sparse or discrete tensors (an SE block's 1x1 outputs, 8-bit image inputs) the
smeared counts move EntropyCalibration2's choice by up to 10x.  With the exact
grid the toolkit's entropy amax equals TensorRT's for 96% of the demo model's
tensors (tests/core/test_calib_fidelity.py).
"""

from __future__ import annotations

import math
from typing import Any, Dict, Optional

import numpy as np

from .stats import TRT_BINS, TensorStats, rebin_to, trt_grid_range

#: Default histogram resolution.  Finer than TensorRT's 2048 because the range is
#: rounded up to a power of two; the range algorithms re-bin to 2048 over [0, absmax].
DEFAULT_BINS = 8192
#: Elements per histogram step: bounds the temporaries to ~12 bytes x CHUNK for any tensor size. Small enough
#: that they stay in the CPU's cache between the step's six passes (|x|, two scalings, two casts, two counts):
#: at 2**16 a 480x640x32 ReLU output is counted in 60% of the CPU time it took at 2**22 (out of memory).
CHUNK = 1 << 16


def pow2_above(x: float) -> float:
    """The smallest power of two strictly greater than ``x`` (> 0)."""
    _, e = math.frexp(float(x))
    return math.ldexp(1.0, e)


def _add_front(total, part: np.ndarray) -> np.ndarray:
    """``total + part`` for count arrays of different lengths (the shorter one padded with zeros)."""
    if total is None:
        return part
    if len(part) > len(total):
        part, total = total, part
    total[:len(part)] += part
    return total


def _merge_pairs(hist: np.ndarray) -> np.ndarray:
    """The histogram over twice the range: neighbouring bins summed, the upper half empty."""
    n = len(hist)
    out = np.zeros_like(hist)
    out[: n // 2] = hist.reshape(n // 2, 2).sum(axis=1)
    return out


class HistogramAccumulator:
    """Mutable running statistics of one tensor (internal to collection).

    Parameters
    ----------
    name : str
    num_bins : int
        A power of two.
    """

    __slots__ = ("name", "num_bins", "count", "nan_count", "inf_count", "min", "max", "hist", "hist_max", "first_absmax",
                 "trt_hist", "trt_range", "edges", "trt_base")

    def __init__(self, name: str, num_bins: int = DEFAULT_BINS) -> None:
        if num_bins < 2 or num_bins & (num_bins - 1):
            raise ValueError(f"num_bins must be a power of two, got {num_bins}")
        self.name = name
        self.num_bins = int(num_bins)
        self.count = 0
        self.nan_count = 0
        self.inf_count = 0
        self.min = math.inf
        self.max = -math.inf
        self.hist = np.zeros(self.num_bins, np.int64)
        self.hist_max = 0.0
        self.first_absmax = math.nan
        self.trt_hist = np.zeros(TRT_BINS, np.int64)
        self.trt_range = 0.0
        # A shard of a distributed collection (:mod:`.shards`) records, per TensorRT range, the values that landed
        # on the range's end (kept in the last bin), and the range it started from when it had no seed.
        self.edges: Optional[Dict[Any, Any]] = None
        self.trt_base = 0.0

    def seed_shard(self, trt_range: float = 0.0) -> None:
        """Collect as a shard of :mod:`.shards`: TensorRT's grid starts at ``trt_range`` (the first batch's
        ``max |x|`` of the whole collection; 0 when not known yet), and clamped values are recorded."""
        self.edges = {}
        self.trt_range = float(trt_range)

    @classmethod
    def from_stats(cls, t: TensorStats) -> "HistogramAccumulator":
        acc = cls(t.name, t.bins)
        acc.count, acc.nan_count, acc.inf_count = int(t.count), int(t.nan_count), int(t.inf_count)
        if t.count:
            acc.min, acc.max = float(t.min), float(t.max)
        acc.hist = np.array(t.hist, dtype=np.int64, copy=True)
        acc.hist_max = float(t.hist_max)
        acc.first_absmax = float(t.first_absmax)
        if t.trt_hist is not None:
            acc.trt_hist = np.array(t.trt_hist, dtype=np.int64, copy=True)
            acc.trt_range = float(t.trt_range)
        elif t.count:
            # Statistics from before the TensorRT grid was kept: start it from the fine histogram.
            from .stats import rebin_linear

            acc.trt_range = trt_grid_range(t.first_absmax, t.absmax) if t.first_absmax > 0 else t.absmax
            acc.trt_hist = rebin_linear(t.hist, t.hist_max, acc.trt_range, TRT_BINS)
        return acc

    def to_stats(self, copy: bool = True) -> TensorStats:
        """An immutable snapshot; ``copy=False`` hands over the histogram (the accumulator must not be used again)."""
        empty = self.count == 0
        return TensorStats(name=self.name, count=int(self.count), nan_count=int(self.nan_count),
                           inf_count=int(self.inf_count), min=float("nan") if empty else float(self.min),
                           max=float("nan") if empty else float(self.max), hist=self.hist.copy() if copy else self.hist,
                           hist_max=float(self.hist_max), first_absmax=float(self.first_absmax),
                           trt_hist=self.trt_hist.copy() if copy else self.trt_hist,
                           trt_range=float(self.trt_range) if self.count else float("nan"))

    def batch_update(self, arr: np.ndarray):
        """Compute this batch's contribution without touching the accumulator.

        Returns an opaque tuple for :meth:`commit`; the split lets collection apply a
        whole batch at once, so an interrupt never leaves tensors counted unevenly.
        """
        a = np.asarray(arr)
        if a.dtype.kind != "f":
            return None
        if a.dtype not in (np.float32, np.float64):
            a = a.astype(np.float32)
        flat = a.reshape(-1)
        if flat.size == 0:
            return (0, 0, 0, math.inf, -math.inf, None, 0.0, 0, None, 0.0, 0)
        mn, mx = flat.min(), flat.max()
        nan = inf = 0
        if not (np.isfinite(mn) and np.isfinite(mx)):
            finite = np.isfinite(flat)
            nan = int(np.count_nonzero(np.isnan(flat)))
            inf = int(flat.size - np.count_nonzero(finite) - nan)
            flat = flat[finite]
            if flat.size == 0:
                return (0, nan, inf, math.inf, -math.inf, None, 0.0, 0, None, 0.0, 0)
            mn, mx = flat.min(), flat.max()
        mn, mx = float(mn), float(mx)
        absmax = max(-mn, mx)
        hist_max = self.hist_max
        if absmax >= hist_max and absmax > 0:
            hist_max = pow2_above(absmax)
        # TensorRT's grid: the first batch's max |x|, doubled while this batch exceeds it.
        trt_range = absmax if self.trt_range <= 0 else trt_grid_range(self.trt_range, absmax)
        trt_counts = None
        clamped = 0
        if hist_max == 0:
            counts = None
            zeros = flat.size
        else:
            zeros = 0
            # n / 2**e is a power of two, so |x| * scale is exact and |x| < 2**e gives an index < n.
            scale = flat.dtype.type(self.num_bins / hist_max)
            counts = None
            # From the fine scale to TensorRT's: |x| * scale is exact, so one more product costs at most an ulp
            # (a value within an ulp of a TensorRT bin edge may land on its other side).
            to_trt = flat.dtype.type((TRT_BINS / trt_range) / (self.num_bins / hist_max))
            # Large tensors go in chunks so the temporaries (|x| and the bin indices) stay small. Scaling the
            # one buffer in place twice costs half as much as a second scaled copy (fresh pages for each).
            for lo in range(0, flat.size, CHUNK):
                buf = np.abs(flat[lo:lo + CHUNK])
                buf *= scale
                # No minlength: small ranges give short count arrays, added to the front of the histogram.
                counts = _add_front(counts, np.bincount(buf.astype(np.intp)))
                buf *= to_trt
                part = np.bincount(buf.astype(np.intp))
                del buf
                if len(part) > TRT_BINS:
                    # The batch maximum itself lands on the range's end: TensorRT keeps it in the last bin.
                    edge = int(part[TRT_BINS:].sum())
                    part[TRT_BINS - 1] += edge
                    clamped += edge
                    part = part[:TRT_BINS]
                trt_counts = _add_front(trt_counts, part)
        return (int(flat.size), nan, inf, mn, mx, counts, hist_max, zeros, trt_counts, trt_range, clamped)

    def commit(self, part) -> None:
        """Apply what :meth:`batch_update` computed (cheap; no large temporaries)."""
        if part is None:
            return
        n, nan, inf, mn, mx, counts = part[:6]
        hist_max = part[6]
        self.nan_count += nan
        self.inf_count += inf
        if n == 0:
            return
        if self.count == 0:
            self.first_absmax = max(-mn, mx)
        self._commit_trt(part[8], part[9], part[7])
        if self.edges is not None and part[10]:
            self.edges[part[9]] = self.edges.get(part[9], 0) + part[10]
        self.count += n
        self.min = min(self.min, mn)
        self.max = max(self.max, mx)
        if hist_max > self.hist_max:
            self.hist = rebin_to(self.hist, self.hist_max, hist_max).astype(np.int64, copy=False)
            self.hist_max = hist_max
        if counts is None:
            self.hist[0] += part[7]
        else:
            if hist_max < self.hist_max:
                # Another batch widened the range since this part was computed.
                full = np.zeros(self.num_bins, np.int64)
                full[:len(counts)] = counts
                counts = rebin_to(full, hist_max, self.hist_max)
            self.hist[:len(counts)] += counts

    def _commit_trt(self, counts, trt_range: float, zeros: int) -> None:
        if trt_range <= 0:
            # All zeros so far: TensorRT has no range yet; the zeros stay in bin 0 of whatever comes.
            self.trt_hist[0] += zeros
            return
        if self.trt_range <= 0:
            self.trt_range = trt_range
            self.trt_base = trt_range  # a shard without a seed: its own first range (:mod:`.shards` checks it)
        while trt_range > self.trt_range:
            self.trt_hist = _merge_pairs(self.trt_hist)
            self.trt_range *= 2.0
        while counts is not None and trt_range < self.trt_range:
            # Another batch widened the range since this part was computed.
            full = np.zeros(TRT_BINS, np.int64)
            full[:len(counts)] = counts
            counts = _merge_pairs(full)
            trt_range *= 2.0
        if counts is not None:
            self.trt_hist[:len(counts)] += counts
        else:
            self.trt_hist[0] += zeros

    def update(self, arr: np.ndarray) -> None:
        """Count one array."""
        self.commit(self.batch_update(arr))
