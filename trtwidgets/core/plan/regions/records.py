"""What the region search found, as typed values: each pattern's schemes, their accuracy, times and the verdict.

plan.json holds them under ``regions`` (:meth:`RegionSearch.to_dict`), read back and checked by
:func:`read_regions` (:mod:`..plan_file` calls it: a wrong type is a message naming the field).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any, Dict, List, Mapping, Optional, Tuple

from ...common.errors import UserError
from ..measured.measurement import Measurement
from ..plan_values import PlanAccuracy

__all__ = ["PatternRecord", "RegionRecordError", "RegionSearch", "SchemeResult", "read_regions"]


def _pairs(mapping: Mapping[str, str]) -> Tuple[Tuple[str, str], ...]:
    return tuple(sorted((str(k), str(v)) for k, v in dict(mapping).items()))


@dataclass(frozen=True)
class SchemeResult:
    """One placement scheme of a pattern, applied to every instance of it.

    Attributes
    ----------
    scheme : str
        Its name (``"skip"``, ``"both"``, ``"shared"``, ``"float"``, ``"int8"``, ``"float:2"`` ...).
    choices : tuple of (str, str)
        Node label -> placement choice over every instance (:mod:`~trtwidgets.core.qdq.region_choices`).
    float_layers : tuple of str
        Weighted layers the scheme keeps float (a branch kept float), over every instance.
    default : bool
        The placement rules' own answer (what the export writes without choices).
    accuracy : PlanAccuracy, optional
        The whole model with the scheme on every instance (over the search's base node set), in ONNX Runtime
        on the plan's held-back samples; None when not scored.
    meets_target : bool, optional
    buildable : bool
        False when TensorRT 8.6 could not build the scheme as it is (rule 12 had to keep layers float): it
        is never timed nor chosen.
    timing : Measurement, optional
        Its sub-model (the pattern's representative instance, cut out at the plan's shapes) timed on a GPU.
    note : str
    """

    scheme: str
    choices: Tuple[Tuple[str, str], ...] = ()
    float_layers: Tuple[str, ...] = ()
    default: bool = False
    accuracy: Optional[PlanAccuracy] = None
    meets_target: Optional[bool] = None
    buildable: bool = True
    timing: Optional[Measurement] = None
    note: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "choices", _pairs(dict(self.choices)))
        object.__setattr__(self, "float_layers", tuple(self.float_layers))

    @property
    def median_ms(self) -> float:
        return self.timing.median_ms if self.timing is not None else math.nan

    @property
    def spread_ms(self) -> float:
        return self.timing.spread_ms if self.timing is not None else math.nan

    @property
    def offered(self) -> bool:
        """Whether the scheme may be chosen: buildable and, where scored, accurate enough."""
        return self.buildable and self.meets_target is not False

    def to_dict(self) -> dict:
        out: Dict[str, Any] = {"scheme": self.scheme, "choices": dict(self.choices),
                               "float_layers": list(self.float_layers), "default": self.default,
                               "buildable": self.buildable, "meets_target": self.meets_target, "note": self.note}
        if self.accuracy is not None:
            out["accuracy"] = self.accuracy.to_dict()
        if self.timing is not None:
            out["timing"] = self.timing.to_dict()
        return out


@dataclass(frozen=True)
class PatternRecord:
    """One repeated pattern of the model and what the search made of it.

    Attributes
    ----------
    name : str
        ``kind:signature`` (:class:`~trtwidgets.core.qdq.repeated_patterns.RegionPattern`).
    kind, description : str
    instances : tuple of str
        Every instance's anchor node.
    representative : str
        The instance cut out and timed.
    inputs : tuple of (str, tuple of int)
        The representative's input tensors and their shapes at the plan's batch (from an ONNX Runtime run on a
        held-back sample, scaled to the batch).
    schemes : tuple of SchemeResult
        The default first.
    chosen : str
        The scheme the measurement chose ("" before it is measured).
    reason : str
        Why, in words.
    """

    name: str
    kind: str
    description: str
    instances: Tuple[str, ...]
    representative: str
    inputs: Tuple[Tuple[str, Tuple[int, ...]], ...]
    schemes: Tuple[SchemeResult, ...]
    chosen: str = ""
    reason: str = ""

    def __post_init__(self) -> None:
        object.__setattr__(self, "instances", tuple(self.instances))
        object.__setattr__(self, "inputs", tuple((str(k), tuple(int(d) for d in v)) for k, v in self.inputs))
        object.__setattr__(self, "schemes", tuple(self.schemes))

    def scheme(self, name: str) -> Optional[SchemeResult]:
        return next((s for s in self.schemes if s.scheme == name), None)

    @property
    def default(self) -> SchemeResult:
        return next((s for s in self.schemes if s.default), self.schemes[0])

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "description": self.description,
                "instances": list(self.instances), "representative": self.representative,
                "inputs": {k: list(v) for k, v in self.inputs}, "schemes": [s.to_dict() for s in self.schemes],
                "chosen": self.chosen, "reason": self.reason}


@dataclass(frozen=True)
class RegionSearch:
    """The region search of a plan: the patterns, the base node set the schemes were applied to, the outcome.

    Attributes
    ----------
    base : int
        The candidate whose node set every scheme was applied to.
    patterns : tuple of PatternRecord
    combined : int, optional
        The candidate that combines the chosen schemes (None before measurement, or when every pattern kept
        its default).
    settings : mapping
        How the sub-models were timed (GPU, TensorRT, rounds, runs, builder level).
    notes : tuple of str
    """

    base: int
    patterns: Tuple[PatternRecord, ...]
    combined: Optional[int] = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    notes: Tuple[str, ...] = ()

    def __post_init__(self) -> None:
        from ...common.frozen import deep_freeze

        object.__setattr__(self, "patterns", tuple(self.patterns))
        object.__setattr__(self, "notes", tuple(self.notes))
        object.__setattr__(self, "settings", deep_freeze(dict(self.settings)))

    @property
    def measured(self) -> bool:
        return any(s.timing is not None for p in self.patterns for s in p.schemes)

    def to_dict(self) -> dict:
        from ...common.frozen import thaw

        return {"base": self.base, "combined": self.combined, "patterns": [p.to_dict() for p in self.patterns],
                "settings": thaw(self.settings), "notes": list(self.notes)}


# ---------------------------------------------------------------------------- reading plan.json


class RegionRecordError(UserError):
    """plan.json's ``regions`` is not what the planner writes (:mod:`..plan_file` reports it as a PlanFileError)."""


class _Read:
    def __init__(self, source: str) -> None:
        self.source = source

    def need(self, ok: bool, at: str, value: Any, should: str) -> None:
        if not ok:
            shown = repr(value)
            raise RegionRecordError(f"{self.source}: {at} is {shown if len(shown) <= 80 else shown[:77] + '...'}, "
                                f"not {should}.", "regions is the plan's region search, read back as it was written.",
                                f"Restore {at} as the planner wrote it, or remove 'regions' (the plan is then "
                                "measured without a region search).")


def _is_text_map(v: Any) -> bool:
    return isinstance(v, Mapping) and all(isinstance(k, str) and isinstance(x, str) for k, x in v.items())


def _scheme(r: _Read, d: Any, at: str) -> SchemeResult:
    from ...qdq.region_choices import CHOICES

    r.need(isinstance(d, Mapping) and isinstance(d.get("scheme"), str), at, d, "an object naming a scheme")
    choices = d.get("choices", {})
    r.need(_is_text_map(choices) and all(v in CHOICES for v in choices.values()), f"{at}.choices", choices,
           f"an object of node label -> one of {', '.join(CHOICES)}")
    layers = d.get("float_layers", [])
    r.need(isinstance(layers, list) and all(isinstance(x, str) for x in layers), f"{at}.float_layers", layers,
           "a list of layer names")
    for key in ("default", "buildable"):
        r.need(isinstance(d.get(key, True), bool), f"{at}.{key}", d.get(key), "true or false")
    r.need(d.get("meets_target") in (None, True, False), f"{at}.meets_target", d.get("meets_target"),
           "true, false or null")
    acc = d.get("accuracy")
    r.need(acc is None or isinstance(acc, Mapping), f"{at}.accuracy", acc, "an object")
    timing = d.get("timing")
    r.need(timing is None or (isinstance(timing, Mapping) and isinstance(timing.get("name"), str)
                              and isinstance(timing.get("kind"), str)), f"{at}.timing", timing, "a measurement")
    try:
        measured = Measurement.from_dict(timing) if timing is not None else None
        accuracy = PlanAccuracy.from_dict(acc) if acc is not None else None
    except (TypeError, ValueError) as exc:
        r.need(False, at, str(exc), "a scheme's accuracy and timing as the planner writes them")
        raise  # pragma: no cover - need() raised
    return SchemeResult(d["scheme"], tuple(choices.items()), tuple(layers), bool(d.get("default", False)), accuracy,
                        d.get("meets_target"), bool(d.get("buildable", True)), measured, str(d.get("note") or ""))


def _pattern(r: _Read, d: Any, at: str) -> PatternRecord:
    r.need(isinstance(d, Mapping), at, d, "an object")
    for key in ("name", "kind", "description", "representative", "chosen", "reason"):
        r.need(isinstance(d.get(key, ""), str), f"{at}.{key}", d.get(key), "text")
    inst = d.get("instances", [])
    r.need(isinstance(inst, list) and all(isinstance(x, str) for x in inst), f"{at}.instances", inst,
           "a list of node labels")
    ins = d.get("inputs", {})
    r.need(isinstance(ins, Mapping) and all(isinstance(v, list) and all(isinstance(x, int) and not isinstance(x, bool)
                                                                        for x in v) for v in ins.values()),
           f"{at}.inputs", ins, "an object of tensor -> shape")
    schemes = d.get("schemes")
    r.need(isinstance(schemes, list) and len(schemes) > 0, f"{at}.schemes", schemes, "a non-empty list of schemes")
    return PatternRecord(str(d.get("name", "")), str(d.get("kind", "")), str(d.get("description", "")), tuple(inst),
                         str(d.get("representative", "")), tuple(ins.items()),
                         tuple(_scheme(r, s, f"{at}.schemes[{i}]") for i, s in enumerate(schemes)),
                         str(d.get("chosen", "")), str(d.get("reason", "")))


def read_regions(doc: Any, source: str = "the plan", candidates: int = 0) -> Optional[RegionSearch]:
    """The :class:`RegionSearch` plan.json's ``regions`` holds (None when absent).

    Raises
    ------
    RegionRecordError
        Naming the first field that is not what the planner writes.
    """
    if not doc:
        return None
    r = _Read(source)
    r.need(isinstance(doc, Mapping), "regions", doc, "an object")
    base, combined = doc.get("base"), doc.get("combined")
    whole = (lambda v: isinstance(v, int) and not isinstance(v, bool) and 0 <= v < max(candidates, 1))
    r.need(whole(base), "regions.base", base, "a candidate's index")
    r.need(combined is None or whole(combined), "regions.combined", combined, "a candidate's index or null")
    pats = doc.get("patterns", [])
    r.need(isinstance(pats, list), "regions.patterns", pats, "a list of patterns")
    notes = doc.get("notes", [])
    r.need(isinstance(notes, list) and all(isinstance(x, str) for x in notes), "regions.notes", notes, "a list of text")
    settings = doc.get("settings", {})
    r.need(isinstance(settings, Mapping), "regions.settings", settings, "an object")
    patterns: List[PatternRecord] = [_pattern(r, p, f"regions.patterns[{i}]") for i, p in enumerate(pats)]
    return RegionSearch(int(base), tuple(patterns), combined, dict(settings), tuple(notes))
