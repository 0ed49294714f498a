"""The values a plan is made of: the target, an accuracy, an engine's verdict, a candidate, the ranges.

Kept apart from the search (:mod:`.planner`) and from the plan itself
(:mod:`.plan_artifact`) so that the measurement's records (:mod:`.measured`) can hold
them and a saved ``plan.json`` reads back without ONNX Runtime.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, Mapping, Optional, Tuple

from ..accuracy.target import Target
from ..accuracy.verdict import Scores, Verdict, json_number
from ..common.frozen import readonly_mapping

__all__ = ["PlanTarget", "PlanAccuracy", "EngineVerdict", "Candidate", "PlanRanges", "json_number", "ratio"]

#: The plan's names for the one target, scores and verdict (:mod:`~..accuracy.target`, :mod:`~..accuracy.verdict`).
PlanTarget = Target
PlanAccuracy = Scores
EngineVerdict = Verdict


def finite_number(v: object) -> bool:
    """True for an int or float that is finite."""
    return isinstance(v, (int, float)) and math.isfinite(v)


def positive_finite(v: object) -> bool:
    """True for an int or float that is finite and above 0 (a time, a ratio)."""
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def ratio(num, den) -> float:
    """``num / den`` for two times; NaN unless both are finite and positive (an unknown time is no ratio)."""
    try:
        a, b = float(num), float(den)
    except (TypeError, ValueError):
        return math.nan
    if not (math.isfinite(a) and math.isfinite(b) and a > 0 and b > 0):
        return math.nan
    return a / b


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
    rewritten : bool
        A float candidate of the graph the Q/DQ candidates are written on: the model with the export's exact
        rewrites applied (:mod:`~trtwidgets.core.model.trt_rewrites`), quantizing nothing. The Q/DQ candidates
        are compared against its FP16 engine where it was measured (the same graph). False for every other.
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
    rewritten: bool = False

    def __post_init__(self) -> None:
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
                **({"choices": dict(self.choices)} if self.choices else {}),
                # Written only where true: plans without the candidate keep their bytes.
                **({"rewritten": True} if self.rewritten else {})}


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

    def __post_init__(self) -> None:
        for name in ("amax", "overrides", "per_method", "methods_used"):
            object.__setattr__(self, name, readonly_mapping(getattr(self, name)))
        object.__setattr__(self, "zero", tuple(str(t) for t in self.zero))

    def to_dict(self) -> dict:
        out: Dict[str, Any] = {"method": self.method, "per_method": {m: a.to_dict() for m, a in self.per_method.items()},
               "methods_used": dict(self.methods_used), "amax": {k: float(v) for k, v in self.amax.items()},
               "statistics": self.statistics, "percentile": self.percentile,
               "overrides": {k: float(v) for k, v in self.overrides.items()}}
        if self.zero:  # written only where there are some: plans without keep their bytes
            out["zero"] = list(self.zero)
        return out
