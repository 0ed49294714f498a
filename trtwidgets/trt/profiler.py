"""Per-layer timing of an engine through TensorRT's IProfiler.

``profile_layers(runner, feeds, runs=20)`` runs an :class:`~.runner.EngineRunner` with a
profiler attached and returns :class:`~trtwidgets.core.engine.layer_times.LayerTimings`.
Layer names are readable only if the engine was built with detailed profiling
verbosity (trtwidgets' build does that, for the inspector).

TensorRT calls ``report_layer_time`` once per layer for every enqueue made while
the profiler is attached (``enqueue_emits_profile``, the default, with no CUDA
graph capture). The profiler is attached after the warm-up runs, and the stream
is synchronised after each profiled run, so every report belongs to one known
run. Layers without a kernel of their own (no-op reshapes, some reformats) can
report 0.0 ms or not be reported at all.
"""

from __future__ import annotations

from typing import List, Mapping

import numpy as np

from ..core.engine.layer_times import LayerTimings, aggregate_layer_times
from .interfaces import interface_subclass

__all__ = ["LayerProfiler", "profile_layers"]


def _init(self):
    self._trt_base.__init__(self)
    self.records = []  # (layer name, ms)



def _report(self, layer_name, ms):
    self.records.append((str(layer_name), float(ms)))


def LayerProfiler(trt_module=None):
    """A new ``tensorrt.IProfiler`` that keeps ``records``: ``[(layer name, ms), ...]``."""
    cls = interface_subclass(trt_module, "IProfiler", "TrtWidgetsProfiler", {"__init__": _init, "report_layer_time": _report},
                             "tensorrt.IProfiler collecting per-layer times.")
    return cls()


def profile_layers(runner, feeds: Mapping[str, np.ndarray], runs: int = 20, warmup: int = 3) -> LayerTimings:
    """Per-layer mean times over ``runs`` profiled runs of ``runner`` on ``feeds``.

    Parameters
    ----------
    runner : EngineRunner
    feeds : mapping
        Inputs, at the shapes to profile.
    runs, warmup : int
        Profiled runs, and unprofiled runs before them.
    """
    runner.prepare(feeds)
    for _ in range(max(0, warmup)):
        runner.execute()
    runner.stream.synchronize()
    from . import cuda

    prof = LayerProfiler(runner.trt)
    if hasattr(runner.context, "enqueue_emits_profile"):
        # Reports come from each enqueue (not only from report_to_profiler(), which CUDA-graph users need).
        runner.context.enqueue_emits_profile = True
    runner.context.profiler = prof
    start, end = cuda.Event(), cuda.Event()
    wall: List[float] = []
    run_ends: List[int] = []
    try:
        for _ in range(runs):
            start.record(runner.stream)
            runner.execute()
            end.record(runner.stream)
            # The profiler reports once the run's work is done; sync per run so
            # reports never mix between runs.
            runner.stream.synchronize()
            wall.append(start.elapsed_ms(end))
            run_ends.append(len(prof.records))
    finally:
        try:
            runner.context.profiler = None
        except TypeError:
            # Bindings that refuse None: leave the finished profiler attached (it only appends records).
            pass
        start.destroy()
        end.destroy()
    return aggregate_layer_times(prof.records, runs, run_ms=float(np.median(wall)) if wall else None,
                                 run_ends=run_ends)
