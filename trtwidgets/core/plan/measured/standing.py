"""A plan's latency standing: an estimate that says how far estimates have been off, or a measurement.

* :class:`EstimateStanding`: what a plan that was not measured says about itself: that its
  latency is an estimate (or an implicit build's choices) and how far such estimates have
  been off on the zoo (:data:`ESTIMATE_ERROR_FILE`, measured ratios from committed GPU runs).
* :class:`PlanMeasurement`: every engine measured for the plan (FP16, implicit INT8, its top
  candidates), the rounds, how the run went, and the pick by measured time.

Both are written into plan.json under ``measured`` (``status`` ``"estimate"``, ``"measured"`` or
``"partial"``) and read back by :mod:`..plan_file`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, List, Mapping, Optional, Tuple

from ...common.frozen import deep_freeze, readonly_mapping, thaw
from ..plan_values import positive_finite
from .measurement import INT8_IMPLICIT, MeasuredRow, Measurement, fp16_of, measurement_rows
from .pick import MeasuredPick

__all__ = ["ESTIMATE_ERROR_FILE", "MEASURE_HINT", "CheckSummary", "EstimateStanding", "PlanMeasurement",
           "estimate_error_entries", "estimate_text"]

#: How far the planner's latency has been off on the zoo: estimated against measured ratios to FP16,
#: from committed GPU runs (``benchmarks/estimate_error.py`` regenerates it).
ESTIMATE_ERROR_FILE = Path(__file__).with_name("estimate_error.json")
#: Where to measure when this machine cannot.
MEASURE_HINT = ("build and time the candidates on a GPU machine: `trtwidgets plan measure PLAN_DIR` "
                "(or plan --measure there)")


def estimate_error_entries(source: Optional[str] = None, path: Optional[Path] = None) -> List[dict]:
    """The zoo's estimated and measured ratios to FP16 (of one ``latency_source`` when given).

    Entries without both ratios are skipped; a missing or empty file is no entry ("not yet measured").
    """
    p = Path(path) if path is not None else ESTIMATE_ERROR_FILE
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return []
    out = []
    for e in doc.get("entries", []) if isinstance(doc, dict) else []:
        if not isinstance(e, dict) or not (positive_finite(e.get("estimated_x_fp16")) and positive_finite(e.get("measured_x_fp16"))):
            continue
        if source is None or e.get("latency_source") == source:
            out.append(e)
    return out


def estimate_text(source: str, path: Optional[Path] = None) -> str:
    """How far the planner's ``source`` latency ("estimate" or "oracle") has been off on the zoo, in one line.

    The zoo's cases themselves are :meth:`EstimateStanding.rows` (a table in plan.html).
    """
    what = {"estimate": "the cost model's estimate",
            "oracle": "estimated from an implicit INT8 build's per-layer choices (oracle)"}.get(source, f"{source}")
    # Estimates the planner would not print (cannot estimate: a transformer, ...) say nothing of those it prints.
    entries = [e for e in estimate_error_entries(source, path) if not e.get("cannot_estimate")]
    if not entries:
        return (f"latency: {what}, not a measurement; how far it is off on the zoo is not yet measured. To be sure, "
                f"{MEASURE_HINT}.")
    ratios = [e["measured_x_fp16"] / e["estimated_x_fp16"] for e in entries]  # both finite and positive (entries)
    low, high = f"{min(ratios):.2f}", f"{max(ratios):.2f}"
    span = low if low == high else f"{low}-{high}"
    return (f"latency: {what}, not a measurement; on {len(entries)} zoo engines the measured time relative to FP16 "
            f"was {span} times the estimated one. To be sure, {MEASURE_HINT}.")


def _cell(v, fmt: str) -> str:
    return format(float(v), fmt) if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
        else "-"


@dataclass(frozen=True)
class EstimateStanding:
    """A plan's latency that was not measured: where it came from and how far such latency has been off.

    Attributes
    ----------
    latency_source : str
        ``"estimate"`` (the cost model) or ``"oracle"`` (an implicit INT8 build's choices).
    zoo : tuple of mapping
        The zoo's entries for that source (:func:`estimate_error_entries`).
    text : str
        The standing in a sentence (:func:`estimate_text`).
    """

    latency_source: str
    zoo: Tuple[Mapping[str, Any], ...] = ()
    text: str = ""

    status = "estimate"

    def __post_init__(self) -> None:
        object.__setattr__(self, "zoo", deep_freeze(tuple(self.zoo)))

    def rows(self) -> List[Tuple[str, str, str, str]]:
        """``(model, estimated x FP16, measured x FP16, where)`` per zoo entry, as text (a plan.json's entries are
        read as they are: what is not a number shows as "-")."""
        out = []
        for e in self.zoo:
            if not isinstance(e, Mapping):
                continue
            # An estimate the planner now refuses to make (a transformer's INT8 MatMuls ...) is shown as such.
            estimated = "cannot estimate" if e.get("cannot_estimate") else _cell(e.get("estimated_x_fp16"), ".2f")
            out.append((f"{e.get('model', '?')} b{e.get('batch', '?')}", estimated,
                        _cell(e.get("measured_x_fp16"), ".2f"), f"{e.get('gpu', '?')}, TensorRT {e.get('trt', '?')}"))
        return out

    @classmethod
    def of(cls, source: str, path: Optional[Path] = None) -> "EstimateStanding":
        """The standing of a plan whose latency came from ``source``, with the zoo's record (``path``: its file)."""
        return cls(source, tuple(estimate_error_entries(source, path)), estimate_text(source, path))

    def to_dict(self) -> dict:
        return {"status": self.status, "latency_source": self.latency_source, "zoo": thaw(self.zoo),
                "text": self.text}


@dataclass(frozen=True)
class CheckSummary:
    """How the engines were judged: on how many held-back samples, whether a target judged them, what it could not."""

    samples: int
    judged: bool
    notes: Tuple[str, ...] = ()

    def to_dict(self) -> dict:
        return {"samples": self.samples, "judged": self.judged, "notes": list(self.notes)}


@dataclass(frozen=True)
class PlanMeasurement:
    """A plan's engines measured on a GPU (:func:`~.repick.apply_measurements`).

    Attributes
    ----------
    measurements : tuple of Measurement
        FP16 (``"fp16"``), implicit INT8 and the candidates (``"#N name"``), in job order.
    rounds : int
        Interleaved rounds completed.
    interrupted : bool
        Ctrl-C stopped the run: what was measured is kept.
    built, cached : int
        Engines built in the run / found in the engine cache.
    shapes : mapping
        Input name -> shape the engines were built and timed at.
    settings : mapping
        GPU, TensorRT version, optimization level, runs and warm-up, as recorded.
    pick : MeasuredPick, optional
        The pick by measured time (``candidate`` its index in the plan; None when it is implicit
        INT8). None when nothing could be judged (no FP16 time): the estimate's pick stays.
    export : MeasuredPick, optional
        When implicit INT8 is the pick: the fastest Q/DQ export that meets the target (what
        ``plan export`` writes), else None.
    implicit_cache : str, optional
        The calibration cache implicit INT8 was built with, when it is the pick.
    estimate_pick : int or None
        The candidate the estimate had picked (None: it recommended nothing).
    estimate_reason : str
        Why, by the estimate.
    check : CheckSummary, optional
        How the engines were judged on the held-back samples; None when they were only timed.
    """

    measurements: Tuple[Measurement, ...]
    rounds: int
    interrupted: bool = False
    built: int = 0
    cached: int = 0
    shapes: Mapping[str, Tuple[int, ...]] = field(default_factory=dict)
    settings: Mapping[str, Any] = field(default_factory=dict)
    pick: Optional[MeasuredPick] = None
    export: Optional[MeasuredPick] = None
    implicit_cache: Optional[str] = None
    estimate_pick: Optional[int] = 0
    estimate_reason: str = ""
    check: Optional[CheckSummary] = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "measurements", tuple(self.measurements))
        object.__setattr__(self, "shapes", readonly_mapping({k: tuple(int(d) for d in v)
                                                             for k, v in self.shapes.items()}))
        object.__setattr__(self, "settings", deep_freeze(dict(self.settings)))

    @property
    def status(self) -> str:
        """``"measured"``, or ``"partial"`` when interrupted or when nothing could be judged against FP16."""
        return "partial" if self.interrupted or self.pick is None else "measured"

    @property
    def implicit_is_pick(self) -> bool:
        """Implicit INT8 is the measured pick (built with :attr:`implicit_cache`, not by ``plan export``)."""
        return self.export is not None

    def rows(self) -> List[MeasuredRow]:
        """Estimate and measurement side by side, one row per engine."""
        return measurement_rows(self.measurements)

    def row_of(self, candidate: int) -> Optional[MeasuredRow]:
        """The measured row of the plan's candidate ``candidate`` (0: FP16), or None when it was not measured."""
        return next((r for r in self.rows() if r.candidate == candidate), None)

    def implicit_row(self) -> Optional[MeasuredRow]:
        """Implicit INT8's row, or None when it was not measured."""
        return next((r for r in self.rows() if r.kind == INT8_IMPLICIT), None)

    def fp16(self) -> Optional[Measurement]:
        """FP16's measurement with a time (of the model as given where both FP16 engines were timed), or None."""
        return fp16_of(self.measurements)

    def _pick_dict(self) -> Optional[dict]:
        if self.pick is None:
            return None
        out = self.pick.to_dict()
        if self.export is not None:
            implicit = next((m for m in self.measurements if m.kind == INT8_IMPLICIT), None)
            out.update(kind=INT8_IMPLICIT, calibration_cache=self.implicit_cache,
                       accuracy=implicit.accuracy.to_dict() if implicit is not None and implicit.accuracy else {},
                       export=self.export.to_dict())
        return out

    def to_dict(self) -> dict:
        """plan.json's ``measured``: the run, each measurement, each row (estimate beside measurement), the pick."""
        rows = self.rows()
        out = {"status": self.status, "rounds": int(self.rounds), "interrupted": bool(self.interrupted),
               "built": int(self.built), "cached": int(self.cached),
               "shapes": {k: list(v) for k, v in self.shapes.items()}, "settings": thaw(self.settings),
               "measurements": [dict(m.to_dict(), candidate=r.candidate) for m, r in zip(self.measurements, rows)],
               "rows": [r.to_dict() for r in rows],
               "estimate_pick": None if self.estimate_pick is None else int(self.estimate_pick),
               "estimate_reason": self.estimate_reason}
        if self.check is not None:
            out["engine_check"] = self.check.to_dict()
        out["pick"] = self._pick_dict()
        return out
