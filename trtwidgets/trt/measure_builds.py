"""The builds of a measurement: one per distinct export, cached on disk, in parallel on several GPUs.

Each job's build key (:func:`build_key`) is everything that makes its engine: the model's
:func:`~trtwidgets.core.plan.measured.measurement.placement_key` (the graph, its types included, with the
Q/DQ scales zeroed), its :func:`~trtwidgets.core.plan.measured.measurement.qdq_values_key` (every Q/DQ
scale and zero point) and the build settings (flags, shapes, optimization level, TensorRT version, GPU);
jobs with the same key share one engine. Two exports that differ only in their ranges time alike but
compute differently, and each engine is judged on the held-back samples, so they are two builds (issue 44:
key format 2; format 1 left the scales out, and an engine cached under it is not found again, only
rebuilt once). ``<cache_dir>/<key>/`` is a build folder published atomically by
:func:`trtwidgets.trt.build.build`: a re-plan finds it and does not rebuild. Where there is more than one
build (or a build limit), one worker process per GPU (:mod:`.measure_worker`, ``CUDA_VISIBLE_DEVICES``)
builds its share into the same cache, and workers past the limit are stopped: a build that breaks its
process's CUDA context (a sticky error such as an illegal memory access while TensorRT times a kernel)
then breaks neither the builds after it, which a new worker takes up, nor the timing in this process.
Progress events (:class:`MeasureProgress`) are shared with the timing and the check of :mod:`.measure`.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, List, Mapping, Optional, Sequence, Tuple

from ..core.common.atomic import write_text_atomic
from ..core.common.errors import UserError
from ..core.plan.measured.measurement import FP16, INT8_IMPLICIT, QDQ, placement_key, qdq_values_key

__all__ = ["BUILD_KEY_FORMAT", "MeasureProgress", "build_all", "build_key", "build_one", "build_specs", "engine_in",
           "notify"]

_FLAGS = {FP16: ("fp16",), INT8_IMPLICIT: ("fp16", "int8"), QDQ: ("fp16", "int8")}
#: What a build key covers, as a number in the key: 2 since the Q/DQ values are in it (issue 44).
BUILD_KEY_FORMAT = 2
#: A build worker's exit status when a failed build left its CUDA context unusable with specs still to build.
CONTEXT_BROKEN = 3


@dataclass(frozen=True)
class MeasureProgress:
    """A progress event: ``stage`` is ``"build"``, ``"time"`` or ``"check"``; ``done`` of ``total``; what it was about."""

    stage: str
    done: int
    total: int
    name: str = ""
    cached: bool = False
    failed: bool = False

    def text(self) -> str:
        if self.stage == "build":
            left = self.total - self.done
            how = "failed" if self.failed else ("cached" if self.cached else "built")
            return f"builds {self.done}/{self.total} done, {left} left ({self.name} {how})"
        if self.stage == "check":
            return f"accuracy of engine {self.done}/{self.total} on the held-back samples"
        return f"timing round {self.done}/{self.total}"


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
           "kind": kind, "flags": list(_FLAGS[kind]),
           "shapes": {k: [int(d) for d in v] for k, v in sorted(shapes.items())},
           "settings": {k: settings[k] for k in sorted(settings)}}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:20]


def engine_in(folder: Path) -> Optional[Path]:
    """The engine of a published build folder (``build()`` publishes whole folders only), or None."""
    from .build_phases.result import ENGINE_FILE

    path = folder / ENGINE_FILE
    return path if path.is_file() else None


def _recipe(spec: Mapping):
    from ..core.model.load import load_model
    from ..core.recipe.fields import CalibratorSpec
    from ..core.recipe.profiles import Profile, ShapeRange
    from ..core.recipe.recipe import Recipe

    kw: Dict[str, object] = {"flags": tuple(_FLAGS[spec["kind"]]), "timing_cache": spec["timing_cache"]}
    if spec.get("shapes"):
        kw["profiles"] = (Profile({k: ShapeRange.fixed(v) for k, v in spec["shapes"].items()}),)
    if spec.get("opt_level") is not None:
        kw["builder_optimization_level"] = int(spec["opt_level"])
    if spec["kind"] == INT8_IMPLICIT:
        kw["calibrator"] = CalibratorSpec(kind="toolkit", cache_path=spec["calibration_cache"])
    return Recipe.for_model(load_model(spec["model_path"]), **kw)


def build_one(spec: Mapping) -> dict:
    """Build one spec into ``spec["out_dir"]`` unless an engine is already there (the cache).

    ``spec`` has ``key, name, kind, model_path, shapes, out_dir, timing_cache`` and
    optionally ``calibration_cache, opt_level``. Returns ``{key, engine_path, build_seconds,
    cached, error}``; a failed build is an ``error``, never an exception (the others go on).
    """
    out = Path(spec["out_dir"])
    hit = engine_in(out)
    if hit is not None:
        return {"key": spec["key"], "engine_path": str(hit), "build_seconds": 0.0, "cached": True, "error": ""}
    from .build import build

    start = time.perf_counter()
    try:
        res = build(_recipe(spec), out_dir=out, progress=False)
    except KeyboardInterrupt:
        raise
    except Exception as exc:
        msg = (exc.message if isinstance(exc, UserError) else "") or str(exc)
        return {"key": spec["key"], "engine_path": "", "build_seconds": time.perf_counter() - start, "cached": False,
                "error": f"{type(exc).__name__}: {msg}"[:2000]}
    return {"key": spec["key"], "engine_path": res.engine_path, "build_seconds": float(res.build_seconds),
            "cached": False, "error": ""}


def _settings(opt_level: Optional[int]) -> Dict[str, object]:
    from . import cuda, version

    try:
        gpu = cuda.device_name(0)
    except Exception:
        gpu = "unknown"
    return {"trt": version() or "none", "gpu": gpu, "opt_level": opt_level}


def build_specs(jobs: Sequence, cache_dir: Path, shapes, opt_level, skip: Mapping[str, str]):
    """``(job name -> key, key -> spec)``: one spec per distinct build of ``jobs`` (:class:`~.measure.MeasureJob`)."""
    settings = _settings(opt_level)
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


def notify(progress, event: MeasureProgress) -> None:
    """Hand ``event`` to ``progress``: a callable, or True for a line on stderr."""
    if callable(progress):
        progress(event)
    elif progress:
        print(f"[measure] {event.text()}", file=sys.stderr, flush=True)


def _build_in_process(todo: List[dict], progress, done0: int, total: int) -> Dict[str, dict]:
    results: Dict[str, dict] = {}
    for spec in todo:
        results[spec["key"]] = build_one(spec)
        notify(progress, MeasureProgress("build", done0 + len(results), total, spec["name"],
                                          failed=bool(results[spec["key"]]["error"])))
    return results


def _start_worker(work: Path, g: int, share: List[dict], n: int = 0):
    """A build worker on GPU ``g`` for ``share`` (``n``: a restart's number): ``(process, results path, share)``."""
    name = f"gpu{g}" + (f".restart{n}" if n else "")
    specs_path, results_path = work / f"{name}.specs.json", work / f"{name}.results.json"
    write_text_atomic(specs_path, json.dumps(share))
    env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(g))
    return subprocess.Popen(_worker_command(specs_path, results_path), env=env), results_path, share


def _build_on_gpus(todo: List[dict], gpus: int, progress, done0: int, total: int, cache_dir: Path,
                   limit_s: Optional[float] = None) -> Dict[str, dict]:
    """One worker process per GPU (``CUDA_VISIBLE_DEVICES``), each building its share; results as they finish.

    A worker that ends with :data:`CONTEXT_BROKEN` is followed by a new one on its GPU for the specs it left.
    Past ``limit_s`` seconds the workers still running are stopped; what they had not finished is reported
    as not built within the limit.
    """
    work = Path(tempfile.mkdtemp(prefix=".measure-", dir=str(cache_dir)))
    procs = []  # (process, results path, share, gpu)
    for g in range(gpus):
        share = [dict(s, timing_cache=str(cache_dir / f"timing.gpu{g}.cache")) for s in todo[g::gpus]]
        if share:
            procs.append(_start_worker(work, g, share) + (g,))
    results: Dict[str, dict] = {}
    deadline = None if limit_s is None else time.monotonic() + float(limit_s)
    stopped = False

    def read(path: Path) -> None:
        for r in (json.loads(path.read_text()) if path.exists() else []):
            if r["key"] not in results:
                results[r["key"]] = r
                notify(progress, MeasureProgress("build", done0 + len(results), total,
                                                  next(s["name"] for s in todo if s["key"] == r["key"]),
                                                  failed=bool(r["error"])))

    try:
        while True:
            codes = [p.poll() for p, _, _, _ in procs]  # before the reads: an exited worker's results are all read
            running = any(c is None for c in codes)
            for _, path, _, _ in procs:
                read(path)
            for i, (p, path, share, g) in enumerate(list(procs)):
                left = [s for s in share if s["key"] not in results]
                if codes[i] == CONTEXT_BROKEN and left and not stopped:  # the new worker owns what it left
                    procs[i] = (p, path, [], g)
                    procs.append(_start_worker(work, g, left, len(procs)) + (g,))  # len >= 1: a restart
                    running = True
            if not running:
                break
            if deadline is not None and time.monotonic() > deadline:
                _stop(procs)
                stopped = True
                deadline = None  # read the results once more, then the loop ends with no worker running
                continue
            time.sleep(0.5)
    except KeyboardInterrupt:
        _stop(procs)
        raise
    for p, _, share, _ in procs:  # a worker that died leaves its unbuilt specs with its exit code as their error
        why = (f"not built within the build limit of {float(limit_s):.0f} s (--build-limit); measured without it"  # type: ignore[arg-type]  # stopped: under a limit
               if stopped else f"the build worker exited with {p.returncode}")
        for spec in share:
            results.setdefault(spec["key"], {"key": spec["key"], "engine_path": "", "build_seconds": 0.0,
                                             "cached": False, "error": why})
    return results


def _worker_command(specs_path: Path, results_path: Path) -> List[str]:
    """The build worker's command line (:mod:`trtwidgets.trt.measure_worker`)."""
    return [sys.executable, "-m", "trtwidgets.trt.measure_worker", str(specs_path), str(results_path)]


def _stop(procs) -> None:
    """Stop the workers this call started that still run (a TensorRT build cannot be interrupted inside)."""
    for p, *_ in procs:
        if p.poll() is None:
            p.terminate()
    for p, *_ in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def build_all(specs: Mapping[str, dict], progress, gpus: Optional[int], cache: Path,
               limit_s: Optional[float] = None) -> Tuple[Dict[str, dict], bool]:
    """Key -> build result for every spec (cache hits first); ``(results, interrupted)``."""
    results: Dict[str, dict] = {}
    todo = []
    try:
        for key, spec in specs.items():
            hit = engine_in(Path(spec["out_dir"]))
            if hit is not None:
                results[key] = {"key": key, "engine_path": str(hit), "build_seconds": 0.0, "cached": True, "error": ""}
                notify(progress, MeasureProgress("build", len(results), len(specs), spec["name"], cached=True))
            else:
                todo.append(spec)
        if gpus is None:
            gpus = _visible_gpus() if todo else 0
        if limit_s is not None and todo:  # a build past the limit can only be stopped in its own process
            todo.sort(key=lambda spec: spec["kind"] == INT8_IMPLICIT)
            results.update(_build_on_gpus(todo, max(gpus, 1), progress, len(results), len(specs), cache, limit_s))
        elif gpus >= 1 and len(todo) > 1:
            # Builds in worker processes even on one GPU: one that breaks its CUDA context cannot take the
            # builds after it, nor the timing in this process, down with it.
            results.update(_build_on_gpus(todo, gpus, progress, len(results), len(specs), cache))
        else:
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
