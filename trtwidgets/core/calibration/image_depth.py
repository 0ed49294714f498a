"""Pixels of an image at its real depth, on the 8-bit scale the preprocessing expects.

The preprocessing's ``scale`` (default 1/255) is written for 8-bit pixels. Pillow's ``convert("RGB")``
of a 16-bit or float image clips every value above 255 to 255, so a 16-bit PNG calibrated as a
white image (input amax 1.0) without a word. Here:

* **8-bit** images (and everything Pillow reads as 8 bits per channel) are read as before;
* **16-bit** images (Pillow modes ``I;16*``, and ``I`` from a PNG, which holds at most 16 bits)
  are scaled to the 8-bit range, ``value * 255 / 65535``, so that the same preprocessing gives the
  same model input for the same picture at either depth; a note says so;
* **float** images (mode ``F``, e.g. a float TIFF) are used as they are when every value is finite
  and within [0, 255] (the 8-bit scale), with a note giving their range; otherwise they are refused;
* other depths (32-bit integers, signed 16-bit) are refused: their range is not known.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import numpy as np

from ..common.errors import CalibrationDataError
from ..common.notes import note

__all__ = ["SIXTEEN_BIT_MODES", "read_pixels"]

SIXTEEN_BIT_MODES = ("I;16", "I;16L", "I;16B", "I;16N")


def _refused(path: Path, mode: str, why: str) -> CalibrationDataError:
    return CalibrationDataError(f"{path} is a {mode} image that cannot be read at its depth.", why,
                                "Save it as an 8- or 16-bit PNG (or a float TIFF with values from 0 to 255), or "
                                "remove it from the folder.")


def _deep_gray(im, path: Path) -> Optional[np.ndarray]:
    """An ``H x W`` float32 array on the 8-bit scale for a 16-bit or float image; None for an 8-bit one."""
    mode = im.mode
    if mode in SIXTEEN_BIT_MODES or (mode == "I" and im.format == "PNG"):
        arr = np.asarray(im.convert("F") if mode != "I" else im, dtype=np.float32)
        if arr.size and (arr.min() < 0 or arr.max() > 65535):
            raise _refused(path, mode, f"Its values run from {arr.min():g} to {arr.max():g}, outside 16 bits.")
        note("16-bit images are scaled to the 8-bit range (value x 255/65535) before the preprocessing's scale, "
             "so the same picture gives the same input at either depth")
        return arr * np.float32(255.0 / 65535.0)
    if mode == "F":
        arr = np.asarray(im, dtype=np.float32)
        finite = bool(np.isfinite(arr).all())
        lo, hi = (float(arr.min()), float(arr.max())) if arr.size and finite else (float("nan"), float("nan"))
        if not finite or lo < 0 or hi > 255:
            raise CalibrationDataError(
                f"{path} is a float image with values " + (f"from {lo:g} to {hi:g}." if finite else "that are NaN or Inf."),
                "Float pixels are used as they are, on the 8-bit scale (0 to 255) that the preprocessing's scale "
                "(default 1/255) is written for; values outside it cannot be mapped without guessing.",
                "Rescale the image to 0..255 and save it again (or as an 8-/16-bit PNG), or remove it.")
        note("float images are used as they are, on the 8-bit scale (0 to 255) that the preprocessing's scale "
             "applies to; if they were normalised to 0..1, set the preprocessing's scale to 1")
        return arr
    if mode.startswith("I"):
        raise _refused(path, mode, f"Pillow reads it as mode {mode!r} (32-bit or signed integers), whose range "
                       "is not known, so it cannot be scaled to the 8-bit range the preprocessing expects.")
    return None


def read_pixels(im, color: str, resize: Optional[Sequence[int]], path: Path) -> np.ndarray:
    """``H x W x C`` float32 pixels of an open Pillow image, on the 8-bit scale, resized to ``resize`` [h, w]."""
    from PIL import Image

    deep = _deep_gray(im, path)
    if deep is None:
        im = im.convert("L" if color == "L" else "RGB")
        if resize:
            h, w = (int(v) for v in resize)
            im = im.resize((w, h), Image.Resampling.BILINEAR)
        arr = np.asarray(im, dtype=np.float32)
        return arr[:, :, None] if arr.ndim == 2 else arr
    if resize:
        h, w = (int(v) for v in resize)
        deep = np.asarray(Image.fromarray(deep).resize((w, h), Image.Resampling.BILINEAR), dtype=np.float32)
    # A one-channel deep image feeds a colour model as grey: the same value in every channel.
    return deep[:, :, None] if color == "L" else np.repeat(deep[:, :, None], 3, axis=2)
