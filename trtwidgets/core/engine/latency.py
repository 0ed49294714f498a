"""Latency statistics of an engine benchmark: pure numbers over measured times.

The timing itself (CUDA events around ``execute_async_v3``) lives in
``trtwidgets.trt.bench``; this module only turns a list of per-run times into
the figures a TensorRT user reads (median, p90, p99, throughput), so that the
math is testable without a GPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Dict, Mapping, Optional, Sequence, Tuple

import numpy as np

from ..common.errors import UserError
from ..common.serial import fields_json, from_json

__all__ = ["BenchResult", "latency_stats", "MIN_RUNS"]

#: Fewer timed runs than this make p99 meaningless (it would be the maximum).
MIN_RUNS = 200


@dataclass(frozen=True)
class BenchResult:
    """Latency of one engine at one set of input shapes.

    Attributes
    ----------
    shapes : dict
        Input name -> shape the engine ran at.
    batch : int
        Samples per run (the first dimension of the first input), for throughput.
    runs, warmup : int
        Timed runs and untimed warm-up runs.
    median_ms, p90_ms, p99_ms, mean_ms, min_ms, max_ms, std_ms : float
        Per-run GPU time (CUDA events around one enqueue), milliseconds.
    throughput : float
        Samples per second, ``batch / median``.
    profile : int
        Optimization profile index used.
    engine_path : str, optional
    """

    shapes: Dict[str, Tuple[int, ...]]
    batch: int
    runs: int
    warmup: int
    median_ms: float
    p90_ms: float
    p99_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    std_ms: float
    throughput: float
    profile: int = 0
    engine_path: Optional[str] = None
    extra: Dict[str, float] = field(default_factory=dict)

    def to_dict(self) -> dict:
        """A JSON-serialisable mapping (:func:`~..common.serial.fields_json`)."""
        return fields_json(self)

    @classmethod
    def from_dict(cls, d: Mapping) -> "BenchResult":
        """Inverse of :meth:`to_dict`."""
        return from_json(cls, d)


def _percentile(sorted_ms: np.ndarray, q: float) -> float:
    # Linear interpolation between closest ranks (numpy's default), written out so
    # that numpy 1.22+ (``method=``) and older (``interpolation=``) agree.
    pos = (len(sorted_ms) - 1) * q / 100.0
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(sorted_ms) - 1)
    return float(sorted_ms[lo] + (sorted_ms[hi] - sorted_ms[lo]) * (pos - lo))


def latency_stats(
    times_ms: Sequence[float],
    batch: int,
    shapes: Optional[Mapping[str, Sequence[int]]] = None,
    warmup: int = 0,
    profile: int = 0,
    engine_path: Optional[str] = None,
    min_runs: int = 1,
) -> BenchResult:
    """Summarise per-run times into a :class:`BenchResult`.

    Parameters
    ----------
    times_ms : sequence of float
        One GPU time per timed run, milliseconds.
    batch : int
        Samples per run; throughput is ``batch / median`` samples per second.
    shapes : mapping, optional
        Input shapes, recorded in the result.
    warmup, profile, engine_path
        Recorded in the result.
    min_runs : int
        Refuse fewer runs than this (the benchmark passes :data:`MIN_RUNS`).

    Raises
    ------
    UserError
        No times, too few, or a negative / non-finite time.
    """
    t = np.asarray(list(times_ms), dtype=np.float64)
    if t.size == 0 or t.size < min_runs:
        raise UserError(
            f"{t.size} timed runs are too few for latency statistics.",
            f"Percentiles need at least {max(min_runs, 1)} runs.",
            f"Run the benchmark with runs >= {max(min_runs, 1)}.",
        )
    if not np.all(np.isfinite(t)) or np.any(t < 0):
        raise UserError(
            "Some measured times are negative or not finite.",
            "CUDA events were recorded out of order or a run failed.",
            "Re-run the benchmark; if it repeats, check the engine runs without errors.",
        )
    if batch < 1:
        raise UserError(f"Batch {batch} is not a positive sample count.", None, "Pass batch >= 1.")
    s = np.sort(t)
    median = _percentile(s, 50.0)
    return BenchResult(
        shapes={k: tuple(int(x) for x in v) for k, v in (shapes or {}).items()},
        batch=int(batch),
        runs=int(t.size),
        warmup=int(warmup),
        median_ms=median,
        p90_ms=_percentile(s, 90.0),
        p99_ms=_percentile(s, 99.0),
        mean_ms=float(t.mean()),
        min_ms=float(s[0]),
        max_ms=float(s[-1]),
        std_ms=float(t.std()),
        throughput=(batch / (median / 1000.0)) if median > 0 else math.inf,
        profile=int(profile),
        engine_path=engine_path,
    )
