"""How close an engine's outputs are to a reference (usually ONNX Runtime FP32).

All metrics are computed in float64 over the flattened tensors:

* ``cosine``: cosine similarity (1.0 = same direction). Two all-zero tensors count
  as identical (1.0); a zero tensor against a non-zero one as 0.0.
* ``max_abs`` / ``mean_abs``: absolute error.
* ``snr_db``: signal-to-noise ratio ``10 log10(sum(ref^2) / sum((ref - x)^2))``;
  ``inf`` when identical, ``-inf`` when the reference is all zero and x is not.
* ``topk_agreement``: for classifier-like outputs (last axis = classes, more than one
  class), the mean over rows of ``|topk(ref) & topk(x)| / k``; for k = 1 this is the
  fraction of rows whose arg-max agrees. A k larger than the class count is left out.

Non-finite values are handled explicitly, never silently propagated: positions
where both tensors hold the same non-finite value (NaN and NaN, +inf and +inf)
agree and are left out; positions where exactly one side is non-finite (or the
two differ) are counted in ``nonfinite_mismatch`` and make ``max_abs`` infinite
and ``ok`` false; every other metric is computed over the positions where both
sides are finite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, Iterable, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..common.errors import UserError
from ..common.serial import fields_json, from_json

__all__ = [
    "ComparisonError",
    "OutputMetrics",
    "compare_outputs",
    "compare_tensor",
    "cosine_similarity",
    "snr_db",
    "topk_agreement",
    "worst_output",
]


class ComparisonError(UserError):
    """Reference and candidate outputs cannot be compared (missing names, shapes)."""


def _as_float64(a) -> np.ndarray:
    arr = np.asarray(a)
    if arr.dtype == np.bool_ or np.issubdtype(arr.dtype, np.number):
        return arr.astype(np.float64, copy=False).ravel()
    raise ComparisonError(
        f"Cannot compare a tensor of dtype {arr.dtype}.",
        "Only numeric tensors have an error metric.",
        "Leave non-numeric outputs out of the comparison.",
    )


def _finite_pair(a, b) -> Tuple[np.ndarray, np.ndarray]:
    x = _as_float64(a)
    y = _as_float64(b)
    if x.shape != y.shape:
        raise ComparisonError(
            f"Tensors of {x.size} and {y.size} elements cannot be compared.",
            "Both sides must hold the same number of values.",
            "Compare outputs of the same shape (same input shapes on both sides).",
        )
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


def _rescale(x: np.ndarray, y: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
    # Both metrics are scale-invariant; dividing by the largest magnitude keeps
    # sums of squares of huge (or tiny) activations from overflowing (underflowing).
    m = max(float(np.abs(x).max()) if x.size else 0.0, float(np.abs(y).max()) if y.size else 0.0)
    if m == 0.0 or m == 1.0:
        return x, y
    return x / m, y / m


def cosine_similarity(a, b) -> float:
    """Cosine similarity of two tensors, flattened, over positions finite in both.

    Parameters
    ----------
    a, b : array_like
        Same number of elements.

    Returns
    -------
    float
        In [-1, 1]; 1.0 when both are all zero (or empty), 0.0 when only one is.
    """
    x, y = _finite_pair(a, b)
    return _cosine(*_rescale(x, y))


def _cosine(x: np.ndarray, y: np.ndarray) -> float:
    # Plain sums, not BLAS dot/norm: BLAS threads fight over shared CPUs for no gain at these sizes.
    sxx = float(np.sum(x * x))
    syy = float(np.sum(y * y))
    if sxx == 0.0 and syy == 0.0:
        return 1.0
    if sxx == 0.0 or syy == 0.0:
        return 0.0
    c = float(np.sum(x * y)) / (np.sqrt(sxx) * np.sqrt(syy))
    return max(-1.0, min(1.0, c))


def _snr(r: np.ndarray, y: np.ndarray) -> float:
    d = r - y
    noise = float(np.sum(d * d))
    signal = float(np.sum(r * r))
    if noise == 0.0:
        return math.inf
    if signal == 0.0:
        return -math.inf
    return 10.0 * math.log10(signal / noise)


def snr_db(ref, x) -> float:
    """Signal-to-noise ratio of ``x`` against ``ref`` in dB, over positions finite in both.

    Parameters
    ----------
    ref : array_like
        The reference (signal).
    x : array_like
        The candidate; ``x - ref`` is the noise.

    Returns
    -------
    float
        ``inf`` when identical; ``-inf`` when the reference is all zero and ``x`` is not.
    """
    r, y = _finite_pair(ref, x)
    return _snr(*_rescale(r, y))


def topk_agreement(ref, x, topk: Iterable[int] = (1, 5)) -> Dict[int, float]:
    """Top-k agreement of classifier-like outputs (classes on the last axis).

    Parameters
    ----------
    ref, x : array_like
        Same shape; the last axis holds class scores.
    topk : iterable of int
        The k values; a k larger than the number of classes is left out.

    Returns
    -------
    dict
        k -> mean over rows of the overlap of the two top-k sets divided by k.
        Empty when the tensors do not look like class scores (0-d or one class).
        Rows with a non-finite score on either side count as disagreeing.
    """
    r = np.asarray(ref)
    y = np.asarray(x)
    if r.shape != y.shape:
        raise ComparisonError(
            f"Shapes {r.shape} and {y.shape} differ.",
            "Top-k agreement compares rows of class scores.",
            "Compare outputs of the same shape.",
        )
    if r.ndim == 0 or r.shape[-1] < 2 or r.size == 0:
        return {}
    classes = r.shape[-1]
    r2 = r.reshape(-1, classes).astype(np.float64)
    y2 = y.reshape(-1, classes).astype(np.float64)
    bad_rows = ~(np.isfinite(r2).all(axis=1) & np.isfinite(y2).all(axis=1))
    out: Dict[int, float] = {}
    for k in sorted({int(k) for k in topk}):
        if k < 1 or k > classes:
            continue
        # Stable sort on negated scores: ties resolve to the lower index on both sides.
        tr = np.argsort(-r2, axis=1, kind="stable")[:, :k]
        ty = np.argsort(-y2, axis=1, kind="stable")[:, :k]
        if k == 1:
            overlap = (tr[:, 0] == ty[:, 0]).astype(np.float64)
        else:
            overlap = np.array(
                [len(set(a.tolist()) & set(b.tolist())) / k for a, b in zip(tr, ty)],
                dtype=np.float64,
            )
        overlap[bad_rows] = 0.0
        out[k] = float(overlap.mean())
    return out


@dataclass(frozen=True)
class OutputMetrics:
    """Error of one candidate tensor against its reference.

    Attributes
    ----------
    cosine, max_abs, mean_abs, snr_db : float
        See the module docstring; computed over positions finite on both sides,
        except that a non-finite mismatch makes ``max_abs`` infinite.
    topk_agreement : dict
        k -> agreement in [0, 1]; empty for non-classifier outputs.
    shape : tuple
        The reference's shape.
    nonfinite_reference, nonfinite_candidate : int
        How many NaN / inf values each side holds.
    nonfinite_mismatch : int
        Positions where the two sides are not the same non-finite value and at
        least one is non-finite (e.g. the engine made a NaN the reference did not).
    max_abs_reference : float
        The largest finite ``|ref|`` (puts ``max_abs`` in proportion).
    """

    cosine: float
    max_abs: float
    mean_abs: float
    snr_db: float
    topk_agreement: Dict[int, float] = field(default_factory=dict)
    shape: Tuple[int, ...] = ()
    nonfinite_reference: int = 0
    nonfinite_candidate: int = 0
    nonfinite_mismatch: int = 0
    max_abs_reference: float = 0.0

    @property
    def ok(self) -> bool:
        """False when the candidate has non-finite values the reference does not."""
        return self.nonfinite_mismatch == 0

    def to_dict(self) -> dict:
        """A JSON-serialisable mapping; non-finite floats become "inf", "-inf", "nan"."""
        return fields_json(self)

    @classmethod
    def from_dict(cls, d: Mapping) -> "OutputMetrics":
        """Inverse of :meth:`to_dict`."""
        return from_json(cls, d)


def compare_tensor(reference, candidate, topk: Sequence[int] = (1, 5), name: str = "tensor") -> OutputMetrics:
    """All metrics of one candidate tensor against its reference.

    Parameters
    ----------
    reference, candidate : array_like
        Same shape (a candidate of the same size but another shape, e.g. a missing
        batch axis of 1, is reshaped to the reference's shape).
    topk : sequence of int
        k values for :func:`topk_agreement`.
    name : str
        Used in error messages.

    Returns
    -------
    OutputMetrics
    """
    ref = np.asarray(reference)
    cand = np.asarray(candidate)
    if ref.shape != cand.shape:
        if ref.size != cand.size:
            raise ComparisonError(
                f"Output {name!r} has shape {tuple(cand.shape)}, the reference {tuple(ref.shape)}.",
                "The two sides were run with different input shapes, or different models.",
                "Run both with the same inputs (same batch and spatial sizes).",
            )
        cand = cand.reshape(ref.shape)
    r = _as_float64(ref)
    c = _as_float64(cand)
    fin_r = np.isfinite(r)
    fin_c = np.isfinite(c)
    both = fin_r & fin_c
    same_nonfinite = (~fin_r) & (~fin_c) & ((np.isnan(r) & np.isnan(c)) | (r == c))
    mismatch = int(np.count_nonzero(~both & ~same_nonfinite))
    rf, cf = r[both], c[both]
    if rf.size:
        diff = np.abs(rf - cf)
        max_abs = float(diff.max())
        mean_abs = float(diff.mean())
        max_ref = float(np.abs(rf).max())
    else:
        max_abs = mean_abs = max_ref = 0.0
    if mismatch:
        max_abs = math.inf
    rs, cs = _rescale(rf, cf)
    return OutputMetrics(
        cosine=_cosine(rs, cs),
        max_abs=max_abs,
        mean_abs=mean_abs,
        snr_db=_snr(rs, cs),
        topk_agreement=topk_agreement(ref, cand, topk) if np.issubdtype(ref.dtype, np.floating) else {},
        shape=tuple(int(s) for s in ref.shape),
        nonfinite_reference=int(np.count_nonzero(~fin_r)),
        nonfinite_candidate=int(np.count_nonzero(~fin_c)),
        nonfinite_mismatch=mismatch,
        max_abs_reference=max_ref,
    )


def compare_outputs(
    reference: Mapping[str, np.ndarray],
    candidate: Mapping[str, np.ndarray],
    topk: Sequence[int] = (1, 5),
    names: Optional[Sequence[str]] = None,
) -> Dict[str, OutputMetrics]:
    """Compare every reference output with the candidate's output of the same name.

    Parameters
    ----------
    reference : mapping
        Name -> array, e.g. ONNX Runtime FP32 outputs.
    candidate : mapping
        Name -> array, e.g. TensorRT engine outputs. Extra names are ignored.
    topk : sequence of int
        k values for top-k agreement.
    names : sequence of str, optional
        Compare only these names (default: all reference names).

    Returns
    -------
    dict
        Name -> :class:`OutputMetrics`, in the reference's order.

    Raises
    ------
    ComparisonError
        A name is missing on either side, or shapes differ in size.
    """
    wanted = list(reference) if names is None else list(names)
    missing_ref = [n for n in wanted if n not in reference]
    missing = [n for n in wanted if n not in candidate]
    if missing_ref or missing:
        lacking = missing_ref or missing
        side = "reference" if missing_ref else "candidate"
        raise ComparisonError(
            f"The {side} has no output named {', '.join(repr(n) for n in lacking)}.",
            f"The {side} outputs are: {', '.join(repr(n) for n in (reference if missing_ref else candidate)) or 'none'}.",
            "Compare runs of the same model, or pass names= to compare a subset.",
        )
    return {n: compare_tensor(reference[n], candidate[n], topk=topk, name=n) for n in wanted}


def worst_output(metrics: Mapping[str, OutputMetrics]) -> Optional[str]:
    """The output name with the lowest SNR (non-finite mismatches first), or None if empty."""
    if not metrics:
        return None
    return min(metrics, key=lambda n: (metrics[n].ok, metrics[n].snr_db, metrics[n].cosine))
