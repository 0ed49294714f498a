"""Small synthetic YOLO-style detector outputs ``[N, 4+C, A]`` with known objects (no model needed)."""

from __future__ import annotations

import numpy as np


def packed_output(images: int = 4, classes: int = 6, anchors: int = 400, objects: int = 5, seed: int = 0,
                  layout: str = "channels_first") -> np.ndarray:
    """Boxes in pixels of a 640x640 image (cx, cy, w, h), then class scores in 0..1.

    Each object is seen by 3 anchors with nearly the same box (NMS keeps one) and a
    confident score (0.4-0.95) in its class; every other anchor has a random box and
    background scores below 0.05.
    """
    rng = np.random.default_rng(seed)
    out = np.zeros((images, anchors, 4 + classes), np.float32)
    out[:, :, 0:2] = rng.uniform(20, 620, (images, anchors, 2))
    out[:, :, 2:4] = rng.uniform(8, 200, (images, anchors, 2))
    out[:, :, 4:] = rng.uniform(0.0, 0.05, (images, anchors, classes))
    for i in range(images):
        for k in range(objects):
            cx, cy = rng.uniform(100, 540, 2)
            w, h = rng.uniform(40, 160, 2)
            cls = int(rng.integers(classes))
            score = rng.uniform(0.4, 0.95)
            for j in range(3):
                a = k * 3 + j
                out[i, a, :4] = (cx + j, cy - j, w + j, h)
                out[i, a, 4:] = rng.uniform(0.0, 0.05, classes)
                out[i, a, 4 + cls] = score - 0.02 * j
    if layout == "channels_first":
        return np.ascontiguousarray(out.transpose(0, 2, 1))
    return out


def perturb_scores(out: np.ndarray, std: float, seed: int = 1, axis: int = 1) -> np.ndarray:
    """``out`` with Gaussian noise of ``std`` added to the class-score channels only."""
    rng = np.random.default_rng(seed)
    noisy = out.copy()
    idx = [slice(None)] * 3
    idx[axis] = slice(4, None)
    noisy[tuple(idx)] += rng.normal(0.0, std, noisy[tuple(idx)].shape).astype(out.dtype)
    return noisy
