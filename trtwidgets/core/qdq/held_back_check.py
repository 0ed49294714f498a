"""The check of an export on held-back samples, before it is written: accuracy against FP32, a task metric, lint.

One :class:`HeldBackCheck` runs the float model once and then checks any number of Q/DQ exports
against it (:func:`~.validate.validate_qdq`): the export itself, and the variants the advice tries
(:mod:`.export_advice`). ``trtwidgets export-qdq --data`` and ``trtwidgets.export_qdq(held_back=...)``
both check through it.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Tuple

import numpy as np

__all__ = ["DEFAULT_CHECK_COSINE", "HeldBackCheck", "held_back_feeds"]

#: The lowest output cosine an export must keep when no task metric is given.
DEFAULT_CHECK_COSINE = 0.99


def held_back_feeds(model, data: Any, samples: Optional[int] = None) -> List[Mapping[str, np.ndarray]]:
    """The held-back samples ``data`` names: a folder of samples (each input cut along its own batch axis, as
    calibration reads them), ``"demo"`` (the held-back part of the demo's labelled set: text lines the bundled
    model reads, never calibrated on) or a sequence of feeds."""
    if isinstance(data, str) and data == "demo":
        from ...demo.labelled_set import labelled_set

        return labelled_set("held_back").feeds(1)[:samples or 64]
    if isinstance(data, (str, bytes)) or hasattr(data, "__fspath__"):
        from ..calibration.data import iter_feeds
        from ..calibration.sample_axes import SampleAxes

        return list(iter_feeds(data, model.summary, max_samples=samples, axes=SampleAxes(model.summary, model=model)))
    feeds = [dict(f) for f in data]
    return feeds[:samples] if samples else feeds


class HeldBackCheck:
    """An export's check on held-back samples (the float model's outputs computed once).

    Parameters
    ----------
    model : LoadedModel
        The float model.
    feeds : sequence of dict
        The held-back samples.
    metric : str, callable or (callable, name), optional
        A task metric as ``plan --metric`` names it (built from FP32's outputs), or ``f(outputs) -> float``.
    labels : ndarray, optional
        The samples' classes (a ``top1`` metric).
    max_metric_drop : float, optional
        How far the metric may fall below FP32's (default: a named metric's own allowance).
    min_cosine : float, optional
        The lowest output cosine; default :data:`DEFAULT_CHECK_COSINE` without a metric, none with one.
    trt_version, precision : str
        What lint checks the export for.
    """

    def __init__(self, model, feeds: Sequence[Mapping[str, np.ndarray]], metric=None, labels=None,
                 max_metric_drop: Optional[float] = None, min_cosine: Optional[float] = None,
                 trt_version: Optional[str] = None, precision: str = "int8"):
        from .validate import run_model

        self.model, self.feeds = model, list(feeds)
        self.reference, _ = run_model(model, self.feeds)
        self.min_cosine = min_cosine if min_cosine is not None else (None if metric is not None
                                                                      else DEFAULT_CHECK_COSINE)
        self.metric, self.labels, self.drop = metric, labels, max_metric_drop
        self.trt_version, self.precision = trt_version, precision

    def __call__(self, export, lint: bool = False):
        """The :class:`~.validate.QdqValidation` of ``export`` (a QdqExport) on the samples."""
        from .validate import validate_qdq

        metric, name = self.metric if isinstance(self.metric, tuple) else (self.metric, "task metric")
        return validate_qdq(self.model, export.model, self.feeds, task_metric=metric, task_metric_name=name,
                            labels=self.labels, max_metric_drop=self.drop, min_cosine=self.min_cosine,
                            trt_version=self.trt_version, precision=self.precision, run_lint=lint,
                            reference_outputs=self.reference)

    def outcome(self, export) -> Tuple[bool, str, float]:
        """``(passed, in words, margin)``: the check without lint (what the advice asks of each variant); the
        margin is how far the gated measure lies above its threshold (negative when it fails)."""
        v = self(export)
        failures = v.failures
        return not failures, ("; ".join(failures) if failures else passed_line(v)), margin(v)


def margin(v) -> float:
    """The smallest distance of a gated measure above its threshold (cosine, then the task metric)."""
    t = v.thresholds
    gaps = []
    if "min_cosine" in t:
        gaps.append(v.cosine - t["min_cosine"])
    if "max_metric_drop" in t and v.task_metric_qdq is not None:
        gaps.append(v.task_metric_qdq - (v.task_metric_reference - t["max_metric_drop"]))
    gaps = [g for g in gaps if g == g]  # NaN (non-finite outputs) is the worst
    return min(gaps) if gaps else (0.0 if not v.failures else -1.0)


def passed_line(v) -> str:
    """What a passing check measured, in a few words."""
    parts = [f"cosine {v.cosine:.4f}"]
    if v.task_metric_name:
        parts.append(f"{v.task_metric_name} {v.task_metric_qdq:.4f} (FP32 {v.task_metric_reference:.4f})")
    return ", ".join(parts)


def accuracy_failed(validation) -> bool:
    """True when a threshold on accuracy failed (not only lint): the advice can help only there."""
    return any(not f.startswith("lint") for f in validation.failures)
