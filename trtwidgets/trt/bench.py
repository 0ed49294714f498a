"""Engine latency with CUDA events: ``benchmark(engine, shapes)`` -> BenchResult.

Each timed run is one enqueue between two CUDA events on the runner's stream,
after ``warmup`` untimed runs; inputs stay on the device (this is the engine's
GPU time, as trtexec's "GPU Compute Time", not host copies).
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Optional, Sequence

import numpy as np

from ..core.common.errors import UserError
from ..core.engine.latency import MIN_RUNS, BenchResult, latency_stats
from . import cuda

__all__ = ["benchmark", "benchmark_runner", "random_feeds", "BenchResult"]


def random_feeds(runner, shapes: Optional[Mapping[str, Sequence[int]]] = None, seed: int = 0) -> Dict[str, np.ndarray]:
    """Random inputs at ``shapes`` (default: each input's opt shape in the runner's profile)."""
    rng = np.random.default_rng(seed)
    shapes = dict(runner.opt_shapes(), **{k: tuple(v) for k, v in (shapes or {}).items()})
    feeds = {}
    for s in runner.specs:
        if not s.is_input:
            continue
        shape = tuple(int(d) for d in shapes[s.name])
        if any(d < 0 for d in shape):
            raise UserError(f"Input {s.name!r} has no concrete shape to benchmark at ({list(shape)}).", None,
                            f"Pass --shape {s.name}:1x3x48x192 (your shape).")
        dt = runner.np_dtype(s)
        if np.issubdtype(dt, np.floating):
            feeds[s.name] = rng.standard_normal(shape).astype(dt)
        elif dt == np.bool_:
            feeds[s.name] = rng.integers(0, 2, shape).astype(dt)
        else:
            feeds[s.name] = rng.integers(0, 8, shape).astype(dt)
    return feeds


def benchmark_runner(runner, feeds: Mapping[str, np.ndarray], runs: int = MIN_RUNS, warmup: int = 20,
                     min_runs: int = MIN_RUNS) -> BenchResult:
    """Time ``runs`` executions of ``runner`` on ``feeds`` with CUDA events."""
    runner.prepare(feeds)
    for _ in range(max(0, warmup)):
        runner.execute()
    runner.stream.synchronize()
    starts = [cuda.Event() for _ in range(runs)]
    ends = [cuda.Event() for _ in range(runs)]
    try:
        for a, b in zip(starts, ends):
            a.record(runner.stream)
            runner.execute()
            b.record(runner.stream)
        runner.stream.synchronize()
        times: List[float] = [a.elapsed_ms(b) for a, b in zip(starts, ends)]
    finally:
        for e in starts + ends:
            e.destroy()
    first = next(iter(feeds.values()))
    batch = int(first.shape[0]) if np.ndim(first) else 1
    return latency_stats(times, batch=batch, shapes={k: np.shape(v) for k, v in feeds.items()}, warmup=warmup,
                         profile=runner.profile, min_runs=min_runs)


def benchmark(engine, shapes: Optional[Mapping[str, Sequence[int]]] = None, runs: int = MIN_RUNS, warmup: int = 20,
              profile: int = 0, feeds: Optional[Mapping[str, np.ndarray]] = None) -> BenchResult:
    """Benchmark an engine file / build directory / bytes at one set of input shapes.

    Parameters
    ----------
    engine : path or bytes
    shapes : mapping, optional
        Input name -> shape; default the profile's opt shapes.
    runs : int
        Timed runs (at least :data:`~trtwidgets.core.engine.latency.MIN_RUNS`).
    warmup : int
        Untimed runs first (clocks up, lazy allocations done).
    profile : int
        Optimization profile.
    feeds : mapping, optional
        Real inputs (default: random at ``shapes``).
    """
    from .runner import EngineRunner

    if runs < MIN_RUNS:
        raise UserError(f"{runs} timed runs are too few.", f"p99 needs at least {MIN_RUNS} runs to mean anything.",
                        f"Use runs >= {MIN_RUNS}.")
    with EngineRunner(engine, profile=profile) as runner:
        if feeds is None:
            feeds = random_feeds(runner, shapes)
        res = benchmark_runner(runner, feeds, runs=runs, warmup=warmup)
    path = engine if isinstance(engine, str) else None
    if path is not None:
        from dataclasses import replace

        res = replace(res, engine_path=path)
    return res
