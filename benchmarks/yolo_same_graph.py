"""Issue 44's files for the GPU: the 320x320 YOLO at batch 32, every Q/DQ model beside the FP16 of its own graph.

    python benchmarks/yolo_same_graph.py [--out .gpuwork/yolo44] [--skip-modelopt]

The toolkit's export rewrites the graph before it places Q/DQ (``QdqOptions.rewrites``, default
:data:`trtwidgets.core.model.trt_rewrites.DEFAULT_REWRITES`), and the rewrites alone make the FP16 engine faster
(``benchmarks/results/rewrites``: 0.843x at level 1). Its INT8 engine is therefore judged against the FP16 of the
*same rewritten graph*, and the peer is given that graph too. The five models go to ``--files`` as plain files; what
the GPU run carries goes to ``--out`` (the YOLO is AGPL-3.0: never committed): ``pack/`` (the five models with each
weight stored once, 15 MB instead of 52: ``scripts/onnx_pack.py unpack`` gives them back byte for byte),
``check_b32.npz`` and ``cpu_f1.json``. All at batch 32, 320x320:

* ``yolo320_b32.onnx``: the float model as given (``$TRTWIDGETS_ZOO/families/yolo320/float_b32.onnx``);
* ``float_rw_b32.onnx``: the same float model exactly as the export sees it before placing Q/DQ (its opset
  conversion and the default rewrites, :func:`trtwidgets.core.qdq.export._prepared`): the toolkit's Q/DQ file
  with its Q/DQ nodes taken out is this graph (checked here, node by node);
* ``toolkit_b32.onnx``: the toolkit's all-INT8 export for TensorRT 8.6 (``yolo_variants.py``'s ``default``:
  ``tw.calibrate`` on the family's 8 calibration pages, ranges written on the batch-32 file);
* ``modelopt_b32.onnx`` / ``modelopt_rw_b32.onnx``: ModelOpt INT8 (``benchmarks/modelopt_quantize.py``, its own
  venv) of the given / rewritten float model with ``high_precision_dtype="fp32"`` (TensorRT 8.6's parser refuses
  its default FP16 scales), calibrated on the same 8 pages (repeated to fill the static batch of 32: the same
  values, so the same histograms' shape);
* ``check_b32.npz``: the held-back check (:class:`trtwidgets.core.plan.engine_check.EngineCheck`, the file a plan
  folder carries): 32 held-back pages from the family's generator (the first 8 are the family's own held-back
  set) and FP32's outputs on them (ONNX Runtime), judged by the family's metric (``detection``: F1 at score 0.25
  against FP32) and the worst-group cosine; ``scripts/gpu_peer_yolo.py --check`` runs every engine on it;
* ``cpu_f1.json``: each file's F1 and cosine in ONNX Runtime (CPU) on the same pages (all 32 and the first 8),
  detections found / FP32's / false positives, and the files' sizes.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "scripts"))
ZOO = Path(os.environ.get("TRTWIDGETS_ZOO", "/work/zoo"))
BATCH = 32
SIZE = 320
METRIC = "detection"
#: The family's own held-back set is the first 8 of the generator's held-back pages.
FAMILY_HELD = 8
#: Issue 44's accuracy target: F1 >= 0.95 against FP32 (its F1 is 1.0 against itself).
TARGET_F1 = 0.95


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def held_pages(n: int) -> np.ndarray:
    """``n`` held-back pages at 320x320, as ``modelopt_zoo.prepare_yolo320`` makes the family's (the same seed)."""
    from skimage import transform

    import zoo_families as zf

    pages = zf._pages("heldback", n)["images"]
    small = np.stack([transform.resize(p, (3, SIZE, SIZE), anti_aliasing=True) for p in pages])
    return small.astype(np.float16).astype(np.float32)


def calib_pages(fam: Path) -> np.ndarray:
    """The family's calibration pages, stacked (8 x 3 x 320 x 320)."""
    files = sorted((fam / "calib").glob("*.npz"))
    return np.concatenate([np.load(f)["images"] for f in files])


def rewritten_float(model_b: Path):
    """The float model as the toolkit's export places Q/DQ on it (opset conversion and default rewrites)."""
    import onnx

    from trtwidgets.core.qdq.export import _prepared
    from trtwidgets.core.qdq.options import QdqOptions

    proto, _, _, _, rewritten = _prepared(onnx.load(str(model_b)), QdqOptions(trt_version="8.6"), False)
    return proto, [list(c) for c in rewritten.changes]


def same_graph(qdq_path: Path, float_proto) -> dict:
    """Whether the Q/DQ file with its Q/DQ nodes taken out has ``float_proto``'s nodes (names and op types)."""
    import onnx

    qdq = onnx.load(str(qdq_path), load_external_data=False)
    a = [(n.name, n.op_type) for n in qdq.graph.node if n.op_type not in ("QuantizeLinear", "DequantizeLinear")]
    b = [(n.name, n.op_type) for n in float_proto.graph.node]
    ops_a = [x for x in a if x[1] != "Constant"]
    ops_b = [x for x in b if x[1] != "Constant"]
    return {"same_nodes": sorted(a) == sorted(b), "same_nodes_but_constants": sorted(ops_a) == sorted(ops_b),
            "qdq_file_nodes": len(a), "float_nodes": len(b),
            "only_in_qdq": sorted(set(a) - set(b))[:10], "only_in_float": sorted(set(b) - set(a))[:10]}


def toolkit_export(fam: Path, model_b: Path, out: Path) -> dict:
    """The toolkit's all-INT8 export for TensorRT 8.6 (``yolo_variants.py``'s ``default``)."""
    import onnx

    import trtwidgets as tw
    from trtwidgets.core.qdq.export import build_qdq
    from trtwidgets.core.qdq.options import QdqOptions
    from trtwidgets.core.qdq.spec import QdqSpec

    t0 = time.perf_counter()
    cal = tw.calibrate(str(fam / "float.onnx"), str(fam / "calib"), progress=False)
    ex = build_qdq(str(model_b), QdqSpec(dict(cal.amax), QdqOptions(trt_version="8.6"), source="yolo_same_graph"))
    onnx.save(ex.model, str(out))
    return {"calibration": repr(cal), "int8_layers": len(ex.report.quantized_layers),
            "kept_float": [s.node_label for s in ex.report.skipped], "seconds": round(time.perf_counter() - t0, 1)}


def modelopt(model: Path, calib: np.ndarray, out: Path, work: Path) -> dict:
    """ModelOpt INT8 (FP32 float part) of ``model`` on ``calib`` repeated to the static batch."""
    import modelopt_zoo as mz

    reps = -(-BATCH // len(calib))
    data = {"images": np.concatenate([calib] * reps)[:max(BATCH, len(calib))]}
    work.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(model, work / model.name)
    rec = mz.run_modelopt(str(work / model.name), data, work, timeout=3600, fp32=True)
    if rec.get("status") == "ok":
        shutil.copyfile(work / "modelopt_fp32.onnx", out)
    rec["calibration_pages"] = f"{len(calib)} pages repeated {reps}x to {len(data['images'])} (the static batch)"
    return rec


def make_check(float_b: Path, out: Path):
    """The held-back check file and the check itself (EngineCheck)."""
    from trtwidgets.core.accuracy.target import Target
    from trtwidgets.core.accuracy.task_metrics import make_task_metric
    from trtwidgets.core.model.batch_axis import BatchAxes
    from trtwidgets.core.plan.engine_check import EngineCheck

    pages = held_pages(BATCH)
    fam_held = np.concatenate([np.load(f)["images"] for f in sorted((ZOO / "families/yolo320/heldback").glob("*.npz"))])
    same = bool(np.array_equal(pages[:FAMILY_HELD], fam_held))
    ref = ort_run(float_b, pages)
    made = make_task_metric(METRIC, ref)
    target = Target.for_metric(METRIC, max_metric_drop=1 - TARGET_F1)
    axes = BatchAxes({"images": 0}, {k: 0 for k in ref})
    check = EngineCheck.of_plan([{"images": pages[i:i + 1]} for i in range(len(pages))], ref, axes, target,
                                float(made.fn(ref)))
    check.save(out)
    return EngineCheck.load(out, target), {"pages": len(pages), "first_8_are_the_family_held_back": same,
                                           "metric": made.name, "fp32_metric": float(made.fn(ref))}


def ort_run(path: Path, pages: np.ndarray) -> dict:
    """ONNX Runtime (CPU) outputs of the batch-32 file on ``pages`` (one run)."""
    from trtwidgets.core.common.ort import open_session

    sess = open_session(path, purpose="the held-back check of issue 44's files")
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, {"images": pages})))


def cpu_scores(check, path: Path) -> dict:
    """The file in ONNX Runtime on the check's pages: its verdict on all and on the family's 8, and detections."""
    import dataclasses

    from modelopt_zoo import score
    from trtwidgets.core.accuracy.task_metrics import make_task_metric

    pages = np.concatenate([f["images"] for f in check.feeds])
    outs = ort_run(path, pages)
    v = check.verdict(outs)
    ref8 = {k: np.asarray(a)[:FAMILY_HELD] for k, a in check.outputs.items()}
    out8 = {k: np.asarray(a)[:FAMILY_HELD] for k, a in outs.items()}
    m8 = make_task_metric(METRIC, ref8)
    check8 = dataclasses.replace(check, feeds=check.feeds[:FAMILY_HELD], outputs=ref8,
                                 target=dataclasses.replace(check.target, metric=m8.fn),
                                 metric_reference=float(m8.fn(ref8)))
    v8 = check8.verdict(out8)
    m_all = make_task_metric(METRIC, check.outputs)
    return {"all": dict(score(m_all, check.outputs, outs, METRIC), verdict=v.to_dict()),
            "family_8": dict(score(m8, ref8, out8, METRIC), verdict=v8.to_dict())}


def main(argv=None) -> int:
    import onnx

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / ".gpuwork" / "yolo44"), help="what the GPU run carries: pack/ (the "
                    "five models, each weight once: scripts/onnx_pack.py), check_b32.npz, cpu_f1.json")
    ap.add_argument("--files", default=str(ZOO / "yolo44"), help="the five models as plain .onnx files")
    ap.add_argument("--skip-modelopt", action="store_true", help="keep ModelOpt's files already in --out")
    a = ap.parse_args(argv)
    out, files = Path(a.out), Path(a.files)
    out.mkdir(parents=True, exist_ok=True)
    files.mkdir(parents=True, exist_ok=True)
    fam = ZOO / "families" / "yolo320"
    model_b = fam / f"float_b{BATCH}.onnx"
    if not model_b.is_file():
        import modelopt_zoo as mz

        mz.prepare_yolo320()
    doc: dict = {"batch": BATCH, "size": SIZE, "metric": METRIC}
    shutil.copyfile(model_b, files / "yolo320_b32.onnx")
    rw, changes = rewritten_float(model_b)
    onnx.save(rw, str(files / "float_rw_b32.onnx"))
    doc["rewrites"] = changes
    log(f"float_rw: {len(changes)} rewrites")
    doc["toolkit"] = toolkit_export(fam, model_b, files / "toolkit_b32.onnx")
    doc["toolkit"]["graph_vs_float_rw"] = same_graph(files / "toolkit_b32.onnx", rw)
    log(f"toolkit: {doc['toolkit']['int8_layers']} INT8 layers; same graph as float_rw: "
        f"{doc['toolkit']['graph_vs_float_rw']['same_nodes']}")
    if a.skip_modelopt and (out / "cpu_f1.json").is_file():  # ModelOpt's files are kept: so is their record
        old = json.loads((out / "cpu_f1.json").read_text())
        doc.update({k: old[k] for k in ("modelopt_b32", "modelopt_rw_b32") if k in old})
    if not a.skip_modelopt:
        calib = calib_pages(fam)
        work = ZOO / "modelopt" / "yolo320_b32"
        for name, src in (("modelopt_b32", files / "yolo320_b32.onnx"),
                          ("modelopt_rw_b32", files / "float_rw_b32.onnx")):
            doc[name] = modelopt(src, calib, files / f"{name}.onnx", work / name)
            log(f"{name}: {doc[name].get('status')} {doc[name].get('error', '')[:300]}")
    for name, src in (("modelopt_b32", "yolo320_b32"), ("modelopt_rw_b32", "float_rw_b32")):
        if (files / f"{name}.onnx").is_file():
            doc.setdefault(name, {})["graph_vs_" + src] = same_graph(files / f"{name}.onnx",
                                                                     onnx.load(str(files / f"{src}.onnx")))
    check, doc["check"] = make_check(files / "yolo320_b32.onnx", out / "check_b32.npz")
    log(f"check: {doc['check']}")
    doc["cpu"] = {}
    for name in ("yolo320_b32", "float_rw_b32", "toolkit_b32", "modelopt_b32", "modelopt_rw_b32"):
        path = files / f"{name}.onnx"
        if path.is_file():
            doc["cpu"][name] = cpu_scores(check, path)
            s, s8 = doc["cpu"][name]["all"], doc["cpu"][name]["family_8"]
            log(f"{name}: F1 {s['metric']:.4f} (cos {s['cosine']:.4f}) {s['detections']}; first 8: F1 "
                f"{s8['metric']:.4f} {s8['detections']}")
    from onnx_pack import pack

    models = [files / f"{n}.onnx" for n in doc["cpu"]]
    doc["pack"] = pack(out / "pack", models)
    doc["bytes"] = {str(p.relative_to(out)): p.stat().st_size for p in sorted(out.rglob("*")) if p.is_file()}
    (out / "cpu_f1.json").write_text(json.dumps(doc, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
