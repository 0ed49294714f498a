"""Does a recipe fit a model and a TensorRT? Every problem, one message each.

A :class:`~trtwidgets.core.recipe.recipe.Recipe` checks itself on construction
(what needs no model); :func:`recipe_problems` checks it against the model
(hash, profiles, ranks, static dims, Q/DQ nodes) and against what the installed
TensorRT supports (its :class:`~trtwidgets.trt.features.TrtFeatures`, or the
recipe's ``trt_version`` without one); :func:`validate_recipe` raises them as
one :class:`RecipeError`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import List, Optional

from ..common.errors import RecipeError
from .fields import major_version
from .profiles import format_shape, profile_problems

# ``recipe`` parameters are a Recipe, unannotated: recipe.py imports this module to
# re-export its functions, so naming the class here would make a circle.

__all__ = ["recipe_problems", "validate_recipe"]

# Which layer precision needs which builder flag (fp32 needs none).
_PRECISION_FLAG = {"fp16": "fp16", "bf16": "bf16", "int8": "int8", "fp8": "fp8"}


def _version_support(version: str) -> dict:
    """What a TensorRT version supports, for recipes checked without the module at hand.

    Used only when no :class:`~trtwidgets.trt.features.TrtFeatures` is given:
    the features read from the module itself take precedence.
    """
    major = major_version(version) or 0
    parts = [int(p) for p in re.findall(r"\d+", version)[:2]] + [0, 0]
    mm = (parts[0], parts[1])
    if major >= 11:
        return {"flags": ("tf32",), "constraints": False, "layer_precision": False, "calibrators": (),
                "opt_level": True, "timing_cache": True}
    flags = ["fp16", "int8", "tf32"]
    if mm >= (8, 6):
        flags.append("fp8")
    if major >= 9:
        flags.append("bf16")
    return {"flags": tuple(flags), "constraints": True, "layer_precision": True,
            "calibrators": ("entropy2", "minmax", "entropy", "legacy"),
            "opt_level": mm >= (8, 6), "timing_cache": True}


def _feature_view(recipe, features) -> Optional[dict]:
    if features is not None:
        return {"flags": tuple(features.precision_flags), "constraints": features.precision_constraints,
                "layer_precision": features.layer_precision, "calibrators": tuple(features.calibrators),
                "opt_level": features.builder_optimization_level, "timing_cache": features.timing_cache,
                "version": features.version, "explanations": dict(features.explanations)}
    if recipe.trt_version:
        view = _version_support(recipe.trt_version)
        view.update(version=recipe.trt_version, explanations={})
        return view
    return None


def recipe_problems(recipe, summary=None, features=None) -> List[str]:
    """Every problem of ``recipe`` for a model and a TensorRT, one message each.

    Parameters
    ----------
    recipe : Recipe
    summary : ModelSummary, optional
        The model's summary; profiles and the model hash are checked against it.
    features : TrtFeatures, optional
        What the installed TensorRT supports (``trtwidgets.trt.features()``).
        Without it, ``recipe.trt_version`` (if set) decides.
    """
    problems: List[str] = []
    if summary is not None:
        if recipe.model_sha256 and summary.sha256 and recipe.model_sha256 != summary.sha256:
            problems.append(f"the model file has changed since the recipe was made (recipe: sha256 {recipe.model_sha256[:12]}..., "
                            f"model: {summary.sha256[:12]}...).")
        problems.extend(profile_problems(recipe.profiles, summary))
    data = recipe.calibration_data
    if data is not None and data.opt_shapes and recipe.profiles:
        for name, shape in data.opt_shapes.items():
            want = recipe.calibration_shapes.get(name)
            if want is not None and tuple(shape) != tuple(want):
                problems.append(f"input {name!r}: the calibration data is prepared at {format_shape(shape)}, but calibration "
                                f"profile {recipe.calibration_profile} has opt {format_shape(want)} (calibration runs at opt).")
    flags = set(recipe.flags)
    for lp in recipe.layer_precisions:
        need = _PRECISION_FLAG.get(lp.precision)
        if need and need not in flags:
            problems.append(f"layer pattern {lp.pattern!r} is pinned to {lp.precision}, but the {need} flag is off.")
    if recipe.layer_precisions and recipe.precision_constraints == "none":
        problems.append("per-layer precisions are set, but precision_constraints is 'none', so TensorRT ignores them "
                        "(set 'prefer' or 'obey').")
    cal = recipe.calibrator
    if cal.kind != "none" and "int8" not in flags:
        problems.append(f"the calibrator is {cal.kind!r}, but the int8 flag is off, so nothing is calibrated [CALIBRATOR_WITHOUT_INT8].")
    if cal.uses_trt_calibrator and recipe.calibration_data is None and not (cal.cache_path and Path(cal.cache_path).is_file()):
        problems.append(f"TensorRT's calibrator {cal.kind!r} needs calibration data (or an existing cache_path).")
    if cal.kind == "toolkit" and recipe.calibration_data is None and not (cal.cache_path and Path(cal.cache_path).is_file()):
        problems.append("the toolkit calibrator needs calibration data to compute ranges, or an existing calibration cache.")
    if "int8" in flags and cal.kind == "none" and summary is not None and summary.qdq.count == 0:
        problems.append("the int8 flag is on, but the model has no Q/DQ nodes and no calibrator is chosen, so TensorRT has no "
                        "INT8 ranges (choose a calibrator, or export a Q/DQ model) [INT8_WITHOUT_CALIBRATION].")
    major = features.major if features is not None else major_version(recipe.trt_version)
    if summary is not None and summary.qdq.count and major is not None and major <= 10:
        qtypes = set(summary.qdq.dtypes)
        if qtypes & {"int8", "uint8"} and "int8" not in flags:
            problems.append("the model has INT8 Q/DQ nodes but the int8 flag is off: TensorRT <= 10 then fails with "
                            "'Int8 precision has been set for a layer or layer output, but int8 is not configured in the "
                            "builder' (turn int8 on beside fp16) [QDQ_REQUIRES_INT8].")
        if any(t.startswith("float8") for t in qtypes) and "fp8" not in flags:
            problems.append("the model has FP8 Q/DQ nodes but the fp8 flag is off (turn fp8 on) [QDQ_REQUIRES_FP8].")
    view = _feature_view(recipe, features)
    if view is not None:
        where = f"TensorRT {view['version']}"
        expl = view["explanations"]
        for f in recipe.flags:
            if f not in view["flags"]:
                problems.append(f"{where} has no {f} flag." + (f" {expl[f]}" if f in expl else ""))
        if recipe.precision_constraints != "none" and not view["constraints"]:
            problems.append(f"{where} has no precision constraints ({recipe.precision_constraints!r})."
                            + (f" {expl['precision_constraints']}" if "precision_constraints" in expl else ""))
        if recipe.layer_precisions and not view["layer_precision"]:
            problems.append(f"{where} cannot pin layer precisions." + (f" {expl['layer_precision']}" if "layer_precision" in expl else ""))
        if cal.uses_trt_calibrator and cal.trt_name not in view["calibrators"]:
            problems.append(f"{where} has no {cal.trt_name} calibrator." + (f" {expl['calibrators']}" if "calibrators" in expl else ""))
        if cal.kind == "toolkit" and not view["calibrators"]:
            problems.append(f"{where} reads no calibration cache; export a Q/DQ model from the toolkit's ranges instead.")
        if recipe.builder_optimization_level is not None and not view["opt_level"]:
            problems.append(f"{where} has no builder optimization level (set it to null).")
        if recipe.timing_cache is not None and not view["timing_cache"]:
            problems.append(f"{where} has no timing cache (set timing_cache to null).")
    return problems


def validate_recipe(recipe, summary=None, features=None) -> None:
    """Raise :class:`RecipeError` if ``recipe`` does not fit the model or TensorRT.

    Every message names what is wrong; for profiles, the input and the
    dimension (e.g. ``profile 0: input 'x' dimension 2 (H): opt 300 is outside
    [min, max] = [32, 256]``). See :func:`recipe_problems` for the checks.
    """
    problems = recipe_problems(recipe, summary, features)
    if problems:
        first = problems[0][0].upper() + problems[0][1:]
        raise RecipeError(
            first if len(problems) == 1 else f"{first.rstrip('.')} (and {len(problems) - 1} more problem(s)).",
            "\n".join(f"- {p}" for p in problems) if len(problems) > 1 else
            "The build would fail, or TensorRT would silently ignore the setting.",
            "Change the recipe as said above; the widgets of the notebook offer only valid choices.",
        )
