"""Range (amax) algorithms on ``|x|`` histograms, and the int8 error at a range.

Methods
-------
``max``
    ``max(|min|, |max|)``: TensorRT's MinMaxCalibration.
``entropy``
    TensorRT's EntropyCalibration2 semantics as published in NVIDIA's
    pytorch-quantization (``_compute_amax_entropy``): a 2048-bin histogram of
    ``|x|`` over ``[0, absmax]``, the zero bin replaced by its neighbour, every
    candidate threshold from bin 128 up, reference distribution P with the
    outliers folded into its last bin, candidate Q quantized to 128 levels and
    spread back over P's non-empty bins, KL(P || Q) minimised (the last minimum
    wins), amax = the candidate bin's upper edge.  The candidate loop is
    vectorised with cumulative sums (same result, ~100x faster).
``percentile``
    The ``p``-th percentile of ``|x|``, interpolated within its bin.
``mse``
    The amax that minimises the int8 mean squared error on the histogram.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from typing import Dict, Iterable, Mapping, Optional

import numpy as np

from ..common.errors import StatsError
from .fake_quant import qdq_error, symmetric_scale
from .stats import ActivationStats, TensorStats

METHODS = ("max", "entropy", "percentile", "mse")
ENTROPY_BINS = 2048
ENTROPY_START_BIN = 128


@dataclass(frozen=True)
class RangeQuality:
    """The int8 quantization error of one tensor at one amax (computed on the histogram).

    Attributes
    ----------
    mse : float
        Mean squared error of symmetric int8 quantize-dequantize.
    sqnr_db : float
        Signal-to-quantization-noise ratio, ``10 log10(E[x^2] / mse)``; ``inf`` without error.
    clipped_fraction : float
        Fraction of values with ``|x| > amax``.
    """

    mse: float
    sqnr_db: float
    clipped_fraction: float


@dataclass(frozen=True)
class RangeResult:
    """One method's range for one tensor, with its error."""

    method: str
    amax: float
    mse: float
    sqnr_db: float
    clipped_fraction: float

    @property
    def scale(self) -> float:
        """TensorRT's per-tensor scale, ``amax / 127``."""
        return float(symmetric_scale(self.amax))

    def to_dict(self) -> dict:
        return {"method": self.method, "amax": self.amax, "scale": self.scale, "mse": self.mse,
                "sqnr_db": self.sqnr_db, "clipped_fraction": self.clipped_fraction}


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise StatsError(f"Unknown range method {method!r}.", f"Known methods: {', '.join(METHODS)}.",
                         "Use one of them.")


def _cdf_at(t: TensorStats, x: np.ndarray) -> np.ndarray:
    """Counts of ``|x| <= x`` assuming values spread evenly within each bin."""
    hist = np.asarray(t.hist, dtype=np.float64)
    if t.hist_max == 0:
        return np.full(np.shape(x), hist.sum())
    cum = np.concatenate(([0.0], np.cumsum(hist)))
    pos = np.clip(np.asarray(x, dtype=np.float64) / t.bin_width, 0, len(hist))
    k = np.minimum(np.floor(pos).astype(np.int64), len(hist) - 1)
    return cum[k] + (pos - k) * hist[k]


def resample(t: TensorStats, bins: int = ENTROPY_BINS, upper: Optional[float] = None) -> np.ndarray:
    """The histogram re-binned to ``bins`` equal bins over ``[0, upper]`` (default ``absmax``).

    Collection keeps a finer power-of-two range; this gives the ``[0, absmax]`` histogram that
    TensorRT's entropy calibration works on, to the precision of the collected bins.
    """
    upper = t.absmax if upper is None else upper
    edges = np.linspace(0.0, upper, bins + 1)
    out = np.diff(_cdf_at(t, edges))
    out[-1] += max(0.0, float(np.sum(t.hist)) - float(_cdf_at(t, np.array([upper]))[0]))
    return np.maximum(out, 0.0)


@functools.lru_cache(maxsize=8)
def _group_bounds(n: int, num_quantized_bins: int, start_bin: int):
    """Candidates ``i`` and, per candidate, the first bin of each of Q's groups (the same for every tensor)."""
    cands = np.arange(start_bin, n + 1)
    # Exactly as np.digitize(range(i), np.linspace(0, i, 129)) draws the groups.
    edges = np.linspace(0.0, cands.astype(np.float64), num_quantized_bins + 1, axis=1)
    b = np.ceil(edges).astype(np.intp)
    b[:, -1] = cands
    cands.setflags(write=False)
    b.setflags(write=False)
    return cands, b


def entropy_bin(bins: np.ndarray, num_quantized_bins: int = 128, start_bin: int = ENTROPY_START_BIN,
                replace_zero_bin: bool = True) -> int:
    """The number of bins ``i`` that minimises KL(P || Q) (amax = ``i`` bin widths).

    Vectorised form of pytorch-quantization's ``_compute_amax_entropy`` loop: for a candidate
    ``i``, Q's group ``j`` holds the bins ``ceil(i*j/128) <= k < ceil(i*(j+1)/128)``; group sums
    and non-empty counts come from cumulative sums, so each candidate costs O(128).
    """
    bins = np.array(bins, dtype=np.float64)
    n = len(bins)
    if n < 2 or bins.sum() <= 0:
        return n
    if replace_zero_bin:
        # As pytorch-quantization does: the spike of exact zeros (ReLU) would dominate the divergence.
        bins[0] = bins[1]
    total = bins.sum()
    nz = (bins != 0).astype(np.float64)
    cum = np.concatenate(([0.0], np.cumsum(bins)))
    cnz = np.concatenate(([0.0], np.cumsum(nz)))
    with np.errstate(divide="ignore", invalid="ignore"):
        blogb = np.where(bins > 0, bins * np.log(np.where(bins > 0, bins, 1.0)), 0.0)
    cblogb = np.concatenate(([0.0], np.cumsum(blogb)))
    cands, b = _group_bounds(n, num_quantized_bins, start_bin)
    s = np.diff(cum[b], axis=1)                   # group sums, shape (C, 128)
    c = np.diff(cnz[b], axis=1)                   # non-empty bins per group
    # Q's value on each non-empty bin of a group is s/c; empty groups (s == 0) contribute nothing.
    np.maximum(c, 1.0, out=c)
    np.maximum(s, 1e-300, out=s)
    logq = np.log(s / c)
    s[s <= 1e-300] = 0.0
    outliers = total - cum[cands]
    last = bins[cands - 1]
    p_last = last + outliers
    # sum_k P_k log P_k over the candidate's bins, with the outliers folded into the last bin.
    with np.errstate(divide="ignore", invalid="ignore"):
        plogp = cblogb[cands - 1] + np.where(p_last > 0, p_last * np.log(np.where(p_last > 0, p_last, 1.0)), 0.0)
    # sum_k P_k log Q_k: every group contributes s_j log q_j; the last group also carries the outliers.
    plogq = np.sum(s * logq, axis=1) + outliers * logq[:, -1]
    q_total = cum[cands]  # Q's mass equals the mass of the candidate's bins
    with np.errstate(divide="ignore", invalid="ignore"):
        kl = (plogp - plogq) / total - math.log(total) + np.log(q_total)
    # Outliers landing on an empty last bin make Q zero where P is not: infinite divergence.
    kl = np.where((last == 0) & (outliers > 0), np.inf, kl)
    kl = np.where(q_total > 0, kl, np.inf)
    if not np.isfinite(kl).any():
        return n
    best = np.nanmin(kl)
    idx = np.nonzero(kl == best)[0][-1]
    return int(cands[idx])


def trt_histogram_range(t: TensorStats) -> float:
    """The upper edge of TensorRT's entropy histogram for this tensor.

    TensorRT starts the histogram at the first calibration batch's ``max |x|`` and doubles its
    range whenever a later batch exceeds it (TensorRT developer guide, "INT8 calibration"), so
    the range is ``first_absmax * 2**k`` and may leave up to half of the 2048 bins empty.
    Without a known first batch, the range is ``[0, absmax]``.
    """
    absmax = t.absmax
    first = t.first_absmax
    if not (first > 0) or not math.isfinite(first) or first > absmax:
        return absmax
    upper = first
    while upper < absmax:
        upper *= 2.0
    return upper


def entropy_amax(t: TensorStats, num_bins: int = ENTROPY_BINS, start_bin: int = ENTROPY_START_BIN,
                 trt_range: bool = True, replace_zero_bin: bool = True) -> float:
    """EntropyCalibration2's amax for one tensor.

    Parameters
    ----------
    trt_range : bool
        Use TensorRT's histogram (``t.trt_hist``, collected on TensorRT's grid) or, for statistics
        without it, lay the 2048 bins over TensorRT's range (see :func:`trt_histogram_range`);
        False: 2048 bins over ``[0, absmax]``.
    replace_zero_bin : bool
        Replace the count of bin 0 by bin 1's before the search (pytorch-quantization does).
    """
    absmax = t.absmax
    if absmax == 0 or t.count == 0:
        return 0.0
    if trt_range and t.trt_hist is not None and len(t.trt_hist) == num_bins and t.trt_range > 0:
        # TensorRT's own histogram, collected on its grid. TensorRT 8.6 reports the middle of the
        # last bin kept ((i + 0.5) bin widths): its EntropyCalibration2 caches are exactly that.
        i = entropy_bin(t.trt_hist, 128, start_bin, replace_zero_bin)
        return float(t.trt_range * (i + 0.5) / num_bins)
    upper = trt_histogram_range(t) if trt_range else absmax
    hist = resample(t, num_bins, upper)
    i = entropy_bin(hist, 128, start_bin, replace_zero_bin)
    return float(upper * i / num_bins)


def _percentile_amax(t: TensorStats, percentile: float) -> float:
    if not 0 < percentile <= 100:
        raise StatsError(f"Percentile {percentile} is out of range.", "It must be in (0, 100].", "Use e.g. 99.99.")
    if t.absmax == 0:
        return 0.0
    hist = np.asarray(t.hist, dtype=np.float64)
    cum = np.cumsum(hist)
    target = cum[-1] * percentile / 100.0
    k = int(np.searchsorted(cum, target, side="left"))
    k = min(k, len(hist) - 1)
    before = cum[k - 1] if k else 0.0
    frac = (target - before) / hist[k] if hist[k] else 1.0
    return float(min((k + frac) * t.bin_width, t.absmax))


def _centers(t: TensorStats):
    hist = np.asarray(t.hist, dtype=np.float64)
    keep = np.nonzero(hist)[0]
    if t.hist_max == 0:
        return np.zeros(1), np.array([hist.sum()])
    return (keep + 0.5) * t.bin_width, hist[keep]


def _mse_amax(t: TensorStats, num_bits: int = 8) -> float:
    absmax = t.absmax
    if absmax == 0:
        return 0.0
    hist = resample(t, ENTROPY_BINS, absmax)
    width = absmax / ENTROPY_BINS
    keep = np.nonzero(hist)[0]
    v, c = (keep + 0.5) * width, hist[keep]
    def errors(bins_):
        cc = bins_ * width
        return cc, qdq_error(v[None, :], cc[:, None], num_bits) @ c

    # Coarse pass every 8 bins, then every bin around the best: the error is smooth in amax.
    cc, err = errors(np.arange(ENTROPY_START_BIN, ENTROPY_BINS + 1, 8))
    j = int(np.argmin(err))
    centre = ENTROPY_START_BIN + 8 * j
    cc, err = errors(np.arange(max(ENTROPY_START_BIN, centre - 8), min(ENTROPY_BINS, centre + 8) + 1))
    best = cc[int(np.argmin(err))]
    return float(best)


def compute_amax(t: TensorStats, method: str, percentile: float = 99.99) -> float:
    """The amax of one tensor by one method (0 for a tensor that was all zeros or never seen)."""
    _check_method(method)
    if t.count == 0:
        return 0.0
    if method == "max":
        return t.absmax
    if method == "entropy":
        return entropy_amax(t)
    if method == "percentile":
        return _percentile_amax(t, percentile)
    return _mse_amax(t)


def evaluate_amax(t: TensorStats, amax: float, num_bits: int = 8) -> RangeQuality:
    """The int8 error at ``amax``: MSE and SQNR on the histogram, and the clipped fraction."""
    total = float(np.sum(t.hist))
    if total == 0:
        return RangeQuality(0.0, float("inf"), 0.0)
    v, c = _centers(t)
    err = float(qdq_error(v, amax, num_bits) @ c / total)
    power = float((v ** 2) @ c / total)
    if err <= 0:
        sqnr = float("inf")
    elif power <= 0:
        sqnr = float("-inf")
    else:
        sqnr = 10.0 * math.log10(power / err)
    clipped = 0.0 if amax >= t.absmax else max(0.0, 1.0 - float(_cdf_at(t, np.array([amax]))[0]) / total)
    return RangeQuality(mse=err, sqnr_db=sqnr, clipped_fraction=clipped)


def clipped_share(t: TensorStats, amax: float, num_bits: int = 8) -> float:
    """The share of ``t``'s values that a range of ``amax`` clips by more than rounding does.

    A value up to half a step above ``amax`` lands on the top code as it would by rounding; only the
    values beyond that lose more than rounding loses (what a clipping note counts).
    """
    total = float(np.sum(t.hist))
    if total == 0 or not amax > 0:
        return 0.0
    edge = amax * (1.0 + 0.5 / (2 ** (num_bits - 1) - 1))
    if edge >= t.absmax:
        return 0.0
    return max(0.0, 1.0 - float(_cdf_at(t, np.array([edge]))[0]) / total)


def range_result(t: TensorStats, method: str, percentile: float = 99.99, num_bits: int = 8) -> RangeResult:
    amax = compute_amax(t, method, percentile)
    q = evaluate_amax(t, amax, num_bits)
    return RangeResult(method=method, amax=amax, mse=q.mse, sqnr_db=q.sqnr_db, clipped_fraction=q.clipped_fraction)


def compute_ranges(stats: ActivationStats, methods: Iterable[str] = METHODS, percentile: float = 99.99
                   ) -> Dict[str, Dict[str, RangeResult]]:
    """Tensor -> method -> :class:`RangeResult` for every tensor that saw finite values."""
    methods = tuple(methods)
    for m in methods:
        _check_method(m)
    seen = [(name, t) for name, t in stats.tensors.items() if t.count]

    def one(t: TensorStats) -> Dict[str, RangeResult]:
        return {m: range_result(t, m, percentile) for m in methods}

    workers = _range_threads(len(seen))
    if workers < 2:
        return {name: one(t) for name, t in seen}
    # Tensors in parallel: each is a few numpy steps on arrays of 10^5-10^6 elements, which release the GIL
    # (a ViT-S's 665 tensors took 9 s of CPU in one thread).
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trtw-ranges") as pool:
        return dict(zip((name for name, _ in seen), pool.map(one, (t for _, t in seen))))


def _range_threads(tensors: int) -> int:
    """Threads for :func:`compute_ranges`: the CPUs ONNX Runtime may use (``$TRTWIDGETS_ORT_THREADS``), one for few."""
    if tensors < 8:
        return 1
    from ..common.ort import default_threads

    return default_threads()


def usable_amax(value) -> bool:
    """True when ``value`` can be exported: finite and positive (an all-zero tensor's 0 has no scale)."""
    return math.isfinite(value) and value > 0


def amax_from_stats(stats: ActivationStats, method: str = "entropy", percentile: float = 99.99,
                    ranges: Optional[Mapping[str, Mapping[str, RangeResult]]] = None) -> Dict[str, float]:
    """Tensor -> amax of one range method, for every tensor with a finite positive range.

    Tensors that saw no finite value, or whose range is not finite and positive (an
    all-zero tensor), are left out: the export lists them as having no range. This is
    the method's part of :attr:`~.calibration.Calibration.amax`, the exported amax.

    Parameters
    ----------
    ranges : mapping, optional
        :func:`compute_ranges` of ``stats`` at ``percentile`` holding ``method``: read
        instead of computing the method's amax again.
    """
    _check_method(method)
    if ranges is not None:
        values = ((name, per[method].amax) for name, per in ranges.items() if method in per)
    else:
        values = _amax_each(stats, method, percentile)
    return {name: float(v) for name, v in values if usable_amax(float(v))}


def _amax_each(stats: ActivationStats, method: str, percentile: float):
    """``(tensor, amax)`` of every seen tensor, in the statistics' order; tensors in threads as in
    :func:`compute_ranges` (the planner refits every method: mse alone took 20 s of a ViT-S's plan)."""
    seen = [(name, t) for name, t in stats.tensors.items() if t.count]
    workers = _range_threads(len(seen)) if method != "max" else 1
    if workers < 2:
        return [(name, compute_amax(t, method, percentile=percentile)) for name, t in seen]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trtw-ranges") as pool:
        return list(zip((name for name, _ in seen),
                        pool.map(lambda t: compute_amax(t, method, percentile=percentile), (t for _, t in seen))))

