"""The check of an export on held-back samples, before it is written: the one verdict, and lint.

One :class:`HeldBackCheck` runs the float model once (a :class:`~..accuracy.reference.Reference`)
and then judges any number of Q/DQ exports against it by one :class:`~..accuracy.target.Target`
(:func:`~.validate.validate_qdq`, :func:`~..accuracy.verdict.evaluate`): the export itself, and the
variants the advice tries (:mod:`.export_advice`). ``trtwidgets export-qdq --held-back`` and
``trtwidgets.export_qdq(held_back=...)`` both check through it.
"""

from __future__ import annotations

from typing import Any, List, Mapping, Optional, Sequence, Tuple

import numpy as np

__all__ = ["HeldBackCheck", "held_back_feeds"]


def held_back_feeds(model, data: Any, samples: Optional[int] = None) -> Sequence[Mapping[str, np.ndarray]]:
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
    target : Target, optional
        What every export is judged by (default: cosine >= 0.99 on the worst channel group).
    labels : ndarray, optional
        The samples' classes (a ``top1`` metric).
    shown_metric : TaskMetric, optional
        A metric shown beside the target for both models, not judged.
    trt_version, precision : str
        What lint checks the export for.
    """

    def __init__(self, model, feeds: Sequence[Mapping[str, np.ndarray]], target=None, labels=None,
                 shown_metric=None, trt_version: Optional[str] = None, precision: str = "int8") -> None:
        from ..accuracy.reference import Reference
        from .validate import check_target

        self.model = model
        self.reference = Reference.compute(model, feeds, labels=labels)
        self.target = check_target(target)
        self.shown_metric = shown_metric
        self.trt_version, self.precision = trt_version, precision

    @property
    def feeds(self) -> List[Mapping[str, np.ndarray]]:
        """The held-back samples, one feed each."""
        return list(self.reference.feeds)

    def __call__(self, export, lint: bool = False):
        """The :class:`~.validate.QdqValidation` of ``export`` (a QdqExport, or a model) on the samples."""
        from .validate import validate_qdq

        from .export_report import QdqExport

        model = export.model if isinstance(export, QdqExport) else export
        return validate_qdq(self.model, model, target=self.target,
                            held_back=self.reference, shown_metric=self.shown_metric, trt_version=self.trt_version,
                            precision=self.precision, run_lint=lint)

    def float_part(self, dtype: str = "fp16", keep_fp32=()):
        """The float model alone in ``dtype`` judged by the same target, with its FP32 island when it fails
        (:func:`~.float_island.check_float_part`)."""
        from .float_island import check_float_part

        bound, _ = self.target.bound(self.reference.outputs, labels=self.reference.labels)
        return check_float_part(self.model, self.reference, bound, dtype, tuple(keep_fp32))

    def outcome(self, export) -> Tuple[bool, str, float]:
        """``(passed, in words, margin)``: the check without lint (what the advice asks of each variant); the
        margin is how far the judged measure lies above its part of the target (negative when it fails)."""
        v = self(export)
        failures = v.failures
        return not failures, ("; ".join(failures) if failures else passed_line(v)), v.margin()


def passed_line(v) -> str:
    """What a passing check measured, in a few words."""
    acc = v.verdict.accuracy if v.verdict is not None else None
    parts = [f"cosine {acc.cosine:.4f} (worst channel group)" if acc is not None else f"cosine {v.cosine:.4f}"]
    if v.task_metric_name:
        parts.append(f"{v.task_metric_name} {v.task_metric_qdq:.4f} (FP32 {v.task_metric_reference:.4f})")
    return ", ".join(parts)
