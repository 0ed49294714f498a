"""Labelled data for the demo classifier: text lines, upright and turned by 180 degrees.

The demo model tells text lines at 0 degrees from lines at 180 degrees. Labels come
for free: cut a line of real printed text (scikit-image's scanned ``page``), keep it
as it is (label 0) and turn it by 180 degrees (label 1). Random crops of whole
images (``crops.text_line_crops``) cut lines in half and hold photos, on which the
model is at chance; crops aligned on the page's text lines are what it was made for.

The page is split at its middle column: ``half="left"`` and ``half="right"`` never
share a pixel, so one can train on one half and measure on the other.
scikit-image is imported inside the functions (a test/notebook dependency).
"""

from __future__ import annotations

from typing import List, Tuple

import numpy as np

#: Darker than the local background by this many grey levels counts as ink.
INK_CONTRAST = 25.0
#: A text line is a run of rows with at least this share of ink pixels ...
INK_SHARE = 0.1
#: ... at least this many rows high (thinner runs are rules or specks).
MIN_LINE_ROWS = 8


def text_line_rows(image: np.ndarray) -> List[Tuple[int, int]]:
    """The ``(top, bottom)`` rows of the text lines of a greyscale page (bottom exclusive).

    Parameters
    ----------
    image : numpy.ndarray
        2-D greyscale image, dark text on a light (possibly uneven) background.
    """
    from skimage import filters

    img = np.asarray(image, dtype=np.float64)
    # Against a blurred copy rather than one threshold: the scanned page's lighting is uneven.
    background = filters.gaussian(img, sigma=8, preserve_range=True)
    share = (img < background - INK_CONTRAST).mean(axis=1)
    rows, top = [], None
    for r, s in enumerate(np.append(share, 0.0)):
        if s >= INK_SHARE and top is None:
            top = r
        elif s < INK_SHARE and top is not None:
            if r - top >= MIN_LINE_ROWS:
                rows.append((top, r))
            top = None
    return rows


def orientation_crops(n: int, seed: int = 0, half: str = "all") -> Tuple[np.ndarray, np.ndarray]:
    """``2 n`` labelled crops: ``n`` text-line crops upright (label 0) and the same turned (label 1).

    Parameters
    ----------
    n : int
        Crops per orientation.
    seed : int
        Seed of the crop positions and sizes.
    half : {"all", "left", "right"}
        Which columns of the page the crops come from; the halves share no pixel.

    Returns
    -------
    images : numpy.ndarray
        uint8 ``(2 n, 48, 192, 3)`` RGB; the first ``n`` upright, then the same turned.
    labels : numpy.ndarray
        int64 ``(2 n,)``: the index into ``demo.LABELS`` (0 for "0", 1 for "180").
    """
    from skimage import data, transform

    if half not in ("all", "left", "right"):
        raise ValueError(f"half={half!r}: use 'all', 'left' or 'right'")
    page = data.page()
    lines = text_line_rows(page)
    x0, x1 = {"all": (0, page.shape[1]), "left": (0, page.shape[1] // 2),
              "right": (page.shape[1] // 2, page.shape[1])}[half]
    rng = np.random.default_rng(seed)
    crops = []
    for _ in range(int(n)):
        top, bottom = lines[int(rng.integers(len(lines)))]
        # A margin of a quarter line above and below, jittered: PaddleOCR's detector crops about so.
        h = int(round((bottom - top) * rng.uniform(1.3, 1.6)))
        y = int(np.clip((top + bottom) // 2 - h // 2 + rng.integers(-2, 3), 0, page.shape[0] - h))
        w = min(x1 - x0, int(h * rng.uniform(3.0, 4.0)))    # the model's 48x192 is 4:1
        x = int(rng.integers(x0, x1 - w + 1))
        crop = transform.resize(page[y:y + h, x:x + w], (48, 192), preserve_range=True, anti_aliasing=True)
        crops.append(np.repeat(crop.astype(np.uint8)[..., None], 3, axis=-1))
    upright = np.stack(crops)
    images = np.concatenate([upright, upright[:, ::-1, ::-1]])
    labels = np.repeat(np.array([0, 1], dtype=np.int64), len(upright))
    return np.ascontiguousarray(images), labels
