"""What a build recorded about itself, read for the app's views without TensorRT.

A build (a live ``BuildResult`` or a :class:`~trtwidgets.core.engine.saved_build.SavedBuild`)
carries its recipe, maybe the calibration cache TensorRT's own calibrator wrote, and
for saved builds the latency measured where it was built (``timings.json``). This
module answers the questions the app asks of one: was it calibrated by TensorRT
(and where is that cache, to draw TensorRT's amax beside the toolkit's), and what
latency did it record. Measuring accuracy needs the engine run by TensorRT; this
module only says so.

Pure: stdlib and the core modules; no widgets, no TensorRT.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Iterable, Optional, Tuple

from ..common.errors import UserError
from ..common.json_limits import SIDE_FILE_LIMITS, read_json_file
from .latency import BenchResult
from ..recipe.staleness import recipe_dict

__all__ = ["build_recipe_dict", "tensorrt_cache_path", "find_tensorrt_cache", "recorded_latency",
           "recorded_latencies", "PerformanceRecord", "performance_record"]


def build_recipe_dict(build: Any) -> Optional[dict]:
    """The recipe a build was made from, as a plain dict (its ``recipe``, else its ``recipe.json``); None if unknown."""
    own = recipe_dict(getattr(build, "recipe", None))
    if own is not None:
        return own
    path = getattr(build, "recipe_path", None)
    if path and os.path.isfile(path):
        try:
            doc = read_json_file(path, SIDE_FILE_LIMITS)
        except (OSError, ValueError, UserError):
            return None
        return doc if isinstance(doc, dict) else None
    return None


def tensorrt_cache_path(build: Any, model_sha256: Optional[str] = None) -> Optional[str]:
    """The calibration cache TensorRT's own calibrator wrote for this build, or None.

    A cache handed to TensorRT from the toolkit's ranges (calibrator kind
    ``toolkit``) is not TensorRT's: drawing it as "TensorRT's amax" would show the
    toolkit's own numbers twice. With ``model_sha256``, a build recorded for
    another model is skipped (its tensor names would not match).
    """
    path = getattr(build, "calibration_cache_path", None)
    if not path or not os.path.isfile(path):
        return None
    recipe = build_recipe_dict(build) or {}
    cal = recipe.get("calibrator") or {}
    kind = str(cal.get("kind") or "") if isinstance(cal, dict) else ""
    if not kind.startswith("trt_"):
        return None
    sha = recipe.get("model_sha256")
    if model_sha256 and sha and sha != model_sha256:
        return None
    return str(path)


def find_tensorrt_cache(builds: Iterable[Any], model_sha256: Optional[str] = None) -> Optional[str]:
    """The newest build's TensorRT calibration cache among ``builds`` (oldest first), or None."""
    for build in reversed(list(builds)):
        path = tensorrt_cache_path(build, model_sha256)
        if path:
            return path
    return None


def recorded_latency(build: Any) -> Optional[BenchResult]:
    """The whole-engine latency a saved build recorded (``timings.json``), or None."""
    latency = getattr(build, "latency", None)
    if not isinstance(latency, dict) or not latency:
        return None
    try:
        return BenchResult.from_dict(latency)
    except (KeyError, TypeError, ValueError):
        return None  # an older or foreign timings file: the layer times may still be there


@dataclass(frozen=True)
class PerformanceRecord:
    """What one build says about its speed and accuracy.

    Attributes
    ----------
    latency : BenchResult, optional
        Latency recorded where the engine was built.
    engine_path : str, optional
        The engine file, when it is on this machine (only then can it be run).
    note : str
        Why accuracy is not shown, or how to get it (plain text).
    """

    latency: Optional[BenchResult]
    engine_path: Optional[str]
    note: str


def performance_record(build: Any, tensorrt_available: bool) -> PerformanceRecord:
    """What can be shown of a build's latency and accuracy here, and why the rest cannot."""
    engine = getattr(build, "engine_path", None)
    engine = str(engine) if engine and os.path.isfile(str(engine)) else None
    out_dir = getattr(build, "out_dir", None) or "BUILD_DIR"
    compare = f"trtwidgets compare {out_dir} --data demo"
    if engine is None:
        note = ("Accuracy needs TensorRT to run the engine, and this build has no engine file here "
                "(saved builds keep the inspector JSON and timings, not the GPU-specific engine). "
                "Rebuild it on a GPU machine and run " + compare + ".")
    elif not tensorrt_available:
        note = ("Accuracy needs TensorRT to run the engine, and TensorRT is not installed here. "
                "On the GPU machine run " + compare + ".")
    else:
        note = (f"Measure accuracy against ONNX Runtime FP32 with {compare}, "
                f"and latency with trtwidgets bench {out_dir}.")
    return PerformanceRecord(latency=recorded_latency(build), engine_path=engine, note=note)


def recorded_latencies(builds: Iterable[Tuple[str, Any]]) -> dict:
    """``{label: BenchResult}`` for the builds that recorded a latency (for a side-by-side table)."""
    out = {}
    for label, build in builds:
        lat = recorded_latency(build)
        if lat is not None:
            out[label] = lat
    return out
