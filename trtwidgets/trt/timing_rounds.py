"""The candidates of one comparison timed in interleaved rounds (A B C A B C ...), then judged, in this process.

:func:`~.measure.measure` calls them here, :func:`~.dask_measure.time_task` on one Dask GPU worker.
"""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..core.plan.plan_values import EngineVerdict
from .build_job import MeasureProgress, notify

__all__ = ["judge_engines", "time_interleaved"]


def time_interleaved(engines: Mapping[str, str], shapes, rounds: int, runs: int, warmup: int,
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
            notify(progress, MeasureProgress.of("time", r + 1, rounds))
    except KeyboardInterrupt:
        return times, True
    finally:
        for runner in runners.values():
            runner.close()
    return times, False


def judge_engines(engines: Mapping[str, str], check: Callable[[str], EngineVerdict],
                   progress) -> Tuple[Dict[str, EngineVerdict], bool]:
    """Key -> the engine's verdict on the held-back samples; ``(verdicts, interrupted)``: Ctrl-C keeps those done."""
    out: Dict[str, EngineVerdict] = {}
    try:
        for i, (key, path) in enumerate(engines.items()):
            out[key] = check(path)
            notify(progress, MeasureProgress.of("check", i + 1, len(engines)))
    except KeyboardInterrupt:
        return out, True
    return out, False
