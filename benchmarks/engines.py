"""FP32 / FP16 / INT8 (implicit, TensorRT Entropy2) / INT8 (explicit Q/DQ) engines side by side.

Latency (CUDA events, median/p90/p99 over >= 200 runs after warm-up) and accuracy,
on the GPU machine with Python 3.9 + TensorRT 8.6 (numpy, onnx, tensorrt only):

* ``cls``: the bundled PaddleOCR direction classifier at 1x3x48x192 and 32x3x48x192
  (one profile, min batch 1, opt = max batch 32), accuracy against the committed
  ONNX Runtime FP32 outputs ``tests/fixtures/cls_reference.npz`` (32 real crops).
  INT8 is calibrated by TensorRT's IInt8EntropyCalibrator2 on those same 32 crops
  (the only real data on that machine): the accuracy is an optimistic in-sample figure.
* ``resnet``: a ResNet-50-shaped network (random weights, batch 32, 224x224, static)
  for a compute-bound case: operation count (2 x MACs), achieved TOP/s, INT8 vs FP16,
  and the distance to the H200's dense peaks (INT8 ~1979 TOPS, FP16 ~989 TFLOPS).
  Its "accuracy" is agreement with the FP32 (or, without it, FP16) engine.

The explicit Q/DQ model is exported by the toolkit's ``export_qdq`` with the ranges
of the INT8 build's calibration cache, so implicit and explicit INT8 differ only in
where quantization happens, not in the ranges.

Every finished measurement is merged into ``engines.json`` in the work folder
(``--out``, default ``$TRTWIDGETS_ARTIFACTS``) at once, so the run can be split
over several commands; with ``--out`` elsewhere the JSON files are also copied to
``$TRTWIDGETS_ARTIFACTS/engines/`` after each command, e.g.::

    $PY39 benchmarks/engines.py --out /tmp/eb --models cls --precisions fp32,fp16
    $PY39 benchmarks/engines.py --out /tmp/eb --models cls --precisions int8,qdq --layer-errors
    $PY39 benchmarks/engines.py --out /tmp/eb --models resnet --precisions fp16,int8,qdq

Builds use builder optimization level 0 (``--opt-level``), one shared timing
cache, and leave the cuBLAS/cuBLASLt/cuDNN tactic sources off (stubs on that machine).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path
from typing import Dict, List, Optional

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

PEAK_TOPS = {"int8": 1979.0, "fp16": 989.0, "fp32": 67.0}  # H200 SXM dense (fp32 without tensor cores)
PRECISIONS = ("fp32", "fp16", "int8", "qdq")
FLAGS = {"fp32": (), "fp16": ("fp16",), "int8": ("fp16", "int8"), "qdq": ("fp16", "int8")}
EXCLUDED_SOURCES = ("CUBLAS", "CUBLAS_LT", "CUDNN")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def artifacts_dir(arg: Optional[str]) -> Path:
    d = Path(arg or os.environ.get("TRTWIDGETS_ARTIFACTS") or (ROOT / "benchmark-results"))
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_json_atomic(path: Path, doc) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=str(path.parent))
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1, allow_nan=True)
    os.replace(tmp, path)


class Results:
    """engines.json: rows keyed by (model, precision, batch), merged across runs."""

    def __init__(self, path: Path):
        self.path = path
        self.doc = {"rows": [], "notes": {}}
        if path.exists():
            try:
                self.doc = json.loads(path.read_text())
            except ValueError:
                pass

    def put(self, row: dict) -> None:
        key = (row["model"], row["precision"], row.get("batch"))
        rows = [r for r in self.doc["rows"] if (r["model"], r["precision"], r.get("batch")) != key]
        rows.append(row)
        self.doc["rows"] = rows
        write_json_atomic(self.path, self.doc)

    def note(self, key: str, value) -> None:
        self.doc.setdefault("notes", {})[key] = value
        write_json_atomic(self.path, self.doc)

    def rows(self, model: str) -> List[dict]:
        return [r for r in self.doc["rows"] if r["model"] == model]


# -- models ---------------------------------------------------------------------------------------


def cls_setup(art: Path):
    from trtwidgets import demo
    from trtwidgets.core.profiles import Profile, ShapeRange
    from trtwidgets.core.reference import load_reference

    ref = load_reference(ROOT / "tests" / "fixtures" / "cls_reference.npz")
    x = ref.inputs["x"]
    profile = Profile({"x": ShapeRange((1, 3, 48, 192), (32, 3, 48, 192), (32, 3, 48, 192))})
    return {
        "name": "cls", "model_path": str(demo.MODEL_PATH), "profiles": (profile,),
        "calibration": [{"x": x}], "batches": (1, 32), "inputs": ref.inputs, "reference": ref.outputs,
        "input_shapes": {1: {"x": (1, 3, 48, 192)}, 32: {"x": (32, 3, 48, 192)}},
    }


def resnet_setup(art: Path):
    import onnx
    from resnet50 import resnet50

    path = art / "resnet50_b32.onnx"
    if not path.exists():
        log("writing the ResNet-50-shaped model (random weights, batch 32)")
        tmp = path.with_suffix(".tmp")
        onnx.save(resnet50(batch=32), str(tmp))
        os.replace(tmp, path)
    rng = np.random.default_rng(0)
    calib = [{"input": rng.standard_normal((32, 3, 224, 224)).astype(np.float32)} for _ in range(2)]
    x = rng.standard_normal((32, 3, 224, 224)).astype(np.float32)
    return {
        "name": "resnet", "model_path": str(path), "profiles": (), "calibration": calib, "batches": (32,),
        "inputs": {"input": x}, "reference": None, "input_shapes": {32: {"input": (32, 3, 224, 224)}},
    }


# -- build / measure ------------------------------------------------------------------------------


def tactic_sources(trt) -> List[str]:
    return [n for n in trt.TacticSource.__members__ if n not in EXCLUDED_SOURCES]


def build_one(setup: dict, precision: str, art: Path, args, trt) -> "object":
    from trtwidgets.core.model import load_model
    from trtwidgets.core.recipe import CalibratorSpec, Recipe
    from trtwidgets.trt.build import build

    model_path = setup["model_path"]
    calibration_data = None
    calibrator = CalibratorSpec()
    if precision == "int8":
        calibrator = CalibratorSpec(kind="trt_entropy2")
        calibration_data = setup["calibration"]
    elif precision == "qdq":
        model_path = str(export_qdq_model(setup, art))
    recipe = Recipe.for_model(load_model(model_path), flags=FLAGS[precision], calibrator=calibrator,
                              profiles=setup["profiles"], builder_optimization_level=args.opt_level,
                              timing_cache=str(art / "timing.cache"))
    out = art / "builds" / f"{setup['name']}-{precision}-{time.strftime('%Y%m%d-%H%M%S')}"
    log(f"building {setup['name']} {precision} (flags {list(FLAGS[precision]) or ['fp32']}, opt level {args.opt_level})")
    res = build(recipe, out_dir=out, progress=False, tactic_sources=tactic_sources(trt),
                calibration_data=calibration_data)
    log(f"  built in {res.build_seconds:.1f} s -> {res.engine_path} ({res.engine_bytes / 1e6:.1f} MB)")
    if precision == "int8" and res.calibration_cache_path:
        data = Path(res.calibration_cache_path).read_bytes()
        (art / f"{setup['name']}.int8.cache").write_bytes(data)
    return res


def export_qdq_model(setup: dict, art: Path) -> Path:
    from trtwidgets.core.calib_cache import read_cache
    from trtwidgets.core.qdq_export import export_qdq, save_qdq_model

    cache = art / f"{setup['name']}.int8.cache"
    if not cache.exists():
        raise RuntimeError(f"{cache} is missing: run the int8 precision first (the Q/DQ model uses its ranges)")
    amax = read_cache(cache).amax
    model = export_qdq(setup["model_path"], amax)
    path = art / f"{setup['name']}.qdq.onnx"
    save_qdq_model(model, path)
    log(f"  exported Q/DQ model with {len(amax)} ranges from {cache.name} -> {path.name}")
    return path


def measure(setup: dict, precision: str, build_res, args, results: Results, art: Path):
    from trtwidgets.core.metrics import compare_outputs
    from trtwidgets.core.opcount import count_macs
    from trtwidgets.trt.bench import benchmark_runner
    from trtwidgets.trt.profiler import profile_layers
    from trtwidgets.trt.runner import EngineRunner, run_samples

    with EngineRunner(build_res.engine_path) as runner:
        for batch in setup["batches"]:
            feeds = {k: v[:batch] for k, v in setup["inputs"].items()}
            bench = benchmark_runner(runner, feeds, runs=args.runs, warmup=args.warmup)
            # Accuracy over every sample, at this batch size.
            cand, used = run_samples(runner, setup["inputs"], batch)
            if setup["reference"] is not None:
                reference, ref_label = setup["reference"], "onnxruntime fp32 (cpu)"
            else:
                reference, ref_label = engine_reference(setup, batch, precision, cand, art)
            metrics = compare_outputs(reference, cand, topk=(1, 5)) if reference is not None else {}
            macs_by_batch = setup.setdefault("macs", {})
            if batch not in macs_by_batch:
                macs_by_batch[batch] = count_macs(setup["model_path"], setup["input_shapes"][batch], strict=False)
            macs = macs_by_batch[batch]
            seconds = bench.median_ms / 1000.0
            row = {
                "model": setup["name"], "precision": precision, "batch": batch,
                "flags": list(FLAGS[precision]), "build_seconds": build_res.build_seconds,
                "engine_bytes": build_res.engine_bytes, "engine_path": build_res.engine_path,
                "latency": bench.to_dict(), "macs": macs.total, "ops": macs.ops,
                "tops": macs.tops(seconds), "reference": ref_label,
                "accuracy": {k: m.to_dict() for k, m in metrics.items()},
                "samples": used,
                "trt_version": build_res.trt_version, "gpu": build_res.gpu_name,
            }
            if batch == max(setup["batches"]):
                t = profile_layers(runner, feeds, runs=20)
                prof = art / f"{setup['name']}-{precision}-b{batch}.profile.json"
                t.write_trt_profile(prof)
                row["profile"] = {"path": str(prof), "layers": len(t.layers), "sum_ms": t.total_ms, "run_ms": t.run_ms}
            results.put(row)
            acc = ""
            if metrics:
                m0 = next(iter(metrics.values()))
                acc = (f"| cos {m0.cosine:.6f}  SNR {m0.snr_db:.1f} dB  top1 {m0.topk_agreement.get(1, float('nan')):.4f}"
                       f"  (vs {ref_label})")
            log(f"  {setup['name']} {precision} b{batch}: median {bench.median_ms:.4f} ms  p99 {bench.p99_ms:.4f} ms  "
                f"{bench.throughput:,.0f} samples/s  {macs.tops(seconds):.1f} TOP/s  {acc}")


def engine_reference(setup: dict, batch: int, precision: str, outputs: Dict[str, np.ndarray], art: Path):
    """For models without an ORT reference: the FP32 engine's outputs, else FP16's (kept on disk across runs)."""
    from trtwidgets.core.reference import load_reference, save_reference

    path = art / f"{setup['name']}-b{batch}-reference.npz"
    current = load_reference(path) if path.exists() else None
    rank = {"fp32": 0, "fp16": 1}
    if precision in rank and (current is None or rank[precision] < rank.get(current.meta.get("precision"), 9)):
        save_reference(path, {k: v[:batch] for k, v in setup["inputs"].items()}, outputs, {"precision": precision})
        current = load_reference(path)
    if current is None:
        return None, "none (build fp32 or fp16 first)"
    return current.outputs, f"tensorrt {current.meta.get('precision')}"


def layer_errors_cls(setup: dict, art: Path, args, results: Results) -> None:
    """Per-layer error growth of INT8 vs FP32 for the cls model, both as TensorRT debug builds."""
    import onnx

    from trtwidgets.core.accuracy import float_intermediates, layer_errors, plan_sweep
    from trtwidgets.trt.debug_build import build_debug_engine
    from trtwidgets.trt.runner import EngineRunner

    cache = art / "cls.int8.cache"
    if not cache.exists():
        log("layer errors: no cls.int8.cache yet (run int8 first); skipped")
        return
    proto = onnx.load(setup["model_path"])
    names = float_intermediates(proto)
    shapes = {"x": (32, 3, 48, 192)}
    feeds = {"x": setup["inputs"]["x"][:32]}
    outs = {}
    for label, flags, cc in (("fp32", (), None), ("int8", ("fp16", "int8"), cache)):
        log(f"debug build {label} marking {len(names)} tensors")
        dbg = build_debug_engine(setup["model_path"], mark=names, shapes=shapes, flags=flags, calibration_cache=cc,
                                 builder_optimization_level=args.opt_level, timing_cache=art / "timing.cache")
        log(f"  built in {dbg.build_seconds:.1f} s; marked {len(dbg.marked)}, not found {len(dbg.not_found)}")
        with EngineRunner(dbg.engine) as r:
            outs[label] = r.infer(feeds)
    for o in outs.values():
        o.setdefault("x", feeds["x"])  # the graph input, so that "local" can re-run the first layers
    compared = [n for n in names if n in outs["int8"]]
    report = layer_errors(proto, outs["fp32"], outs["int8"], names=compared)
    # "local" re-runs every node on the INT8 engine's own inputs (onnx.reference here: no ORT on
    # this Python), on 8 samples to keep it quick.
    few = {k: {n: v[:8] for n, v in o.items()} for k, o in outs.items()}
    local = layer_errors(proto, few["fp32"], few["int8"], names=compared, growth="local")
    write_json_atomic(art / "cls-int8-layer-errors.json", report.to_dict())
    write_json_atomic(art / "cls-int8-layer-errors-local.json", local.to_dict())
    plan = plan_sweep(local, steps=(0, 1, 2, 4, 8), mode="qdq_exclude")
    results.note("cls_layer_errors", {"added_top": report.to_rows()[:10], "local_top": local.to_rows()[:10],
                                      "sweep_plan": [s.to_dict() for s in plan]})
    for label, rep in (("added noise", report), ("local (node re-run on INT8 inputs)", local)):
        log(f"  INT8 vs FP32 per-layer error growth, {label} (top 10):")
        for row in rep.to_rows()[:10]:
            log(f"    {row['growth_db']:7.1f} dB  err {row['error_db']:7.1f} dB  {row['op_type']:<18} {row['layer']}")


def summary(results: Results) -> None:
    print("\n" + "=" * 110)
    print(f"{'model':<7} {'prec':<5} {'batch':>5} {'median ms':>10} {'p90 ms':>9} {'p99 ms':>9} {'samples/s':>11} "
          f"{'TOP/s':>8} {'cosine':>10} {'SNR dB':>7} {'top1':>7}  reference")
    for model in ("cls", "resnet"):
        rows = sorted(results.rows(model), key=lambda r: (r["batch"], PRECISIONS.index(r["precision"])))
        for r in rows:
            lat = r["latency"]
            m = next(iter(r["accuracy"].values()), {"cosine": "nan", "snr_db": "nan", "topk_agreement": {}})
            print(f"{model:<7} {r['precision']:<5} {r['batch']:>5} {lat['median_ms']:>10.4f} {lat['p90_ms']:>9.4f} "
                  f"{lat['p99_ms']:>9.4f} {lat['throughput']:>11,.0f} {r['tops']:>8.1f} {float(m['cosine']):>10.6f} "
                  f"{float(m['snr_db']):>7.1f} {float(m['topk_agreement'].get('1', 'nan')):>7.4f}  {r['reference']}")
    by = {(r["model"], r["precision"], r["batch"]): r for r in results.doc["rows"]}
    for model, batch in (("cls", 1), ("cls", 32), ("resnet", 32)):
        fp16, int8, qdq = (by.get((model, p, batch)) for p in ("fp16", "int8", "qdq"))
        if fp16 and int8:
            ratio = int8["latency"]["median_ms"] / fp16["latency"]["median_ms"]
            line = f"{model} b{batch}: INT8 takes {ratio:.2f}x the FP16 time"
            if qdq:
                line += f" (explicit Q/DQ {qdq['latency']['median_ms'] / fp16['latency']['median_ms']:.2f}x)"
            print(line)
    r16, r8 = by.get(("resnet", "fp16", 32)), by.get(("resnet", "int8", 32))
    rq = by.get(("resnet", "qdq", 32))
    if r16 or r8:
        ops = (r16 or r8)["ops"]
        print(f"resnet50 b32: {ops / 1e9:.1f} GOP per run (2 x {ops / 2e9:.1f} GMAC)")
        for label, r, peak in (("fp16", r16, PEAK_TOPS["fp16"]), ("int8", r8, PEAK_TOPS["int8"]),
                               ("qdq", rq, PEAK_TOPS["int8"])):
            if r:
                print(f"  {label:<5} {r['tops']:7.1f} TOP/s = {100 * r['tops'] / peak:5.1f}% of the dense peak "
                      f"({peak:.0f}); at peak a run would take {ops / peak / 1e12 * 1e3:.3f} ms vs "
                      f"{r['latency']['median_ms']:.3f} ms measured")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="cls,resnet")
    ap.add_argument("--precisions", default="fp32,fp16,int8,qdq")
    ap.add_argument("--resnet-precisions", default=None,
                    help="precisions for resnet (default: --precisions without fp32, to keep builds few)")
    ap.add_argument("--opt-level", type=int, default=0)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--layer-errors", action="store_true", help="cls: INT8 vs FP32 per-layer error growth (2 debug builds)")
    ap.add_argument("--out", default=None, help="results folder (default $TRTWIDGETS_ARTIFACTS)")
    ap.add_argument("--summary-only", action="store_true")
    args = ap.parse_args(argv)

    art = artifacts_dir(args.out)
    results = Results(art / "engines.json")
    if args.summary_only:
        summary(results)
        return 0
    from trtwidgets.trt import tensorrt

    trt = tensorrt()
    results.note("peaks_tops", PEAK_TOPS)
    results.note("settings", {"opt_level": args.opt_level, "runs": args.runs, "warmup": args.warmup,
                              "excluded_tactic_sources": list(EXCLUDED_SOURCES), "trt": trt.__version__})
    failures = 0
    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        setup = cls_setup(art) if model == "cls" else resnet_setup(art)
        precs = args.precisions.split(",")
        if model == "resnet":
            precs = (args.resnet_precisions or ",".join(p for p in precs if p != "fp32")).split(",")
        for precision in [p.strip() for p in precs if p.strip()]:
            try:
                res = build_one(setup, precision, art, args, trt)
                measure(setup, precision, res, args, results, art)
            except Exception as exc:  # noqa: BLE001 - record and go on with the next engine
                failures += 1
                log(f"  {model} {precision} FAILED: {exc}")
                traceback.print_exc()
                results.note(f"error_{model}_{precision}", str(getattr(exc, "message", exc)))
        if model == "cls" and args.layer_errors:
            try:
                layer_errors_cls(setup, art, args, results)
            except Exception as exc:  # noqa: BLE001
                failures += 1
                log(f"  layer errors FAILED: {exc}")
                traceback.print_exc()
    summary(results)
    copy_results(art)
    return 1 if failures else 0


def copy_results(art: Path) -> None:
    """With ``--out`` elsewhere, copy the JSON results into ``$TRTWIDGETS_ARTIFACTS`` too.

    Keeping the work folder (engines, timing cache, INT8 cache for the Q/DQ step) out of
    the artifacts folder lets a fresh, empty artifacts folder per command still
    accumulate results across commands.
    """
    dest = os.environ.get("TRTWIDGETS_ARTIFACTS")
    if not dest or Path(dest).resolve() == art.resolve():
        return
    import shutil

    d = Path(dest) / "engines"
    d.mkdir(parents=True, exist_ok=True)
    for f in art.glob("*.json"):
        shutil.copy2(f, d / f.name)
    log(f"copied {len(list(art.glob('*.json')))} JSON file(s) to {d}")


if __name__ == "__main__":
    sys.exit(main())
