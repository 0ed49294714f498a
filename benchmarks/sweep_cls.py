"""Sensitivity sweep on the demo cls model with real builds: accuracy and latency per step.

GPU machine (Python 3.9, TensorRT 8.6; numpy + onnx + tensorrt only)::

    source /tmp/trtb/env.sh && TRTWIDGETS_ARTIFACTS=$OUT/art TRTWIDGETS_NO_CUBLAS_CUDNN=1 EXTRA_PYTHONPATH=$PWD \\
        $PY39 benchmarks/sweep_cls.py [--steps 0,2,8] [--opt-level 1]

Explicit mode (the TensorRT 11 way, also valid on 8.6/10): step N is the toolkit's Q/DQ export
with the N layers that the committed INT8-vs-FP32 per-layer ranking
(``benchmarks/results/h200_trt86/engines/cls-int8-layer-errors-local.json``, "local" growth on
the H200) found most sensitive left in high precision; ranges from TensorRT's Entropy2 cache of
the same run (``cls.int8.cache``). Each step is built (FP16+INT8, static 8x3x48x192), run on the
64 held-back crops of ``tests/fixtures/qdq/cls_heldback.npz`` against ONNX Runtime FP32, and timed.
Writes ``$TRTWIDGETS_ARTIFACTS/sweep_cls.json`` after every step and prints the table.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
RESULTS = ROOT / "benchmarks" / "results" / "h200_trt86" / "engines"
BATCH = 8


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", default="0,2,8")
    ap.add_argument("--opt-level", type=int, default=1)
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args(argv)

    import numpy as np

    from trtwidgets import demo
    from trtwidgets.core.accuracy.sweep import plan_sweep
    from trtwidgets.core.calibration.cache import read_cache
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.recipe.profiles import Profile, ShapeRange
    from trtwidgets.core.recipe.recipe import Recipe
    from trtwidgets.core.accuracy.reference import ReferenceData, load_reference
    from trtwidgets.trt.sweep import sweep

    art = Path(os.environ.get("TRTWIDGETS_ARTIFACTS") or "build/sweep_cls")
    art.mkdir(parents=True, exist_ok=True)
    ranking = json.loads((RESULTS / "cls-int8-layer-errors-local.json").read_text())
    amax = read_cache(RESULTS / "cls.int8.cache").amax
    # Only layers the default export quantizes can be kept out of INT8 by an exclusion (the ranking
    # also holds pointwise ops, SE convs and depthwise convs that placement keeps float anyway).
    from trtwidgets.core.qdq.export import QdqSpec, build_qdq

    quantized = set(build_qdq(str(demo.MODEL_PATH), QdqSpec(amax)).report.quantized_layers)
    ranked = [n for n in ranking["ranked_layers"] if n in quantized]
    ref = load_reference(ROOT / "tests" / "fixtures" / "qdq" / "cls_heldback.npz")
    x = demo.preprocess(ref.inputs["images"]).astype(np.float32)
    outputs = {k: v for k, v in ref.outputs.items() if not k.startswith("qdq_ort/")}
    data = ReferenceData(inputs={demo.INPUT_NAME: x}, outputs=outputs)
    shape = (BATCH,) + tuple(x.shape[1:])
    base = Recipe.for_model(load_model(demo.MODEL_PATH), flags=("fp16", "int8"),
                            profiles=(Profile({demo.INPUT_NAME: ShapeRange.fixed(shape)}),),
                            builder_optimization_level=args.opt_level, timing_cache=str(art / "sweep_timing.cache"))
    steps = tuple(int(s) for s in args.steps.split(","))
    plan = plan_sweep(ranked, steps=steps, mode="qdq_exclude")
    rows = []

    def on_step(r):
        d = r.to_dict() if hasattr(r, "to_dict") else dict(r.__dict__)
        rows.append(d)
        (art / "sweep_cls.json").write_text(json.dumps({"ranked_top": ranked[:16], "steps": rows}, indent=1, default=str))
        print(f"step {r.step.n:>2} (kept float: {', '.join(r.step.exclude) or '-'}): "
              f"worst cosine {r.worst_cosine}, worst SNR {r.worst_snr_db} dB, median {r.median_ms} ms, "
              f"error {r.error}", flush=True)

    result = sweep(plan, base, data, amax=amax, out_root=art / "sweep_cls_builds", runs=args.runs, batch=BATCH,
                   on_step=on_step)
    print(json.dumps(result.to_dict(), indent=1, default=str)[:4000])
    return 0


if __name__ == "__main__":
    sys.exit(main())
