"""Checking a plan.json as it is read: every field the export uses has the type and shape the planner writes.

A plan.json is a file a user may edit by hand (to pick another candidate, to change a range). What
the export reads from it is checked here, field by field, so that a wrong type is a message naming
the field (``recommended is "2", not a whole number``) rather than a TypeError deep in the export,
and an amax that cannot be a scale is refused before anything is written
(:mod:`~trtwidgets.core.calibration.amax_values`, checked at export time, where the float part's
type is known). Fields the export does not use are checked for type only when present, and keys
the planner does not write are left alone (a newer plan.json, ``plan measure``'s records).
"""

from __future__ import annotations

import numbers
from typing import Any, Mapping

from ..common.errors import UserError

__all__ = ["PlanFileError", "check_plan_doc"]


class PlanFileError(UserError):
    """A plan.json (or its data) is not what the planner writes."""


def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _is_whole(v) -> bool:
    return isinstance(v, numbers.Integral) and not isinstance(v, bool)


def _optional_number(v) -> bool:
    return v is None or _is_number(v)


def _text_list(v) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


class _Checker:
    def __init__(self, source: str):
        self.source = source

    def fail(self, field: str, value: Any, should: str) -> PlanFileError:
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        return PlanFileError(f"{self.source}: {field} is {shown}, not {should}.",
                             "A plan.json is read back as the planner wrote it; this field is used to export the "
                             "pick, and nothing was written.",
                             f"Restore {field} as the planner wrote it (or run the planner again); to export another "
                             "candidate, pass candidate=N (the index in the plan's table) instead of editing the file.")

    def need(self, ok: bool, field: str, value: Any, should: str) -> None:
        if not ok:
            raise self.fail(field, value, should)

    def optional(self, doc: Mapping, key: str, ok, should: str, prefix: str = "") -> None:
        if key in doc:
            self.need(ok(doc[key]), f"{prefix}{key}", doc[key], should)


def _check_candidate(c: _Checker, i: int, cand: Any) -> None:
    at = f"candidates[{i}]"
    c.need(isinstance(cand, Mapping), at, cand, "an object")
    c.need(isinstance(cand.get("name"), str), f"{at}.name", cand.get("name"), "text")
    c.need(_text_list(cand.get("quantized")), f"{at}.quantized", cand.get("quantized"), "a list of layer names")
    kept = cand.get("kept", [])
    c.need(isinstance(kept, list) and all(isinstance(k, Mapping) and isinstance(k.get("layer"), str)
                                          and isinstance(k.get("reason", ""), str) for k in kept),
           f"{at}.kept", kept, "a list of {\"layer\": name, \"reason\": text}")
    acc = cand.get("accuracy", {})
    c.need(isinstance(acc, Mapping), f"{at}.accuracy", acc, "an object")
    for key in ("cosine", "snr_db", "metric", "metric_reference"):
        c.optional(acc, key, _optional_number, "a number or null", f"{at}.accuracy.")
    for key in ("latency_us", "fp16_latency_us", "speedup_vs_fp16"):
        c.optional(cand, key, _optional_number, "a number or null", f"{at}.")
    c.optional(cand, "latency_source", lambda v: isinstance(v, str), "text", f"{at}.")
    c.optional(cand, "meets_target", lambda v: isinstance(v, bool), "true or false", f"{at}.")


def _check_ranges(c: _Checker, ranges: Any) -> None:
    c.need(isinstance(ranges, Mapping), "ranges", ranges, "an object")
    amax = ranges.get("amax")
    c.need(isinstance(amax, Mapping) and len(amax) > 0, "ranges.amax", amax,
           "an object of tensor name -> amax (the ranges every candidate was scored with)")
    for name, value in amax.items():
        # The value itself (NaN, Inf, too large for the float part) is judged at export, where the type is known.
        c.need(_is_number(value), f"ranges.amax[{name!r}]", value, "a number")
    c.optional(ranges, "method", lambda v: isinstance(v, str), "text", "ranges.")
    c.optional(ranges, "percentile", _optional_number, "a number", "ranges.")
    c.optional(ranges, "overrides", lambda v: isinstance(v, Mapping) and all(_is_number(x) for x in v.values()),
               "an object of tensor name -> amax", "ranges.")


#: Option -> (accepts, what it must be): the types :meth:`QdqOptions.to_dict` writes.
_OPTION_TYPES = {
    "method": (lambda v: isinstance(v, str), "text"),
    "percentile": (_is_number, "a number"),
    "precision": (lambda v: isinstance(v, str), "text"),
    "dense_int8": (lambda v: isinstance(v, bool), "true or false"),
    "high_precision": (lambda v: isinstance(v, str), "text"),
    "trt_version": (lambda v: v is None or isinstance(v, str), "text or null"),
    "exclude": (_text_list, "a list of text"),
    "exclude_op_types": (_text_list, "a list of text"),
    "keep_fp32": (_text_list, "a list of text"),
    "weights_per_channel": (lambda v: v is None or isinstance(v, bool), "true, false or null"),
    "skip_matrix_vector": (lambda v: isinstance(v, bool), "true or false"),
    "keep_float_output_grouped_convs": (lambda v: isinstance(v, bool), "true or false"),
    "opset": (lambda v: v is None or _is_whole(v), "a whole number or null"),
}


def _check_options(c: _Checker, options: Any) -> None:
    if not isinstance(options, Mapping):
        return  # absent or null: an older plan.json (not an object: refused with the other fields)
    for key, (ok, should) in _OPTION_TYPES.items():
        c.optional(options, key, ok, should, "options.")


def check_plan_doc(doc: Any, source: str = "the plan") -> dict:
    """``doc`` as a dict when it is a plan as the planner writes it, else a :class:`PlanFileError`.

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
    c = _Checker(source)
    c.need(isinstance(doc, Mapping), "the plan", type(doc).__name__, "an object")
    for key in ("candidates", "recommended"):
        if key not in doc:
            raise PlanFileError(f"{source} is not a plan.json.", f"It has no {key!r}.",
                                "Give the plan.json the planner wrote (trtwidgets plan ... --out DIR).")
    cands = doc["candidates"]
    c.need(isinstance(cands, list) and len(cands) > 0, "candidates", cands, "a non-empty list of candidates")
    for i, cand in enumerate(cands):
        _check_candidate(c, i, cand)
    rec = doc["recommended"]
    c.need(_is_whole(rec), "recommended", rec, "a whole number (an index in candidates)")
    c.need(0 <= rec < len(cands), "recommended", rec, f"an index from 0 to {len(cands) - 1}")
    _check_ranges(c, doc.get("ranges"))
    c.optional(doc, "version", _is_whole, "a whole number")
    for key in ("model", "reason", "trt_version"):
        c.optional(doc, key, lambda v: v is None or isinstance(v, str), "text")
    c.optional(doc, "high_precision", lambda v: v in ("fp32", "fp16", "bf16"), "'fp32', 'fp16' or 'bf16'")
    c.optional(doc, "interrupted", lambda v: isinstance(v, bool), "true or false")
    c.optional(doc, "notes", _text_list, "a list of text")
    for key in ("target", "input_shapes", "seconds", "placement", "options", "fingerprint"):
        c.optional(doc, key, lambda v: v is None or isinstance(v, Mapping), "an object")
    c.optional(doc, "seconds", lambda v: v is None or all(_is_number(x) for x in v.values()),
               "an object of phase -> seconds")
    _check_options(c, doc.get("options"))
    return dict(doc)
