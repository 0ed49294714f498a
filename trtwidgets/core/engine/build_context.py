"""What a build folder says about its engine: the recipe, calibration cache and timings saved beside it.

The inspector JSON of a trtwidgets build sits in a folder with the recipe that
made it, the calibration cache and, where measured, per-layer timings. The layer
table and why-not-INT8 read them when present; :func:`context_failure` turns a
malformed one into a clear error naming the files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, Union

from ..common.errors import InspectorError

__all__ = ["BUILD_ARTIFACTS", "CONTEXT_FAILURES", "build_context", "context_failure", "find_build_artifacts"]


#: Files a trtwidgets build folder holds beside the inspector JSON, by role.
BUILD_ARTIFACTS = {"recipe": ("recipe.json",), "calibration": ("calibration.cache",),
                   "profile": ("engine.profile.json", "profile.json", "timings.json", "layer_times.json")}


def find_build_artifacts(graph_path: Union[str, os.PathLike]) -> dict:
    """The recipe, calibration cache and profile saved beside an inspector JSON file, where present.

    Parameters
    ----------
    graph_path : path
        ``<build folder>/engine.graph.json`` (or any ``*.graph.json``).

    Returns
    -------
    dict
        Role (``"recipe"``, ``"calibration"``, ``"profile"``) -> path, for the files that exist.
    """
    folder = Path(graph_path).parent
    found = {}
    for role, names in BUILD_ARTIFACTS.items():
        for name in names:
            if (folder / name).is_file():
                found[role] = str(folder / name)
                break
    return found


def build_context(source: Any) -> dict:
    """What a build source says about how it was built: recipe, calibration cache, per-layer timings.

    Parameters
    ----------
    source : build result, saved build, path of an inspector JSON file, or anything else
        Build results and saved builds give their ``recipe`` (or ``recipe_path``),
        ``calibration_cache_path`` and ``timings_path`` attributes; a path gives the
        files found beside it (:func:`find_build_artifacts`). Other sources give nothing.

    Returns
    -------
    dict
        Keys among ``"recipe"``, ``"calibration"``, ``"profile"`` (the arguments of
        ``layer_table``), for what is known.
    """
    found: dict = {}
    path: Union[str, os.PathLike, None] = None
    if isinstance(source, os.PathLike):
        path = source
    elif isinstance(source, str) and source.strip()[:1] not in ("{", "[") and len(source) < 4096:
        path = source
    else:
        path = getattr(source, "inspector_json_path", None)
        for key, attrs in (("recipe", ("recipe", "recipe_path")), ("calibration", ("calibration_cache_path",)),
                           ("profile", ("timings", "timings_path"))):
            for attr in attrs:
                value = getattr(source, attr, None)
                if value is not None:
                    found[key] = value
                    break
    if path is not None:
        try:
            if Path(path).is_file():
                for key, value in find_build_artifacts(path).items():
                    found.setdefault(key, value)
        except OSError:
            pass
    return found


#: Exceptions a malformed file beside the engine can raise deep in the analysis (an odd recipe field, a cache
#: entry of the wrong type); turned into a :class:`~trtwidgets.core.common.errors.UserError` by :func:`context_failure`.
CONTEXT_FAILURES = (TypeError, ValueError, KeyError, AttributeError, IndexError, OSError)


def context_failure(exc: BaseException, context: Mapping[str, Any], ignore_hint: str) -> Exception:
    """A user-facing error for a failure while using a build's recipe, calibration cache or timings.

    Parameters
    ----------
    exc : exception
        A :class:`~trtwidgets.core.common.errors.UserError`, or one of :data:`CONTEXT_FAILURES`.
    context : mapping
        What :func:`build_context` found (role -> path or value); files among them are named.
    ignore_hint : str
        How the caller leaves those files out (``"--no-siblings"``, ``"use_siblings=False"``).

    Returns
    -------
    UserError
        The same class as ``exc`` when it was one, with the hint added to its fix; else an
        :class:`~trtwidgets.core.common.errors.InspectorError`.
    """
    from ..common.errors import UserError

    files = [str(v) for v in context.values() if isinstance(v, (str, os.PathLike))]
    if not files:
        if isinstance(exc, UserError):
            return exc
        return InspectorError(f"The build could not be inspected ({type(exc).__name__}: {exc}).",
                              "The recipe, calibration cache or timings given have an unexpected shape.",
                              "Give the files saved with the build, or leave them out.")
    hint = (f"Or leave the files beside the engine out ({ignore_hint}): {', '.join(files)}.")
    if isinstance(exc, UserError):
        err = type(exc).__new__(type(exc))
        UserError.__init__(err, exc.what, exc.why, f"{exc.fix} {hint}" if exc.fix else hint)
        return err
    return InspectorError(
        f"A file beside the engine could not be used ({type(exc).__name__}: {exc}).",
        f"The analysis reads {', '.join(files)} from the build folder; one of them has an unexpected shape.",
        f"Fix or remove the broken file. {hint}")
