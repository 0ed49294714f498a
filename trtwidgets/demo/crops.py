"""Real text-line-sized crops cut from scikit-image's bundled images.

scikit-image is imported inside the function: it is a test/benchmark
dependency, not a runtime one (the bundled ``samples.npz`` was made with this).
"""

from __future__ import annotations

import numpy as np


def text_line_crops(n: int, seed: int = 0) -> np.ndarray:
    """``n`` uint8 crops of shape (48, 192, 3) from scikit-image's bundled images."""
    from skimage import data, transform

    rng = np.random.default_rng(seed)
    sources = [data.page(), data.text(), data.camera(), data.coffee(), data.chelsea()]
    # Text sources come first and are drawn more often: the model is a text-line classifier.
    weights = np.array([4, 3, 1, 1, 1], dtype=float)
    weights /= weights.sum()
    crops = []
    for i in range(n):
        img = sources[rng.choice(len(sources), p=weights)]
        if img.ndim == 2:
            img = np.stack([img] * 3, axis=-1)
        h, w = img.shape[:2]
        ch = int(rng.integers(24, min(96, h)))
        cw = min(w, int(ch * rng.uniform(3.0, 6.0)))
        y = int(rng.integers(0, h - ch + 1))
        x = int(rng.integers(0, w - cw + 1))
        crop = img[y:y + ch, x:x + cw]
        out = transform.resize(crop, (48, 192), preserve_range=True, anti_aliasing=True).astype(np.uint8)
        if i % 2 == 1:
            out = out[::-1, ::-1]
        crops.append(out)
    return np.stack(crops)
