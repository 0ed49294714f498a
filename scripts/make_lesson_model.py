"""Regenerate trtwidgets/demo/lesson_direction.onnx: the lesson model that INT8 really hurts.

Renders the training text lines, trains the classifier in numpy (about a minute on a CPU),
gives it its outlier channels and writes it (see trtwidgets/demo/lesson_model.py).

Usage: python scripts/make_lesson_model.py [OUT.onnx]
"""

import sys

from trtwidgets.demo.lesson_model import PATH, make


if __name__ == "__main__":
    out = make(sys.argv[1] if len(sys.argv) > 1 else PATH)
    print(f"wrote {out} ({out.stat().st_size:,} bytes)")
