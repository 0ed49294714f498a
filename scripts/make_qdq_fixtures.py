"""Regenerate the Q/DQ fixtures under ``tests/fixtures/qdq/`` (CPU, needs onnxruntime and scikit-image).

The GPU machine has TensorRT but no ONNX Runtime, so everything that needs ORT is
made here and committed:

* ``cls_amax_percentile.json``: tensor -> amax, percentile 99.99 ranges of the demo
  cls model from the toolkit's statistics over the 32 bundled crops;
* ``cls_qdq_int8.onnx`` / ``cls_qdq_int8.report.json``: the Q/DQ model exported
  from those ranges (dynamic input, like the demo) and its export report;
* ``cls_heldback.npz`` (``core.reference`` format): 64 held-back crops (scikit-image,
  seed 1, never used for calibration) as uint8 HWC images under ``input/images``,
  the float model's ONNX Runtime FP32 outputs, and the Q/DQ model's ORT outputs
  under ``output/qdq_ort/<name>``.

Run from the repository root: ``python scripts/make_qdq_fixtures.py``.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

OUT = ROOT / "tests" / "fixtures" / "qdq"
HELD_BACK = 64
SEED = 1


def main() -> int:

    from trtwidgets import demo
    from trtwidgets.core.calibration.collect import collect_stats
    from trtwidgets.core.calibration.ranges import amax_from_stats
    from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq, save_qdq_model
    from trtwidgets.core.qdq.validate import run_model
    from trtwidgets.core.accuracy.reference import save_reference

    OUT.mkdir(parents=True, exist_ok=True)
    stats = collect_stats(demo.MODEL_PATH, demo.sample_inputs(8), progress=False)
    amax = amax_from_stats(stats, "percentile", 99.99)
    amax_text = json.dumps({k: amax[k] for k in sorted(amax)}, indent=1) + "\n"
    (OUT / "cls_amax_percentile.json").write_text(amax_text)
    # Placement rules 1-7 (dense_int8 off), as the fixture was first written.
    result = build_qdq(str(demo.MODEL_PATH), QdqSpec(amax, QdqOptions(dense_int8=False)))
    save_qdq_model(result, OUT / "cls_qdq_int8.onnx")
    (OUT / "cls_qdq_int8.report.json").write_text(json.dumps(result.report.to_dict(), indent=1) + "\n")

    images = demo.skimage_crops(HELD_BACK, seed=SEED)
    x = demo.preprocess(images)
    ref, _ = run_model(str(demo.MODEL_PATH), [{"x": x}])
    qdq, _ = run_model(result.model, [{"x": x}])
    outputs = dict(ref)
    outputs.update({f"qdq_ort/{k}": v for k, v in qdq.items()})
    save_reference(OUT / "cls_heldback.npz", {"images": images}, outputs,
                   {"model": "demo cls", "preprocess": "trtwidgets.demo.preprocess", "seed": SEED,
                    "reference": "onnxruntime fp32 cpu", "ranges": "toolkit percentile 99.99 on the 32 bundled crops"})
    print(result.report.summary())
    for f in sorted(OUT.iterdir()):
        print(f"{f.relative_to(ROOT)}  {os.path.getsize(f) / 1e3:.0f} kB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
