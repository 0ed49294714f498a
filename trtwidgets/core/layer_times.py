"""Per-layer GPU times reported by TensorRT's IProfiler, aggregated over runs.

The IProfiler glue is in ``trtwidgets.trt.profiler``; this module holds the
result value and its exports: a ``{layer: mean ms}`` mapping that
``core.layer_table.layer_table(profile=...)`` attaches, and the JSON list that
``trtexec --exportProfile`` writes, so the same readers work on both.
"""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Tuple, Union

import numpy as np

__all__ = ["LayerTime", "LayerTimings", "aggregate_layer_times"]


@dataclass(frozen=True)
class LayerTime:
    """Times of one layer over ``count`` runs, milliseconds."""

    name: str
    count: int
    total_ms: float
    mean_ms: float
    median_ms: float

    def to_dict(self) -> dict:
        return {"name": self.name, "count": self.count, "total_ms": self.total_ms,
                "mean_ms": self.mean_ms, "median_ms": self.median_ms}


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
    """

    layers: Tuple[LayerTime, ...]
    runs: int
    run_ms: Optional[float] = None

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
        d = os.path.dirname(os.path.abspath(path))
        fd, tmp = tempfile.mkstemp(prefix=".profile-", suffix=".json", dir=d)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(self.to_trt_profile(), f, indent=1)
            os.replace(tmp, path)
        except BaseException:
            if os.path.exists(tmp):
                os.unlink(tmp)
            raise
        return path

    def to_dict(self) -> dict:
        return {"runs": self.runs, "total_ms": self.total_ms, "run_ms": self.run_ms, "layers": [t.to_dict() for t in self.layers]}


def aggregate_layer_times(records: Iterable[Tuple[str, float]], runs: int,
                          run_ms: Optional[float] = None) -> LayerTimings:
    """Aggregate ``(layer name, ms)`` reports in the order TensorRT made them.

    Parameters
    ----------
    records : iterable of (str, float)
        One record per layer per run (a layer reported twice in one run, as
        TensorRT does for some reformat layers, adds up).
    runs : int
        Number of profiled runs; a layer's mean is its total divided by this.
    """
    totals: Dict[str, List[float]] = {}
    for name, ms in records:
        totals.setdefault(str(name), []).append(float(ms))
    runs = max(int(runs), 1)
    layers = []
    for name, times in totals.items():
        arr = np.asarray(times, dtype=np.float64)
        per_run = arr if len(arr) == runs else None
        layers.append(LayerTime(
            name=name, count=len(times), total_ms=float(arr.sum()), mean_ms=float(arr.sum() / runs),
            median_ms=float(np.median(per_run)) if per_run is not None else float(arr.sum() / runs),
        ))
    return LayerTimings(layers=tuple(layers), runs=runs, run_ms=run_ms)
