"""Which Q/DQ choice costs accuracy on TensorRT? Build variants of the demo cls Q/DQ export and compare.

GPU machine (TensorRT 8.6, Python 3.9, numpy + onnx + tensorrt only)::

    source /tmp/trtb/env.sh && TRTWIDGETS_NO_CUBLAS_CUDNN=1 EXTRA_PYTHONPATH=$PWD \\
        $PY39 scripts/qdq_variants_gpu.py --out $OUT/art/qdq_variants

Each variant is exported from the committed ranges (``tests/fixtures/qdq/cls_amax_percentile.json``),
built with FP16+INT8 at builder optimization level 1, run on the 16 first held-back crops and
compared with ONNX Runtime FP32 (``tests/fixtures/qdq/cls_heldback.npz``). Prints one line per
variant and writes ``variants.json`` plus each engine's layer precisions.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
FIX = ROOT / "tests" / "fixtures" / "qdq"
N = 16


def variants(report: dict):
    se_depthwise = ["Conv@2", "Conv@13", "Conv@18", "Conv@23", "Conv@28", "Conv@33", "Conv@38", "Conv@43",
                    "Conv@48"]
    return {
        "full": ({}, ("fp16", "int8")),
        # The placement before rule 6: the 9 SE depthwise convs quantized (cosine 0.75 on TensorRT 8.6).
        "grouped_convs_quantized": ({"keep_float_output_grouped_convs": False}, ("fp16", "int8")),
        "int8_flag_only": ({}, ("int8",)),
        "no_matmul": ({"exclude_op_types": ("MatMul",)}, ("fp16", "int8")),
        "no_se_depthwise": ({"exclude": se_depthwise}, ("fp16", "int8")),
        "per_tensor_weights": ({"weights_per_channel": False}, ("fp16", "int8")),
        "no_first_conv": ({"exclude": ["Conv@0"]}, ("fp16", "int8")),
    }


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)

    import numpy as np

    from trtwidgets import demo
    from trtwidgets.core.engine.inspector_json import parse_inspector_json
    from trtwidgets.core.accuracy.metrics import compare_outputs
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.recipe.profiles import Profile, ShapeRange
    from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq, save_qdq_model
    from trtwidgets.core.recipe.recipe import Recipe
    from trtwidgets.core.accuracy.reference import load_reference
    from trtwidgets.trt.build import build
    from trtwidgets.trt.runner import EngineRunner

    amax = json.loads((FIX / "cls_amax_percentile.json").read_text())
    report = json.loads((FIX / "cls_qdq_int8.report.json").read_text())
    ref = load_reference(FIX / "cls_heldback.npz")
    x = demo.preprocess(ref.inputs["images"][:N]).astype(np.float32)
    names = [k for k in ref.outputs if not k.startswith("qdq_ort/")]
    results = {}
    for name, (kw, flags) in variants(report).items():
        if args.only and name not in args.only:
            continue
        t0 = time.perf_counter()
        try:
            exp = build_qdq(str(demo.MODEL_PATH), QdqSpec(amax, QdqOptions(**kw)))
            path = save_qdq_model(exp, out / f"{name}.onnx")
            recipe = Recipe.for_model(load_model(path), flags=flags,
                                      profiles=(Profile({"x": ShapeRange.fixed(tuple(x.shape))}),),
                                      builder_optimization_level=1, timing_cache=str(out / "timing.cache"))
            res = build(recipe, out_dir=out / name, progress=False)
            with EngineRunner(res.engine_path) as runner:
                got = runner.infer({"x": x})
            m = compare_outputs({k: ref.outputs[k][:N] for k in names}, {k: got[k] for k in names}, topk=(1,))
            (metric,) = m.values()
            layers = parse_inspector_json(res.inspector_json_path).layers
            prec = [{"name": l.name, "type": l.type, "precision": l.precision} for l in layers]
            (out / f"{name}.precisions.json").write_text(json.dumps(prec, indent=1))
            results[name] = {"cosine": metric.cosine, "top1": metric.topk_agreement.get(1),
                             "max_abs": metric.max_abs, "int8_layers": sum(p["precision"] == "INT8" for p in prec),
                             "seconds": time.perf_counter() - t0}
        except Exception as exc:
            results[name] = {"error": f"{type(exc).__name__}: {exc}"[:2000]}
        print(name, json.dumps(results[name]), flush=True)
        (out / "variants.json").write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
