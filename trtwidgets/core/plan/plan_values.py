"""The values a plan is made of: the target, an accuracy, an engine's verdict, a candidate, the ranges.

Kept apart from the search (:mod:`.planner`) and from the plan itself
(:mod:`.plan_artifact`) so that the measurement's records (:mod:`.measured`) can hold
them and a saved ``plan.json`` reads back without ONNX Runtime.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Mapping, Optional, Tuple

from ..common.errors import UserError
from ..common.frozen import readonly_mapping

__all__ = ["PlanTarget", "PlanAccuracy", "EngineVerdict", "Candidate", "PlanRanges", "json_number", "ratio"]


def json_number(v) -> Optional[float]:
    """``v`` rounded for plan.json, None where it is not a finite number (JSON has no NaN)."""
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else round(float(v), 6)


def ratio(num, den) -> float:
    """``num / den`` for two times; NaN unless both are finite and positive (an unknown time is no ratio)."""
    try:
        a, b = float(num), float(den)
    except (TypeError, ValueError):
        return math.nan
    if not (math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0):
        return math.nan
    return a / b


def _float(v) -> float:
    return math.nan if v is None else float(v)


def _optional(v) -> Optional[float]:
    return None if v is None else float(v)


@dataclass(frozen=True)
class PlanTarget:
    """What accuracy the plan must keep, against ONNX Runtime FP32 on held-back data.

    Build one with a task metric by :meth:`for_metric` (``PlanTarget.for_metric("detection")``).

    Attributes
    ----------
    cosine : float, optional
        Minimum output cosine similarity (the worst output).
    snr_db : float, optional
        Minimum output SNR in dB.
    metric : callable, optional
        ``f(outputs) -> float`` (higher is better) over the concatenated outputs of the
        held-back data, e.g. top-1 accuracy against labels or mask IoU; compared with
        the same metric of the float model.
    metric_name : str
        The metric in words. A plan read back from plan.json has the name but not the
        function (``metric`` None): its candidates' recorded metric values still judge it.
    max_metric_drop : float, optional
        The metric may fall at most this much below the float model's. None (the default): the
        metric's own allowance (``TaskMetric.default_drop``: 0.05 for the detection F1, else 0.01).
    metric_factory : callable, optional
        ``f(reference_outputs, summary, samples) -> (metric, name)``: a metric that needs
        the float model's outputs or the sample count (mask IoU, top-1 against labels);
        the planner calls it once the reference is known.
    metric_spec : str
        The metric as text (``"detection"``, ``"top1"``, ``"package.module:function"``) when it was
        given as text: what rebuilds it where the plan's engines are measured (``plan measure``).
        Empty for a Python callable.
    task_metric : str, callable or TaskMetric, optional
        The metric as :meth:`for_metric` was given it; the planner builds it against the float
        model's outputs (with the held-back samples' ``labels``).
    labels : array of int, optional
        Classes for ``task_metric="top1"``: one per sample of the planner's data (the split picks
        the held-back ones), or one per held-back sample.
    """

    cosine: Optional[float] = 0.99
    snr_db: Optional[float] = None
    metric: Optional[Callable[[Dict[str, Any]], float]] = field(default=None, compare=False, repr=False)
    metric_name: str = ""
    max_metric_drop: Optional[float] = None
    metric_factory: Optional[Callable[..., Tuple[Callable, str]]] = field(default=None, compare=False, repr=False)
    metric_spec: str = ""
    task_metric: Any = field(default=None, compare=False, repr=False)
    labels: Any = field(default=None, compare=False, repr=False)

    def __post_init__(self):
        if self.cosine is None and self.snr_db is None and not self.has_metric:
            raise UserError("The plan has no accuracy target.", "Without one every candidate would pass.",
                            "Give cosine (e.g. 0.99), snr_db, or a metric (PlanTarget.for_metric).")
        if self.cosine is not None and not -1.0 <= float(self.cosine) <= 1.0:
            raise UserError(f"Target cosine {self.cosine} is outside [-1, 1].",
                            "Cosine similarity lies between -1 and 1.", "Use e.g. --target-cosine 0.99.")
        if self.labels is not None and self.task_metric is None and self.metric_factory is None:
            raise UserError("labels were given without a metric.",
                            "Labels are read by a task metric; without one the plan is judged by the output cosine.",
                            "Use PlanTarget.for_metric('top1', labels) to score the plan by top-1 accuracy "
                            "against these labels, or leave labels out.")

    @classmethod
    def for_metric(cls, metric, labels=None, *, cosine: Optional[float] = None, snr_db: Optional[float] = None,
                   max_metric_drop: Optional[float] = None) -> "PlanTarget":
        """A target judged by a task metric (and by ``cosine`` / ``snr_db`` too where given).

        Parameters
        ----------
        metric : str, callable or TaskMetric
            A built-in name such as ``"detection"``, ``"top1-agreement"``, ``"mask-iou:0.3"``,
            ``"package.module:function"``, or ``f(reference, candidate) -> float`` (higher is better)
            (:mod:`~..accuracy.task_metrics`).
        labels : array of int, optional
            Classes for ``metric="top1"``.
        cosine, snr_db : float, optional
            Kept besides the metric (default: the metric alone).
        max_metric_drop : float, optional
            How far the metric may fall below FP32's (default: the metric's own).
        """
        if isinstance(metric, str):  # an unknown name (or snr, a target) is refused here, before any work
            from ..accuracy.task_metrics import check_metric_text

            check_metric_text(metric)
        return cls(cosine=cosine, snr_db=snr_db, max_metric_drop=max_metric_drop, task_metric=metric, labels=labels,
                   metric_spec=metric if isinstance(metric, str) else "")

    @property
    def has_metric(self) -> bool:
        """Whether a task metric is part of the target (built, to be built, or named in a plan.json)."""
        return (self.metric is not None or self.metric_factory is not None or self.task_metric is not None
                or bool(self.metric_name))

    @property
    def metric_drop(self) -> float:
        """The allowance in force: ``max_metric_drop``, else the default of 0.01."""
        return 0.01 if self.max_metric_drop is None else float(self.max_metric_drop)

    def describe(self) -> str:
        parts = []
        if self.cosine is not None:
            parts.append(f"cosine >= {self.cosine:g}")
        if self.snr_db is not None:
            parts.append(f"SNR >= {self.snr_db:g} dB")
        if self.has_metric:
            parts.append(f"{self.metric_name or self.metric_spec or 'metric'} within {self.metric_drop:g} of FP32")
        return ", ".join(parts)

    def to_dict(self) -> dict:
        out = {"cosine": self.cosine, "snr_db": self.snr_db, "metric": self.metric_name or None,
               "max_metric_drop": self.metric_drop if self.has_metric else None}
        if self.metric_spec:
            out["metric_spec"] = self.metric_spec
        return out


@dataclass(frozen=True)
class PlanAccuracy:
    """A candidate's accuracy against ONNX Runtime FP32 (``metric_reference`` is the float model's metric).

    ``cosine`` and ``snr_db`` are those of the worst channel group of any output
    (:mod:`.plan_accuracy`), ``worst_group`` names it, ``pooled_cosine`` is the lowest
    plain output cosine (blind to groups with little of an output's energy). ``non_finite``
    counts the values that are NaN or Inf where FP32's are finite: every score leaves such
    positions out, so any of them fails the target, whatever the scores say.
    """

    cosine: float
    snr_db: float
    metric: Optional[float] = None
    metric_reference: Optional[float] = None
    worst_group: str = ""
    pooled_cosine: Optional[float] = None
    non_finite: int = 0

    def meets(self, target: PlanTarget) -> bool:
        """Whether every part of ``target`` holds (a NaN never does, nor a candidate with NaN/Inf where FP32 is finite)."""
        if self.non_finite:
            return False
        if target.cosine is not None and not self.cosine >= target.cosine:
            return False
        if target.snr_db is not None and not self.snr_db >= target.snr_db:
            return False
        if target.has_metric and self.metric is not None and self.metric_reference is not None:
            if not self.metric >= self.metric_reference - target.metric_drop:
                return False
        return True

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "PlanAccuracy":
        """Inverse of :meth:`to_dict` (a value JSON left null is NaN; plan.json is checked by :mod:`.plan_file`)."""
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
class EngineVerdict:
    """A built engine judged on the plan's held-back samples (:meth:`~.engine_check.EngineCheck.verdict`).

    Attributes
    ----------
    meets : bool or None
        Whether the engine keeps the plan's target; None when nothing judged it (no target that
        travels, or the engine could not run the samples: ``error``).
    accuracy : PlanAccuracy, optional
        The engine's accuracy, scored as the planner scores a candidate.
    samples : int
    error : str
        Why the engine was not judged.
    non_finite : bool
        The engine output NaN or Inf where FP32's output is finite (it fails whatever a metric makes of it).
    """

    meets: Optional[bool]
    accuracy: Optional[PlanAccuracy] = None
    samples: int = 0
    error: str = ""
    non_finite: bool = False

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
        return ", ".join(parts) + (f", {self.samples} samples" if self.samples else "")

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> "EngineVerdict":
        """Inverse of :meth:`to_dict`."""
        scored = any(d.get(k) is not None for k in ("cosine", "snr_db", "metric"))
        return cls(d.get("meets"), PlanAccuracy.from_dict(d) if scored else None, int(d.get("samples") or 0),
                   str(d.get("error") or ""), bool(d.get("non_finite", False)))

    def to_dict(self) -> dict:
        """For plan.json: the accuracy's fields beside ``meets`` and ``samples`` (or the error)."""
        out: Dict[str, Any] = dict(self.accuracy.to_dict()) if self.accuracy is not None else {}
        out["meets"] = self.meets
        if self.accuracy is not None or self.samples:
            out["samples"] = int(self.samples)
        if self.error:
            out["error"] = self.error
        if self.non_finite:
            out["non_finite"] = int(self.accuracy.non_finite) if self.accuracy is not None and \
                self.accuracy.non_finite else True
        return out


@dataclass(frozen=True)
class Candidate:
    """One way to quantize the model, with its predicted accuracy and latency.

    Attributes
    ----------
    name : str
    quantized : tuple of str
        Weighted layers (node labels) that run in INT8: the candidate's node set.
    kept : tuple of (str, str)
        Weighted layers kept in high precision, each with the reason.
    accuracy : PlanAccuracy
        ONNX Runtime's prediction on the held-back data.
    latency_us : float
        Estimated (or oracle-timed) time of the weighted layers plus precision borders.
    fp16_latency_us : float
        The same for the all-FP16 engine.
    latency_source : str
        ``"estimate"`` (cost model), ``"oracle"`` (an implicit INT8 build's choices and
        times) or ``"measured"``.
    meets_target : bool
    choices : tuple of (str, str)
        Placement choices (node label, choice) the candidate is exported with: the region schemes it
        combines (:mod:`~trtwidgets.core.qdq.region_choices`); empty: the placement rules' own answers.
    """

    name: str
    quantized: Tuple[str, ...]
    kept: Tuple[Tuple[str, str], ...]
    accuracy: PlanAccuracy
    latency_us: float
    fp16_latency_us: float
    latency_source: str
    meets_target: bool
    choices: Tuple[Tuple[str, str], ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "choices", tuple(sorted((str(k), str(v)) for k, v in dict(self.choices).items())))

    @property
    def speedup(self) -> float:
        """FP16 time / this candidate's time (above 1: faster than FP16).

        NaN ("cannot estimate") unless both times are finite and positive: an estimate of 0, infinity
        or NaN (shapes that inference cannot resolve leave a model with no timed layer at all) is no
        ratio, and never reaches a division.
        """
        return ratio(self.fp16_latency_us, self.latency_us)

    @property
    def vs_fp16(self) -> float:
        """This candidate's time / FP16's (below 1: faster than FP16); NaN when either cannot be estimated."""
        return ratio(self.latency_us, self.fp16_latency_us)

    def to_dict(self) -> dict:
        return {"name": self.name, "quantized": list(self.quantized),
                "kept": [{"layer": n, "reason": r} for n, r in self.kept],
                "accuracy": self.accuracy.to_dict(), "latency_us": json_number(self.latency_us),
                "fp16_latency_us": json_number(self.fp16_latency_us), "speedup_vs_fp16": json_number(self.speedup),
                "latency_source": self.latency_source, "meets_target": self.meets_target,
                **({"choices": dict(self.choices)} if self.choices else {})}


@dataclass(frozen=True)
class PlanRanges:
    """How the activation ranges every candidate was scored with were chosen, and the ranges themselves.

    Attributes
    ----------
    amax : mapping
        Tensor name -> amax: what every candidate's Q/DQ model is written with.
    method : str
        The range method the search kept.
    percentile : float, optional
    overrides : mapping
        Tensor name -> amax set by hand (the calibration's), in every method.
    per_method : mapping
        Method -> the full placement's accuracy with that method's ranges.
    methods_used : mapping
        Method (or ``"tuned"``) -> how many tensors' amax came from it.
    statistics : str
        Where the statistics came from, in words.
    zero : tuple of str
        The tensors that were zero on every calibration sample: the model's, without a range (so an export
        of the plan is not taken for another model's, and its report says why they stay float).
    """

    amax: Mapping[str, float]
    method: str = ""
    percentile: Optional[float] = None
    overrides: Mapping[str, float] = field(default_factory=dict)
    per_method: Mapping[str, PlanAccuracy] = field(default_factory=dict)
    methods_used: Mapping[str, int] = field(default_factory=dict)
    statistics: str = ""
    zero: Tuple[str, ...] = ()

    def __post_init__(self):
        for name in ("amax", "overrides", "per_method", "methods_used"):
            object.__setattr__(self, name, readonly_mapping(getattr(self, name)))
        object.__setattr__(self, "zero", tuple(str(t) for t in self.zero))

    def to_dict(self) -> dict:
        out = {"method": self.method, "per_method": {m: a.to_dict() for m, a in self.per_method.items()},
               "methods_used": dict(self.methods_used), "amax": {k: float(v) for k, v in self.amax.items()},
               "statistics": self.statistics, "percentile": self.percentile,
               "overrides": {k: float(v) for k, v in self.overrides.items()}}
        if self.zero:  # written only where there are some: plans without keep their bytes
            out["zero"] = list(self.zero)
        return out
