"""A plan's target with a task metric: built-in by name, the user's ``package.module:function``, or a callable.

The metric given here is the caller's own (never read from a file), so a ``package.module:function``
not yet registered is imported and registered (:func:`~..accuracy.task_metrics.import_metric`); a
plan.json that names it is later only looked up.

The metrics themselves are :mod:`~..accuracy.task_metrics`' (one registry for the CLI,
the API and the App); this module only puts one into a :class:`~.plan_values.PlanTarget`
(:meth:`PlanTarget.for_metric` records it), built once the float model's outputs on the
held-back samples are known.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Optional

import numpy as np

from .plan_values import PlanTarget

__all__ = ["metric_factory", "with_metric"]


def _make(metric, labels, reference, summary=None, samples: int = 0):
    from ..accuracy.task_metrics import make_task_metric

    # The caller's own metric (the API's metric=, a command line's --metric): a module:function may be imported.
    return make_task_metric(metric, reference, labels, own=True)


def metric_factory(metric, labels: Optional[np.ndarray] = None):
    """``f(reference, summary, samples) -> TaskMetric`` for :attr:`PlanTarget.metric_factory`.

    Parameters
    ----------
    metric : str, callable or TaskMetric
        As :func:`~..accuracy.task_metrics.make_task_metric` takes it.
    labels : array, optional
        Classes of the held-back samples, in order (``top1``).
    """
    return functools.partial(_make, metric, labels)


def with_metric(target: Optional[PlanTarget], metric=None, labels: Optional[np.ndarray] = None) -> PlanTarget:
    """``target`` (default: cosine >= 0.99) with ``metric`` as its task metric, ready for the planner to build.

    Without a ``target``, a metric is the whole target (no cosine); a given target keeps its
    cosine/SNR and its ``max_metric_drop``. ``metric`` None leaves ``target`` as it is.
    ``labels`` are the held-back samples' own (the planner picks them from the data's).
    """
    if metric is None:
        return target or PlanTarget()
    factory = metric_factory(metric, labels)
    spec = metric if isinstance(metric, str) else ""  # text rebuilds the metric where the engines run
    if target is None:
        return PlanTarget(cosine=None, metric_factory=factory, metric_spec=spec)
    return dataclasses.replace(target, metric=None, metric_name="", metric_factory=factory, metric_spec=spec,
                               task_metric=None, labels=None)
