"""The Plan: every candidate the planner tried, the pick and why, and the latency's standing; saved and loaded.

A Plan is the planner's result (:func:`~.planner.plan`) and what ``plan.json`` holds: it can be
saved on a laptop, loaded on a GPU machine (:meth:`Plan.load`: the file's checks,
:mod:`.plan_file`, are the Plan's own validation), measured there
(:func:`trtwidgets.trt.plan_measure.measure_plan`) and exported (:func:`~.plan_export.export_plan`).
Its parts are typed values (:mod:`.plan_values`, :mod:`.measured`); ``to_dict`` is for the file.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping, Optional, Tuple, Union

from ..calibration.fingerprint import ModelFingerprint
from ..calibration.held_back import HeldBackSplit
from ..common.atomic import write_text_atomic
from ..common.frozen import deep_freeze, readonly_mapping, thaw
from ..model.batch_axis import BatchAxes
from ..qdq.options import QdqOptions
from .measured.standing import EstimateStanding, PlanMeasurement
from .plan_values import Candidate, PlanRanges, PlanTarget

__all__ = ["Plan", "PLAN_FILE"]

#: A plan folder's plan.json.
PLAN_FILE = "plan.json"
#: plan.json's format.
FORMAT_VERSION = 1
#: ``repr`` shows at most this many candidates (the pick and FP16 always).
_REPR_ROWS = 8


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
    recommended : int or None
        Index of the fastest candidate that meets the target (by measured time once measured), or of
        the float candidate that meets it (FP16, FP16 with an FP32 island, or once measured FP16 of
        the rewritten graph) when no INT8 one is faster and accurate; None when none
        meets it, FP16 included (plan.json: ``null``).
    reason : str
        Why that one, in a sentence.
    ranges : PlanRanges
        The ranges every candidate was scored with and how they were chosen.
    options : QdqOptions
        The Q/DQ options every candidate was exported with (:func:`~.plan_export.export_plan` reuses them).
    input_shapes : mapping
        Input name -> the shape the engine runs at (latency was estimated there).
    seconds : mapping
        Time spent in each phase of the search.
    notes : tuple of str
    interrupted : bool
        The search was interrupted: the candidates are those found before it.
    measured : PlanMeasurement, optional
        The engines built and timed and the pick by measured time; None until measured.
    estimate : EstimateStanding, optional
        Where an unmeasured plan's latency came from and how far such estimates have been off.
    held_back : HeldBackSplit, optional
        Which samples calibrated and which measured accuracy; None in an older plan.json.
    batch_axes : BatchAxes, optional
        The batch axis of every input and output, and how each was found; None in an older plan.json.
    fingerprint : ModelFingerprint, optional
        The model's fingerprint (exporting for another model is refused); None in an older plan.json.
    regions : RegionSearch, optional
        The region search (:mod:`.regions`); None when the plan was made without one.
    engine_check : EngineCheck, optional
        The held-back samples and FP32's outputs on them (:mod:`.engine_check`), written beside
        plan.json (``held_back.npz``), not into it.
    extra : mapping
        Keys of a plan.json this version does not know, written back as they were.
    """

    model: str
    target: PlanTarget
    candidates: Tuple[Candidate, ...]
    recommended: Optional[int]
    reason: str
    ranges: PlanRanges
    options: QdqOptions = field(default_factory=QdqOptions)
    input_shapes: Mapping[str, Tuple[int, ...]] = field(default_factory=dict)
    seconds: Mapping[str, float] = field(default_factory=dict)
    notes: Tuple[str, ...] = ()
    interrupted: bool = False
    measured: Optional[PlanMeasurement] = None
    estimate: Optional[EstimateStanding] = None
    held_back: Optional[HeldBackSplit] = None
    batch_axes: Optional[BatchAxes] = None
    fingerprint: Optional[ModelFingerprint] = None
    regions: Optional[Any] = None
    engine_check: Optional[Any] = field(default=None, compare=False, repr=False)
    extra: Mapping[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "candidates", tuple(self.candidates))
        object.__setattr__(self, "notes", tuple(self.notes))
        object.__setattr__(self, "input_shapes", readonly_mapping({k: tuple(int(d) for d in v)
                                                                   for k, v in self.input_shapes.items()}))
        object.__setattr__(self, "seconds", readonly_mapping({k: float(v) for k, v in self.seconds.items()}))
        object.__setattr__(self, "extra", deep_freeze(dict(self.extra)))

    # -- what the plan says --------------------------------------------------------------------

    @property
    def pick(self) -> Optional[Candidate]:
        """The recommended candidate; None when no candidate meets the target (FP16 included)."""
        return None if self.recommended is None else self.candidates[self.recommended]

    @property
    def fp16_is_best(self) -> bool:
        """True when the plan recommends a float engine (no INT8 at all)."""
        return self.pick is not None and not self.pick.quantized

    @property
    def any_meets_target(self) -> bool:
        return any(c.meets_target for c in self.candidates)

    @property
    def latency_status(self) -> str:
        """``"measured"``, ``"partial"`` (interrupted, or no FP16 time), ``"estimate"``, or ``""`` (neither said)."""
        if self.measured is not None:
            return self.measured.status
        return self.estimate.status if self.estimate is not None else ""

    @property
    def high_precision(self) -> str:
        """The float part's type in the written Q/DQ model."""
        return self.options.resolved_high_precision()

    @property
    def trt_version(self) -> str:
        """The TensorRT the candidates were exported for ("" when the installed one decided)."""
        return str(self.options.trt_version or "")

    def table(self) -> str:
        """The candidates as a plain-text table (what the CLI prints; :func:`~.plan_table.plan_table`)."""
        from .plan_table import plan_table

        return plan_table(self)

    def __repr__(self) -> str:
        from .plan_table import short_rows

        implicit = self.measured is not None and self.measured.implicit_is_pick
        pick = "none (no candidate meets the target)" if self.pick is None else \
            f"{self.recommended} ({self.pick.name[:60]})"
        head = (f"Plan of {Path(self.model).name or 'a model'}: {len(self.candidates)} candidates, pick {pick}"
                + (" (its export; the measured pick is implicit INT8)" if implicit else "")
                + f", target {self.target.describe()}, latency {self.latency_status or 'not stated'}"
                + (", interrupted" if self.interrupted else ""))
        reason = self.reason if len(self.reason) <= 300 else self.reason[:297] + "..."
        return "\n".join([head, *short_rows(self, _REPR_ROWS), f"reason: {reason}",
                          "(plan.table(), plan.notes, plan.measured for the rest)"])

    # -- the file ------------------------------------------------------------------------------

    def to_dict(self) -> dict:
        """plan.json's data."""
        standing = self.measured or self.estimate
        out = {"version": FORMAT_VERSION, "model": self.model, "target": self.target.to_dict(),
               "recommended": self.recommended, "reason": self.reason,
               "candidates": [c.to_dict() for c in self.candidates], "ranges": self.ranges.to_dict(),
               "high_precision": self.high_precision, "trt_version": self.trt_version,
               "input_shapes": {k: list(v) for k, v in self.input_shapes.items()},
               "seconds": {k: round(v, 3) for k, v in self.seconds.items()}, "notes": list(self.notes),
               "interrupted": self.interrupted, "placement": {"dense_int8": bool(self.options.dense_int8)},
               "options": self.options.to_dict(), "measured": standing.to_dict() if standing is not None else {},
               "held_back": self.held_back.to_dict() if self.held_back is not None else {},
               "batch_axes": self.batch_axes.to_dict() if self.batch_axes is not None else {},
               "fingerprint": self.fingerprint.to_dict() if self.fingerprint is not None else {},
               **({"regions": self.regions.to_dict()} if self.regions is not None else {})}
        out.update({k: thaw(v) for k, v in self.extra.items() if k not in out})
        return out

    @classmethod
    def from_dict(cls, doc: Any, source: str = "the plan") -> "Plan":
        """The Plan a plan.json's data describes, every field checked (:mod:`.plan_file`).

        Raises
        ------
        PlanFileError
            Naming the first field that is missing or of the wrong type (``source`` says where it came from).
        """
        from .plan_file import plan_fields

        return cls(**plan_fields(doc, source))

    @classmethod
    def load(cls, path: Union[str, os.PathLike]) -> "Plan":
        """Read a plan folder's ``plan.json`` (or a plan.json itself).

        Raises
        ------
        UserError
            The file is missing, not JSON, over the size limits, or not a plan (naming the field).
        """
        from .plan_file import read_plan_file

        doc, source = read_plan_file(path)
        return cls.from_dict(doc, source)

    def save_json(self, path: Union[str, os.PathLike]) -> Path:
        """Write ``plan.json`` atomically, and beside it the held-back check (``held_back.npz``) when the plan has one.

        ``trtwidgets plan measure`` judges the engines it builds by that file (:mod:`.engine_check`).
        """
        out = write_text_atomic(Path(path), json.dumps(self.to_dict(), indent=1))
        if self.engine_check is not None:
            self.engine_check.save(Path(path).with_name(self.engine_check.file_name))
        return out

    def save(self, folder: Union[str, os.PathLike]) -> Path:
        """Write ``plan.json`` (and ``held_back.npz``) into ``folder`` (made if missing); the plan.json's path."""
        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        return self.save_json(folder / PLAN_FILE)
