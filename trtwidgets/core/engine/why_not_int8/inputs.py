"""What why-not-INT8 reads besides the engine: the recipe, the calibration cache, the Q/DQ model.

Each comes in several forms (an object, its dict, a file path); these readers
reduce them to what the explanations need.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, FrozenSet, Iterable, Mapping, Optional, Set, Tuple


@dataclass(frozen=True)
class RecipeView:
    """The parts of a recipe why-not-INT8 reads (flags, constraints, overrides, calibrator, level)."""

    flags: Optional[FrozenSet[str]]
    constraints: str
    overrides: Tuple[Tuple[str, str, bool], ...]
    calibrator: str
    opt_level: Optional[int] = None


def _get(obj: Any, key: str, default=None):
    if isinstance(obj, Mapping):
        return obj.get(key, default)
    return getattr(obj, key, default)


def _read_recipe(path) -> dict:
    import json

    from ...common.errors import RecipeError
    from ...common.json_limits import RECIPE_LIMITS, read_json_file

    try:
        return read_json_file(os.fspath(path), RECIPE_LIMITS, RecipeError)
    except OSError as exc:
        raise RecipeError(f"Could not read the recipe {path}.", str(exc), "Check the path.") from None
    except json.JSONDecodeError as exc:
        raise RecipeError(f"The recipe {path} is not JSON ({exc.msg}, line {exc.lineno}).", None,
                          "Give the recipe.json saved with the build.") from None


def recipe_view(recipe: Any) -> Optional[RecipeView]:
    """A :class:`RecipeView` of a Recipe, its dict, a recipe.json path or a build record; None for None."""
    if recipe is None:
        return None
    if isinstance(recipe, (str, os.PathLike)):
        recipe = _read_recipe(recipe)
    if isinstance(recipe, Mapping) and "recipe" in recipe and "flags" not in recipe:
        recipe = recipe["recipe"]
    flags = _get(recipe, "flags")
    if flags is not None and (isinstance(flags, (str, bytes)) or not isinstance(flags, Iterable)):
        from ...common.errors import RecipeError

        raise RecipeError(f"The recipe's flags are {flags!r}, not a list of precision names.",
                          "why-not-INT8 reads the build's precision flags from the recipe.",
                          'Give the recipe.json saved with the build (its "flags" look like ["fp16", "int8"]).')
    overrides = []
    for item in _get(recipe, "layer_precisions", ()) or ():
        if isinstance(item, (list, tuple)):
            pattern, precision, regex = (list(item) + [False])[:3]
        else:
            pattern, precision, regex = _get(item, "pattern"), _get(item, "precision"), _get(item, "regex", False)
        if pattern and precision:
            overrides.append((str(pattern), str(precision).lower(), bool(regex)))
    calibrator = _get(recipe, "calibrator")
    kind = _get(calibrator, "kind", "none") if calibrator is not None else "none"
    level = _get(recipe, "builder_optimization_level")
    return RecipeView(frozenset(str(f).lower() for f in flags) if flags is not None else None,
                       str(_get(recipe, "precision_constraints", "none") or "none"), tuple(overrides), str(kind),
                       int(level) if isinstance(level, int) and not isinstance(level, bool) else None)


def calibration_names(calibration: Any) -> Optional[FrozenSet[str]]:
    """Tensor names that have a scale, from whatever form the calibration takes.

    Parameters
    ----------
    calibration : CalibrationCache, str, path, mapping, iterable of str or None
        A cache object (``.amax`` or ``.scales``), a cache file (read with
        ``trtwidgets.core.calibration.cache.read_cache``), a name -> value mapping or names.
    """
    if calibration is None:
        return None
    if isinstance(calibration, (str, os.PathLike)):
        from ...calibration.cache import read_cache

        calibration = read_cache(calibration)
    for attr in ("amax", "scales"):
        value = getattr(calibration, attr, None)
        if isinstance(value, Mapping):
            return frozenset(value)
    if isinstance(calibration, Mapping):
        return frozenset(calibration)
    return frozenset(str(n) for n in calibration)


def qdq_tensor_names(model: Any) -> FrozenSet[str]:
    """Names of the tensors a Q/DQ model quantizes: inputs and outputs of its Q and DQ nodes.

    Parameters
    ----------
    model : onnx.ModelProto, LoadedModel or path
    """
    import onnx

    proto = getattr(model, "proto", model)
    if isinstance(proto, (str, os.PathLike)):
        proto = onnx.load(str(proto), load_external_data=False)
    names: Set[str] = set()
    for node in proto.graph.node:
        if node.op_type in ("QuantizeLinear", "DequantizeLinear"):
            # input 0 and output 0 carry data; inputs 1-2 are scale and zero point.
            names.update(n for n in (node.input[0], node.output[0]) if n)
    return frozenset(names)
