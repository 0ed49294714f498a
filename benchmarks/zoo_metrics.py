"""The zoo's task metrics: how much of a model's *answer* survives quantization (numpy only).

Each compares a candidate's outputs with the reference's (ONNX Runtime FP32 on the CPU,
or ONNX Runtime running the same Q/DQ model for the TensorRT/ORT agreement):

``top1``              share of samples whose arg-max class is the same (cls, resnet);
``mask_iou``          intersection over union of the text masks at probability 0.3 (the DB
                      detector's ``thresh``), pooled over all held-back images (det);
``ctc_string``        share of text lines whose CTC greedy decode (arg-max per step,
                      repeats merged, blank 0 dropped) is the same label sequence (rec);
``embedding_cosine``  mean cosine of the sentence embeddings, row by row (minilm).
"""

from __future__ import annotations

from typing import List, Tuple

import numpy as np

METRICS = ("top1", "mask_iou", "ctc_string", "embedding_cosine")
MASK_THRESHOLD = 0.3


def top1_agreement(ref: np.ndarray, cand: np.ndarray) -> float:
    """Share of rows whose arg-max over the last axis agrees."""
    r, c = np.asarray(ref), np.asarray(cand)
    return float(np.mean(r.reshape(-1, r.shape[-1]).argmax(-1) == c.reshape(-1, c.shape[-1]).argmax(-1)))


def mask_iou(ref: np.ndarray, cand: np.ndarray, threshold: float = MASK_THRESHOLD) -> float:
    """IoU of the two binary masks ``> threshold``, pooled over every sample; 1.0 when both are empty."""
    r, c = np.asarray(ref) > threshold, np.asarray(cand) > threshold
    union = np.logical_or(r, c).sum()
    return 1.0 if union == 0 else float(np.logical_and(r, c).sum() / union)


def ctc_greedy(probs: np.ndarray, blank: int = 0) -> List[Tuple[int, ...]]:
    """CTC greedy decode of ``(N, T, classes)`` scores: the label sequence of each sample."""
    best = np.asarray(probs).argmax(-1)
    out = []
    for row in best:
        keep = np.ones(len(row), bool)
        keep[1:] = row[1:] != row[:-1]
        out.append(tuple(int(v) for v in row[keep] if v != blank))
    return out


def ctc_string_agreement(ref: np.ndarray, cand: np.ndarray) -> float:
    """Share of samples whose greedy-decoded label sequences are identical."""
    a, b = ctc_greedy(ref), ctc_greedy(cand)
    return float(np.mean([x == y for x, y in zip(a, b)]))


def embedding_cosine(ref: np.ndarray, cand: np.ndarray) -> float:
    """Mean row-wise cosine similarity of two ``(N, D)`` embedding matrices."""
    r = np.asarray(ref, np.float64).reshape(len(ref), -1)
    c = np.asarray(cand, np.float64).reshape(len(cand), -1)
    num = (r * c).sum(1)
    den = np.linalg.norm(r, axis=1) * np.linalg.norm(c, axis=1)
    return float(np.mean(num / np.maximum(den, 1e-30)))


def task_metric(name: str, ref: np.ndarray, cand: np.ndarray) -> float:
    """The metric ``name`` (one of :data:`METRICS`) of ``cand`` against ``ref``."""
    fn = {"top1": top1_agreement, "mask_iou": mask_iou, "ctc_string": ctc_string_agreement,
          "embedding_cosine": embedding_cosine}.get(name)
    if fn is None:
        raise ValueError(f"unknown task metric {name!r}; choose from {', '.join(METRICS)}")
    if np.shape(ref) != np.shape(cand):
        raise ValueError(f"{name}: reference shape {np.shape(ref)} differs from candidate shape {np.shape(cand)}")
    return fn(ref, cand)
