"""Task metrics for the planner's target: top-1 against labels, mask IoU against the float model.

A metric is ``f(outputs) -> float`` over the concatenated outputs of the held-back
data, higher is better; the planner compares it with the float model's value.
"""

from __future__ import annotations

from typing import Callable, Dict, Optional, Tuple

import numpy as np

from ..common.errors import UserError

__all__ = ["mask_iou_metric", "parse_metric"]


def mask_iou_metric(reference: Dict[str, np.ndarray], threshold: float = 0.3,
                    output: Optional[str] = None) -> Tuple[Callable[[Dict[str, np.ndarray]], float], str]:
    """IoU of ``output > threshold`` against the float model's mask (a segmenter's or text detector's map).

    The float model scores 1.0 against itself; a candidate's IoU says how much of the
    mask survives quantization.
    """
    name = output or next(iter(reference))
    if name not in reference:
        raise UserError(f"The model has no output {name!r}.", f"Its outputs are {', '.join(reference)}.",
                        "Name one of them, e.g. --metric mask-iou:0.3:OUTPUT.")
    ref_mask = np.asarray(reference[name]) > threshold
    if not ref_mask.any():
        raise UserError(f"No value of {name} exceeds {threshold} on the held-back data.",
                        "The mask IoU of an empty mask says nothing.",
                        "Pick a lower threshold, or data where the model finds something.")

    def iou(outputs: Dict[str, np.ndarray]) -> float:
        mask = np.asarray(outputs[name]) > threshold
        union = np.logical_or(mask, ref_mask).sum()
        return float(np.logical_and(mask, ref_mask).sum() / union) if union else 1.0

    return iou, f"mask IoU@{threshold:g} ({name})"


def parse_metric(text: str, reference: Dict[str, np.ndarray], summary=None, samples: int = 0, labels=None):
    """``(metric, name)`` from the CLI's ``--metric`` text: ``top1`` (needs labels) or ``mask-iou[:T[:OUTPUT]]``."""
    kind, _, rest = text.partition(":")
    if kind == "top1":
        if labels is None:
            raise UserError("--metric top1 needs --labels.", "Top-1 accuracy compares the class with labels.",
                            "Give --labels FILE (.npy of integer classes, in data order).")
        from ..qdq.validate import label_accuracy

        return label_accuracy(labels, summary, samples)
    if kind == "mask-iou":
        thr_text, _, out = rest.partition(":")
        try:
            thr = float(thr_text) if thr_text else 0.3
        except ValueError:
            raise UserError(f"{thr_text!r} is not a threshold.", "mask-iou takes a number: mask-iou:0.3.",
                            "Write e.g. --metric mask-iou:0.3") from None
        return mask_iou_metric(reference, thr, out or None)
    raise UserError(f"Unknown metric {text!r}.", "The planner knows top1 (with --labels) and mask-iou[:T[:OUTPUT]].",
                    "Use one of them, or the Python API's PlanTarget(metric=callable).")
