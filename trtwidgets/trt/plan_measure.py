"""Measuring a plan on this GPU: build FP16, implicit INT8 and the plan's top candidates, time them, pick again.

What ``plan --measure``, ``tw.plan(..., measure=True)``, the App's Plan step and
``trtwidgets plan measure PLAN_DIR`` run:

1. The candidates are chosen in core (:func:`~trtwidgets.core.plan.measured.repick.measure_targets`)
   and exported as scored (:func:`~trtwidgets.core.plan.plan_export.export_plan`) into
   ``<work_dir>/candidates/``; implicit INT8 reads the plan's ranges as a calibration cache. FP16 of
   the rewritten graph, where the plan has it, is built beside FP16 as given.
2. :func:`trtwidgets.trt.measure.measure` builds each distinct placement once (cached on disk),
   times them interleaved and reports the median and spread; Ctrl-C keeps what was measured.
3. Every engine runs the plan's held-back samples and is judged by the plan's target
   (:mod:`trtwidgets.core.plan.engine_check`, :mod:`.engine_outputs`).
4. The pick is made again by measured time among the engines that meet the target and win FP16's
   paired rounds by the sign test (:func:`~trtwidgets.core.plan.measured.repick.apply_measurements`).

The measurement is an edge: ``measure_fn`` (default :func:`trtwidgets.trt.measure.measure`) takes the
jobs and returns a :class:`~trtwidgets.trt.measure.MeasureReport`.
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional, Union

from ..core.common.errors import TensorRTUnavailable, UserError
from ..core.plan.measured.measurement import FP16, INT8_IMPLICIT, QDQ
from ..core.plan.measured.paired import PAIRED_MIN_ROUNDS
from ..core.plan.measured.repick import MEASURE_TOP, apply_measurements, candidate_job_name, measure_targets
from ..core.plan.measured.standing import CheckSummary
from ..core.plan.plan_artifact import Plan
from ..core.plan.plan_values import Candidate
from .measure import MeasureJob

__all__ = ["ENGINE_CACHE_ENV", "default_cache_dir", "gpu_source", "measure_plan", "require_measurable",
           "unavailable_reason"]

#: Environment variable naming the engine cache shared by every plan (default ``~/.cache/trtwidgets/engines``).
ENGINE_CACHE_ENV = "TRTWIDGETS_ENGINE_CACHE"


def unavailable_reason() -> Optional[str]:
    """Why this machine cannot build and time engines (no TensorRT, no GPU), or None when it can."""
    from . import available, cuda

    if not available():
        from . import tensorrt

        try:
            tensorrt()
        except TensorRTUnavailable as err:
            return err.why or err.what
        return "TensorRT cannot be imported"
    try:
        n = cuda.device_count()
    except Exception as exc:
        return f"the CUDA runtime cannot be loaded ({exc})"
    return None if n > 0 else "no CUDA GPU is visible"


def require_measurable(what: str = "plan --measure") -> None:
    """Raise :class:`TensorRTUnavailable` (exit 2 in the CLI) unless engines can be built and timed here."""
    reason = unavailable_reason()
    if reason:
        fix = ("Plan here without --measure (plan.json keeps every candidate), then run "
               "`trtwidgets plan measure PLAN_DIR` on a GPU machine with TensorRT.")
        if "plan measure" in what:
            fix = ("Run it on a GPU machine with TensorRT: copy PLAN_DIR there, with the float model "
                   "(or give its path with --model).")
        raise TensorRTUnavailable(
            f"{what} cannot build and time engines on this machine.",
            f"{reason}; measuring builds FP16, implicit INT8 and the candidates with TensorRT and times them on a GPU.",
            fix)


def default_cache_dir() -> Path:
    """The engine cache: ``$TRTWIDGETS_ENGINE_CACHE``, else ``~/.cache/trtwidgets/engines``."""
    env = os.environ.get(ENGINE_CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "trtwidgets" / "engines"


def _model_path(plan: Plan, model) -> str:
    path = getattr(model, "path", model) if model is not None else plan.model
    if path is None or not os.path.isfile(str(path)):
        raise UserError(f"The plan's float model is not at {path}.", "Measuring builds FP16 and implicit INT8 from "
                        "the float model, and exports each candidate from it.",
                        "Give the float model's path (--model PATH, or model=).")
    return str(path)


def _estimate_ms(cand: Candidate) -> float:
    """A candidate's estimated time in ms (NaN when unknown), as a measurement job carries it."""
    us = cand.latency_us
    return float(us) / 1000.0 if math.isfinite(us) and us > 0 else float("nan")


def _jobs(plan: Plan, model_path: str, work: Path, targets: List[int], implicit: bool) -> List[MeasureJob]:
    from ..core.calibration.cache import write_cache
    from ..core.common.write_rule import inside_output
    from ..core.plan.plan_export import export_plan

    folder = inside_output(work, "candidates")  # before any write: a link there would send the exports elsewhere
    cands = plan.candidates
    jobs = [MeasureJob("fp16", FP16, model_path, estimate_ms=_estimate_ms(cands[0]))]
    if implicit and plan.ranges.amax:
        cache = work / "implicit_int8.cache"
        write_cache(dict(plan.ranges.amax), cache)
        jobs.append(MeasureJob("int8_implicit", INT8_IMPLICIT, model_path, calibration_cache=str(cache)))
    folder.mkdir(parents=True, exist_ok=True)
    rewritten = next((i for i, c in enumerate(cands) if c.rewritten), None)
    if rewritten is not None:
        # FP16 of the graph the Q/DQ candidates are written on, built beside FP16 as given: the candidates are
        # compared with it (the same graph), and the two FP16 engines give the rewrites' own gain.
        path = folder / f"candidate{rewritten}.rewritten.onnx"
        export_plan(model_path, plan, path, candidate=rewritten)
        jobs.append(MeasureJob(candidate_job_name(rewritten, cands[rewritten]), FP16, str(path),
                               estimate_ms=_estimate_ms(cands[rewritten])))
    for i in targets:
        path = folder / f"candidate{i}.qdq.onnx"
        export_plan(model_path, plan, path, candidate=i)
        jobs.append(MeasureJob(candidate_job_name(i, cands[i]), QDQ, str(path), int8_layers=frozenset(cands[i].quantized),
                               estimate_ms=_estimate_ms(cands[i])))
    return jobs


def measure_plan(plan: Plan, model=None, *, work_dir: Union[str, os.PathLike, None] = None,
                 cache_dir: Union[str, os.PathLike, None] = None, top: int = MEASURE_TOP,
                 rounds: int = PAIRED_MIN_ROUNDS,
                 runs: int = 100, warmup: int = 10, opt_level: Optional[int] = None, implicit: bool = True,
                 progress: Union[bool, Callable] = True, gpus: Optional[int] = None,
                 measure_fn: Optional[Callable] = None, build_limit_s: Optional[float] = None, check=None,
                 regions: bool = True, client=None) -> Plan:
    """The plan with FP16, implicit INT8 and its top candidates measured, and the pick made by measurement.

    What ``tw.plan(..., measure=True)``, ``plan --measure``, ``trtwidgets plan measure PLAN_DIR`` and
    the App's Plan step run.

    Parameters
    ----------
    plan : Plan
        A plan made here or read back (:meth:`~trtwidgets.core.plan.plan_artifact.Plan.load`).
    model : path or LoadedModel, optional
        The float model (default: the plan's ``model``).
    work_dir : path, optional
        Where the candidates' Q/DQ models and the implicit build's calibration cache are written
        (default: a temporary folder, removed after).
    cache_dir : path, optional
        The engine cache (:func:`default_cache_dir`).
    top : int
        Candidates to measure besides FP16 and implicit INT8.
    rounds, runs, warmup, opt_level, progress, gpus
        As :func:`trtwidgets.trt.measure.measure` takes them; ``rounds`` defaults to 5, the fewest in which a
        candidate can win FP16's paired rounds by the sign test (:mod:`~trtwidgets.core.plan.measured.paired`).
    implicit : bool
        Measure implicit INT8 too, where this TensorRT has it: a reference, and a pick only
        when its engine meets the target on the held-back samples (``check``).
    measure_fn : callable, optional
        The measurement source (default :func:`trtwidgets.trt.measure.measure`).
    build_limit_s : float, optional
        Stop the builds after this many seconds and time what was built (None: no limit).
    check : EngineCheck, optional
        The plan's held-back samples and FP32's outputs (:mod:`trtwidgets.core.plan.engine_check`):
        every engine built is run on them and judged by the plan's target (default: the plan's
        own, or none: the engines are timed, not judged).
    regions : bool
        Run the region search first (:mod:`.region_measure`): each repeated pattern's placement schemes
        timed on a sub-model, the fastest offered one chosen, and the candidate combining the choices
        built whole beside FP16 and the base candidate.
    client : distributed.Client, optional
        Build on its Dask GPU workers, each comparison timed on one of them (:mod:`.dask_measure`, ``timed_on``).

    Returns
    -------
    Plan
        With ``measured`` (:func:`~trtwidgets.core.plan.measured.repick.apply_measurements`).
    """
    if work_dir is None:
        with tempfile.TemporaryDirectory(prefix="trtwidgets-measure-") as tmp:
            return measure_plan(plan, model, work_dir=tmp, cache_dir=cache_dir, top=top, rounds=rounds, runs=runs,
                                warmup=warmup, opt_level=opt_level, implicit=implicit, progress=progress, gpus=gpus,
                                measure_fn=measure_fn, build_limit_s=build_limit_s, check=check, regions=regions,
                                client=client)
    if measure_fn is None:
        from .measure import measure
        measure_fn = measure
    check = check if check is not None else plan.engine_check
    model_path = _model_path(plan, model)
    work = Path(work_dir)
    work.mkdir(parents=True, exist_ok=True)
    cache = Path(cache_dir) if cache_dir is not None else default_cache_dir()
    on = {} if client is None else {"client": client}
    if regions:
        plan = _region_search(plan, model_path, work, cache, measure_fn, dict(
            rounds=rounds, runs=runs, warmup=warmup, opt_level=opt_level, progress=progress, gpus=gpus, **on))
    jobs = _jobs(plan, model_path, work, _targets(plan, top), implicit)
    extra: Dict[str, Any] = dict(on, **({} if build_limit_s is None else {"build_limit_s": build_limit_s}))

    summary = None
    if check is not None:
        from .engine_outputs import engine_verdict

        extra["check"] = lambda engine: engine_verdict(engine, check)
        summary = CheckSummary(len(check.feeds), bool(check.judges), tuple(check.notes))
    report = measure_fn(jobs, cache, shapes=dict(plan.input_shapes), rounds=rounds, runs=runs, warmup=warmup,
                        opt_level=opt_level, progress=progress, gpus=gpus, **extra)
    return apply_measurements(plan, report.measurements, rounds=report.rounds, interrupted=report.interrupted,
                              built=report.built, cached=report.cached, shapes=report.shapes,
                              settings=dict(_settings(), opt_level=opt_level, runs=runs, warmup=warmup,
                                            **_where_timed(report)),
                              implicit_cache=_implicit_cache(jobs, report, cache), check=summary)


def _region_search(plan: Plan, model_path: str, work: Path, cache: Path, measure_fn, kw: dict) -> Plan:
    """The plan with its region search timed (:mod:`.region_measure`); a plan made without one gets one here,
    its schemes unscored (the engine check judges the combined engine)."""
    from .region_measure import measure_regions

    if plan.regions is None:
        from ..core.plan.regions.search import score_regions

        plan = score_regions(plan, model_path, use_ort=False)
    return measure_regions(plan, model_path, work, cache, measure_fn=measure_fn, **kw)


def _targets(plan: Plan, top: int) -> List[int]:
    """The candidates to build: the plan's top ones, and with a region search its base and the combination."""
    out = measure_targets(plan, top)
    search = plan.regions
    if search is not None and search.measured:
        for i in (search.base, search.combined):
            if i is not None and i not in out and plan.candidates[i].meets_target:
                out.append(i)
    return out


def _implicit_cache(jobs, report, cache_dir: Path) -> Optional[str]:
    """Implicit INT8's calibration cache where it outlives this call: in its engine's build folder (the engine
    cache keeps both), else the one written for the build (gone with a temporary work folder)."""
    from .build_phases.result import CACHE_FILE

    m = next((m for m in report.measurements if m.kind == INT8_IMPLICIT and m.key), None)
    kept = cache_dir.expanduser() / m.key / CACHE_FILE if m is not None else None
    if kept is not None and kept.is_file():
        return str(kept)
    return next((j.calibration_cache for j in jobs if j.kind == INT8_IMPLICIT), None)


def _where_timed(report) -> dict:
    """Where a report's rounds ran when not here (a Dask GPU worker), and the GPU workers it left out."""
    from .measure import MeasureReport

    if not isinstance(report, MeasureReport):  # a measure_fn of the caller's may report otherwise
        return {}
    out = {"timed_on": report.timed_on} if report.timed_on else {}
    if report.notes:
        out["left_out"] = " ".join(report.notes)
    return out


def _settings() -> dict:
    from . import cuda, version

    try:
        gpu = cuda.device_name(0)
    except Exception:
        gpu = "unknown"
    return {"trt": version() or "none", "gpu": gpu}


def gpu_source(what: str, **kw):
    """The planner's measurement source on this GPU (``plan(measure=...)``), after checking TensorRT and a GPU.

    ``what`` names the caller in the refusal (``"plan --measure"``, ``"plan(measure=True)"``); ``kw`` goes to
    :func:`measure_plan` (``work_dir``, ``progress``, ``rounds`` ...). The CLI, the API and the App's Plan
    step all take their source from here, so the check comes before the search every time.
    """
    require_measurable(what)
    return lambda plan, model: measure_plan(plan, model, **kw)
