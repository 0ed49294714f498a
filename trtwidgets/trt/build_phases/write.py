"""The write phase: the engine, inspector JSON, recipe, layers, cache, metadata and log, published as one folder."""

from __future__ import annotations

import json
import platform
from pathlib import Path
from typing import Optional

from .. import version_of
from ..build_dir import publish
from .result import (CACHE_FILE, ENGINE_FILE, GRAPH_FILE, LAYERS_FILE, LOG_FILE, META_FILE, RECIPE_FILE,
                     BuildResult)
from .state import BuildState


def _get_batch_calls(cal) -> Optional[int]:
    return None if cal is None else int(cal.get_batch_calls)


def write_build_dir(state: BuildState, final: Path, recipe, recipe_json: str, inspector_json: str) -> BuildResult:
    """Write every file of the build into its staging folder and publish it as ``final`` (atomically).

    Returns
    -------
    BuildResult
        Paths inside ``final``, the log, and what the build measured.
    """
    trt = state.trt
    st = state.staging
    assert st is not None, "build.py sets the staging folder before any phase runs"
    (st / ENGINE_FILE).write_bytes(state.plan)
    (st / GRAPH_FILE).write_text(inspector_json, encoding="utf-8")
    (st / RECIPE_FILE).write_text(recipe_json + "\n", encoding="utf-8")
    (st / LAYERS_FILE).write_text(json.dumps(state.layers, indent=1) + "\n", encoding="utf-8")
    cache_name = None
    if state.cache_bytes_used is not None:
        (st / CACHE_FILE).write_bytes(state.cache_bytes_used)
        cache_name = CACHE_FILE
    elif state.calibrator is not None:
        if state.calibrator.cache_written is None and state.calibrator.cache_in:
            (st / CACHE_FILE).write_bytes(state.calibrator.cache_in)
        if (st / CACHE_FILE).is_file():
            cache_name = CACHE_FILE
    cal = state.calibrator
    meta = {
        "trt_version": str(version_of(trt)), "gpu_name": state.gpu_name,
        "compute_capability": list(state.cc) if state.cc else None, "build_seconds": round(state.build_seconds, 3),
        "engine_bytes": len(state.plan), "python": platform.python_version(),
        "phases": state.progress.timings_dict(), "lint": [f.to_dict() for f in state.lint_findings],
        "calibration": None if cal is None else {
            "kind": recipe.calibrator.kind, "batches": cal.batches_fed,
            "get_batch_calls": _get_batch_calls(cal),
            "shapes": [{k: list(v) for k, v in s.items()} for s in cal.batch_shapes],
            "skipped": list(cal.skipped), "cache": cache_name},
        "log_counts": dict(state.collector.counts),
        "dim_renames": [list(r) for r in state.dim_renames],
    }
    (st / META_FILE).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
    (st / LOG_FILE).write_text(state.collector.to_jsonl(), encoding="utf-8")
    publish(st, final)
    state.staging = None
    p = final
    return BuildResult(
        engine_path=str(p / ENGINE_FILE), inspector_json_path=str(p / GRAPH_FILE), inspector_json=inspector_json,
        recipe_path=str(p / RECIPE_FILE), log=state.collector.lines, build_seconds=state.build_seconds,
        trt_version=str(version_of(trt)), gpu_name=state.gpu_name,
        calibration_cache_path=str(p / cache_name) if cache_name else None, out_dir=str(p),
        log_path=str(p / LOG_FILE), compute_capability=state.cc, engine_bytes=len(state.plan),
        phases=tuple(state.progress.timings_dict()),
        calibration_batches=int(cal.batches_fed) if cal is not None else 0,
        calibration_get_batch_calls=_get_batch_calls(cal),
        calibration_shapes=tuple(dict(s) for s in cal.batch_shapes) if cal is not None else (),
        lint_codes=tuple(f.code for f in state.lint_findings),
    )
