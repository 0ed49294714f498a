"""``trtwidgets.plan``: the planner, with ``measure=True`` meaning "on this GPU".

The search lives in :func:`trtwidgets.core.plan.planner.plan`, which runs on a CPU and never
imports TensorRT (the layering rule). Measuring on a GPU is TensorRT's side
(:mod:`trtwidgets.trt.plan_measure`): this thin layer turns ``measure=True`` into that
measurement source, checking TensorRT and a GPU before the search starts, and passes
everything else through.
"""

from __future__ import annotations

import functools

from .core.plan.planner import plan as _core_plan

__all__ = ["plan"]


@functools.wraps(_core_plan)
def plan(model, data, *, measure=False, progress: bool = True, **kwargs):
    if measure is True:
        from .trt.plan_measure import gpu_source

        measure = gpu_source("plan(measure=True)", progress=progress)  # checked now, before the search
    return _core_plan(model, data, measure=measure, progress=progress, **kwargs)
