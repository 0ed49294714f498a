"""Streaming per-tensor accumulator: min/max, NaN/Inf counts and an ``|x|`` histogram.

Memory is fixed per tensor (``num_bins`` int64 counts).  The histogram covers
``[0, 2**e)`` with the smallest ``e`` that holds every finite ``|x|`` seen; when a
larger value arrives the range doubles and neighbouring bins are merged in
pairs, which is exact because ``num_bins / 2**e`` is a power of two: a value
lands in the same (merged) bin whether it was counted before or after the
widening.  This is also what makes statistics of two halves merge into exactly
the histogram of one pass.
"""

from __future__ import annotations

import math

import numpy as np

from .stats import TensorStats, rebin_to

#: Default histogram resolution.  Finer than TensorRT's 2048 because the range is
#: rounded up to a power of two; the range algorithms re-bin to 2048 over [0, absmax].
DEFAULT_BINS = 8192
#: Elements per histogram step: bounds the temporaries to ~12 bytes x CHUNK for any tensor size.
CHUNK = 1 << 22


def pow2_above(x: float) -> float:
    """The smallest power of two strictly greater than ``x`` (> 0)."""
    _, e = math.frexp(float(x))
    return math.ldexp(1.0, e)


class HistogramAccumulator:
    """Mutable running statistics of one tensor (internal to collection).

    Parameters
    ----------
    name : str
    num_bins : int
        A power of two.
    """

    __slots__ = ("name", "num_bins", "count", "nan_count", "inf_count", "min", "max", "hist", "hist_max", "first_absmax")

    def __init__(self, name: str, num_bins: int = DEFAULT_BINS):
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

    @classmethod
    def from_stats(cls, t: TensorStats) -> "HistogramAccumulator":
        acc = cls(t.name, t.bins)
        acc.count, acc.nan_count, acc.inf_count = int(t.count), int(t.nan_count), int(t.inf_count)
        if t.count:
            acc.min, acc.max = float(t.min), float(t.max)
        acc.hist = np.array(t.hist, dtype=np.int64, copy=True)
        acc.hist_max = float(t.hist_max)
        acc.first_absmax = float(t.first_absmax)
        return acc

    def to_stats(self, copy: bool = True) -> TensorStats:
        """An immutable snapshot; ``copy=False`` hands over the histogram (the accumulator must not be used again)."""
        empty = self.count == 0
        return TensorStats(name=self.name, count=int(self.count), nan_count=int(self.nan_count),
                           inf_count=int(self.inf_count), min=float("nan") if empty else float(self.min),
                           max=float("nan") if empty else float(self.max), hist=self.hist.copy() if copy else self.hist,
                           hist_max=float(self.hist_max), first_absmax=float(self.first_absmax))

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
            return (0, 0, 0, math.inf, -math.inf, None, 0.0)
        mn, mx = flat.min(), flat.max()
        nan = inf = 0
        if not (np.isfinite(mn) and np.isfinite(mx)):
            finite = np.isfinite(flat)
            nan = int(np.count_nonzero(np.isnan(flat)))
            inf = int(flat.size - np.count_nonzero(finite) - nan)
            flat = flat[finite]
            if flat.size == 0:
                return (0, nan, inf, math.inf, -math.inf, None, 0.0)
            mn, mx = flat.min(), flat.max()
        mn, mx = float(mn), float(mx)
        absmax = max(-mn, mx)
        hist_max = self.hist_max
        if absmax >= hist_max and absmax > 0:
            hist_max = pow2_above(absmax)
        if hist_max == 0:
            counts = None
            zeros = flat.size
        else:
            zeros = 0
            # n / 2**e is a power of two, so |x| * scale is exact and |x| < 2**e gives an index < n.
            scale = flat.dtype.type(self.num_bins / hist_max)
            counts = None
            # Large tensors go in chunks so the temporaries (|x| and the bin indices) stay small.
            for lo in range(0, flat.size, CHUNK):
                buf = np.abs(flat[lo:lo + CHUNK])
                buf *= scale
                # No minlength: small ranges give short count arrays, added to the front of the histogram.
                part = np.bincount(buf.astype(np.intp))
                del buf
                if counts is None:
                    counts = part
                else:
                    if len(part) > len(counts):
                        part, counts = counts, part
                    counts[:len(part)] += part
        return (int(flat.size), nan, inf, mn, mx, counts, hist_max, zeros)

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

    def update(self, arr: np.ndarray) -> None:
        """Count one array."""
        self.commit(self.batch_update(arr))
