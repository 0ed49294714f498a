"""The demo classifier's input: its name, and PaddleOCR's preprocessing of a 48x192 crop."""

from __future__ import annotations

import numpy as np

#: Name of the model's only input.
INPUT_NAME = "x"


def preprocess(images: np.ndarray) -> np.ndarray:
    """PaddleOCR's classifier preprocessing: HWC uint8 -> NCHW float32 in [-1, 1].

    Parameters
    ----------
    images : numpy.ndarray
        ``(N, 48, 192, 3)`` or ``(48, 192, 3)`` uint8.
    """
    x = np.asarray(images, dtype=np.float32)
    if x.ndim == 3:
        x = x[None]
    x = (x / 255.0 - 0.5) / 0.5
    return np.ascontiguousarray(x.transpose(0, 3, 1, 2))
