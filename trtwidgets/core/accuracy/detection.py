"""Detections of a YOLO-style detector, decoded and matched in numpy: the ``detection`` task metric's parts.

A packed YOLO output holds, per image and per anchor, four box values ``cx, cy, w, h``
followed by the class scores (YOLOv8 and later: ``[N, 4+C, A]``; some exports
transpose it to ``[N, A, 4+C]``; YOLOv5-style outputs have an objectness score at
channel 4, which multiplies the class scores when ``objectness=True``).

:func:`decode` keeps the anchors whose best class score reaches the score threshold
and runs class-wise non-maximum suppression; :func:`match_f1` counts a candidate's
detections that match the reference's (same class, IoU >= 0.5, greedy by score) and
returns F1. Against FP32's own detections, F1 = 1 means the candidate finds the same
objects; it falls when quantization pushes class scores across the threshold.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Tuple

import numpy as np

from ..common.errors import UserError

__all__ = ["Detections", "box_iou", "decode", "detection_axis", "match_counts", "match_f1", "nms"]

#: Ultralytics' defaults: score 0.25, NMS IoU 0.7, at most 300 detections an image.
SCORE_THRESHOLD = 0.25
NMS_IOU = 0.7
MAX_DETECTIONS = 300


@dataclass(frozen=True)
class Detections:
    """One image's detections: ``boxes`` ``[K, 4]`` (x1, y1, x2, y2), ``scores`` ``[K]``, ``classes`` ``[K]``."""

    boxes: np.ndarray
    scores: np.ndarray
    classes: np.ndarray

    def __len__(self) -> int:
        return int(self.scores.shape[0])


def detection_axis(shape, objectness: bool = False) -> int:
    """The channel axis (1 or 2) of a packed output ``[N, 4+C, A]`` / ``[N, A, 4+C]``.

    The shorter of the last two axes holds the channels (there are more anchors than classes).

    Raises
    ------
    UserError
        The output is not 3-D, or has too few channels for boxes and a class.
    """
    need = 6 if objectness else 5
    if len(shape) != 3 or min(shape[1], shape[2]) < need:
        raise UserError(f"An output of shape {tuple(shape)} is not a packed YOLO output.",
                        f"The detection metric reads [N, 4+C, A] or [N, A, 4+C] with at least {need} channels "
                        "(4 box values, " + ("objectness, " if objectness else "") + "class scores).",
                        "Name the detector's output: --metric detection:0.25:OUTPUT, or use another metric.")
    return 1 if shape[1] <= shape[2] else 2


def box_iou(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """IoU matrix ``[len(a), len(b)]`` of x1y1x2y2 boxes."""
    a = np.asarray(a, dtype=np.float64).reshape(-1, 4)
    b = np.asarray(b, dtype=np.float64).reshape(-1, 4)
    lt = np.maximum(a[:, None, :2], b[None, :, :2])
    rb = np.minimum(a[:, None, 2:], b[None, :, 2:])
    inter = np.prod(np.clip(rb - lt, 0.0, None), axis=2)
    area_a = np.prod(np.clip(a[:, 2:] - a[:, :2], 0.0, None), axis=1)
    area_b = np.prod(np.clip(b[:, 2:] - b[:, :2], 0.0, None), axis=1)
    union = area_a[:, None] + area_b[None, :] - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(union > 0, inter / union, 0.0)


def nms(boxes: np.ndarray, scores: np.ndarray, classes: np.ndarray, iou: float = NMS_IOU,
        max_det: int = MAX_DETECTIONS) -> np.ndarray:
    """Indices kept by class-wise non-maximum suppression, best score first.

    Boxes of different classes never suppress each other (each class is offset far
    apart, as Ultralytics and torchvision's ``batched_nms`` do).
    """
    if len(scores) == 0:
        return np.zeros(0, dtype=np.int64)
    span = float(np.abs(boxes).max()) + 1.0
    shifted = boxes + (classes.astype(np.float64) * 2.0 * span)[:, None]
    order = np.argsort(-scores, kind="stable")
    keep: List[int] = []
    while order.size and len(keep) < max_det:
        i = int(order[0])
        keep.append(i)
        if order.size == 1:
            break
        ious = box_iou(shifted[i:i + 1], shifted[order[1:]])[0]
        order = order[1:][ious <= iou]
    return np.asarray(keep, dtype=np.int64)


def decode(output: np.ndarray, score_threshold: float = SCORE_THRESHOLD, nms_iou: float = NMS_IOU,
           objectness: bool = False, axis: Optional[int] = None) -> List[Detections]:
    """Per image of a packed YOLO output: boxes, scores and classes after threshold and class-wise NMS.

    Parameters
    ----------
    output : ndarray
        ``[N, 4+C, A]`` or ``[N, A, 4+C]`` (``axis`` says which; default :func:`detection_axis`).
    score_threshold : float
        A detection's score (its best class score, times objectness) must reach this.
    nms_iou : float
        Boxes of one class overlapping more than this are suppressed.
    objectness : bool
        Channel 4 is an objectness score (YOLOv5 layout).
    """
    out = np.asarray(output, dtype=np.float64)
    if axis is None:
        axis = detection_axis(out.shape, objectness)
    per_anchor = out if axis == 2 else np.swapaxes(out, 1, 2)  # [N, A, 4+C]
    result: List[Detections] = []
    for img in per_anchor:
        img = np.where(np.isfinite(img), img, -np.inf)
        cls_scores = img[:, 5:] * img[:, 4:5] if objectness else img[:, 4:]
        classes = np.argmax(cls_scores, axis=1)
        scores = cls_scores[np.arange(len(classes)), classes]
        keep = scores >= score_threshold
        box = img[keep, :4]
        xyxy = np.concatenate([box[:, :2] - box[:, 2:] / 2.0, box[:, :2] + box[:, 2:] / 2.0], axis=1)
        xyxy = np.nan_to_num(xyxy, nan=0.0, posinf=0.0, neginf=0.0)
        idx = nms(xyxy, scores[keep], classes[keep], nms_iou)
        result.append(Detections(xyxy[idx], scores[keep][idx], classes[keep][idx]))
    return result


def match_counts(reference: Detections, candidate: Detections, iou: float = 0.5) -> Tuple[int, int, int]:
    """``(true positives, false positives, false negatives)`` of ``candidate`` against ``reference``.

    Greedy in the candidate's score order: each candidate detection takes the unmatched
    reference detection of its class with the highest IoU, if that IoU reaches ``iou``.
    """
    if len(candidate) == 0 or len(reference) == 0:
        return 0, len(candidate), len(reference)
    ious = box_iou(candidate.boxes, reference.boxes)
    ious[candidate.classes[:, None] != reference.classes[None, :]] = -1.0
    taken = np.zeros(len(reference), dtype=bool)
    tp = 0
    for i in np.argsort(-candidate.scores, kind="stable"):
        row = np.where(taken, -1.0, ious[i])
        j = int(np.argmax(row))
        if row[j] >= iou:
            taken[j] = True
            tp += 1
    return tp, len(candidate) - tp, len(reference) - tp


def match_f1(reference: List[Detections], candidate: List[Detections], iou: float = 0.5) -> float:
    """F1 of a candidate's detections against the reference's, summed over images (1.0 when both find nothing)."""
    tp = fp = fn = 0
    for r, c in zip(reference, candidate):
        a, b, d = match_counts(r, c, iou)
        tp, fp, fn = tp + a, fp + b, fn + d
    if tp + fp + fn == 0:
        return 1.0
    return 2.0 * tp / (2.0 * tp + fp + fn)
