"""Measured latency: build FP16, implicit INT8 and Q/DQ candidates once each, time them interleaved.

:func:`measure` is what ``plan --measure`` and ``trtwidgets plan measure PLAN_DIR`` run on the GPU:

1. one build per distinct placement, cached on disk by its build key, in parallel where there are
   several GPUs (:mod:`.measure_builds`);
2. timing interleaved, A B C A B C ..., in ``rounds`` rounds (at least 3) of ``runs`` CUDA-event
   timed runs each on the same inputs: per-round medians, their median and spread
   (:class:`~trtwidgets.core.plan.measured.measurement.Measurement`);
3. with a ``check``, each engine judged on the plan's held-back samples after the timing (the
   Measurement's ``accuracy``);
4. progress to a callback or stderr; Ctrl-C keeps cached builds and timed rounds, and the report
   says it was interrupted.

The decision (:func:`~trtwidgets.core.plan.measured.pick.pick_measured`) is pure and lives in
:mod:`trtwidgets.core.plan.measured`. The planner's use is :mod:`.plan_measure`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Dict, FrozenSet, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np

from ..core.common.errors import UserError
from ..core.plan.measured.measurement import INT8_IMPLICIT, Measurement
from ..core.plan.plan_values import EngineVerdict
from .build_job import implicit_int8_reason
from .measure_builds import MeasureProgress, build_all, build_specs
from .timing_rounds import judge_engines, time_interleaved

__all__ = ["MIN_ROUNDS", "MeasureJob", "MeasureProgress", "MeasureReport", "implicit_int8_reason", "judge_engines",
           "measure", "time_interleaved"]

#: Fewer rounds cannot tell a steady difference from a drifting clock.
MIN_ROUNDS = 3


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
    timed_on : str
        Where the interleaved rounds ran when not in this process: the GPU and the Dask worker (one GPU for
        every engine of the comparison); '' in this process.
    notes : tuple of str
        What the run says besides (GPU workers of another kind left out).
    """

    measurements: Tuple[Measurement, ...]
    rounds: int
    interrupted: bool = False
    built: int = 0
    cached: int = 0
    shapes: Dict[str, Tuple[int, ...]] = field(default_factory=dict)
    timed_on: str = ""
    notes: Tuple[str, ...] = ()

    def to_dict(self) -> dict:
        """For plan.json."""
        return {"measurements": [m.to_dict() for m in self.measurements], "rounds": self.rounds,
                "interrupted": self.interrupted, "built": self.built, "cached": self.cached,
                "shapes": {k: list(v) for k, v in self.shapes.items()}, "timed_on": self.timed_on,
                "notes": list(self.notes)}


def _check_rounds(rounds: int, runs: int) -> None:
    if rounds < MIN_ROUNDS:
        raise UserError(f"{rounds} rounds are too few.",
                        f"Interleaved rounds tell a steady difference from a drifting clock; {MIN_ROUNDS} is the least.",
                        f"Use rounds >= {MIN_ROUNDS}.")
    if runs < 1:
        raise UserError(f"{runs} runs per round time nothing.", None, "Use runs >= 1 (100 is the default).")


def _gpu_pool(client):
    """The Dask GPU workers of ``client`` this measurement uses (:class:`~.dask_measure.GpuPool`), or None."""
    if client is None:
        return None
    from .dask_measure import GpuPool

    return GpuPool(client)


def _time_and_judge(pool, built: Mapping[str, dict], shapes, timing: Tuple[int, int, int], feeds, check, progress):
    """``(times, verdicts, interrupted, timed_on)`` of the engines built: on one GPU worker of ``pool``, else here."""
    rounds, runs, warmup = timing
    engines = {k: r["engine_path"] for k, r in built.items() if not r["error"]}
    if pool is not None:
        from .dask_measure import time_on_worker

        return time_on_worker(pool, {k: built[k] for k in engines}, shapes, rounds, runs, warmup, feeds, check,
                              progress)
    verdicts: Dict[str, EngineVerdict] = {}
    times, interrupted = time_interleaved(engines, shapes, rounds, runs, warmup, feeds, progress)
    if check is not None and not interrupted:
        verdicts, interrupted = judge_engines(engines, check, progress)
    return times, verdicts, interrupted, ""


def _implicit_skips(jobs: Sequence[MeasureJob], pool) -> Dict[str, str]:
    """Job name -> why its implicit INT8 build is skipped, for each such job when INT8 is not available."""
    if not any(j.kind == INT8_IMPLICIT for j in jobs):
        return {}
    # The TensorRT that builds decides: the workers' with a client (this process may have none).
    reason = implicit_int8_reason() if pool is None else pool.implicit_reason
    if not reason:
        return {}
    return {j.name: f"implicit INT8 is not available: {reason}" for j in jobs if j.kind == INT8_IMPLICIT}


def measure(jobs: Sequence[MeasureJob], cache_dir: Union[str, os.PathLike], shapes: Optional[Mapping] = None,
            rounds: int = MIN_ROUNDS, runs: int = 100, warmup: int = 10, opt_level: Optional[int] = None,
            progress: Union[bool, Callable[[MeasureProgress], None]] = True, gpus: Optional[int] = None,
            feeds: Optional[Mapping[str, np.ndarray]] = None,
            build_limit_s: Optional[float] = None,
            check: Optional[Callable[[str], EngineVerdict]] = None, client=None) -> MeasureReport:
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
        Wall time for the builds of this call (None: no limit). Builds then run in worker
        processes, implicit INT8 last on each GPU; at the limit finished builds are kept, each
        build left gets that as its error, and what was built is timed.
    check : callable, optional
        ``check(engine_path) -> EngineVerdict``: each engine built is judged after the timing (the plan's
        held-back samples, :func:`~trtwidgets.trt.engine_outputs.engine_verdict`); the result is
        the Measurement's ``accuracy``.
    client : distributed.Client, optional
        Build on its Dask workers that declare ``GPU=1`` (one GPU each, of one kind: :mod:`.dask_measure`), and
        time every engine of this comparison on one of them (``check`` runs there too); ``gpus`` is then unused.

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
    pool = _gpu_pool(client)
    skip = _implicit_skips(jobs, pool)
    key_of, specs = build_specs(jobs, cache, shapes, opt_level, skip, gpu=pool.kind if pool is not None else None,
                                trt=pool.trt if pool is not None else None)
    built, interrupted = build_all(specs, progress, gpus, cache, build_limit_s, pool=pool)
    times: Dict[str, List[float]] = {}
    verdicts: Dict[str, EngineVerdict] = {}
    timed_on = ""
    if any(not r["error"] for r in built.values()) and not interrupted:
        times, verdicts, interrupted, timed_on = _time_and_judge(pool, built, shapes, (rounds, runs, warmup), feeds,
                                                                 check, progress)
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
                         cached=sum(1 for r in built.values() if r["cached"]), shapes=shapes, timed_on=timed_on,
                         notes=(pool.note(),) if pool is not None and pool.note() else ())
