"""A plan's target with a task metric: the one target's (:mod:`~..accuracy.target`)."""

from __future__ import annotations

from ..accuracy.target import metric_factory, with_metric

__all__ = ["metric_factory", "with_metric"]
