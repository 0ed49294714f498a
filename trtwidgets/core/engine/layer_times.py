"""Per-layer GPU times reported by TensorRT's IProfiler, aggregated over runs.

The IProfiler glue is in ``trtwidgets.trt.profiler``; this module holds the
result value and its exports: a ``{layer: mean ms}`` mapping that
``core.layer_table.layer_table(profile=...)`` attaches, and the JSON list that
``trtexec --exportProfile`` writes, so the same readers work on both.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from ..common.atomic import write_text_atomic

__all__ = ["LayerTime", "LayerTimings", "aggregate_layer_times"]


@dataclass(frozen=True)
class LayerTime:
    """Times of one layer, milliseconds.

    Attributes
    ----------
    name : str
    count : int
        Reports TensorRT made for this layer (one per profiled run normally).
    total_ms, mean_ms, median_ms : float
        Sum over all reports; mean and median per profiled run.
    runs_seen : int, optional
        Profiled runs in which the layer was reported (None when run boundaries are unknown).
    zero_count : int
        Reports of exactly 0.0 ms (layers without a kernel of their own, e.g. no-op reshapes).
    """

    name: str
    count: int
    total_ms: float
    mean_ms: float
    median_ms: float
    runs_seen: Optional[int] = None
    zero_count: int = 0

    def to_dict(self) -> dict:
        return {"name": self.name, "count": self.count, "total_ms": self.total_ms,
                "mean_ms": self.mean_ms, "median_ms": self.median_ms, "runs_seen": self.runs_seen,
                "zero_count": self.zero_count}


@dataclass(frozen=True)
class LayerTimings:
    """All layers of one engine, in execution order.

    Attributes
    ----------
    layers : tuple of LayerTime
    runs : int
        Profiled runs.
    run_ms : float, optional
        Median time of a whole profiled run (CUDA events around it), which
        includes the profiler's own per-layer overhead.
    run_sums_ms : tuple of float
        Sum of the layer reports of each profiled run (empty when run
        boundaries are unknown).
    consistent_runs : bool, optional
        Whether every profiled run reported the same layers in the same order
        (None when run boundaries are unknown).
    """

    layers: Tuple[LayerTime, ...]
    runs: int
    run_ms: Optional[float] = None
    run_sums_ms: Tuple[float, ...] = ()
    consistent_runs: Optional[bool] = None

    @property
    def total_ms(self) -> float:
        """Sum of the per-layer means: the engine's time per run as the profiler sees it."""
        return float(sum(t.mean_ms for t in self.layers))

    def as_mapping(self) -> Dict[str, float]:
        """Layer name -> mean ms per run (what ``layer_table(profile=...)`` takes)."""
        return {t.name: t.mean_ms for t in self.layers}

    def top(self, n: int = 10) -> Tuple[LayerTime, ...]:
        """The ``n`` slowest layers."""
        return tuple(sorted(self.layers, key=lambda t: -t.mean_ms)[:n])

    def to_trt_profile(self) -> List[dict]:
        """The list ``trtexec --exportProfile`` writes: ``[{"count"}, {"name", "timeMs", "averageMs", ...}]``."""
        total = self.total_ms or 1.0
        out: List[dict] = [{"count": int(self.runs)}]
        for t in self.layers:
            out.append({"name": t.name, "timeMs": t.total_ms, "averageMs": t.mean_ms,
                        "medianMs": t.median_ms, "percentage": 100.0 * t.mean_ms / total})
        return out

    def write_trt_profile(self, path: Union[str, os.PathLike]) -> str:
        """Write :meth:`to_trt_profile` as JSON, atomically; returns the path."""
        path = os.fspath(path)
        write_text_atomic(path, json.dumps(self.to_trt_profile(), indent=1))
        return path

    def to_dict(self) -> dict:
        return {"runs": self.runs, "total_ms": self.total_ms, "run_ms": self.run_ms,
                "run_sums_ms": list(self.run_sums_ms), "consistent_runs": self.consistent_runs,
                "layers": [t.to_dict() for t in self.layers]}


def aggregate_layer_times(records: Sequence[Tuple[str, float]], runs: int, run_ms: Optional[float] = None,
                          run_ends: Optional[Sequence[int]] = None) -> LayerTimings:
    """Aggregate ``(layer name, ms)`` reports in the order TensorRT made them.

    Parameters
    ----------
    records : sequence of (str, float)
        One record per layer per run (a layer reported twice in one run adds up).
    runs : int
        Number of profiled runs; a layer's mean is its total divided by this.
    run_ms : float, optional
        Median wall time of a profiled run.
    run_ends : sequence of int, optional
        ``len(records)`` after each profiled run, so that reports can be told
        apart by run (per-run sums, in how many runs each layer appeared).
    """
    records = [(str(n), float(ms)) for n, ms in records]
    runs = max(int(runs), 1)
    chunks: List[List[Tuple[str, float]]] = []
    if run_ends is not None:
        start = 0
        for end in run_ends:
            chunks.append(records[start:int(end)])
            start = int(end)
    order: List[str] = []
    totals: Dict[str, List[float]] = {}
    for name, ms in records:
        if name not in totals:
            order.append(name)
            totals[name] = []
        totals[name].append(ms)
    per_run: Dict[str, List[float]] = {}
    for chunk in chunks:
        sums: Dict[str, float] = {}
        for name, ms in chunk:
            sums[name] = sums.get(name, 0.0) + ms
        for name, v in sums.items():
            per_run.setdefault(name, []).append(v)
    layers = []
    for name in order:
        arr = np.asarray(totals[name], dtype=np.float64)
        if chunks:
            seen: Optional[int] = len(per_run.get(name, ()))
            # Runs without a report count as 0 ms for the median.
            values = np.asarray(per_run.get(name, []) + [0.0] * (len(chunks) - len(per_run.get(name, ()))))
            median = float(np.median(values))
        else:
            seen = None
            median = float(np.median(arr)) if len(arr) == runs else float(arr.sum() / runs)
        layers.append(LayerTime(name=name, count=len(arr), total_ms=float(arr.sum()), mean_ms=float(arr.sum() / runs),
                                median_ms=median, runs_seen=seen, zero_count=int(np.count_nonzero(arr == 0.0))))
    sums_ms = tuple(float(sum(ms for _, ms in c)) for c in chunks)
    consistent = None
    if chunks:
        first = [n for n, _ in chunks[0]]
        consistent = all([n for n, _ in c] == first for c in chunks[1:])
    return LayerTimings(layers=tuple(layers), runs=runs, run_ms=run_ms, run_sums_ms=sums_ms, consistent_runs=consistent)
