"""One verdict: a candidate's outputs judged against FP32's by a :class:`~.target.Target`.

:func:`evaluate` is the one comparison every check of the toolkit makes (Polygraphy's Comparator is
the anchor: one comparison, pluggable compare functions): the export's check on held-back samples,
the planner's candidates (FP16 among them), ``plan measure``'s engines, ``compare`` and the App.
It scores

* the **worst channel group** of every output (:func:`~.output_groups.check_outputs`: values
  standardized per channel), not a pooled output cosine: a packed detector output keeps a pooled
  cosine of 0.999 while its class scores lose a quarter of the confident detections;
* **non-finite values**: NaN or Inf in the candidate where FP32 is finite, counted per output. Every
  score leaves such positions out, so any of them fails the target, whatever the scores say;
* the target's **task metric**, against FP32's own score.

An output that is zero throughout in FP32 (a valid output: a mask with nothing in it) has no
direction to compare: it is judged by absolute error (:data:`ZERO_ATOL`), never failed outright.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, NamedTuple, Optional, Tuple

import numpy as np

from ..common.frozen import readonly_mapping
from .metrics import cosine_similarity
from .output_groups import check_outputs
from .reference import ZERO_ATOL, Reference, numeric_outputs, reference_notes, zero_outputs
from .target import Target, target_notes

__all__ = ["OutputScore", "Scores", "Verdict", "ZERO_ATOL", "evaluate", "non_finite_counts",
           "non_finite_where_finite", "reference_notes", "score_outputs", "target_notes", "json_number"]



def json_number(v) -> Optional[float]:
    """``v`` rounded for JSON, None where it is not a finite number (JSON has no NaN)."""
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else round(float(v), 6)


def _float(v) -> float:
    return math.nan if v is None else float(v)


def _optional(v) -> Optional[float]:
    return None if v is None else float(v)


@dataclass(frozen=True)
class Scores:
    """A candidate's accuracy against FP32 (``metric_reference`` is FP32's own score).

    ``cosine`` and ``snr_db`` are those of the worst channel group of any output, ``worst_group``
    names it, ``pooled_cosine`` is the lowest plain output cosine (blind to groups with little of
    an output's energy). ``non_finite`` counts the values that are NaN or Inf where FP32's are finite.
    """

    cosine: float
    snr_db: float
    metric: Optional[float] = None
    metric_reference: Optional[float] = None
    worst_group: str = ""
    pooled_cosine: Optional[float] = None
    non_finite: int = 0

    def failures(self, target: Target) -> Tuple[str, ...]:
        """Each part of ``target`` these scores miss, in words (empty: every part holds; a NaN never does)."""
        out: List[str] = []
        if self.non_finite:
            out.append(f"{self.non_finite} output values are NaN or Inf where FP32's are finite")
        if target.cosine is not None and not self.cosine >= target.cosine:
            out.append(f"cosine {self.cosine:.4f} < {target.cosine:g} (worst channel group {self.worst_group})")
        if target.snr_db is not None and not self.snr_db >= target.snr_db:
            out.append(f"SNR {self.snr_db:.1f} dB < {target.snr_db:g} dB (worst channel group {self.worst_group})")
        if target.has_metric and self.metric is not None and self.metric_reference is not None:
            low = self.metric_reference - target.metric_drop
            if not self.metric >= low:
                out.append(f"{target.metric_name or 'metric'} {self.metric:.4f} < {low:.4f} (FP32's "
                           f"{self.metric_reference:.4f} less the allowed drop {target.metric_drop:g})")
        return tuple(out)

    def meets(self, target: Target) -> bool:
        """Whether every part of ``target`` holds."""
        return not self.failures(target)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Scores":
        """Inverse of :meth:`to_dict` (a value JSON left null is NaN)."""
        return cls(_float(d.get("cosine")), _float(d.get("snr_db")), _optional(d.get("metric")),
                   _optional(d.get("metric_reference")), str(d.get("worst_group") or ""),
                   _optional(d.get("pooled_cosine")), int(d.get("non_finite") or 0))

    def to_dict(self) -> dict:
        out = {"cosine": json_number(self.cosine), "snr_db": json_number(self.snr_db),
               "metric": json_number(self.metric), "metric_reference": json_number(self.metric_reference),
               "worst_group": self.worst_group, "pooled_cosine": json_number(self.pooled_cosine)}
        if self.non_finite:
            out["non_finite"] = int(self.non_finite)
        return out


@dataclass(frozen=True)
class Verdict:
    """A candidate (a model in ONNX Runtime, an engine) judged by a target on held-back samples.

    Attributes
    ----------
    meets : bool or None
        Whether it keeps the target; None when nothing judged it (no target, or ``error``).
    accuracy : Scores, optional
        Its scores.
    samples : int
    error : str
        Why it was not judged.
    non_finite_outputs : mapping of str to int
        Output -> values that are NaN or Inf where FP32's are finite.
    why : tuple of str
        Each part of the target it misses, in words (empty when it meets it).
    """

    meets: Optional[bool]
    accuracy: Optional[Scores] = None
    samples: int = 0
    error: str = ""
    non_finite_outputs: Mapping[str, int] = field(default_factory=dict)
    why: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "non_finite_outputs", readonly_mapping(dict(self.non_finite_outputs)))

    @property
    def scores(self) -> Optional[Scores]:
        return self.accuracy

    @property
    def scored(self) -> Scores:
        """:attr:`accuracy` of a verdict that was scored (every :func:`evaluate`'s); ValueError otherwise."""
        if self.accuracy is None:
            raise ValueError("this verdict holds no scores")
        return self.accuracy

    @property
    def non_finite(self) -> bool:
        """The candidate wrote NaN or Inf where FP32's output is finite (it fails whatever a metric makes of it)."""
        return bool(self.accuracy is not None and self.accuracy.non_finite) or any(self.non_finite_outputs.values())

    def text(self) -> str:
        """In words ("" when not judged and no error)."""
        if self.error:
            return f"not judged: {self.error}"
        acc = self.accuracy
        if acc is None:
            return ""
        parts = []
        if acc.metric is not None and acc.metric_reference is not None:
            parts.append(f"metric {float(acc.metric):.4f} vs FP32 {float(acc.metric_reference):.4f}")
        if acc.cosine is not None and math.isfinite(acc.cosine):
            parts.append(f"worst group cosine {float(acc.cosine):.4f}")
        if acc.non_finite:
            shown = ", ".join(f"{k} {v}" for k, v in self.non_finite_outputs.items() if v)
            parts.append(f"{acc.non_finite} NaN/Inf values" + (f" ({shown})" if shown else ""))
        return ", ".join(parts) + (f", {self.samples} samples" if self.samples else "")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "Verdict":
        """Inverse of :meth:`to_dict`."""
        scored = any(d.get(k) is not None for k in ("cosine", "snr_db", "metric"))
        acc = Scores.from_dict(d) if scored else None
        counts = d.get("non_finite_outputs") or {}
        if acc is None and d.get("non_finite") and not counts:  # an engine's verdict wrote true before counting
            counts = {"": 1}
        return cls(d.get("meets"), acc, int(d.get("samples") or 0), str(d.get("error") or ""),
                   {str(k): int(v) for k, v in dict(counts).items()}, tuple(str(w) for w in d.get("why") or ()))

    def to_dict(self) -> dict:
        """For plan.json: the scores' fields beside ``meets`` and ``samples`` (or the error)."""
        out: Dict[str, Any] = dict(self.accuracy.to_dict()) if self.accuracy is not None else {}
        out["meets"] = self.meets
        if self.accuracy is not None or self.samples:
            out["samples"] = int(self.samples)
        if self.error:
            out["error"] = self.error
        if self.non_finite:
            out["non_finite"] = int(self.accuracy.non_finite) if self.accuracy is not None and \
                self.accuracy.non_finite else True
            out["non_finite_outputs"] = {k: int(v) for k, v in self.non_finite_outputs.items() if v}
        if self.why:
            out["why"] = list(self.why)
        return out


class OutputScore(NamedTuple):
    """What the worst-group comparison found."""

    cosine: float  #: the lowest cosine of any channel group of any output
    snr_db: float  #: the SNR of the worst group (lowest SNR)
    worst: str  #: that group, ``output[group]``
    pooled_cosine: float  #: the lowest plain output cosine
    non_finite: int = 0  #: values that are NaN or Inf in the candidate where FP32's are finite


def non_finite_counts(reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray]) -> Dict[str, int]:
    """Output -> how many values are NaN or Inf in ``candidate`` where FP32's ``reference`` is finite."""
    counts: Dict[str, int] = {}
    for name in numeric_outputs(reference):
        ref = np.asarray(reference[name])
        cand = np.asarray(candidate[name])
        if cand.size != ref.size or not np.issubdtype(cand.dtype, np.number):
            continue  # check_outputs refuses another size; a non-numeric candidate has no score at all
        counts[name] = int(np.count_nonzero(np.isfinite(ref) & ~np.isfinite(cand.reshape(ref.shape))))
    return counts


def non_finite_where_finite(reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray]) -> int:
    """How many values are NaN or Inf in ``candidate`` where FP32's ``reference`` is finite (every numeric output).

    Every metric leaves non-finite positions out (:mod:`~.metrics`), so a candidate that writes NaN
    into 2 of 40 values can keep a cosine of 0.9995: this count is what fails it.
    """
    return sum(non_finite_counts(reference, candidate).values())


def score_outputs(reference: Mapping[str, np.ndarray], candidate: Mapping[str, np.ndarray]) -> OutputScore:
    """The worst channel group's cosine and SNR over every output, its label, the worst pooled output cosine, and
    the count of non-finite values where FP32 is finite (any fails the target).

    Outputs are batch first; non-numeric outputs are skipped. An output that is zero throughout in
    FP32 scores cosine 1 (and an infinite SNR) when every candidate value lies within :data:`ZERO_ATOL`
    of 0, else 0.
    """
    zero = zero_outputs(reference)
    rest = {k: v for k, v in reference.items() if k not in zero}
    check = check_outputs(rest, dict(candidate))
    groups = [(g.cosine, g.snr_db, g.label) for g in check.groups]
    for name in zero:
        cand = np.asarray(candidate[name], np.float64)
        err = float(np.max(np.abs(np.where(np.isfinite(cand), cand, 0.0)))) if cand.size else 0.0
        groups.append((1.0, math.inf, f"{name}[zero in FP32]") if err <= ZERO_ATOL else
                      (0.0, -math.inf, f"{name}[zero in FP32, max |error| {err:.3g}]"))
    pooled = [cosine_similarity(reference[n], candidate[n]) for n in numeric_outputs(reference) if n not in zero]
    pooled += [g[0] for g in groups if "[zero in FP32" in g[2]]
    bad = non_finite_where_finite(reference, candidate)
    if not groups:
        return OutputScore(math.nan, math.nan, "", min(pooled, default=math.nan), bad)
    worst = min(groups, key=lambda g: (g[1], g[0]))
    # The target's cosine is the lowest of any group; its SNR the lowest of any group (they may be two groups).
    return OutputScore(float(min(g[0] for g in groups)), float(worst[1]), worst[2],
                       float(min(pooled, default=math.nan)), bad)


def evaluate(outputs: Mapping[str, np.ndarray], reference, target: Optional[Target]) -> Verdict:
    """Judge a candidate's ``outputs`` against FP32's by ``target``: the one verdict of the toolkit.

    Parameters
    ----------
    outputs : mapping
        The candidate's outputs on the held-back samples, batch first.
    reference : Reference or mapping
        FP32's outputs on the same samples (a :class:`~.reference.Reference`, or the outputs themselves).
    target : Target, optional
        Bound to ``reference`` (:meth:`~.target.Target.bound`) when it has a metric. None: scored,
        not judged (``meets`` None).

    Returns
    -------
    Verdict

    Raises
    ------
    UserError
        An output of FP32 is missing from ``outputs`` or has another size (another model's outputs).
    """
    from ..common.errors import UserError

    ref = reference.outputs if isinstance(reference, Reference) else reference
    missing = [n for n in ref if n not in outputs]
    if missing:
        raise UserError(f"The candidate has no output {', '.join(map(repr, missing))}.",
                        "It was made from another model than FP32's reference.",
                        "Judge a candidate of the same model.")
    got = {n: np.asarray(outputs[n]) for n in ref}
    for n, r in ref.items():
        if got[n].size != np.asarray(r).size:
            raise UserError(f"The candidate's output {n!r} has shape {got[n].shape}, FP32's {np.shape(r)}.",
                            "Each held-back sample must give the same output shape on both sides.",
                            "Run both at the same input shapes.")
    s = score_outputs(ref, got)
    metric = target.metric if target is not None else None
    value = float(metric(got)) if metric is not None else None
    scores = Scores(cosine=float(s.cosine), snr_db=float(s.snr_db), metric=value,
                    metric_reference=target.metric_reference if value is not None and target is not None else None,
                    worst_group=s.worst, pooled_cosine=float(s.pooled_cosine), non_finite=s.non_finite)
    why = scores.failures(target) if target is not None else ()
    samples = reference.samples if isinstance(reference, Reference) else _samples(ref)
    return Verdict(None if target is None else not why, scores, samples,
                   non_finite_outputs=non_finite_counts(ref, got), why=why)


def _samples(ref: Mapping[str, np.ndarray]) -> int:
    first = next(iter(ref.values()), None)
    return int(np.shape(first)[0]) if first is not None and np.ndim(first) else 0
