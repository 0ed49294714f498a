"""The numbers behind the calibration explorer's figures (no plotting here).

Everything the figures in :mod:`trtwidgets.plots` and the calibration explorer
widget need that is computation: histogram bin geometry of a
:class:`~trtwidgets.core.calibration.stats.TensorStats`, the int8 grid at a given amax, the
per-bin split of quantization error into rounding and clipping, the ranking of
tensors that tells the user where to look, and the bookkeeping of per-tensor
amax overrides.

Overrides are handled as values: every function returns a new mapping and
never touches the one it was given, so a rejected override cannot damage what
the user had.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Dict, Iterable, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..common.errors import StatsError
from .fake_quant import INT8_MAX, fake_quant_symmetric, symmetric_qmax, symmetric_scale

#: Positive int8 levels used by TensorRT's symmetric quantization: q in [-127, 127].
INT8_LEVELS = INT8_MAX

#: How tensors can be ranked in the overview.
RANK_BY = ("disagreement", "error")


# --------------------------------------------------------------------------- histograms

def hist_edges(t) -> np.ndarray:
    """Bin edges of the |x| histogram of a tensor: ``len(t.hist) + 1`` values from 0 to ``t.hist_max``."""
    return np.linspace(0.0, float(t.hist_max), len(t.hist) + 1)


# --------------------------------------------------------------------------- int8 grid

def int8_step(amax: float, num_bits: int = 8) -> float:
    """Distance between two neighbouring quantized values at ``amax`` (the scale)."""
    _check_amax(amax)
    return float(symmetric_scale(float(amax), num_bits))


def int8_levels(amax: float, max_lines: Optional[int] = None, x_range: Optional[Tuple[float, float]] = None,
                num_bits: int = 8) -> np.ndarray:
    """Non-negative quantized values ``k * amax / 127`` for ``k = 0..127``, thinned for display.

    Parameters
    ----------
    amax : float
        The clipping threshold (positive).
    max_lines : int, optional
        Keep at most this many levels: every ``n``-th level is kept, always
        including 0 and ``amax`` itself, so that the grid stays readable when
        the whole range is shown (one more when the last level would be dropped).
    x_range : (float, float), optional
        Only levels inside this interval (a zoomed view); thinning applies to
        the levels that remain.
    """
    qmax = symmetric_qmax(num_bits)
    step = int8_step(amax, num_bits)
    k = np.arange(qmax + 1)
    if x_range is not None:
        lo = max(0, int(math.floor(x_range[0] / step)))
        hi = min(qmax, int(math.ceil(x_range[1] / step)))
        k = np.arange(lo, hi + 1) if hi >= lo else np.arange(0)
    if max_lines is not None and max_lines > 0 and len(k) > max_lines:
        stride = int(math.ceil(len(k) / max_lines))
        keep = k[::stride]
        if keep[-1] != k[-1]:
            # the last level (amax itself when in view) marks where clipping starts: always shown
            keep = np.append(keep, k[-1])
        k = keep
    return k.astype(np.float64) * step


@dataclass(frozen=True)
class ErrorSplit:
    """Where the squared quantization error of a tensor comes from, per histogram bin.

    Attributes
    ----------
    centers : numpy.ndarray
        Bin centres of the |x| histogram.
    rounding : numpy.ndarray
        Expected squared error per bin from rounding to the grid (values <= amax), times the count.
    clipping : numpy.ndarray
        Squared error per bin from clipping (values > amax), times the count.
    """

    centers: np.ndarray
    rounding: np.ndarray
    clipping: np.ndarray

    @property
    def rounding_total(self) -> float:
        return float(self.rounding.sum())

    @property
    def clipping_total(self) -> float:
        return float(self.clipping.sum())

    @property
    def rounding_share(self) -> float:
        """Fraction of the total squared error that comes from rounding (0 when there is none)."""
        total = self.rounding_total + self.clipping_total
        return self.rounding_total / total if total > 0 else 0.0

    @property
    def clipping_share(self) -> float:
        """Fraction of the total squared error that comes from clipping (0 when there is none)."""
        total = self.rounding_total + self.clipping_total
        return self.clipping_total / total if total > 0 else 0.0


def error_split(t, amax: float, num_bits: int = 8, samples_per_bin: int = 16) -> ErrorSplit:
    """Split the expected squared error at ``amax`` into rounding and clipping, bin by bin.

    Values are taken as spread uniformly inside each bin (``samples_per_bin``
    evenly spaced points), which is all a histogram knows about them.
    """
    _check_amax(amax)
    edges = hist_edges(t)
    counts = np.asarray(t.hist, dtype=np.float64)
    frac = (np.arange(samples_per_bin) + 0.5) / samples_per_bin
    x = edges[:-1, None] + (edges[1:] - edges[:-1])[:, None] * frac[None, :]
    clipped = x > amax
    q = fake_quant_symmetric(x, amax, num_bits)  # TensorRT's grid: values above amax land on 127 * scale
    err = (x - q) ** 2
    rounding = np.where(clipped, 0.0, err).mean(axis=1) * counts
    clipping = np.where(clipped, err, 0.0).mean(axis=1) * counts
    return ErrorSplit(0.5 * (edges[:-1] + edges[1:]), rounding, clipping)


# --------------------------------------------------------------------------- ranking

@dataclass(frozen=True)
class TensorRanking:
    """Tensors ordered so that the ones that matter most come first.

    Attributes
    ----------
    by : str
        ``"disagreement"`` (log2 of the largest over the smallest amax across
        methods; 1.0 means the methods differ by a factor 2) or ``"error"``
        (SQNR in dB at ``method``, lowest first).
    names : tuple of str
        Tensor names, most interesting first.
    scores : tuple of float
        The ranking value of each tensor, in the same order.
    method : str or None
        The method whose error was ranked (``by == "error"``).
    disagreement : tuple of float
        log2(max/min amax) of each tensor, whatever ``by`` is.
    sqnr_db : tuple of float
        SQNR at ``method`` (or the lowest over methods when ``method`` is None) of each tensor.
    """

    by: str
    names: Tuple[str, ...]
    scores: Tuple[float, ...]
    method: Optional[str]
    disagreement: Tuple[float, ...]
    sqnr_db: Tuple[float, ...]

    def __len__(self) -> int:
        return len(self.names)

    def position(self, name: str) -> int:
        """0-based rank of ``name`` (StatsError when it was not ranked)."""
        try:
            return self.names.index(name)
        except ValueError:
            raise StatsError(f"tensor {name!r} is not in the ranking",
                             "it has no statistics, or all of its values were NaN/Inf",
                             "pick one of the listed tensors") from None

    def top(self, n: int) -> "TensorRanking":
        """The first ``n`` tensors."""
        return TensorRanking(self.by, self.names[:n], self.scores[:n], self.method,
                             self.disagreement[:n], self.sqnr_db[:n])


def disagreement(amaxes: Iterable[float]) -> float:
    """log2 of the largest over the smallest positive amax (0 when fewer than two are usable)."""
    vals = [float(a) for a in amaxes if a is not None and math.isfinite(a) and a > 0]
    if len(vals) < 2:
        return 0.0
    return math.log2(max(vals) / min(vals))


def rank_tensors(ranges: Mapping[str, Mapping[str, Any]], by: str = "disagreement",
                 method: Optional[str] = None, methods: Optional[Sequence[str]] = None,
                 chosen: Optional[Mapping[str, str]] = None) -> TensorRanking:
    """Rank tensors by how much the range methods disagree, or by quantization error.

    Parameters
    ----------
    ranges : mapping
        ``tensor -> method -> RangeResult`` as returned by
        :func:`trtwidgets.core.calibration.ranges.compute_ranges` (anything with ``amax``
        and ``sqnr_db`` attributes).
    by : {"disagreement", "error"}
        Disagreement ranks the largest log2(max/min amax) first; error ranks
        the lowest SQNR at ``method`` first.
    method : str, optional
        The method whose SQNR is ranked; default: the lowest SQNR of any method.
    methods : sequence of str, optional
        Only these methods take part (default: all present).
    chosen : mapping of str to str, optional
        Tensor -> the method whose SQNR is ranked for it (``auto``'s choices, ``Calibration.choices``); it wins
        over ``method``; the ranking's method reads ``"auto"``.

    Ties keep the order of ``ranges`` so the result is deterministic.
    """
    if by not in RANK_BY:
        raise StatsError(f"cannot rank tensors by {by!r}", None, f"use one of {', '.join(RANK_BY)}")
    rows = []
    for i, (name, per_method) in enumerate(ranges.items()):
        use = {m: r for m, r in per_method.items() if methods is None or m in methods}
        if not use:
            continue
        dis = disagreement(r.amax for r in use.values())
        own = (chosen or {}).get(name, method)
        if chosen and own not in use:
            own = method  # its chosen method is not taking part: as the others
        if own is not None:
            if own not in use:
                raise StatsError(f"no {own!r} range for tensor {name!r}", None,
                                 f"compute ranges with method {own!r} or rank by another method")
            sq = float(use[own].sqnr_db)
        else:
            sq = min(float(r.sqnr_db) for r in use.values())
        rows.append((name, dis, sq, i))
    if by == "disagreement":
        rows.sort(key=lambda r: (-r[1], r[3]))
        scores = tuple(r[1] for r in rows)
    else:
        # NaN SQNR (an all-zero tensor) says nothing: rank it last.
        rows.sort(key=lambda r: (math.isnan(r[2]), r[2], r[3]))
        scores = tuple(r[2] for r in rows)
    return TensorRanking(by, tuple(r[0] for r in rows), scores, "auto" if chosen else method,
                         tuple(r[1] for r in rows), tuple(r[2] for r in rows))


def search_tensors(names: Sequence[str], query: str, limit: Optional[int] = None) -> Tuple[str, ...]:
    """Names containing every whitespace-separated word of ``query`` (case-insensitive), in input order."""
    words = query.lower().split()
    found = tuple(n for n in names if all(w in n.lower() for w in words))
    return found[:limit] if limit is not None else found


# --------------------------------------------------------------------------- amax

def _check_amax(amax) -> None:
    try:
        value = float(amax)
    except (TypeError, ValueError):
        raise StatsError(f"amax {amax!r} is not a number", None, "enter a positive number") from None
    if not math.isfinite(value) or value <= 0:
        raise StatsError(f"amax {value!r} cannot be used",
                         "the int8 scale is amax / 127 and must be a positive finite number",
                         "enter a positive number, e.g. the max method's value")


def amax_log2_ratio(before: Mapping[str, Mapping[str, Any]], after: Mapping[str, Mapping[str, Any]],
                    method: str) -> Dict[str, float]:
    """tensor -> log2(amax after / amax before) at ``method``, for tensors usable in both.

    0 means unchanged, +1 means the range doubled. Used to show how much a
    change of calibration data (order, batch, sample count, input shape) moves
    the ranges.
    """
    out: Dict[str, float] = {}
    for name, per in before.items():
        a = per.get(method)
        b = after.get(name, {}).get(method)
        if a is None or b is None:
            continue
        x, y = float(a.amax), float(b.amax)
        if math.isfinite(x) and math.isfinite(y) and x > 0 and y > 0:
            out[name] = math.log2(y / x)
    return out
