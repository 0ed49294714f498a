"""Regenerate tests/fixtures/cls_reference.npz: the 32 bundled demo crops and ONNX Runtime FP32 (CPU) outputs.

The GPU machine's Python 3.9 has TensorRT but no ONNX Runtime, so the engines'
accuracy there is measured against this committed reference.

    /work/venv/bin/python scripts/make_cls_reference.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from trtwidgets import demo  # noqa: E402
from trtwidgets.core.accuracy.reference import make_reference, save_reference  # noqa: E402


def main() -> int:
    feeds = demo.sample_inputs(1)
    ref = make_reference(demo.MODEL_PATH, feeds)
    out = ROOT / "tests" / "fixtures" / "cls_reference.npz"
    save_reference(out, ref.inputs, ref.outputs, dict(ref.meta, model=demo.MODEL_PATH.name,
                                                      source="trtwidgets.demo.sample_inputs(1), 32 crops"))
    (name, probs), = ref.outputs.items()
    print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB): {ref.samples} samples, output {name} {probs.shape}, "
          f"class balance {np.bincount(probs.argmax(1), minlength=2).tolist()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
