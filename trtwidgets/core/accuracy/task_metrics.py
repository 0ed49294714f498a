"""Task metrics by name: what a plan's accuracy target is judged by, built-in or the user's own.

A task metric is ``metric(outputs) -> float``: ``outputs`` maps output names to arrays
over the held-back samples (samples stacked on the batch axis, as the planner collects
them); higher is better. It is made from the FP32 reference outputs, so that most
metrics measure **agreement with FP32** and score 1.0 on FP32 itself.

Built in (:data:`REGISTRY`; ``--metric`` text, then its ``:``-separated options):

=====================================  =====================================================
``detection[:SCORE[:OUTPUT[:IOU]]]``   F1 of the candidate's detections against FP32's
                                       (YOLO-style ``[N, 4+C, A]`` or ``[N, A, 4+C]``;
                                       score threshold 0.25, class-wise NMS, match IoU 0.5)
``detection-obj[...]``                 the same with an objectness channel (YOLOv5 layout)
``top1-agreement[:OUTPUT]``            fraction of samples whose arg-max class is FP32's
``topk-agreement:K[:OUTPUT]``          top-k overlap with FP32 (:func:`.metrics.topk_agreement`)
``mask-iou[:T[:OUTPUT]]``              IoU of ``output > T`` against FP32's mask
``seg-miou[:OUTPUT]``                  mean IoU over classes of the per-pixel arg-max (axis 1 of
                                       ``[N, K, H, W]`` logits) against FP32's
``cosine[:OUTPUT]`` / ``snr[:OUTPUT]`` the pooled metrics of :mod:`.metrics` (SNR in dB)
``worst-group``                        the worst channel group's cosine (:mod:`.output_groups`)
``top1`` (needs labels)                top-1 accuracy against the user's labels
=====================================  =====================================================

Anything else of the form ``package.module:function`` is **the user's own metric**,
imported by name with :mod:`importlib` (never evaluated). The function is called as
``function(reference, candidate) -> float`` with two mappings of output name to array,
higher is better; it is called once on ``(reference, reference)`` when it is loaded, so a
wrong signature or a non-number fails at once with a :class:`UserError`, and that call's
value is the float model's score (``TaskMetric.reference_value``).

From the API, :func:`make_task_metric` takes a name or a callable of that signature.
"""

from __future__ import annotations

import importlib
import inspect
import math
import re
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Tuple, Union

import numpy as np

from ..common.errors import UserError
from . import detection as det
from .metrics import cosine_similarity, snr_db, topk_agreement
from .output_groups import check_outputs

__all__ = ["DEFAULT_DROP", "DETECTION_DROP", "REGISTRY", "TaskMetric", "check_metric_text", "load_user_metric", "make_task_metric", "metric_names", "parse_task_metric",
           "register_metric"]

Outputs = Mapping[str, np.ndarray]
#: factory(reference, options, labels) -> TaskMetric
Factory = Callable[[Outputs, List[str], Optional[np.ndarray]], "TaskMetric"]

#: A task metric's default allowance below FP32's score (agreement metrics: 1% of samples, pixels or tokens).
DEFAULT_DROP = 0.01
#: The detection F1's: F1 >= 0.95 against FP32's detections, the usual bar for a quantized detector. A held-back
#: set holds few detections (a YOLOv8 on 4 document pages: 31), so one lost box moves F1 by about 0.03 and 0.01
#: would refuse every INT8 candidate over a single borderline score.
DETECTION_DROP = 0.05

_DOTTED = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


@dataclass(frozen=True)
class TaskMetric:
    """A named task metric.

    Attributes
    ----------
    fn : callable
        ``fn(outputs) -> float``, higher is better.
    name : str
        What it is, in words, with its options (``"detection F1@0.25 (output0)"``).
    reference_value : float
        The float model's score (1.0 for agreement metrics; the user's metric on FP32).
    outputs : tuple of str, optional
        The outputs it reads (None: unknown, e.g. the user's own metric; all of them for ``worst-group``).
    pooled : bool
        A pooled cosine or SNR of an output: blind to channel groups with a small share of its energy.
    default_drop : float
        How far below FP32's score a candidate may fall when the user sets no ``max_metric_drop``
        (:data:`DEFAULT_DROP`; the detection F1 allows :data:`DETECTION_DROP`).
    """

    fn: Callable[[Outputs], float]
    name: str
    reference_value: float = 1.0
    outputs: Optional[Tuple[str, ...]] = None
    pooled: bool = False
    default_drop: float = 0.01

    def __call__(self, outputs: Outputs) -> float:
        return float(self.fn(outputs))

    def as_pair(self) -> Tuple[Callable[[Outputs], float], str]:
        """``(fn, name)``: the form the planner's ``metric`` argument takes."""
        return self.fn, self.name


def _output(reference: Outputs, name: Optional[str], want=None) -> str:
    if name:
        if name not in reference:
            raise UserError(f"The model has no output {name!r}.", f"Its outputs are {', '.join(reference)}.",
                            "Name one of them after the metric, e.g. --metric top1-agreement:OUTPUT.")
        return name
    if want is not None:
        for n, v in reference.items():
            if want(np.shape(v)):
                return n
    return next(iter(reference))


def _number(text: str, what: str, default: float) -> float:
    if not text:
        return default
    try:
        value = float(text)
    except ValueError:
        raise UserError(f"{text!r} is not a number ({what}).", f"The metric's {what} is a number.",
                        "Write e.g. --metric detection:0.25") from None
    if not math.isfinite(value):
        raise UserError(f"{text!r} is not a finite {what}.", None, "Give a finite number.")
    return value


def _opt(options: List[str], i: int) -> str:
    return options[i] if len(options) > i else ""


def _detection(objectness: bool) -> Factory:
    def factory(reference: Outputs, options: List[str], labels=None) -> TaskMetric:
        score = _number(_opt(options, 0), "score threshold", det.SCORE_THRESHOLD)
        out = _output(reference, _opt(options, 1) or None, lambda s: len(s) == 3 and min(s[1:]) >= 5)
        iou = _number(_opt(options, 2), "match IoU", 0.5)
        axis = det.detection_axis(np.shape(reference[out]), objectness)
        ref = det.decode(reference[out], score, objectness=objectness, axis=axis)
        if not any(len(d) for d in ref):
            raise UserError(f"FP32 finds no detection with score >= {score:g} in {out!r} on the held-back data.",
                            "F1 against no detections says nothing.",
                            "Use samples with objects in them, or a lower score threshold (detection:0.1).")

        def f1(outputs: Outputs) -> float:
            return det.match_f1(ref, det.decode(outputs[out], score, objectness=objectness, axis=axis), iou)

        return TaskMetric(f1, f"detection F1@{score:g} ({out})", outputs=(out,), default_drop=DETECTION_DROP)

    return factory


def _top1_agreement(reference: Outputs, options: List[str], labels=None) -> TaskMetric:
    out = _output(reference, _opt(options, 0) or None, lambda s: len(s) >= 2 and s[-1] >= 2)
    ref = np.argmax(np.asarray(reference[out]), axis=-1)

    def agreement(outputs: Outputs) -> float:
        return float(np.mean(np.argmax(np.asarray(outputs[out]), axis=-1) == ref))

    return TaskMetric(agreement, f"top-1 agreement ({out})", outputs=(out,))


def _topk_agreement(reference: Outputs, options: List[str], labels=None) -> TaskMetric:
    k = int(_number(_opt(options, 0), "k", 5))
    out = _output(reference, _opt(options, 1) or None, lambda s: len(s) >= 2 and s[-1] >= 2)
    ref = reference[out]

    def agreement(outputs: Outputs) -> float:
        return topk_agreement(ref, outputs[out], (k,)).get(k, float("nan"))

    return TaskMetric(agreement, f"top-{k} agreement ({out})", outputs=(out,))


def _mask_iou(reference: Outputs, options: List[str], labels=None) -> TaskMetric:
    thr = _number(_opt(options, 0), "threshold", 0.3)
    out = _output(reference, _opt(options, 1) or None)
    ref_mask = np.asarray(reference[out]) > thr
    if not ref_mask.any():
        raise UserError(f"No value of {out} exceeds {thr:g} on the held-back data.",
                        "The mask IoU of an empty mask says nothing.",
                        "Pick a lower threshold, or data where the model finds something.")

    def iou(outputs: Outputs) -> float:
        mask = np.asarray(outputs[out]) > thr
        union = np.logical_or(mask, ref_mask).sum()
        return float(np.logical_and(mask, ref_mask).sum() / union) if union else 1.0

    return TaskMetric(iou, f"mask IoU@{thr:g} ({out})", outputs=(out,))


def _seg_miou(reference: Outputs, options: List[str], labels=None) -> TaskMetric:
    out = _output(reference, _opt(options, 0) or None, lambda s: len(s) == 4 and s[1] >= 2)
    if np.ndim(reference[out]) != 4 or np.shape(reference[out])[1] < 2:
        raise UserError(f"seg-miou reads [N, K, H, W] class scores; {out!r} has shape {np.shape(reference[out])}.",
                        "The class of a pixel is the arg-max over axis 1.",
                        "Name a segmentation output (seg-miou:OUTPUT), or use mask-iou for a one-channel map.")
    ref = np.argmax(np.asarray(reference[out]), axis=1)
    k = np.shape(reference[out])[1]

    def miou(outputs: Outputs) -> float:
        cand = np.argmax(np.asarray(outputs[out]), axis=1)
        ious = []
        for c in range(k):
            r, p = ref == c, cand == c
            union = np.logical_or(r, p).sum()
            if union:
                ious.append(np.logical_and(r, p).sum() / union)
        return float(np.mean(ious)) if ious else 1.0

    return TaskMetric(miou, f"segmentation mIoU ({out})", outputs=(out,))


def _pooled(kind: str) -> Factory:
    def factory(reference: Outputs, options: List[str], labels=None) -> TaskMetric:
        out = _output(reference, _opt(options, 0) or None)
        ref = reference[out]
        if kind == "cosine":
            return TaskMetric(lambda o: cosine_similarity(ref, o[out]), f"cosine ({out})", outputs=(out,), pooled=True)
        return TaskMetric(lambda o: snr_db(ref, o[out]), f"SNR dB ({out})", reference_value=math.inf, outputs=(out,),
                          pooled=True)

    return factory


def _worst_group(reference: Outputs, options: List[str], labels=None) -> TaskMetric:
    ref = dict(reference)

    def worst(outputs: Outputs) -> float:
        check = check_outputs(ref, outputs)
        return 1.0 if check.worst is None else check.worst.cosine

    return TaskMetric(worst, "worst channel group cosine", outputs=tuple(ref))


def _top1_labels(reference: Outputs, options: List[str], labels=None) -> TaskMetric:
    if labels is None:
        raise UserError("--metric top1 needs --labels.", "Top-1 accuracy compares the class with labels.",
                        "Give --labels FILE (.npy of integer classes, in data order), or use top1-agreement.")
    out = _output(reference, _opt(options, 0) or None, lambda s: len(s) == 2 and s[-1] >= 2)
    labels = np.asarray(labels).astype(np.int64).ravel()
    n = np.shape(reference[out])[0]
    if len(labels) < n:
        raise UserError(f"{len(labels)} labels for {n} held-back samples.", "Every sample needs its label.",
                        "Give one label per sample, in data order.")
    wanted = labels[:n]

    def accuracy(outputs: Outputs) -> float:
        scores = np.asarray(outputs[out])  # [N, K], or [N, K, 1, 1] of a pooled head: one class per sample
        return float(np.mean(np.argmax(scores.reshape(len(scores), -1), axis=1) == wanted))

    return TaskMetric(accuracy, f"top-1 accuracy ({out}, {n} labels)", reference_value=accuracy(reference),
                      outputs=(out,))


#: Built-in metric name -> factory. Extend with :func:`register_metric`.
REGISTRY: Dict[str, Factory] = {
    "detection": _detection(False),
    "detection-obj": _detection(True),
    "top1-agreement": _top1_agreement,
    "topk-agreement": _topk_agreement,
    "mask-iou": _mask_iou,
    "seg-miou": _seg_miou,
    "cosine": _pooled("cosine"),
    "snr": _pooled("snr"),
    "worst-group": _worst_group,
    "top1": _top1_labels,
}


def register_metric(name: str, factory: Factory) -> None:
    """Add a built-in metric: ``factory(reference, options, labels) -> TaskMetric``."""
    if not re.match(r"^[a-z][a-z0-9-]*$", name):
        raise UserError(f"{name!r} is not a metric name.", "Names are lower case, digits and dashes.",
                        "Pick a name like 'my-metric'.")
    REGISTRY[name] = factory


def metric_names() -> Tuple[str, ...]:
    """The built-in metric names, sorted."""
    return tuple(sorted(REGISTRY))


def _check_signature(fn: Callable, text: str) -> None:
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return  # a builtin without a signature: the trial call below decides
    try:
        sig.bind({}, {})
    except TypeError:
        raise UserError(f"{text} does not take (reference, candidate).",
                        f"Its signature is {text.split(':')[-1]}{sig}; a metric is called as "
                        "function(reference, candidate) with two dicts of output name -> array.",
                        "Write it as def metric(reference, candidate) -> float (higher is better).") from None


def _wrap_user(fn: Callable, text: str, reference: Outputs) -> TaskMetric:
    ref = dict(reference)
    _check_signature(fn, text)
    try:
        value = float(fn(ref, ref))
    except UserError:
        raise
    except Exception as exc:  # noqa: BLE001 - the user's code: any failure is reported with its cause
        raise UserError(f"{text} failed on the float model's own outputs.", f"{type(exc).__name__}: {exc}",
                        "Fix the metric; it is called as function(reference, candidate) -> float.") from exc
    if math.isnan(value):
        raise UserError(f"{text} returned NaN on the float model's own outputs.",
                        "A metric must give a number for the plan to compare with.",
                        "Return a finite float, higher is better.")

    def metric(outputs: Outputs) -> float:
        return float(fn(ref, outputs))

    return TaskMetric(metric, text, reference_value=value)


def load_user_metric(text: str, reference: Outputs) -> TaskMetric:
    """The user's ``package.module:function``, imported by name (never evaluated), checked and wrapped.

    Raises
    ------
    UserError
        The text is not ``module:function``, the module does not import, it has no such
        function, or the function does not take ``(reference, candidate)`` / fails on FP32.
    """
    module_name, sep, attr = text.partition(":")
    if not sep or not _DOTTED.match(module_name) or not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", attr):
        raise UserError(f"{text!r} is neither a built-in metric nor package.module:function.",
                        f"The built-in metrics are {', '.join(metric_names())}.",
                        "Name one of them, or your own metric as mypackage.metrics:my_metric.")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - ImportError, or the module's own error at import
        raise UserError(f"The metric's module {module_name!r} does not import.", f"{type(exc).__name__}: {exc}",
                        "Install it, or put its folder on PYTHONPATH, and check the spelling.") from exc
    fn = getattr(module, attr, None)
    if not callable(fn):
        raise UserError(f"{module_name} has no function {attr!r}.",
                        f"Found {type(fn).__name__ if fn is not None else 'nothing'} under that name.",
                        "Name a function defined in that module: package.module:function.")
    return _wrap_user(fn, text, reference)


def check_metric_text(text: str) -> None:
    """Refuse, before any work, a ``--metric`` text that is neither a built-in name nor ``package.module:function``.

    The module is not imported here (that happens once the reference is known).

    Raises
    ------
    UserError
        An unknown name, with the built-in names listed.
    """
    kind = text.strip().partition(":")[0]
    if kind in REGISTRY:
        return
    module_name, sep, attr = text.strip().partition(":")
    if sep and _DOTTED.match(module_name) and re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", attr):
        return
    raise UserError(f"Unknown metric {text!r}: neither a built-in metric nor package.module:function.",
                    f"The built-in metrics are {', '.join(metric_names())}.",
                    "Name one of them (e.g. --metric detection), or your own as mypackage.metrics:my_metric.")


def parse_task_metric(text: str, reference: Outputs, labels: Optional[np.ndarray] = None) -> TaskMetric:
    """The task metric the CLI's ``--metric TEXT`` names (module docstring lists the forms).

    Parameters
    ----------
    text : str
        ``name[:option...]`` of a built-in metric, or ``package.module:function``.
    reference : mapping
        FP32's outputs over the held-back samples.
    labels : ndarray, optional
        Integer classes in sample order (for ``top1``).
    """
    kind, _, rest = text.strip().partition(":")
    factory = REGISTRY.get(kind)
    if factory is not None:
        return factory(reference, rest.split(":") if rest else [], labels)
    return load_user_metric(text.strip(), reference)


def make_task_metric(metric: Union[str, Callable, TaskMetric], reference: Outputs,
                     labels: Optional[np.ndarray] = None) -> TaskMetric:
    """A :class:`TaskMetric` from the API's ``metric=``: a name, ``(reference, candidate) -> float``, or one made."""
    if isinstance(metric, TaskMetric):
        return metric
    if isinstance(metric, str):
        return parse_task_metric(metric, reference, labels)
    if callable(metric):
        return _wrap_user(metric, getattr(metric, "__qualname__", repr(metric)), reference)
    raise UserError(f"metric={metric!r} is not a metric.", "A metric is a name or a function.",
                    f"Pass one of {', '.join(metric_names())}, or f(reference, candidate) -> float.")
