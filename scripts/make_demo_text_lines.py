"""Regenerate trtwidgets/demo/text_lines.npz: the demo's labelled text lines (needs Pillow).

The lines are the standard library's own text drawn with the font Pillow ships
(trtwidgets/demo/text_lines.py says how); the split into a calibration part and a
held-back part is seeded and stored in the file. Rendering takes a few seconds.

Usage: python scripts/make_demo_text_lines.py [OUT.npz]
"""

import sys

import numpy as np

from trtwidgets.demo.labelled_set import CALIBRATION_LINES, LINES, PATH, SEED
from trtwidgets.demo.text_lines import render_set


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else str(PATH)
    arrays = render_set(LINES, SEED)
    calibration = np.sort(np.random.default_rng(SEED + 2).permutation(LINES)[:CALIBRATION_LINES]).astype(np.int16)
    np.savez_compressed(out, calibration=calibration, **arrays)
    print(f"wrote {LINES} lines ({CALIBRATION_LINES} for calibration) to {out}")
