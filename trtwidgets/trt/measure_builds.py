"""The builds of a measurement: one per distinct export, cached on disk, in parallel on several GPUs.

Each job's build key (:func:`build_key`) is everything that makes its engine: the model's
:func:`~trtwidgets.core.plan.measured.measurement.placement_key` (the graph, its types included, with the
Q/DQ scales zeroed), its :func:`~trtwidgets.core.plan.measured.measurement.qdq_values_key` (every Q/DQ
scale and zero point) and the build settings (flags, shapes, optimization level, TensorRT version, GPU);
jobs with the same key share one engine. Exports that differ only in their ranges are two builds: each
engine is judged on the held-back samples. ``<cache_dir>/<key>/`` is a build folder published atomically by
:func:`trtwidgets.trt.build.build`, so a re-plan does not rebuild.

Where there is more than one build (or a build limit), the builds are Dask tasks on one worker process per
GPU (:mod:`.dask_measure`), into the same cache; workers past the limit are restarted, so a build that
breaks its process's CUDA context breaks neither the later builds nor the timing. Progress events
(:class:`MeasureProgress`) are shared with the timing and the check of :mod:`.measure`. History of the key
format: docs/evidence.md, "measure_builds".
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..core.common.errors import UserError
from ..core.plan.measured.measurement import INT8_IMPLICIT, placement_key, qdq_values_key
from .build_job import FLAGS, MeasureProgress, build_one, engine_in, notify

__all__ = ["BUILD_KEY_FORMAT", "MeasureProgress", "build_all", "build_key", "build_one", "build_specs", "engine_in",
           "notify"]

#: What a build key covers, as a number in the key: 2 since the Q/DQ values are in it (issue 44).
BUILD_KEY_FORMAT = 2


def build_key(model_path: str, kind: str, shapes: Mapping[str, Sequence[int]], settings: Mapping[str, object]) -> str:
    """The cache key of one build: what its model computes (placement, types, Q/DQ values) and every setting.

    Parameters
    ----------
    model_path : str
        The ONNX file built.
    kind : str
        :data:`FP16`, :data:`INT8_IMPLICIT` or :data:`QDQ` (its builder flags).
    shapes : mapping
        Input name -> the shape built at.
    settings : mapping
        The rest that changes the engine (TensorRT version, GPU, optimization level, a calibration cache's hash).

    Returns
    -------
    str
        20 hex characters; :data:`BUILD_KEY_FORMAT` is part of what is hashed.
    """
    import onnx

    proto = onnx.load(model_path)
    doc = {"format": BUILD_KEY_FORMAT, "placement": placement_key(proto), "qdq_values": qdq_values_key(proto),
           "kind": kind, "flags": list(FLAGS[kind]),
           "shapes": {k: [int(d) for d in v] for k, v in sorted(shapes.items())},
           "settings": {k: settings[k] for k in sorted(settings)}}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:20]


def _settings(opt_level: Optional[int], gpu: Optional[str] = None, trt: Optional[str] = None) -> Dict[str, object]:
    from . import cuda, version

    if gpu is None:
        try:
            gpu = cuda.device_name(0)
        except Exception:
            gpu = "unknown"
    return {"trt": trt or version() or "none", "gpu": gpu, "opt_level": opt_level}


def build_specs(jobs: Sequence, cache_dir: Path, shapes, opt_level, skip: Mapping[str, str], gpu: Optional[str] = None,
                trt: Optional[str] = None):
    """``(job name -> key, key -> spec)``: one spec per distinct build of ``jobs`` (:class:`~.measure.MeasureJob`).

    ``gpu``, ``trt``: the GPU and TensorRT the engines are built with (default: this process's; with a client, the
    Dask workers').
    """
    settings = _settings(opt_level, gpu, trt)
    names: Dict[str, str] = {}
    specs: Dict[str, dict] = {}
    for job in jobs:
        if job.name in skip:
            continue
        if not os.path.isfile(job.model_path):
            raise UserError(f"The model of {job.name!r} is missing: {job.model_path}.", None,
                            "Export the candidate first, or leave it out of the jobs.")
        if job.kind == INT8_IMPLICIT and not job.calibration_cache:
            raise UserError("Implicit INT8 needs a calibration cache.", "TensorRT's calibrator reads its ranges.",
                            "Write one with `trtwidgets calibrate --cache` and give MeasureJob(calibration_cache=...).")
        extra = {"calibration_cache": hashlib.sha256(Path(job.calibration_cache).read_bytes()).hexdigest()[:16]} \
            if job.kind == INT8_IMPLICIT else {}
        key = build_key(job.model_path, job.kind, shapes, dict(settings, **extra))
        names[job.name] = key
        specs.setdefault(key, {"key": key, "name": job.name, "kind": job.kind, "model_path": job.model_path,
                               "calibration_cache": job.calibration_cache, "opt_level": opt_level,
                               "shapes": {k: list(v) for k, v in shapes.items()},
                               "out_dir": str(cache_dir / key), "timing_cache": str(cache_dir / "timing.cache")})
    return names, specs


def _visible_gpus() -> int:
    from . import cuda

    try:
        return cuda.device_count()
    except Exception:
        return 0


def _build_in_process(todo: List[dict], progress, done0: int, total: int) -> Dict[str, dict]:
    results: Dict[str, dict] = {}
    for spec in todo:
        results[spec["key"]] = build_one(spec)
        notify(progress, MeasureProgress.of("build", done0 + len(results), total, spec["name"],
                                          failed=bool(results[spec["key"]]["error"])))
    return results


def build_all(specs: Mapping[str, dict], progress, gpus: Optional[int], cache: Path,
              limit_s: Optional[float] = None, pool=None, build=None) -> Tuple[Dict[str, dict], bool]:
    """Key -> build result for every spec (cache hits first); ``(results, interrupted)``.

    ``pool`` (a :class:`~.dask_measure.GpuPool`): build on its Dask GPU workers. Without one, several builds (or a
    build limit) run on a Dask cluster of one worker per GPU started here (:func:`~.dask_measure.gpu_cluster`), so
    a build that breaks its CUDA context or outlasts the limit takes only its worker down; a single build, or a
    machine without dask, builds in this process. ``build``: the workers' build function (tests: a CPU stand-in).
    """
    results: Dict[str, dict] = {}
    todo = []
    try:
        for key, spec in specs.items():
            hit = engine_in(Path(spec["out_dir"]))
            if hit is not None:
                results[key] = {"key": key, "engine_path": str(hit), "build_seconds": 0.0, "cached": True, "error": ""}
                notify(progress, MeasureProgress.of("build", len(results), len(specs), spec["name"], cached=True))
            else:
                todo.append(spec)
        if gpus is None:
            gpus = _visible_gpus() if todo and pool is None else 0
        todo.sort(key=lambda spec: spec["kind"] == INT8_IMPLICIT)  # implicit INT8, a reference, is built last
        on_workers = pool is not None or (todo and (limit_s is not None or (gpus >= 1 and len(todo) > 1)))
        if on_workers and (pool is not None or _dask_installed()):
            results.update(_build_on_cluster(todo, pool, max(gpus, 1), progress, len(results), len(specs), limit_s,
                                             build))
        else:
            if on_workers:
                from ..core.common.notes import note

                note("builds run one after another in this process: install trtwidgets[dask] for one build worker "
                     "per GPU (a build that breaks its CUDA context or outlasts --build-limit takes only its worker "
                     "down)")
            results.update(_build_in_process(todo, progress, len(results), len(specs)))
    except KeyboardInterrupt:
        # Builds already done are published in the cache; they are kept, and a re-run picks them up.
        for key, spec in specs.items():
            hit = engine_in(Path(spec["out_dir"])) if key not in results else None
            if hit is not None:
                results[key] = {"key": key, "engine_path": str(hit), "build_seconds": 0.0, "cached": False,
                                "error": ""}
        return results, True
    return results, False


def _dask_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("distributed") is not None


def _build_on_cluster(todo: List[dict], pool, gpus: int, progress, done0: int, total: int,
                      limit_s: Optional[float], build) -> Dict[str, dict]:
    """The builds as tasks on ``pool``'s workers, or on a cluster of one worker per GPU started for them."""
    from .dask_measure import GpuPool, build_on_workers, gpu_cluster

    if pool is not None:
        return build_on_workers(pool, todo, progress, done0, total, limit_s, build)
    with gpu_cluster(gpus) as client:
        return build_on_workers(GpuPool(client), todo, progress, done0, total, limit_s, build)
