"""Activation statistics: immutable per-tensor summaries that merge exactly.

A :class:`TensorStats` holds what the range algorithms need about one tensor:
element counts, NaN/Inf counts (never folded into the range), the finite
minimum and maximum, and a histogram of ``|x|`` over ``[0, hist_max)``.

``hist_max`` is always a power of two (or 0 while every value seen was zero) so
that two histograms over different ranges line up bin for bin after merging
pairs of bins: merging statistics of two halves of the data gives the same
histogram as one pass over all of it.  See :mod:`trtwidgets.core.calibration.histogram`.

Beside it, each tensor keeps TensorRT's own entropy histogram (``trt_hist``):
2048 bins over ``[0, trt_range]``, where ``trt_range`` starts at the first
batch's ``max |x|`` and doubles (bins merged in pairs) when a later batch
exceeds it, as TensorRT 8.6's entropy calibrators do.  Its grid depends on the
order of the data, so it is exact for one stream in order and re-binned (to bin
precision) when collections are merged.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Mapping, Optional, Tuple, Union

import numpy as np

from ..common.atomic import atomic_write
from ..common.errors import StatsError
from ..common.npz_files import open_npz
from ..common.paths import user_path

#: Format tag written into statistics files.
STATS_FORMAT = "trtwidgets-activation-stats"
STATS_VERSION = 2
#: Bins of TensorRT's entropy-calibration histogram.
TRT_BINS = 2048


def rebin_to(hist: np.ndarray, hist_max: float, new_max: float) -> np.ndarray:
    """Re-bin a power-of-two ``|x|`` histogram to the wider power-of-two range ``new_max``.

    Each doubling of the range merges neighbouring bin pairs, which is exact:
    ``floor(|x| * n / 2m) == floor(floor(|x| * n / m) / 2)``.
    """
    hist = np.asarray(hist)
    if new_max == hist_max:
        return hist
    n = len(hist)
    if hist_max == 0:
        # Every value counted so far was exactly zero: it stays in bin 0.
        out = np.zeros_like(hist)
        out[0] = hist.sum()
        return out
    if new_max < hist_max:
        raise ValueError("a histogram can only be widened")
    ratio = new_max / hist_max
    k = int(round(np.log2(ratio)))
    if 2.0 ** k != ratio:
        raise ValueError(f"ranges {hist_max} and {new_max} are not a power of two apart")
    out = hist
    for _ in range(k):
        merged = out.reshape(n // 2, 2).sum(axis=1)
        out = np.zeros_like(hist)
        out[: n // 2] = merged
        if not merged.any():
            break
    return out


@dataclass(frozen=True)
class TensorStats:
    """Statistics of one activation tensor.

    Attributes
    ----------
    name : str
        The tensor name in the ONNX graph (= TensorRT's tensor name).
    count : int
        Finite elements counted.
    nan_count, inf_count : int
        Elements that were NaN or +-Inf; they are in neither the range nor the histogram.
    min, max : float
        Smallest and largest finite value seen (``nan`` when ``count == 0``).
    hist : numpy.ndarray
        int64 counts of ``|x|`` in ``len(hist)`` equal bins over ``[0, hist_max)``.
    hist_max : float
        Upper edge of the histogram: a power of two strictly above ``max(|min|, |max|)``,
        or 0 when all finite values were 0 (then every count is in bin 0).
    first_absmax : float
        ``max |x|`` of the first batch (``nan`` if unknown).  TensorRT's entropy calibrators start
        their histogram at this range and double it when a later batch exceeds it, so their
        ranges depend on it; :func:`~trtwidgets.core.calibration.ranges.compute_amax` uses it to match them.
    trt_hist : numpy.ndarray or None
        TensorRT's own entropy histogram of ``|x|``: int64 counts in 2048 bins over
        ``[0, trt_range]`` (values at or above the range's end are in the last bin); None
        for statistics written before it was collected.
    trt_range : float
        Upper edge of ``trt_hist``: ``first_absmax`` doubled until it held every value.
    """

    name: str
    count: int
    nan_count: int
    inf_count: int
    min: float
    max: float
    hist: np.ndarray = field(repr=False, compare=False)
    hist_max: float = 0.0
    first_absmax: float = float("nan")
    trt_hist: Optional[np.ndarray] = field(default=None, repr=False, compare=False)
    trt_range: float = float("nan")

    @property
    def absmax(self) -> float:
        """``max(|min|, |max|)``; 0 for an empty tensor."""
        if self.count == 0:
            return 0.0
        return float(max(abs(self.min), abs(self.max)))

    @property
    def bins(self) -> int:
        return int(len(self.hist))

    @property
    def bin_width(self) -> float:
        return self.hist_max / self.bins if self.bins else 0.0

    def merge(self, other: "TensorStats") -> "TensorStats":
        """Statistics of both tensors' samples together (exact for min/max and counts)."""
        if other.name != self.name:
            raise StatsError(f"Cannot merge statistics of tensor {other.name!r} into {self.name!r}.",
                             "Only statistics of the same tensor can be merged.", "Merge statistics tensor by tensor.")
        if self.bins != other.bins:
            raise StatsError(f"Cannot merge histograms of tensor {self.name!r} with {self.bins} and {other.bins} bins.",
                             "Both collections must use the same number of bins.",
                             "Collect again with the same num_bins.")
        new_max = max(self.hist_max, other.hist_max)
        hist = rebin_to(self.hist, self.hist_max, new_max).astype(np.int64) + \
            rebin_to(other.hist, other.hist_max, new_max).astype(np.int64)
        trt_hist, trt_range = merge_trt_hist(self, other)
        mins = [v for v, c in ((self.min, self.count), (other.min, other.count)) if c]
        maxs = [v for v, c in ((self.max, self.count), (other.max, other.count)) if c]
        return TensorStats(
            name=self.name, count=self.count + other.count,
            nan_count=self.nan_count + other.nan_count, inf_count=self.inf_count + other.inf_count,
            min=float(min(mins)) if mins else float("nan"), max=float(max(maxs)) if maxs else float("nan"),
            hist=hist, hist_max=float(new_max),
            first_absmax=self.first_absmax if self.count else other.first_absmax,
            trt_hist=trt_hist, trt_range=float(trt_range))

    def to_dict(self) -> dict:
        """JSON-friendly summary (without the histogram)."""
        return {"name": self.name, "count": self.count, "nan_count": self.nan_count, "inf_count": self.inf_count,
                "min": self.min, "max": self.max, "absmax": self.absmax, "bins": self.bins, "hist_max": self.hist_max,
                "first_absmax": self.first_absmax, "trt_range": self.trt_range}


def trt_grid_range(first_range: float, absmax: float) -> float:
    """TensorRT's histogram range after seeing ``absmax``: ``first_range`` doubled until it holds it."""
    r = float(first_range)
    if not (r > 0):
        return float(absmax)
    while absmax > r:
        r *= 2.0
    return r


def rebin_linear(hist: np.ndarray, upper: float, new_upper: float, bins: int) -> np.ndarray:
    """Counts of a ``[0, upper]`` histogram re-binned onto ``bins`` bins over ``[0, new_upper]``.

    Values are taken as spread evenly within their bin; rounding keeps integer counts and the total.
    """
    hist = np.asarray(hist, dtype=np.float64)
    if upper <= 0 or new_upper <= 0:
        out = np.zeros(bins, np.int64)
        out[0] = int(round(hist.sum()))
        return out
    cum = np.concatenate(([0.0], np.cumsum(hist)))
    pos = np.clip(np.linspace(0.0, new_upper, bins + 1) / (upper / len(hist)), 0, len(hist))
    k = np.minimum(np.floor(pos).astype(np.int64), len(hist) - 1)
    cdf = cum[k] + (pos - k) * hist[k]
    cdf[-1] = cum[-1]
    return np.diff(np.round(cdf)).astype(np.int64)


def merge_trt_hist(a: "TensorStats", b: "TensorStats"):
    """TensorRT's histogram of ``a``'s data followed by ``b``'s: ``a``'s grid, widened as TensorRT would."""
    if not a.count:
        return (b.trt_hist, b.trt_range)
    if not b.count:
        return (a.trt_hist, a.trt_range)
    if a.trt_hist is None or b.trt_hist is None:
        # One side predates the TensorRT grid: a histogram of only the other side's values would be
        # wrong, so none (entropy then re-bins the fine histogram).
        return (None, float("nan"))
    new_range = trt_grid_range(a.trt_range, max(a.absmax, b.absmax))
    return (rebin_linear(a.trt_hist, a.trt_range, new_range, len(a.trt_hist))
            + rebin_linear(b.trt_hist, b.trt_range, new_range, len(a.trt_hist)), new_range)


def _merge_shapes(a: Mapping[str, tuple], b: Mapping[str, tuple]) -> Dict[str, tuple]:
    out = dict(a)
    for name, shape in b.items():
        if name not in out:
            out[name] = tuple(shape)
        elif tuple(out[name]) != tuple(shape):
            old = tuple(out[name])
            if len(old) != len(shape):
                out[name] = tuple(-1 for _ in shape)
            else:
                # A dimension that differed between samples is reported as -1 (dynamic).
                out[name] = tuple(x if x == y else -1 for x, y in zip(old, shape))
    return out


@dataclass(frozen=True)
class ActivationStats:
    """Statistics of every collected tensor of one model over some samples.

    Attributes
    ----------
    tensors : dict
        Tensor name -> :class:`TensorStats`, in graph order.
    samples : int
        Number of samples (batch items) seen.
    model_sha256 : str
        SHA-256 of the model the statistics belong to.
    input_shapes : dict
        Input name -> shape the model was run at (-1 where it varied).
    interrupted : bool
        True when collection was stopped early (Ctrl-C) and holds only the samples seen so far.
    batches : int
        Number of model runs.
    sample_hashes : tuple of str
        The fingerprint of every sample seen (:func:`~trtwidgets.core.calibration.held_back.sample_fingerprint`),
        so that a plan can warn when it measures accuracy on them; empty for older files.
    model_inputs : dict
        The model's input names and declared shapes (ints, or text for dynamic dims): with
        ``model_sha256``, the model's fingerprint (:func:`~.fingerprint.check_stats_fit`); empty in older files.
    """

    tensors: Dict[str, TensorStats]
    samples: int
    model_sha256: str
    input_shapes: Dict[str, tuple] = field(default_factory=dict)
    interrupted: bool = False
    batches: int = 0
    sample_hashes: Tuple[str, ...] = field(default=(), repr=False, compare=False)
    model_inputs: Dict[str, tuple] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.tensors)

    def __getitem__(self, name: str) -> TensorStats:
        return self.tensors[name]

    def merge(self, other: "ActivationStats") -> "ActivationStats":
        """Statistics over both collections' samples.

        Raises
        ------
        StatsError
            When the two collections are of different models.
        """
        if self.model_sha256 and other.model_sha256 and self.model_sha256 != other.model_sha256:
            raise StatsError("Cannot merge activation statistics of two different models.",
                             f"One is of model {self.model_sha256[:12]}..., the other of {other.model_sha256[:12]}....",
                             "Merge only statistics collected on the same ONNX file.")
        tensors = dict(self.tensors)
        for name, t in other.tensors.items():
            tensors[name] = tensors[name].merge(t) if name in tensors else t
        return ActivationStats(tensors=tensors, samples=self.samples + other.samples,
                               model_sha256=self.model_sha256 or other.model_sha256,
                               input_shapes=_merge_shapes(self.input_shapes, other.input_shapes),
                               interrupted=self.interrupted or other.interrupted,
                               batches=self.batches + other.batches,
                               sample_hashes=tuple(self.sample_hashes) + tuple(other.sample_hashes),
                               model_inputs=dict(self.model_inputs or other.model_inputs))

    def nonfinite(self) -> Dict[str, Tuple[int, int]]:
        """Tensor name -> (nan_count, inf_count) for tensors that had any."""
        return {n: (t.nan_count, t.inf_count) for n, t in self.tensors.items() if t.nan_count or t.inf_count}


def zero_tensors(stats: ActivationStats) -> Tuple[str, ...]:
    """The tensors of ``stats`` that were seen and were zero on every sample (every finite value 0): no range."""
    return tuple(name for name, t in stats.tensors.items() if t.count > 0 and t.min == 0 and t.max == 0)


def zero_note(stats: ActivationStats) -> Optional[str]:
    """What to say of the tensors that were zero on every sample (None when there are none)."""
    zeros = zero_tensors(stats)
    if not zeros:
        return None
    shown = ", ".join(zeros[:8]) + (f" and {len(zeros) - 8} more" if len(zeros) > 8 else "")
    every = " (every tensor: is the data blank, or all zero?)" if len(zeros) == len(stats.tensors) else ""
    return (f"{len(zeros)} of {len(stats.tensors)} tensors were zero on every calibration sample{every}: {shown}. "
            "No range can be computed for them, so a Q/DQ export keeps them float; give data that exercises them")


def save_stats(stats: ActivationStats, path: Union[str, os.PathLike]) -> Path:
    """Write statistics to an ``.npz`` file (atomically, no pickles).

    Returns the path written.
    """
    path = user_path(path)
    arrays = stats_arrays(stats)
    atomic_write(path, lambda f: np.savez_compressed(f, **arrays))  # type: ignore[arg-type]  # numpy's stub: a member could be allow_pickle
    return path


def stats_arrays(stats: ActivationStats) -> Dict[str, np.ndarray]:
    """The members of a statistics ``.npz`` (what :func:`load_stats` reads): histograms and a JSON ``meta``.

    A saved :class:`~.calibration.Calibration` is these and one member more, so :func:`load_stats` reads it too.
    """
    names = list(stats.tensors)
    meta = {
        "format": STATS_FORMAT, "version": STATS_VERSION, "samples": int(stats.samples),
        "batches": int(stats.batches), "model_sha256": stats.model_sha256, "interrupted": bool(stats.interrupted),
        "input_shapes": {k: [int(d) for d in v] for k, v in stats.input_shapes.items()},
        "sample_hashes": [str(h) for h in stats.sample_hashes],
        "model_inputs": {k: [d if isinstance(d, str) else int(d) for d in v] for k, v in stats.model_inputs.items()},
        "tensors": [{"name": n, "count": int(t.count), "nan_count": int(t.nan_count), "inf_count": int(t.inf_count),
                     "min": float(t.min), "max": float(t.max), "hist_max": float(t.hist_max),
                     "first_absmax": float(t.first_absmax), "trt_range": float(t.trt_range),
                     "trt_hist": t.trt_hist is not None}
                    for n, t in ((n, stats.tensors[n]) for n in names)],
    }
    bins = {stats.tensors[n].bins for n in names}
    if len(bins) <= 1:
        hists = np.stack([np.asarray(stats.tensors[n].hist, dtype=np.int64) for n in names]) if names \
            else np.zeros((0, 0), np.int64)
        arrays = {"hists": hists}
    else:
        arrays = {f"hist_{i}": np.asarray(stats.tensors[n].hist, dtype=np.int64) for i, n in enumerate(names)}
    with_trt = [n for n in names if stats.tensors[n].trt_hist is not None]
    if with_trt:
        arrays["trt_hists"] = np.stack([np.asarray(stats.tensors[n].trt_hist, dtype=np.int64) for n in with_trt])
    arrays["meta"] = np.frombuffer(json.dumps(meta, allow_nan=True).encode("utf-8"), dtype=np.uint8)
    return arrays


def load_stats(path: Union[str, os.PathLike]) -> ActivationStats:
    """Read statistics written by :func:`save_stats` (never unpickles).

    Every field is checked (types, counts, histogram lengths and ranges), so a damaged or
    hand-edited file is refused here, naming what is wrong, rather than failing later inside
    the range algorithms.

    Raises
    ------
    StatsError
        When the file is missing, not an npz, not a statistics file, or inconsistent.
    """
    path = user_path(path)
    if not path.is_file():
        raise StatsError(f"No statistics file at {path}.", "The path does not exist or is a directory.",
                         "Give the .npz written by `trtwidgets calibrate --stats` or save_stats().")
    try:
        # Headers checked before any array is read: a header claiming 10^11 floats is refused, not a MemoryError.
        with open_npz(path) as f:
            meta = json.loads(bytes(f["meta"].astype(np.uint8)).decode("utf-8"))
            if not isinstance(meta, dict) or meta.get("format") != STATS_FORMAT:
                raise ValueError(f"format tag is {meta.get('format') if isinstance(meta, dict) else None!r}")
            entries = meta["tensors"]
            if not isinstance(entries, list):
                raise ValueError("'tensors' is not a list")
            if "hists" in f.files:
                hists = f["hists"]
                hist_list = [hists[i] for i in range(len(entries))]
            else:
                hist_list = [f[f"hist_{i}"] for i in range(len(entries))]
            trt_rows = iter(f["trt_hists"]) if "trt_hists" in f.files else iter(())
            trt_list = [np.asarray(next(trt_rows), dtype=np.int64) if isinstance(e, dict) and e.get("trt_hist") else None
                        for e in entries]
    except Exception as exc:
        raise StatsError(f"{path} is not a trtwidgets statistics file.", f"{type(exc).__name__}: {exc}",
                         "Collect the statistics again and save them with save_stats().") from None
    try:
        tensors = {}
        for i, (e, h, th) in enumerate(zip(entries, hist_list, trt_list)):
            t = _tensor_from_entry(e, h, th, i)
            if t.name in tensors:
                raise ValueError(f"tensor {t.name!r} is listed twice")
            tensors[t.name] = t
        shapes = meta.get("input_shapes", {})
        if not isinstance(shapes, dict):
            raise ValueError("'input_shapes' is not an object")
        return ActivationStats(tensors=tensors, samples=_whole(meta["samples"], "samples"),
                               model_sha256=_text(meta["model_sha256"], "model_sha256"),
                               input_shapes={str(k): tuple(_whole(d, f"input_shapes[{k!r}]", -1) for d in _seq(v, k))
                                             for k, v in shapes.items()},
                               interrupted=bool(meta.get("interrupted", False)),
                               batches=_whole(meta.get("batches", 0), "batches"),
                               sample_hashes=_hashes(meta.get("sample_hashes", [])),
                               model_inputs=_model_inputs(meta.get("model_inputs", {})))
    except (ValueError, KeyError, TypeError, OverflowError) as exc:
        raise StatsError(f"{path} is a damaged statistics file.", f"{type(exc).__name__}: {exc}",
                         "Collect the statistics again (trtwidgets calibrate --stats); the file was not changed.") from None


def _whole(value, what: str, low: int = 0) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != value or value < low \
            or value != int(value):
        raise ValueError(f"{what} is {value!r}, not a whole number of at least {low}")
    return int(value)


def _number(value, what: str) -> float:
    # NaN is how save_stats writes "unknown" (min/max of an empty tensor, first_absmax), so it is allowed.
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} is {value!r}, not a number")
    return float(value)


def _text(value, what: str) -> str:
    if not isinstance(value, str):
        raise ValueError(f"{what} is {value!r}, not text")
    return value


def _hashes(value) -> Tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(h, str) for h in value):
        raise ValueError("'sample_hashes' is not a list of text")
    return tuple(value)


def _model_inputs(value) -> Dict[str, tuple]:
    # Declared dims: whole numbers for static ones, text for symbolic ones.
    if not isinstance(value, dict) or not all(
            isinstance(v, list) and all(isinstance(d, str) or (isinstance(d, int) and not isinstance(d, bool))
                                        for d in v) for v in value.values()):
        raise ValueError("'model_inputs' is not an object of input name -> list of dims")
    return {str(k): tuple(v) for k, v in value.items()}


def _seq(value, what) -> list:
    if not isinstance(value, list):
        raise ValueError(f"input_shapes[{what!r}] is {value!r}, not a list")
    return value


def _tensor_from_entry(e, hist, trt_hist, i: int) -> TensorStats:
    if not isinstance(e, dict):
        raise ValueError(f"tensor entry {i} is {type(e).__name__}, not an object")
    name = _text(e["name"], f"tensor {i}'s name")
    hist = np.asarray(hist)
    n = len(hist) if hist.ndim == 1 else 0
    if hist.ndim != 1 or n < 2 or n & (n - 1) or hist.dtype.kind not in "iu" or (hist < 0).any():
        raise ValueError(f"tensor {name!r}: the histogram is not a power-of-two count of non-negative integers "
                         f"(shape {hist.shape}, dtype {hist.dtype})")
    if trt_hist is not None and (trt_hist.shape != (TRT_BINS,) or (trt_hist < 0).any()):
        raise ValueError(f"tensor {name!r}: TensorRT's histogram has shape {trt_hist.shape}, not ({TRT_BINS},) counts")
    t = TensorStats(name=name, count=_whole(e["count"], f"{name!r} count"),
                    nan_count=_whole(e["nan_count"], f"{name!r} nan_count"),
                    inf_count=_whole(e["inf_count"], f"{name!r} inf_count"),
                    min=_number(e["min"], f"{name!r} min"), max=_number(e["max"], f"{name!r} max"),
                    hist=hist.astype(np.int64), hist_max=_number(e["hist_max"], f"{name!r} hist_max"),
                    first_absmax=_number(e.get("first_absmax", float("nan")), f"{name!r} first_absmax"),
                    trt_hist=trt_hist, trt_range=_number(e.get("trt_range", float("nan")), f"{name!r} trt_range"))
    if t.count:
        if not (np.isfinite(t.min) and np.isfinite(t.max) and t.min <= t.max):
            raise ValueError(f"tensor {name!r}: min {t.min} and max {t.max} are not a finite range")
        if t.absmax > float(np.finfo(np.float32).max):
            # Activations are float32 at most: a larger value was never seen, and would give an infinite scale.
            raise ValueError(f"tensor {name!r}: |x| {t.absmax:g} is beyond float32's range, so no tensor held it")
        if not (t.hist_max == 0 or (t.hist_max > t.absmax and np.log2(t.hist_max) == int(np.log2(t.hist_max)))):
            raise ValueError(f"tensor {name!r}: hist_max {t.hist_max} is not a power of two above |x| {t.absmax}")
        if int(t.hist.sum()) != t.count:
            raise ValueError(f"tensor {name!r}: the histogram counts {int(t.hist.sum())} values, not {t.count}")
    elif t.hist.any():
        raise ValueError(f"tensor {name!r}: no values counted, yet the histogram is not empty")
    return t


__all__ = ["TensorStats", "ActivationStats", "save_stats", "stats_arrays", "load_stats", "rebin_to",
           "trt_grid_range", "merge_trt_hist", "rebin_linear", "TRT_BINS", "zero_tensors", "zero_note"]
