"""The values of a quantization plan: the target, each candidate's accuracy and latency, the plan.

Kept apart from the search (:mod:`.planner`) so that a saved ``plan.json`` reads
back without ONNX Runtime.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Optional, Tuple, Union

from ..common.atomic import write_text_atomic
from ..common.errors import UserError
from ..common.json_limits import PLAN_LIMITS, read_json_file

__all__ = ["PlanTarget", "PlanAccuracy", "Candidate", "Plan", "load_plan"]


def _jf(v):
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else round(float(v), 6)


@dataclass(frozen=True)
class PlanTarget:
    """What accuracy the plan must keep, against ONNX Runtime FP32 on held-back data.

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
    """

    cosine: Optional[float] = 0.99
    snr_db: Optional[float] = None
    metric: Optional[Callable[[Dict[str, Any]], float]] = field(default=None, compare=False, repr=False)
    metric_name: str = ""
    max_metric_drop: Optional[float] = None
    metric_factory: Optional[Callable[..., Tuple[Callable, str]]] = field(default=None, compare=False, repr=False)
    metric_spec: str = ""

    def __post_init__(self):
        if self.cosine is None and self.snr_db is None and self.metric is None and self.metric_factory is None:
            raise UserError("The plan has no accuracy target.", "Without one every candidate would pass.",
                            "Give cosine (e.g. 0.99), snr_db, or a metric.")
        if self.cosine is not None and not -1.0 <= float(self.cosine) <= 1.0:
            raise UserError(f"Target cosine {self.cosine} is outside [-1, 1].",
                            "Cosine similarity lies between -1 and 1.", "Use e.g. --target-cosine 0.99.")

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
        if self.metric is not None:
            parts.append(f"{self.metric_name or 'metric'} within {self.metric_drop:g} of FP32")
        return ", ".join(parts)

    def to_dict(self) -> dict:
        out = {"cosine": self.cosine, "snr_db": self.snr_db, "metric": self.metric_name or None,
               "max_metric_drop": self.metric_drop if self.metric is not None else None}
        if self.metric_spec:
            out["metric_spec"] = self.metric_spec
        return out


@dataclass(frozen=True)
class PlanAccuracy:
    """A candidate's accuracy against ONNX Runtime FP32 (``metric_reference`` is the float model's metric).

    ``cosine`` and ``snr_db`` are those of the worst channel group of any output
    (:mod:`.plan_accuracy`), ``worst_group`` names it, ``pooled_cosine`` is the lowest
    plain output cosine (blind to groups with little of an output's energy).
    """

    cosine: float
    snr_db: float
    metric: Optional[float] = None
    metric_reference: Optional[float] = None
    worst_group: str = ""
    pooled_cosine: Optional[float] = None

    def meets(self, target: PlanTarget) -> bool:
        """Whether every part of ``target`` holds."""
        if target.cosine is not None and not self.cosine >= target.cosine:
            return False
        if target.snr_db is not None and not self.snr_db >= target.snr_db:
            return False
        if target.metric is not None and self.metric is not None and self.metric_reference is not None:
            if not self.metric >= self.metric_reference - target.metric_drop:  # a NaN metric fails too
                return False
        return True

    def to_dict(self) -> dict:
        return {"cosine": _jf(self.cosine), "snr_db": _jf(self.snr_db), "metric": _jf(self.metric),
                "metric_reference": _jf(self.metric_reference), "worst_group": self.worst_group,
                "pooled_cosine": _jf(self.pooled_cosine)}


@dataclass(frozen=True)
class Candidate:
    """One way to quantize the model, with its predicted accuracy and latency.

    Attributes
    ----------
    name : str
    quantized : tuple of str
        Weighted layers (node labels) that run in INT8.
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
    """

    name: str
    quantized: Tuple[str, ...]
    kept: Tuple[Tuple[str, str], ...]
    accuracy: PlanAccuracy
    latency_us: float
    fp16_latency_us: float
    latency_source: str
    meets_target: bool

    @property
    def speedup(self) -> float:
        """FP16 time / this candidate's time (above 1: faster than FP16)."""
        return self.fp16_latency_us / self.latency_us if self.latency_us > 0 else math.nan

    def to_dict(self) -> dict:
        return {"name": self.name, "quantized": list(self.quantized),
                "kept": [{"layer": n, "reason": r} for n, r in self.kept],
                "accuracy": self.accuracy.to_dict(), "latency_us": _jf(self.latency_us),
                "fp16_latency_us": _jf(self.fp16_latency_us), "speedup_vs_fp16": _jf(self.speedup),
                "latency_source": self.latency_source, "meets_target": self.meets_target}


@dataclass(frozen=True)
class Plan:
    """The planner's answer: every candidate tried and the recommended one.

    Attributes
    ----------
    model : str
        The float model's path or name.
    target : PlanTarget
    candidates : tuple of Candidate
        In the order they were tried; the first is always FP16 (no INT8).
    recommended : int
        Index of the recommendation: the fastest candidate that meets the target, or
        0 (FP16) when no INT8 candidate is faster than FP16 and accurate enough.
    reason : str
        Why that one, in a sentence.
    ranges : dict
        How activation ranges were chosen (the method per tensor, counts).
    high_precision : str
        The float part's type in the written Q/DQ model.
    trt_version : str
    input_shapes : dict
    seconds : dict
        Time spent in each phase of the search.
    notes : tuple of str
    interrupted : bool
        The search was interrupted (Ctrl-C): the candidates are those measured before it.
    placement : dict
        Placement options every candidate was exported with (``dense_int8``; kept
        for readers of older plan.json files).
    options : dict
        The :class:`~trtwidgets.core.qdq.options.QdqOptions` every candidate was
        exported with (``to_dict()``), so that :func:`~.planner.export_plan` writes
        the same model; empty in a plan.json older than it.
    measured : dict
        The latency's standing (:mod:`.measured_plan`): ``status`` ``"estimate"`` with how far
        estimates have been off on the zoo, or ``"measured"`` / ``"partial"`` with every
        engine's measurement beside its estimate and the pick by measured time.
    held_back : dict
        Which samples measured accuracy (:class:`~..calibration.held_back.HeldBackSplit`'s record:
        the source, seed and the sample names of each side).
    batch_axes : dict
        The batch axis of every input and output, and how each was found.
    fingerprint : dict
        The model's fingerprint (:class:`~trtwidgets.core.calibration.fingerprint.ModelFingerprint`
        ``to_dict()``: SHA-256, input names and shapes): exporting the plan for another model is
        refused. Empty in a plan.json older than it.
    engine_check : EngineCheck, optional
        The held-back samples and FP32's outputs on them (:mod:`.engine_check`), for judging
        built engines; written beside plan.json (``held_back.npz``), not into it.
    """

    model: str
    target: PlanTarget
    candidates: Tuple[Candidate, ...]
    recommended: int
    reason: str
    ranges: Dict[str, Any] = field(default_factory=dict)
    high_precision: str = "fp32"
    trt_version: str = ""
    input_shapes: Dict[str, Any] = field(default_factory=dict)
    seconds: Dict[str, float] = field(default_factory=dict)
    notes: Tuple[str, ...] = ()
    interrupted: bool = False
    placement: Dict[str, Any] = field(default_factory=dict)
    options: Dict[str, Any] = field(default_factory=dict)
    measured: Dict[str, Any] = field(default_factory=dict)
    held_back: Dict[str, Any] = field(default_factory=dict)
    batch_axes: Dict[str, Any] = field(default_factory=dict)
    fingerprint: Dict[str, Any] = field(default_factory=dict)
    engine_check: Optional[Any] = field(default=None, compare=False, repr=False)

    @property
    def pick(self) -> Candidate:
        """The recommended candidate."""
        return self.candidates[self.recommended]

    @property
    def fp16_is_best(self) -> bool:
        """True when the plan recommends no INT8 at all."""
        return not self.pick.quantized

    @property
    def any_meets_target(self) -> bool:
        return any(c.meets_target for c in self.candidates)

    def to_dict(self) -> dict:
        return {"version": 1, "model": self.model, "target": self.target.to_dict(),
                "recommended": self.recommended, "reason": self.reason,
                "candidates": [c.to_dict() for c in self.candidates], "ranges": self.ranges,
                "high_precision": self.high_precision, "trt_version": self.trt_version,
                "input_shapes": {k: list(v) for k, v in self.input_shapes.items()},
                "seconds": {k: round(v, 3) for k, v in self.seconds.items()}, "notes": list(self.notes),
                "interrupted": self.interrupted, "placement": dict(self.placement), "options": dict(self.options),
                "measured": dict(self.measured),
                "held_back": dict(self.held_back), "batch_axes": dict(self.batch_axes),
                "fingerprint": dict(self.fingerprint)}

    def table(self) -> str:
        """The candidates as a plain-text table (what the CLI prints; :func:`~.plan_table.plan_table`)."""
        from .plan_table import plan_table

        return plan_table(self.to_dict())

    def save_json(self, path: Union[str, os.PathLike]) -> Path:
        """Write ``plan.json`` atomically, and beside it the held-back check (``held_back.npz``) when the plan has one.

        ``trtwidgets plan measure`` judges the engines it builds by that file (:mod:`.engine_check`).
        """
        out = write_text_atomic(Path(path), json.dumps(self.to_dict(), indent=1))
        if self.engine_check is not None:
            self.engine_check.save(Path(path).with_name(self.engine_check.file_name))
        return out


def load_plan(path: Union[str, os.PathLike]) -> dict:
    """Read a ``plan.json`` back (as plain data: candidates, recommendation, reasons).

    Raises
    ------
    UserError
        The file is missing or not a plan.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "plan.json"
    try:
        doc = read_json_file(p, PLAN_LIMITS)
    except FileNotFoundError:
        raise UserError(f"No plan at {p}.", "plan.json is written by `trtwidgets plan ... --out DIR`.",
                        "Run the planner first, or give the folder it wrote.") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{p} is not a plan.json.", f"It is not JSON: {exc}.",
                        "Give the plan.json the planner wrote.") from None
    except (OSError, RecursionError) as exc:
        raise UserError(f"{p} could not be read as a plan.json.", f"{type(exc).__name__}: {exc}",
                        "Give the plan.json the planner wrote.") from None
    from .plan_check import check_plan_doc

    return check_plan_doc(doc, str(p))
