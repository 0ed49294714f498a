"""Reading a plan.json into a Plan: every field checked as it is turned into its typed value.

A plan.json is a file a user may edit by hand (to pick another candidate, to change a range). Each
field is checked here as it becomes the Plan's value, so that a wrong type is a message naming the
field (``recommended is "2", not a whole number``) rather than a TypeError deep in the export, and
an amax that cannot be a scale is refused before anything is written
(:mod:`~trtwidgets.core.calibration.amax_values`, checked at export time, where the float part's
type is known). Keys the planner does not write are kept as they are (a newer plan.json's).
"""

from __future__ import annotations

import dataclasses
import json
import numbers
import os
from pathlib import Path
from typing import Any, Callable, Dict, Mapping, Optional, Tuple, Union

from ..common.errors import UserError
from ..common.json_limits import PLAN_LIMITS, read_json_file
from .measured.measurement import Measurement
from .measured.pick import MeasuredPick
from .measured.standing import CheckSummary, EstimateStanding, PlanMeasurement
from .plan_values import Candidate, EngineVerdict, PlanAccuracy, PlanRanges, PlanTarget

__all__ = ["PlanFileError", "plan_fields", "read_plan_file"]

#: The keys the planner writes (others are kept in ``Plan.extra``).
_KNOWN = ("version", "model", "target", "recommended", "reason", "candidates", "ranges", "high_precision",
          "trt_version", "input_shapes", "seconds", "notes", "interrupted", "placement", "options", "measured",
          "held_back", "batch_axes", "fingerprint", "regions")


class PlanFileError(UserError):
    """A plan.json (or its data) is not what the planner writes."""


def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _is_whole(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _optional_number(v) -> bool:
    return v is None or _is_number(v)


def _json_float(v) -> bool:
    """A float as plan.json's measurements write it: a number, null, or "nan" / "inf" / "-inf"."""
    return _optional_number(v) or v in ("nan", "inf", "-inf")


def _text(v) -> bool:
    return isinstance(v, str)


def _optional_text(v) -> bool:
    return v is None or isinstance(v, str)


def _text_list(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


def _flag(v) -> bool:
    return isinstance(v, bool)


def _object(v) -> bool:
    return v is None or isinstance(v, Mapping)


class _Checker:
    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, field: str, value: Any, should: str) -> PlanFileError:
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        return PlanFileError(f"{self.source}: {field} is {shown}, not {should}.",
                             "A plan.json is read back as the planner wrote it; this field is part of the plan, and "
                             "nothing was written.",
                             f"Restore {field} as the planner wrote it (or run the planner again); to export another "
                             "candidate, pass candidate=N (the index in the plan's table) instead of editing the file.")

    def need(self, ok: bool, field: str, value: Any, should: str) -> None:
        if not ok:
            raise self.fail(field, value, should)

    def optional(self, doc: Mapping, key: str, ok: Callable[[Any], bool], should: str, prefix: str = "") -> None:
        if key in doc:
            self.need(ok(doc[key]), f"{prefix}{key}", doc[key], should)

    def value(self, doc: Mapping, key: str, ok: Callable[[Any], bool], should: str, default: Any,
              prefix: str = "") -> Any:
        """``doc[key]`` checked, or ``default`` when absent (or null where null is not accepted)."""
        self.optional(doc, key, lambda v: v is None or ok(v), should, prefix)
        v = doc.get(key)
        return default if v is None else v

    def made(self, field: str, make: Callable[[], Any]) -> Any:
        """``make()``, its UserError (a value the type refuses) named as this field's."""
        try:
            return make()
        except PlanFileError:
            raise
        except UserError as err:
            raise PlanFileError(f"{self.source}: {field}: {err.what}", err.why,
                                f"Restore {field} as the planner wrote it (or run the planner again).") from None


# -- the candidates ---------------------------------------------------------------------------------

def _accuracy(c: _Checker, acc: Any, at: str) -> PlanAccuracy:
    c.need(isinstance(acc, Mapping), at, acc, "an object")
    for key in ("cosine", "snr_db", "metric", "metric_reference", "pooled_cosine"):
        c.optional(acc, key, _optional_number, "a number or null", f"{at}.")
    c.optional(acc, "worst_group", _optional_text, "text", f"{at}.")
    # A count of NaN/Inf values where FP32 is finite (an engine's verdict wrote true before it was counted).
    c.optional(acc, "non_finite", lambda v: isinstance(v, bool) or (_is_whole(v) and v >= 0),
               "a count of values (0 or more)", f"{at}.")
    return PlanAccuracy.from_dict(acc)


def _candidate(c: _Checker, i: int, cand: Any) -> Candidate:
    at = f"candidates[{i}]"
    c.need(isinstance(cand, Mapping), at, cand, "an object")
    c.need(isinstance(cand.get("name"), str), f"{at}.name", cand.get("name"), "text")
    c.need(_text_list(cand.get("quantized")), f"{at}.quantized", cand.get("quantized"), "a list of layer names")
    kept = cand.get("kept", [])
    c.need(isinstance(kept, list) and all(isinstance(k, Mapping) and isinstance(k.get("layer"), str)
                                          and isinstance(k.get("reason", ""), str) for k in kept),
           f"{at}.kept", kept, "a list of {\"layer\": name, \"reason\": text}")
    acc = _accuracy(c, cand.get("accuracy", {}), f"{at}.accuracy")
    us = {k: c.value(cand, k, _is_number, "a number or null", float("nan"), f"{at}.")
          for k in ("latency_us", "fp16_latency_us")}
    c.optional(cand, "speedup_vs_fp16", _optional_number, "a number or null", f"{at}.")
    if "latency_us" not in cand and _is_number(cand.get("speedup_vs_fp16")) and cand["speedup_vs_fp16"] > 0:
        us = {"latency_us": 1.0 / cand["speedup_vs_fp16"], "fp16_latency_us": 1.0}  # a hand-written plan's ratio
    source = c.value(cand, "latency_source", _text, "text", "estimate", f"{at}.")
    meets = c.value(cand, "meets_target", _flag, "true or false", False, f"{at}.")
    choices = c.value(cand, "choices", lambda v: isinstance(v, Mapping), "an object of node label -> placement "
                      "choice", {}, f"{at}.")
    # A plan.json older than the rewritten-graph candidate has no such key: every candidate is of the graph as given.
    rewritten = c.value(cand, "rewritten", _flag, "true or false", False, f"{at}.")
    c.need(not (rewritten and cand["quantized"]), f"{at}.rewritten", rewritten,
           "false for a candidate that quantizes layers (only a float candidate is the rewritten graph's FP16)")
    from ..qdq.region_choices import check_choices

    return Candidate(cand["name"], tuple(cand["quantized"]), tuple((k["layer"], k.get("reason", "")) for k in kept),
                     acc, float(us["latency_us"]), float(us["fp16_latency_us"]), source, meets,
                     tuple(c.made(f"{at}.choices", lambda: check_choices(choices)).items()), rewritten=rewritten)


# -- the target, the ranges, the options ----------------------------------------------------------

def _target(c: _Checker, t: Any) -> PlanTarget:
    c.need(isinstance(t, Mapping), "target", t, "an object with cosine, snr_db or metric")
    cosine = c.value(t, "cosine", _is_number, "a number or null", None, "target.")
    snr = c.value(t, "snr_db", _is_number, "a number or null", None, "target.")
    name = c.value(t, "metric", _text, "text or null", "", "target.")
    drop = c.value(t, "max_metric_drop", _is_number, "a number or null", None, "target.")
    spec = c.value(t, "metric_spec", _text, "text", "", "target.")
    return c.made("target", lambda: PlanTarget(cosine=cosine, snr_db=snr, metric_name=name, metric_spec=spec,
                                               max_metric_drop=None if drop is None else float(drop)))


def _ranges(c: _Checker, ranges: Any, any_int8: bool = True) -> PlanRanges:
    c.need(isinstance(ranges, Mapping), "ranges", ranges, "an object")
    amax = ranges.get("amax")
    # A plan cancelled before its statistics holds FP16 alone, which needs no range.
    c.need(isinstance(amax, Mapping) and (len(amax) > 0 or not any_int8), "ranges.amax", amax,
           "an object of tensor name -> amax (the ranges every candidate was scored with)")
    for name, value in amax.items():
        # The value itself (NaN, Inf, too large for the float part) is judged at export, where the type is known.
        c.need(_is_number(value), f"ranges.amax[{name!r}]", value, "a number")
    overrides = c.value(ranges, "overrides", lambda v: isinstance(v, Mapping) and all(map(_is_number, v.values())),
                        "an object of tensor name -> amax", {}, "ranges.")
    per_method = c.value(ranges, "per_method", lambda v: isinstance(v, Mapping), "an object", {}, "ranges.")
    used = c.value(ranges, "methods_used", lambda v: isinstance(v, Mapping) and all(map(_is_whole, v.values())),
                   "an object of method -> count", {}, "ranges.")
    zero = c.value(ranges, "zero", lambda v: isinstance(v, list) and all(map(_text, v)), "a list of tensor names",
                   [], "ranges.")
    return PlanRanges(amax={k: float(v) for k, v in amax.items()}, zero=tuple(zero),
                      method=c.value(ranges, "method", _text, "text", "", "ranges."),
                      percentile=c.value(ranges, "percentile", _is_number, "a number", None, "ranges."),
                      overrides={k: float(v) for k, v in overrides.items()},
                      per_method={m: _accuracy(c, a, f"ranges.per_method[{m!r}]") for m, a in per_method.items()},
                      methods_used=dict(used), statistics=c.value(ranges, "statistics", _text, "text", "", "ranges."))


#: Option -> (accepts, what it must be): the types :meth:`QdqOptions.to_dict` writes.
_OPTION_TYPES = {
    "method": (_text, "text"),
    "percentile": (_is_number, "a number"),
    "precision": (_text, "text"),
    "dense_int8": (_flag, "true or false"),
    "high_precision": (_text, "text"),
    "trt_version": (_optional_text, "text or null"),
    "exclude": (_text_list, "a list of text"),
    "exclude_op_types": (_text_list, "a list of text"),
    "keep_fp32": (_text_list, "a list of text"),
    "weights_per_channel": (lambda v: v is None or isinstance(v, bool), "true, false or null"),
    "skip_matrix_vector": (_flag, "true or false"),
    "keep_float_output_grouped_convs": (_flag, "true or false"),
    "opset": (lambda v: v is None or _is_whole(v), "a whole number or null"),
}
#: Options older plan.json files hold that the export no longer takes (the Calibration holds them now).
_RETIRED_OPTIONS = ("method", "percentile")


def _options(c: _Checker, doc: Mapping):
    """The options the candidates were scored with (a plan.json older than ``options``: its own fields)."""
    from ..qdq.options import QdqOptions

    recorded = doc.get("options")
    if recorded:
        c.need(isinstance(recorded, Mapping), "options", recorded, "an object of Q/DQ options")
        for key, (ok, should) in _OPTION_TYPES.items():
            c.optional(recorded, key, ok, should, "options.")
        known = {f.name for f in dataclasses.fields(QdqOptions)}
        kept = {k: v for k, v in recorded.items() if k in known or k not in _RETIRED_OPTIONS}
        return c.made("options", lambda: QdqOptions.from_dict(kept))
    placement = doc.get("placement") or {}
    c.need(isinstance(placement, Mapping) and isinstance(placement.get("dense_int8", False), bool), "placement",
           placement, "{\"dense_int8\": true} or false (the placement the plan was scored with)")
    # Before options were recorded, a plan without placement was scored with rules 1-7.
    return c.made("high_precision", lambda: QdqOptions(
        high_precision=doc.get("high_precision") or "fp32", trt_version=doc.get("trt_version") or None,
        dense_int8=bool(placement.get("dense_int8", False)), skip_matrix_vector=False))


# -- the latency's standing -----------------------------------------------------------------------

def _verdict(c: _Checker, v: Any, at: str) -> Optional[EngineVerdict]:
    if v is None:
        return None
    c.need(isinstance(v, Mapping), at, v, "an object")
    c.optional(v, "meets", lambda x: x is None or isinstance(x, bool), "true, false or null", f"{at}.")
    c.optional(v, "samples", lambda x: x is None or _is_whole(x), "a whole number", f"{at}.")
    c.optional(v, "error", _optional_text, "text", f"{at}.")
    _accuracy(c, v, at)
    return EngineVerdict.from_dict(v)


def _measurement(c: _Checker, i: int, m: Any) -> Measurement:
    at = f"measured.measurements[{i}]"
    c.need(isinstance(m, Mapping), at, m, "an object")
    for key in ("name", "kind"):
        c.need(isinstance(m.get(key), str), f"{at}.{key}", m.get(key), "text")
    c.optional(m, "round_ms", lambda v: isinstance(v, list) and all(map(_json_float, v)), "a list of times", f"{at}.")
    c.optional(m, "estimate_ms", _json_float, "a number", f"{at}.")
    c.optional(m, "int8_layers", _text_list, "a list of layer names", f"{at}.")
    c.optional(m, "build_seconds", _is_number, "a number", f"{at}.")
    for key in ("key", "error"):
        c.optional(m, key, _text, "text", f"{at}.")
    c.optional(m, "cached", _flag, "true or false", f"{at}.")
    _verdict(c, m.get("accuracy"), f"{at}.accuracy")
    return Measurement.from_dict(m)


def _pick(c: _Checker, p: Any, at: str) -> MeasuredPick:
    c.need(isinstance(p, Mapping) and isinstance(p.get("name"), str), at, p, "an object naming the pick")
    for key in ("median_ms", "fp16_ms", "noise_ms"):
        c.optional(p, key, _json_float, "a number", f"{at}.")
    c.optional(p, "candidate", lambda v: v is None or _is_whole(v), "a candidate's index or null", f"{at}.")
    c.optional(p, "reason", _text, "text", f"{at}.")
    c.optional(p, "notes", _text_list, "a list of text", f"{at}.")
    c.optional(p, "paired", lambda v: isinstance(v, Mapping) and _is_whole(v.get("won")) and _is_whole(v.get("lost"))
               and _json_float(v.get("p")), "the paired rounds: whole numbers won and lost, and p", f"{at}.")
    return MeasuredPick.from_dict(p)


def _measured(c: _Checker, m: Any) -> Tuple[Optional[PlanMeasurement], Optional[EstimateStanding]]:
    if not m:
        return None, None
    c.need(isinstance(m, Mapping), "measured", m, "an object")
    status = m.get("status")
    c.need(status in ("estimate", "measured", "partial"), "measured.status", status,
           "'estimate', 'measured' or 'partial'")
    if status == "estimate":
        c.optional(m, "zoo", lambda v: isinstance(v, list) and all(isinstance(e, Mapping) for e in v),
                   "a list of objects", "measured.")
        return None, EstimateStanding(c.value(m, "latency_source", _text, "text", "estimate", "measured."),
                                      tuple(m.get("zoo") or ()), c.value(m, "text", _text, "text", "", "measured."))
    ms = m.get("measurements")
    c.need(isinstance(ms, list), "measured.measurements", ms, "a list of measurements")
    pick = m.get("pick")
    export = None
    implicit_cache = None
    if pick is not None:
        if isinstance(pick, Mapping) and pick.get("kind") == "int8_implicit":
            export = _pick(c, pick.get("export"), "measured.pick.export")
            implicit_cache = c.value(pick, "calibration_cache", _text, "text", None, "measured.pick.")
        pick = _pick(c, pick, "measured.pick")
    check = c.value(m, "engine_check", lambda v: isinstance(v, Mapping) and _is_whole(v.get("samples", 0))
                    and _text_list(v.get("notes", [])), "an object of samples, judged and notes", None, "measured.")
    shapes = c.value(m, "shapes", _shape_map, "an object of input name -> shape", {}, "measured.")
    return PlanMeasurement(
        tuple(_measurement(c, i, x) for i, x in enumerate(ms)),
        rounds=c.value(m, "rounds", _is_whole, "a whole number", 0, "measured."),
        interrupted=c.value(m, "interrupted", _flag, "true or false", False, "measured."),
        built=c.value(m, "built", _is_whole, "a whole number", 0, "measured."),
        cached=c.value(m, "cached", _is_whole, "a whole number", 0, "measured."),
        shapes=shapes, settings=c.value(m, "settings", lambda v: isinstance(v, Mapping), "an object", {}, "measured."),
        pick=pick, export=export, implicit_cache=implicit_cache,
        estimate_pick=c.value(m, "estimate_pick", _is_whole, "a whole number or null", None, "measured."),
        estimate_reason=c.value(m, "estimate_reason", _text, "text", "", "measured."),
        check=None if check is None else CheckSummary(int(check.get("samples", 0)), bool(check.get("judged")),
                                                      tuple(check.get("notes", ())))), None


def _shape_map(v) -> bool:
    return isinstance(v, Mapping) and all(isinstance(s, list) and all(map(_is_whole, s)) for s in v.values())


# -- the data's record ---------------------------------------------------------------------------

def _held_back(c: _Checker, d: Any):
    """Which samples calibrated and which measured accuracy (None in a plan.json older than the record)."""
    from ..calibration.held_back import HeldBackSplit

    if not d:
        return None
    c.need(isinstance(d, Mapping), "held_back", d, "an object")
    for key in ("calibration", "held_back"):
        c.optional(d, key, _text_list, "a list of sample names", "held_back.")
    return HeldBackSplit(tuple(d.get("calibration") or ()), tuple(d.get("held_back") or ()),
                         source=c.value(d, "source", _text, "text", "random split", "held_back."),
                         seed=c.value(d, "seed", _is_whole, "a whole number or null", None, "held_back."),
                         fraction=c.value(d, "fraction", _is_number, "a number or null", None, "held_back."))


def _axis_map(v) -> bool:
    return isinstance(v, Mapping) and all(a is None or _is_whole(a) for a in v.values())


def _batch_axes(c: _Checker, d: Any):
    """The batch axis of every input and output (None in a plan.json older than the record)."""
    from ..model.batch_axis import BatchAxes

    if not d:
        return None
    c.need(isinstance(d, Mapping), "batch_axes", d, "an object")
    axes = {k: dict(c.value(d, k, _axis_map, "an object of tensor name -> axis or null", {}, "batch_axes."))
            for k in ("inputs", "outputs")}
    reasons = c.value(d, "reasons", lambda v: isinstance(v, Mapping) and all(map(_text, v.values())),
                      "an object of tensor name -> text", {}, "batch_axes.")
    fixed = c.value(d, "fixed_batch", lambda v: isinstance(v, Mapping) and all(map(_is_whole, v.values())),
                    "an object of input name -> size", {}, "batch_axes.")
    return BatchAxes(axes["inputs"], axes["outputs"], dict(reasons), dict(fixed))


# -- the whole plan -------------------------------------------------------------------------------

def plan_fields(doc: Any, source: str = "the plan") -> Dict[str, Any]:
    """The :class:`~.plan_artifact.Plan`'s fields a plan.json's data holds, each checked and typed.

    Parameters
    ----------
    doc : any
        A plan.json's data (``json.load``) or ``Plan.to_dict()``.
    source : str
        Where it came from (the file), for the message.

    Raises
    ------
    PlanFileError
        Naming the first field that is missing or of the wrong type.
    """
    from ..calibration.fingerprint import ModelFingerprint

    c = _Checker(source)
    c.need(isinstance(doc, Mapping), "the plan", type(doc).__name__, "an object")
    for key in ("candidates", "recommended"):
        if key not in doc:
            raise PlanFileError(f"{source} is not a plan.json.", f"It has no {key!r}.",
                                "Give the plan.json the planner wrote (trtwidgets plan ... --out DIR).")
    cands = doc["candidates"]
    c.need(isinstance(cands, list) and len(cands) > 0, "candidates", cands, "a non-empty list of candidates")
    candidates = tuple(_candidate(c, i, cand) for i, cand in enumerate(cands))
    rec = doc["recommended"]  # null: no candidate meets the target, FP16 included
    c.need(rec is None or _is_whole(rec), "recommended", rec, "a whole number (an index in candidates) or null")
    c.need(rec is None or 0 <= rec < len(cands), "recommended", rec, f"an index from 0 to {len(cands) - 1}")
    ranges = _ranges(c, doc.get("ranges"), any(cand.quantized for cand in candidates))
    c.optional(doc, "version", _is_whole, "a whole number")
    c.optional(doc, "high_precision", lambda v: v in ("fp32", "fp16", "bf16"), "'fp32', 'fp16' or 'bf16'")
    c.optional(doc, "trt_version", _optional_text, "text")
    for key in ("placement", "fingerprint"):
        c.optional(doc, key, _object, "an object")
    measured, estimate = _measured(c, doc.get("measured"))
    fingerprint = doc.get("fingerprint")
    return {
        "model": c.value(doc, "model", _text, "text", ""), "target": _target(c, doc.get("target")),
        "candidates": candidates, "recommended": None if rec is None else int(rec),
        "reason": c.value(doc, "reason", _text, "text", ""),
        "ranges": ranges, "options": _options(c, doc),
        "input_shapes": c.value(doc, "input_shapes", _shape_map, "an object of input name -> shape", {}),
        "seconds": c.value(doc, "seconds", lambda v: isinstance(v, Mapping) and all(map(_is_number, v.values())),
                           "an object of phase -> seconds", {}),
        "notes": tuple(c.value(doc, "notes", _text_list, "a list of text", [])),
        "interrupted": c.value(doc, "interrupted", _flag, "true or false", False),
        "measured": measured, "estimate": estimate,
        "held_back": _held_back(c, doc.get("held_back")), "batch_axes": _batch_axes(c, doc.get("batch_axes")),
        "fingerprint": ModelFingerprint.from_dict(fingerprint, source) if fingerprint else None,
        "regions": _regions(doc.get("regions"), source, len(candidates)),
        "extra": {k: v for k, v in doc.items() if k not in _KNOWN}}


def _regions(doc: Any, source: str, candidates: int):
    """The region search (None in a plan.json without one), checked field by field (:mod:`.regions.records`)."""
    from .regions.records import RegionRecordError, read_regions

    try:
        return read_regions(doc, source, candidates)
    except RegionRecordError as err:
        raise PlanFileError(err.what, err.why, err.fix) from None


def read_plan_file(path: Union[str, os.PathLike]) -> Tuple[Any, str]:
    """``(data, where)`` of a plan folder's plan.json (or a plan.json), read within :data:`PLAN_LIMITS`.

    Raises
    ------
    UserError
        The file is missing, not JSON or not readable.
    """
    p = Path(path)
    if p.is_dir():
        p = p / "plan.json"
    try:
        return read_json_file(p, PLAN_LIMITS), str(p)
    except FileNotFoundError:
        raise UserError(f"No plan at {p}.", "plan.json is written by `trtwidgets plan ... --out DIR`.",
                        "Run the planner first, or give the folder it wrote.") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{p} is not a plan.json.", f"It is not JSON: {exc}.",
                        "Give the plan.json the planner wrote.") from None
    except (OSError, RecursionError) as exc:
        raise UserError(f"{p} could not be read as a plan.json.", f"{type(exc).__name__}: {exc}",
                        "Give the plan.json the planner wrote.") from None
