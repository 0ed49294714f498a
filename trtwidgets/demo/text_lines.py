"""Real text lines rendered as 48x192 crops: labelled data for the orientation classifier.

The bundled ``samples.npz`` crops are cut at random places and scales from
scikit-image's images, so most are not text lines, and the FP32 classifier is at
chance on them (a good calibration set, a useless test set). Text lines rendered
with Pillow's default font are what the model was trained for: shown upright and
turned by 180 degrees they carry their label for free. The text is the standard
library's own (the Zen of Python, module docstrings), so nothing is downloaded.
"""

from __future__ import annotations

import codecs
import contextlib
import io
from typing import List

import numpy as np


def _sentences(n: int) -> List[str]:
    with contextlib.redirect_stdout(io.StringIO()):  # `import this` prints the poem
        import this
    import json
    import textwrap
    import unittest

    text = codecs.decode(this.s, "rot13") + "\n" + (json.__doc__ or "") + "\n" + (unittest.__doc__ or "")
    lines = []
    for raw in text.splitlines():
        for line in textwrap.wrap(" ".join(raw.split()), 40):
            if len(line) >= 16 and line.isprintable() and not line.startswith((">>>", "...")):
                lines.append(line)
    return lines[:n]


def text_line_images(n: int = 32) -> np.ndarray:
    """Up to ``n`` rendered text lines, uint8 ``(n, 48, 192, 3)``, upright, black on white.

    Each line is drawn at a height of 48 pixels, scaled to at most 192 wide keeping its
    aspect ratio, and padded on the right as PaddleOCR pads its classifier's input.
    """
    from PIL import Image, ImageDraw, ImageFont

    try:
        font = ImageFont.load_default(size=28)
    except TypeError:  # Pillow < 10.1: the small bitmap font only
        font = ImageFont.load_default()
    out = []
    for line in _sentences(n):
        img = Image.new("RGB", (1600, 48), "white")
        draw = ImageDraw.Draw(img)
        draw.text((4, 6), line, fill="black", font=font)
        width = min(1600, int(draw.textlength(line, font=font)) + 8)
        new_w = min(192, max(1, int(np.ceil(48 * width / 48))))
        crop = np.asarray(img.crop((0, 0, width, 48)).resize((new_w, 48)))
        arr = np.full((48, 192, 3), 255, np.uint8)
        arr[:, :new_w] = crop
        out.append(arr)
    return np.stack(out)
