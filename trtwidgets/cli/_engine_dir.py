"""Find the engine, recipe and model of a build directory (shared by bench and compare)."""

from __future__ import annotations

import os
from typing import Dict, Optional, Tuple

from ..core.common.errors import UserError
from ..core.common.json_limits import RECIPE_LIMITS, read_json_file

ENGINE_SUFFIXES = (".plan", ".engine", ".trt")


def resolve(path: str) -> Tuple[str, Optional[str]]:
    """``(engine file, model path from the build's recipe or None)`` for a build directory or an engine file.

    Raises
    ------
    UserError
        The path is missing or holds no engine.
    """
    if os.path.isfile(path):
        return path, _model_from_recipe(os.path.join(os.path.dirname(os.path.abspath(path)), "recipe.json"))
    if not os.path.isdir(path):
        raise UserError(f"{path} does not exist.", None,
                        "Pass a build directory written by `trtwidgets build` (or an engine file).")
    preferred = os.path.join(path, "engine.plan")
    if os.path.isfile(preferred):
        engine = preferred
    else:
        cands = sorted(f for f in os.listdir(path) if f.endswith(ENGINE_SUFFIXES))
        if not cands:
            raise UserError(f"{path} holds no engine.", f"Looked for engine.plan and *{', *'.join(ENGINE_SUFFIXES)}.",
                            "Pass a build directory written by `trtwidgets build` (or an engine file).")
        engine = os.path.join(path, cands[0])
    return engine, _model_from_recipe(os.path.join(path, "recipe.json"))


def _model_from_recipe(recipe_path: str) -> Optional[str]:
    if not os.path.isfile(recipe_path):
        return None
    try:
        d = read_json_file(recipe_path, RECIPE_LIMITS)
    except (OSError, ValueError, UserError):
        return None
    model = d.get("model_path") if isinstance(d, dict) else None
    if model and not os.path.isabs(model):
        cand = os.path.join(os.path.dirname(recipe_path), model)
        if os.path.exists(cand):
            return cand
    return model


def parse_shapes(items) -> Dict[str, Tuple[int, ...]]:
    """``["x:1x3x48x192", ...]`` -> ``{"x": (1, 3, 48, 192)}``.

    Raises
    ------
    UserError
        An item is not ``NAME:DxDx...`` with positive integer dimensions.
    """
    out: Dict[str, Tuple[int, ...]] = {}
    for item in items or ():
        name, sep, dims = str(item).rpartition(":")
        try:
            shape = tuple(int(d) for d in dims.lower().split("x"))
        except ValueError:
            shape = ()
        if not sep or not name or not shape or any(d <= 0 for d in shape):
            raise UserError(f"--shape {item!r} is not NAME:DIMS.", "Dimensions are positive integers joined by 'x'.",
                            "Write e.g. --shape x:1x3x48x192 (one --shape per input).")
        out[name] = shape
    return out
