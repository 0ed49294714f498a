"""Placement variants of the YOLOv8n all-INT8 export at batch 32, for one interleaved GPU run beside FP16 and ModelOpt.

    python benchmarks/yolo_variants.py [--out .gpuwork/w2] [--batch 32]

Issue 33 asks for the measured pick at batch 32 within 0.80x FP16 and no more reformat layers than ModelOpt's
default INT8 model (40 against 37 on the last record, ``benchmarks/results/regions/whole_both_b32.json``). The
reformats that differ (``benchmarks/yolo_borders.py``) sit in three places, and each variant changes one of them
against the toolkit's default export (``default``: today's ranges, ``tw.calibrate``'s default method, and rules):

* ``first_float``: the first convolution (3 input channels, 320x320) kept in high precision: an INT8 convolution
  over 3 channels pads them to a vector format, and the input's quantize is a reformat of its own in both exports;
* ``dfl_int8``: the DFL head's 1x1 convolution (it reads a Softmax) quantized as ModelOpt does (rule 10 off):
  the toolkit's engine runs it in FP16 between two format changes, ModelOpt's in INT8 after one quantize;
* ``neck_float``: the two neck Concats that read an upsampled map (``/model.11``, ``/model.14``) read their inputs
  in float (the region choice ``float``): the toolkit's engine copies each Resize output into its Concat, ModelOpt's
  writes it in place (its Concat output is quantized, the Resize not).

The ranges come from ``$TRTWIDGETS_ZOO/families/yolo320`` (8 calibration pages, the static batch-1 file, as
``trtwidgets plan`` would run) and are written on the batch-``B`` file (the same tensor names). The GPU half is
``scripts/gpu_peer_yolo.py`` (``--profile`` for the per-layer times). The YOLO is AGPL-3.0: the files stay out of
the repository.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
ZOO = Path(os.environ.get("TRTWIDGETS_ZOO", "/work/zoo"))

NECK_CONCATS = ("/model.11/Concat", "/model.14/Concat")
FIRST_CONV = "/model.0/conv/Conv"


def variants(model_b, amax) -> dict:
    """Name -> QdqExport of each variant on ``model_b`` (a path or ModelProto) with the ranges ``amax``."""
    from trtwidgets.core.qdq import placement
    from trtwidgets.core.qdq.export import build_qdq
    from trtwidgets.core.qdq.options import QdqOptions
    from trtwidgets.core.qdq.spec import QdqSpec

    opts = QdqOptions(trt_version="8.6")
    out = {"default": build_qdq(model_b, QdqSpec(amax, opts, source="yolo_variants")),
           "first_float": build_qdq(model_b, QdqSpec(amax, QdqOptions(trt_version="8.6", exclude=(FIRST_CONV,)),
                                                     source="yolo_variants")),
           "neck_float": build_qdq(model_b, QdqSpec(amax, opts, source="yolo_variants",
                                                    choices={c: "float" for c in NECK_CONCATS}))}
    # Rule 10 off for one export only: the experiment asks what it costs, the rule stays the default.
    with mock.patch.object(placement, "softmax_fed_layers_float", lambda graph, index, edges, weights, patterns:
                           (edges, weights, [])):
        out["dfl_int8"] = build_qdq(model_b, QdqSpec(amax, opts, source="yolo_variants"))
    return out


#: Graph rewrites (``trtwidgets.core.model.trt_rewrites``) tried under the default placement: name -> (rewrites, the
#: expectation head's form or None). ``softmax_first`` needs opset 13 (the model is converted first; the export
#: raises it to 13 for per-channel scales anyway).
REWRITTEN = {"rw_split": (("split_concat",), None), "rw_reduce": (("split_concat",), "reduce"),
             "rw_softmax_first": (("split_concat",), "softmax_first"), "rw_mul_sum": (("split_concat",), "mul_sum")}


def rewritten_float(model_b, rewrites, form):
    """The float model with ``rewrites`` and the expectation head in ``form`` (None: as it is)."""
    import onnx

    from trtwidgets.core.model.trt_rewrites import apply_rewrites, expectation_heads

    proto = onnx.load(str(model_b)) if not isinstance(model_b, onnx.ModelProto) else model_b
    if form == "softmax_first":
        proto = onnx.version_converter.convert_version(proto, 13)
    proto = apply_rewrites(proto, rewrites).model
    return expectation_heads(proto, form).model if form else proto


def dfl_submodels(model_b, out: Path) -> dict:
    """The detector's expectation head alone (from its input Split output to the decoded distances), in each form."""
    import onnx
    from onnx.utils import Extractor

    from trtwidgets.core.model.trt_rewrites import EXPECTATION_FORMS, expectation_heads

    proto = onnx.version_converter.convert_version(onnx.load(str(model_b)), 13)
    proto = onnx.shape_inference.infer_shapes(proto)
    sm = next(n for n in proto.graph.node if n.op_type == "Softmax")
    prod = {o: n for n in proto.graph.node for o in n.output}
    t = sm.input[0]
    while prod[t].op_type in ("Transpose", "Reshape"):  # back to the tensor the head reshapes
        t = prod[t].input[0]
    cons = {}
    for n in proto.graph.node:
        for i in n.input:
            cons.setdefault(i, []).append(n)
    o = sm.output[0]
    while cons.get(o) and cons[o][0].op_type in ("Transpose", "Conv", "Reshape") and len(cons[o]) == 1:
        o = cons[o][0].output[0]
        if prod[o].op_type == "Reshape":
            break
    sub = Extractor(proto).extract_model([t], [o])
    files = {"dfl_as_is": sub}
    for form in EXPECTATION_FORMS:
        files[f"dfl_{form}"] = expectation_heads(sub, form).model
    for name, m in files.items():
        onnx.save(m, str(out / f"{name}.onnx"))
    return {"input": t, "output": o, "files": sorted(files)}


def main(argv=None) -> int:
    import onnx

    import trtwidgets as tw

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / ".gpuwork" / "w2"))
    ap.add_argument("--batch", type=int, default=32)
    a = ap.parse_args(argv)
    fam = ZOO / "families" / "yolo320"
    model_b = fam / f"float_b{a.batch}.onnx"
    if not model_b.is_file():
        from zoo_shapes import yolov8_at

        onnx.save(yolov8_at(onnx.load(str(fam / "float.onnx")), a.batch, 320), str(model_b))
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    cal = tw.calibrate(str(fam / "float.onnx"), str(fam / "calib"), progress=False)
    doc = {"calibration": repr(cal), "batch": a.batch, "variants": {}}
    for name, ex in variants(str(model_b), dict(cal.amax)).items():
        onnx.save(ex.model, str(out / f"{name}_b{a.batch}.onnx"))
        doc["variants"][name] = {"int8_layers": len(ex.report.quantized_layers),
                                 "skipped": [s.node_label for s in ex.report.skipped]}
        print(f"{name:<12} {len(ex.report.quantized_layers)} INT8 layers; kept float: "
              f"{', '.join(s.node_label for s in ex.report.skipped) or '-'}", flush=True)
    from trtwidgets.core.qdq.export import build_qdq
    from trtwidgets.core.qdq.options import QdqOptions
    from trtwidgets.core.qdq.spec import QdqSpec

    for name, (rewrites, form) in REWRITTEN.items():
        proto = rewritten_float(model_b, rewrites, form)
        ex = build_qdq(proto, QdqSpec(dict(cal.amax), QdqOptions(trt_version="8.6"), source="yolo_variants"))
        onnx.save(ex.model, str(out / f"{name}_b{a.batch}.onnx"))
        doc["variants"][name] = {"int8_layers": len(ex.report.quantized_layers), "rewrites": list(rewrites), "form": form}
        print(f"{name:<12} {len(ex.report.quantized_layers)} INT8 layers", flush=True)
        if name == "rw_reduce":
            onnx.save(proto, str(out / f"float_{name}_b{a.batch}.onnx"))
    doc["dfl"] = dfl_submodels(model_b, out)
    doc["seconds"] = round(time.perf_counter() - t0, 1)
    (out / "variants.json").write_text(json.dumps(doc, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
