"""The toolkit's own task metrics, and the :class:`TaskMetric` every metric is made as.

Each factory is ``factory(reference, options, labels) -> TaskMetric``: ``reference`` maps output
names to FP32's outputs over the held-back samples (batch first), ``options`` are the
``:``-separated words after the metric's name (``detection:0.25:output0``), ``labels`` the samples'
classes (``top1``). :data:`BUILTIN` names them; :mod:`.task_metrics` looks names up (its
:data:`~.task_metrics.REGISTRY` starts as a copy and grows by what the user registers).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Dict, List, Mapping, Optional, Tuple

import numpy as np

from ..common.errors import UserError
from . import detection as det
from .metrics import cosine_similarity, topk_agreement
from .output_groups import check_outputs

__all__ = ["BUILTIN", "DEFAULT_DROP", "DETECTION_DROP", "Factory", "Outputs", "TaskMetric"]

Outputs = Mapping[str, np.ndarray]
#: factory(reference, options, labels) -> TaskMetric
Factory = Callable[[Outputs, List[str], Optional[np.ndarray]], "TaskMetric"]

#: A task metric's default allowance below FP32's score (agreement metrics: 1% of samples, pixels or tokens).
DEFAULT_DROP = 0.01
#: The detection F1's: F1 >= 0.95 against FP32's detections, the usual bar for a quantized detector. A held-back
#: set holds few detections (a YOLOv8 on 4 document pages: 31), so one lost box moves F1 by about 0.03 and 0.01
#: would refuse every INT8 candidate over a single borderline score.
DETECTION_DROP = 0.05

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


def _pooled_cosine(reference: Outputs, options: List[str], labels=None) -> TaskMetric:
    out = _output(reference, _opt(options, 0) or None)
    ref = reference[out]
    return TaskMetric(lambda o: cosine_similarity(ref, o[out]), f"cosine ({out})", outputs=(out,), pooled=True)


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
    classes = int(np.asarray(reference[out]).reshape(n, -1).shape[1]) if n else 0
    outside = wanted[(wanted < 0) | (wanted >= classes)]
    if outside.size:
        raise UserError(f"{outside.size} of the {n} held-back labels are not classes of {out!r} "
                        f"(e.g. {int(outside[0])}; it scores {classes} classes, 0 to {classes - 1}).",
                        "A label no output can name scores top-1 0.0 for FP32 and every candidate alike, so every "
                        "candidate would meet the target.",
                        "Give the labels of these samples as class indices of this output, or name the class-score "
                        "output after the metric (--metric top1:OUTPUT).")

    def accuracy(outputs: Outputs) -> float:
        scores = np.asarray(outputs[out])  # [N, K], or [N, K, 1, 1] of a pooled head: one class per sample
        return float(np.mean(np.argmax(scores.reshape(len(scores), -1), axis=1) == wanted))

    return TaskMetric(accuracy, f"top-1 accuracy ({out}, {n} labels)", reference_value=accuracy(reference),
                      outputs=(out,))


#: Built-in metric name -> factory.
BUILTIN: Dict[str, Factory] = {
    "detection": _detection(False),
    "detection-obj": _detection(True),
    "top1-agreement": _top1_agreement,
    "topk-agreement": _topk_agreement,
    "mask-iou": _mask_iou,
    "seg-miou": _seg_miou,
    "cosine": _pooled_cosine,
    "worst-group": _worst_group,
    "top1": _top1_labels,
}
