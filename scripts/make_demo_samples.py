"""Regenerate trtwidgets/demo/samples.npz: real 48x192 RGB crops for the demo.

The crops come from scikit-image's bundled images (page.png and text.png are
scanned/printed text, CC0 / public domain; camera, coffee and chelsea are CC0
photos), so the direction classifier sees both text and non-text. Every other
crop is rotated by 180 degrees, the case the classifier exists to detect.

Usage: python scripts/make_demo_samples.py [OUT.npz] [N]
"""

import sys

import numpy as np

from trtwidgets.demo.crops import text_line_crops


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "trtwidgets/demo/samples.npz"
    n = int(sys.argv[2]) if len(sys.argv) > 2 else 32
    np.savez_compressed(out, images=text_line_crops(n))
    print(f"wrote {n} crops to {out}")
