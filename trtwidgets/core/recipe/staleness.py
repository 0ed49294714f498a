"""Which results of a session are out of date, and why.

A result (activation statistics, ranges, a build, a plan) is made from some inputs: the
model, some fields of the recipe and, for a plan, what is not in the recipe (the
calibration it planned with, the held-back data). Its *fingerprint* is those inputs, as plain
JSON values, recorded when the result is made. Comparing it with the fingerprint
of the current model and recipe says whether the result is stale and names the
changed inputs. Changing a flag back makes the build current again, which a
"something changed" bit could not do.

Pure: no widgets, no TensorRT.
"""

from __future__ import annotations

import json
from typing import Any, Dict, Mapping, Optional

#: Result kinds and the recipe fields each depends on (besides the model itself).
STATS_FIELDS = ("calibration_data", "calibration_shapes")
RANGES_FIELDS = STATS_FIELDS + ("percentile",)
BUILD_FIELDS = ("flags", "precision_constraints", "layer_precisions", "calibrator", "calibration_data", "profiles",
                "calibration_profile", "builder_optimization_level", "workspace_mib")
#: A plan's recipe fields: its data, and the TensorRT version its Q/DQ options are for. The calibration
#: and the held-back data are given as ``inputs`` (see :func:`calibration_inputs`).
PLAN_FIELDS = STATS_FIELDS + ("trt_version",)
FIELDS = {"stats": STATS_FIELDS, "ranges": RANGES_FIELDS, "build": BUILD_FIELDS, "plan": PLAN_FIELDS}

#: Calibrator entries that say where things are, not what they are: a saved build made
#: elsewhere has other paths but is the same build.
_LOCATION_KEYS = ("cache_path",)

_LABELS = {"model": "the model", "calibration_data": "the calibration data",
           "calibration_shapes": "the calibration (opt) shapes", "percentile": "the percentile",
           "flags": "the precision flags", "precision_constraints": "the precision constraints",
           "layer_precisions": "the layer precisions", "calibrator": "the calibrator", "profiles": "the profiles",
           "calibration_profile": "the calibration profile", "builder_optimization_level": "the optimization level",
           "workspace_mib": "the workspace limit", "trt_version": "the target TensorRT version",
           "calibration": "the calibration", "held_back": "the held-back data"}


def recipe_dict(recipe: Any) -> Optional[dict]:
    """A recipe (``Recipe``, a mapping from ``recipe.json``, or None) as a plain dict."""
    if recipe is None:
        return None
    if isinstance(recipe, Mapping):
        return dict(recipe)
    to_dict = getattr(recipe, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    return None


def _calibration_shapes(d: Mapping) -> Optional[dict]:
    profiles = d.get("profiles") or []
    idx = d.get("calibration_profile") or 0
    if not profiles or not 0 <= idx < len(profiles):
        return None
    out = {}
    for name, rng in (profiles[idx].get("shapes") or {}).items():
        out[name] = list(rng.get("opt", [])) if isinstance(rng, Mapping) else rng
    return out


def _value(d: Mapping, field: str):
    if field == "calibration_shapes":
        return _calibration_shapes(d)
    if field == "percentile":
        return (d.get("calibrator") or {}).get("percentile")
    if field == "calibration_data":
        data = d.get("calibration_data")
        if isinstance(data, Mapping):
            # opt_shapes is a copy of the calibration shapes, compared on its own.
            data = {k: v for k, v in data.items() if k not in ("opt_shapes",)}
        return data
    if field == "calibrator":
        cal = d.get("calibrator")
        if isinstance(cal, Mapping):
            cal = {k: v for k, v in cal.items() if k not in _LOCATION_KEYS}
        return cal
    return d.get(field)


def _canonical(value) -> Any:
    # Tuples and lists compare equal; dict order does not matter.
    return json.loads(json.dumps(value, sort_keys=True, default=str))


def fingerprint(kind: str, model_sha256: Optional[str], recipe: Any,
                inputs: Optional[Mapping[str, Any]] = None) -> dict:
    """The inputs a result of ``kind`` (``"stats"``, ``"ranges"``, ``"build"`` or ``"plan"``) is made from.

    Parameters
    ----------
    kind : str
    model_sha256 : str, optional
        Of the model the result is made from.
    recipe : Recipe, mapping or None
    inputs : mapping, optional
        Inputs that are not in the recipe, by name (plain JSON values): a plan's ``calibration``
        (:func:`calibration_inputs`) and ``held_back`` (the folder, '' for a seeded split).

    Returns
    -------
    dict
        ``{"model": sha, field: value, ...}``; without a recipe, the model (and ``inputs``) only.
    """
    if kind not in FIELDS:
        raise ValueError(f"unknown result kind {kind!r}; known: {', '.join(FIELDS)}")
    out = {"model": model_sha256 or ""}
    d = recipe_dict(recipe)
    if d is not None:
        for field in FIELDS[kind]:
            out[field] = _canonical(_value(d, field))
    for name, value in (inputs or {}).items():
        out[name] = _canonical(value)
    return out


def calibration_inputs(calibration: Any) -> Optional[dict]:
    """What of a :class:`~trtwidgets.core.calibration.calibration.Calibration` a result made with it depends on.

    The exported ranges (method, percentile, overrides) and which statistics (their samples, data and
    shapes): a plan made with one calibration is stale once another is in force. None for none.
    """
    if calibration is None:
        return None
    stats = calibration.stats
    return {"method": calibration.method, "percentile": calibration.percentile,
            "overrides": dict(calibration.overrides), "samples": int(stats.samples), "data": calibration.data,
            "input_shapes": {k: list(v) for k, v in dict(stats.input_shapes or {}).items()}}


def _short(value, limit: int = 60) -> str:
    if value is None:
        return "none"
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        text = ", ".join(value) or "none"
    elif isinstance(value, str):
        text = value[:12] if len(value) == 64 else value
    else:
        text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def changes(made_with: Mapping[str, Any], now: Mapping[str, Any]) -> Dict[str, str]:
    """Field -> ``"old -> new"`` for every input that differs (fields missing on either side are skipped).

    A recipe-less fingerprint has the model only, so a result made before any
    recipe existed becomes stale only when the model changes.
    """
    out = {}
    for field, old in made_with.items():
        if field not in now:
            continue
        new = now[field]
        if old != new:
            out[field] = _change_text(old, new)
    return out


def _change_text(old, new) -> str:
    # An object (the calibrator, the data) reads best as the keys that changed, not as two JSON dumps.
    if isinstance(old, dict) and isinstance(new, dict):
        keys = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
        return ", ".join(f"{k}: {_short(old.get(k), 30)} -> {_short(new.get(k), 30)}" for k in keys)
    return f"{_short(old)} -> {_short(new)}"


def stale_reason(made_with: Mapping[str, Any], now: Mapping[str, Any]) -> str:
    """One sentence naming what changed since a result was made, or '' when it is current."""
    diff = changes(made_with, now)
    if not diff:
        return ""
    if "model" in diff:
        return "the model changed since it was made"
    parts = [f"{_LABELS.get(f, f)} changed ({d})" for f, d in diff.items()]
    return "; ".join(parts)
