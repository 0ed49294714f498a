"""Measured latency: build FP16, implicit INT8 and Q/DQ candidates once each, time them interleaved.

:func:`measure` is what ``plan --measure`` and ``trtwidgets plan measure PLAN_DIR`` run on
the GPU machine:

1. **One build per distinct placement.** Each job's build key is its model's
   :func:`~trtwidgets.core.plan.measured.measurement.placement_key` (Q/DQ scales zeroed: a change of
   ranges alone changes no latency) plus the build settings (flags, shapes, optimization
   level, TensorRT version, GPU). Jobs with the same key share one engine.
2. **Cached on disk by that key**: ``<cache_dir>/<key>/`` is a build folder published
   atomically by :func:`trtwidgets.trt.build.build`; a re-plan finds it and does not rebuild.
3. **Builds in parallel where there are several GPUs**: one worker process per GPU
   (``CUDA_VISIBLE_DEVICES``), each building its share into the same cache.
4. **Timed interleaved**: A B C A B C ... in ``rounds`` rounds (at least 3) of ``runs`` CUDA-event
   timed runs each, on the same inputs; each engine gets its per-round medians, their median
   and their spread (:class:`~trtwidgets.core.plan.measured.measurement.Measurement`).
5. **Judged** where a ``check`` is given: each engine runs the plan's held-back samples after the
   timing and its verdict becomes the Measurement's ``accuracy``.
6. **Progress** (builds done and left, rounds done) goes to a callback or stderr, and
   **Ctrl-C keeps what was measured**: builds already done stay cached, rounds already
   timed are returned, and the report says it was interrupted.

The decision (:func:`~trtwidgets.core.plan.measured.pick.pick_measured`) is pure and lives in core
(:mod:`trtwidgets.core.plan.measured`, the home of measured latency).

The planner's use is :mod:`.plan_measure`.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.common.atomic import write_text_atomic
from ..core.common.errors import UserError
from ..core.plan.measured.measurement import FP16, INT8_IMPLICIT, QDQ, Measurement, placement_key
from ..core.plan.plan_values import EngineVerdict

__all__ = ["MIN_ROUNDS", "MeasureJob", "MeasureProgress", "MeasureReport", "build_key", "build_one",
           "implicit_int8_reason", "measure"]

#: Fewer rounds cannot tell a steady difference from a drifting clock.
MIN_ROUNDS = 3
_FLAGS = {FP16: ("fp16",), INT8_IMPLICIT: ("fp16", "int8"), QDQ: ("fp16", "int8")}


@dataclass(frozen=True)
class MeasureJob:
    """One engine to measure.

    Attributes
    ----------
    name : str
        Shown in the report and used by ``pick_measured(meets=...)``.
    kind : str
        ``"fp16"``, ``"int8_implicit"`` or ``"qdq"`` (:mod:`trtwidgets.core.plan.measured.measurement`).
    model_path : str
        The ONNX file: the float model for FP16 and implicit INT8, the Q/DQ export for a candidate.
    calibration_cache : str, optional
        TensorRT calibration cache (implicit INT8 only).
    int8_layers : frozenset of str
        The candidate's INT8 layers (carried into the Measurement).
    estimate_ms : float
        The planner's estimate, shown beside the measurement.
    """

    name: str
    kind: str
    model_path: str
    calibration_cache: Optional[str] = None
    int8_layers: FrozenSet[str] = field(default_factory=frozenset)
    estimate_ms: float = float("nan")


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


@dataclass(frozen=True)
class MeasureReport:
    """Every job's measurement and how the run went.

    Attributes
    ----------
    measurements : tuple of Measurement
        One per job, in job order (jobs sharing a build share its times).
    rounds : int
        Rounds completed.
    interrupted : bool
        Ctrl-C stopped the run; what was measured is kept.
    built, cached : int
        Distinct engines built in this run / found in the cache.
    shapes : dict
        Input shapes timed at.
    """

    measurements: Tuple[Measurement, ...]
    rounds: int
    interrupted: bool = False
    built: int = 0
    cached: int = 0
    shapes: Dict[str, Tuple[int, ...]] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """For plan.json."""
        return {"measurements": [m.to_dict() for m in self.measurements], "rounds": self.rounds,
                "interrupted": self.interrupted, "built": self.built, "cached": self.cached,
                "shapes": {k: list(v) for k, v in self.shapes.items()}}


def implicit_int8_reason(trt_module=None) -> Optional[str]:
    """Why this TensorRT cannot build implicit INT8 (no INT8 flag, no calibrators), or None when it can."""
    from .features import features

    f = features(trt_module)
    if not f.has_flag("int8"):
        return f.explain("int8") or f"TensorRT {f.version} has no INT8 precision flag."
    if not f.calibrators:
        return f.explain("calibrators") or f"TensorRT {f.version} has no INT8 calibrators."
    return None


def build_key(model_path: str, kind: str, shapes: Mapping[str, Sequence[int]], settings: Mapping[str, object]) -> str:
    """The cache key of one build: the placement key of its model plus every setting that changes the engine."""
    import onnx

    proto = onnx.load(model_path)
    doc = {"placement": placement_key(proto), "kind": kind, "flags": list(_FLAGS[kind]),
           "shapes": {k: [int(d) for d in v] for k, v in sorted(shapes.items())},
           "settings": {k: settings[k] for k in sorted(settings)}}
    return hashlib.sha256(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:20]


def _engine_in(folder: Path) -> Optional[Path]:
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
    hit = _engine_in(out)
    if hit is not None:
        return {"key": spec["key"], "engine_path": str(hit), "build_seconds": 0.0, "cached": True, "error": ""}
    from .build import build

    start = time.perf_counter()
    try:
        res = build(_recipe(spec), out_dir=out, progress=False)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - one failed build is reported, the others go on
        msg = getattr(exc, "message", None) or str(exc)
        return {"key": spec["key"], "engine_path": "", "build_seconds": time.perf_counter() - start, "cached": False,
                "error": f"{type(exc).__name__}: {msg}"[:2000]}
    return {"key": spec["key"], "engine_path": res.engine_path, "build_seconds": float(res.build_seconds),
            "cached": False, "error": ""}


def _settings(opt_level: Optional[int]) -> Dict[str, object]:
    from . import cuda, version

    try:
        gpu = cuda.device_name(0)
    except Exception:  # noqa: BLE001 - no GPU: the build fails later with its own clear message
        gpu = "unknown"
    return {"trt": version() or "none", "gpu": gpu, "opt_level": opt_level}


def _specs(jobs: Sequence[MeasureJob], cache_dir: Path, shapes, opt_level, skip: Mapping[str, str]):
    """``(job name -> key, key -> spec)``: one spec per distinct build."""
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
    except Exception:  # noqa: BLE001 - no CUDA library: build in this process, which says why it cannot
        return 0


def _notify(progress, event: MeasureProgress) -> None:
    if callable(progress):
        progress(event)
    elif progress:
        print(f"[measure] {event.text()}", file=sys.stderr, flush=True)


def _build_in_process(todo: List[dict], progress, done0: int, total: int) -> Dict[str, dict]:
    results: Dict[str, dict] = {}
    for spec in todo:
        results[spec["key"]] = build_one(spec)
        _notify(progress, MeasureProgress("build", done0 + len(results), total, spec["name"],
                                          failed=bool(results[spec["key"]]["error"])))
    return results


def _build_on_gpus(todo: List[dict], gpus: int, progress, done0: int, total: int, cache_dir: Path,
                   limit_s: Optional[float] = None) -> Dict[str, dict]:
    """One worker process per GPU (``CUDA_VISIBLE_DEVICES``), each building its share; results as they finish.

    Past ``limit_s`` seconds the workers still running are stopped; what they had not finished is reported
    as not built within the limit.
    """
    work = Path(tempfile.mkdtemp(prefix=".measure-", dir=str(cache_dir)))
    procs = []
    for g in range(gpus):
        share = [dict(s, timing_cache=str(cache_dir / f"timing.gpu{g}.cache")) for s in todo[g::gpus]]
        if not share:
            continue
        specs_path, results_path = work / f"gpu{g}.specs.json", work / f"gpu{g}.results.json"
        write_text_atomic(specs_path, json.dumps(share))
        env = dict(os.environ, CUDA_VISIBLE_DEVICES=str(g))
        procs.append((subprocess.Popen(_worker_command(specs_path, results_path), env=env), results_path, share))
    results: Dict[str, dict] = {}
    deadline = None if limit_s is None else time.monotonic() + float(limit_s)
    stopped = False
    try:
        while True:
            running = [p for p, _, _ in procs if p.poll() is None]
            for _, path, _ in procs:
                for r in (json.loads(path.read_text()) if path.exists() else []):
                    if r["key"] not in results:
                        results[r["key"]] = r
                        _notify(progress, MeasureProgress("build", done0 + len(results), total,
                                                          next(s["name"] for s in todo if s["key"] == r["key"]),
                                                          failed=bool(r["error"])))
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
    for p, _, share in procs:  # a worker that died leaves its unbuilt specs with its exit code as their error
        why = (f"not built within the build limit of {float(limit_s):.0f} s (--build-limit); measured without it"
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
    for p, _, _ in procs:
        if p.poll() is None:
            p.terminate()
    for p, _, _ in procs:
        try:
            p.wait(timeout=10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()


def _time_interleaved(engines: Mapping[str, str], shapes, rounds: int, runs: int, warmup: int,
                      feeds: Optional[Mapping[str, np.ndarray]], progress) -> Tuple[Dict[str, List[float]], bool]:
    """Key -> per-round medians, timed A B C A B C ...; ``(times, interrupted)``: Ctrl-C keeps the rounds done."""
    from .bench import benchmark_runner, random_feeds
    from .runner import EngineRunner

    times: Dict[str, List[float]] = {k: [] for k in engines}
    runners: Dict[str, EngineRunner] = {}
    inputs: Dict[str, Dict[str, np.ndarray]] = {}
    try:
        for key, path in engines.items():
            runners[key] = EngineRunner(path)
            inputs[key] = dict(feeds) if feeds is not None else random_feeds(runners[key], shapes, seed=0)
        for r in range(rounds):
            partial: Dict[str, float] = {}
            for key, runner in runners.items():
                res = benchmark_runner(runner, inputs[key], runs=runs, warmup=warmup, min_runs=1)
                partial[key] = res.median_ms
            for key, t in partial.items():  # a round counts only when every engine ran in it
                times[key].append(t)
            _notify(progress, MeasureProgress("time", r + 1, rounds))
    except KeyboardInterrupt:
        return times, True
    finally:
        for runner in runners.values():
            runner.close()
    return times, False


def _judge_engines(engines: Mapping[str, str], check: Callable[[str], EngineVerdict],
                   progress) -> Tuple[Dict[str, EngineVerdict], bool]:
    """Key -> the engine's verdict on the held-back samples; ``(verdicts, interrupted)``: Ctrl-C keeps those done."""
    out: Dict[str, EngineVerdict] = {}
    try:
        for i, (key, path) in enumerate(engines.items()):
            out[key] = check(path)
            _notify(progress, MeasureProgress("check", i + 1, len(engines)))
    except KeyboardInterrupt:
        return out, True
    return out, False


def _check_rounds(rounds: int, runs: int) -> None:
    if rounds < MIN_ROUNDS:
        raise UserError(f"{rounds} rounds are too few.",
                        f"Interleaved rounds tell a steady difference from a drifting clock; {MIN_ROUNDS} is the least.",
                        f"Use rounds >= {MIN_ROUNDS}.")
    if runs < 1:
        raise UserError(f"{runs} runs per round time nothing.", None, "Use runs >= 1 (100 is the default).")


def measure(jobs: Sequence[MeasureJob], cache_dir: Union[str, os.PathLike], shapes: Optional[Mapping] = None,
            rounds: int = MIN_ROUNDS, runs: int = 100, warmup: int = 10, opt_level: Optional[int] = None,
            progress: Union[bool, Callable[[MeasureProgress], None]] = True, gpus: Optional[int] = None,
            feeds: Optional[Mapping[str, np.ndarray]] = None,
            build_limit_s: Optional[float] = None,
            check: Optional[Callable[[str], EngineVerdict]] = None) -> MeasureReport:
    """Build (or find in the cache) and time every job; see the module docstring.

    Parameters
    ----------
    jobs : sequence of MeasureJob
        FP16 first by convention; names must be unique.
    cache_dir : path
        Engines are cached here, one build folder per build key.
    shapes : mapping, optional
        Input name -> shape to build (a fixed profile) and time at; default the models' own
        static shapes.
    rounds, runs, warmup : int
        Interleaved rounds (>= 3), timed runs per engine per round, untimed runs before each.
    opt_level : int, optional
        TensorRT builder optimization level (default TensorRT's).
    progress : bool or callable
        True: lines on stderr; a callable gets each :class:`MeasureProgress`.
    gpus : int, optional
        Build on this many GPUs in parallel (default: all visible); timing uses GPU 0.
    feeds : mapping, optional
        Real inputs to time on (default: random at ``shapes``).
    build_limit_s : float, optional
        Wall time for the builds of this call (None: no limit). Builds run in worker processes
        then, implicit INT8 (a reference, often the slowest build) last on each GPU; at the limit
        the workers stop, finished builds are kept in the cache, and each build left says so as
        its error: the run goes on to time what was built.
    check : callable, optional
        ``check(engine_path) -> EngineVerdict``: each engine built is judged after the timing (the plan's
        held-back samples, :func:`~trtwidgets.trt.engine_outputs.engine_verdict`); the result is
        the Measurement's ``accuracy``.

    Returns
    -------
    MeasureReport
        Jobs whose build failed carry the error; implicit INT8 without INT8 support says why.
    """
    _check_rounds(rounds, runs)
    names = [j.name for j in jobs]
    if len(set(names)) != len(names):
        raise UserError("Two measure jobs have the same name.", f"Names: {', '.join(names)}.", "Name each job once.")
    cache = Path(cache_dir).expanduser()
    cache.mkdir(parents=True, exist_ok=True)
    shapes = {k: tuple(int(d) for d in v) for k, v in (shapes or {}).items()}
    skip = {}
    if any(j.kind == INT8_IMPLICIT for j in jobs):
        reason = implicit_int8_reason()
        if reason:
            skip = {j.name: f"implicit INT8 is not available: {reason}" for j in jobs if j.kind == INT8_IMPLICIT}
    key_of, specs = _specs(jobs, cache, shapes, opt_level, skip)
    built, interrupted = _build_all(specs, progress, gpus, cache, build_limit_s)
    engines = {k: r["engine_path"] for k, r in built.items() if not r["error"]}
    times: Dict[str, List[float]] = {}
    if engines and not interrupted:
        times, interrupted = _time_interleaved(engines, shapes, rounds, runs, warmup, feeds, progress)
    verdicts: Dict[str, EngineVerdict] = {}
    if check is not None and engines and not interrupted:
        verdicts, interrupted = _judge_engines(engines, check, progress)
    out = []
    for job in jobs:
        key = key_of.get(job.name, "")
        r = built.get(key, {})
        error = skip.get(job.name) or r.get("error") or ("" if key in built else "interrupted before its build")
        out.append(Measurement(job.name, job.kind, tuple(times.get(key, ())), key, job.estimate_ms,
                               frozenset(job.int8_layers), float(r.get("build_seconds", 0.0)),
                               bool(r.get("cached", False)), error, verdicts.get(key)))
    done_rounds = min((len(v) for v in times.values()), default=0)
    return MeasureReport(tuple(out), done_rounds, interrupted,
                         built=sum(1 for r in built.values() if not r["cached"] and not r["error"]),
                         cached=sum(1 for r in built.values() if r["cached"]), shapes=shapes)


def _build_all(specs: Mapping[str, dict], progress, gpus: Optional[int], cache: Path,
               limit_s: Optional[float] = None) -> Tuple[Dict[str, dict], bool]:
    """Key -> build result for every spec (cache hits first); ``(results, interrupted)``."""
    results: Dict[str, dict] = {}
    todo = []
    try:
        for key, spec in specs.items():
            hit = _engine_in(Path(spec["out_dir"]))
            if hit is not None:
                results[key] = {"key": key, "engine_path": str(hit), "build_seconds": 0.0, "cached": True, "error": ""}
                _notify(progress, MeasureProgress("build", len(results), len(specs), spec["name"], cached=True))
            else:
                todo.append(spec)
        if gpus is None:
            gpus = _visible_gpus() if todo else 0
        if limit_s is not None and todo:  # a build past the limit can only be stopped in its own process
            todo.sort(key=lambda spec: spec["kind"] == INT8_IMPLICIT)
            results.update(_build_on_gpus(todo, max(gpus, 1), progress, len(results), len(specs), cache, limit_s))
        elif gpus > 1 and len(todo) > 1:
            results.update(_build_on_gpus(todo, gpus, progress, len(results), len(specs), cache))
        else:
            results.update(_build_in_process(todo, progress, len(results), len(specs)))
    except KeyboardInterrupt:
        # Builds already done are published in the cache; they are kept, and a re-run picks them up.
        for key, spec in specs.items():
            hit = _engine_in(Path(spec["out_dir"])) if key not in results else None
            if hit is not None:
                results[key] = {"key": key, "engine_path": str(hit), "build_seconds": 0.0, "cached": False,
                                "error": ""}
        return results, True
    return results, False
