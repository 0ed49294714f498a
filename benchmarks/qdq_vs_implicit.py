"""Explicit Q/DQ INT8 vs implicit INT8 (TensorRT-calibrated) vs FP16 on the demo cls model, side by side.

Run on the GPU machine (Python 3.9, TensorRT 8.6; numpy + onnx + tensorrt only)::

    source /tmp/trtb/env.sh && TRTWIDGETS_ARTIFACTS=$OUT EXTRA_PYTHONPATH=$PWD \\
        $PY39 benchmarks/qdq_vs_implicit.py [--engines fp16,int8,qdq_toolkit,qdq_trtcache] [--runs 300]

Engines (one profile x: 1..32 x 3 x 48 x 192, opt 32; builder optimization level 1 (``--opt-level``);
cuBLAS/cuBLASLt/cuDNN tactic sources off, as they are stubs on that machine):

``fp16``          the float model, FP16 flag.
``int8``          implicit INT8: FP16+INT8 flags, IInt8EntropyCalibrator2 on the 32
                  bundled crops (TensorRT decides where INT8 runs).
``qdq_toolkit``   explicit INT8: the committed Q/DQ export
                  ``tests/fixtures/qdq/cls_qdq_int8.onnx`` (the toolkit's
                  percentile-99.99 ranges from the same 32 crops, made on the CPU),
                  FP16+INT8 flags.
``qdq_trtcache``  explicit INT8 exported here with *TensorRT's* Entropy2 ranges
                  (the ``int8`` build's calibration cache): implicit and explicit
                  then differ only in placement, not in ranges.

Accuracy: against ONNX Runtime FP32 outputs computed on the CPU and committed
(``tests/fixtures/qdq/cls_heldback.npz``: 64 crops never used for calibration):
cosine, max abs error, top-1 agreement, and the rotation accuracy against the
crops' true labels (odd crops are turned by 180 degrees). Latency: CUDA-event
median / p99 at batch 1 and 32 (``trtwidgets.trt.bench``). Also the number of
engine layers running in INT8 (engine inspector).

Results are merged into ``$TRTWIDGETS_ARTIFACTS/qdq_vs_implicit.json`` after each
engine, so the run may be split across commands (``--engines int8`` then
``--engines qdq_trtcache``...); ``--summary-only`` prints the table again.
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
from typing import Dict, List

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FIX = ROOT / "tests" / "fixtures" / "qdq"
ENGINES = ("fp16", "int8", "qdq_toolkit", "qdq_trtcache")
OPT_LEVEL = 1
BATCHES = (1, 32)
EXCLUDED_SOURCES = ("CUBLAS", "CUBLAS_LT", "CUDNN")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def _write_json(path: Path, doc) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=str(path.parent))
    with os.fdopen(fd, "w") as f:
        json.dump(doc, f, indent=1, allow_nan=True)
    os.replace(tmp, path)


def _held_back():
    from trtwidgets import demo
    from trtwidgets.core.accuracy.reference import load_reference

    ref = load_reference(FIX / "cls_heldback.npz")
    x = demo.preprocess(ref.inputs["images"])
    outputs = {k: v for k, v in ref.outputs.items() if not k.startswith("qdq_ort/")}
    labels = np.arange(len(x)) % 2
    return x, outputs, labels


def _recipe(model_path: Path, flags, art: Path, calibrator=None):
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.recipe.profiles import Profile, ShapeRange
    from trtwidgets.core.recipe.recipe import CalibratorSpec, Recipe

    profile = Profile({"x": ShapeRange((1, 3, 48, 192), (32, 3, 48, 192), (32, 3, 48, 192))})
    return Recipe.for_model(load_model(model_path), flags=tuple(flags), profiles=(profile,),
                            calibrator=calibrator or CalibratorSpec(), builder_optimization_level=OPT_LEVEL,
                            timing_cache=str(art / "timing.cache"))


def build_engine(name: str, art: Path, trt):
    from trtwidgets import demo
    from trtwidgets.core.recipe.recipe import CalibratorSpec
    from trtwidgets.trt.build import build

    sources = [n for n in trt.TacticSource.__members__ if n not in EXCLUDED_SOURCES]
    calibration = None
    calibrator = None
    model = Path(demo.MODEL_PATH)
    if name == "fp16":
        flags = ("fp16",)
    elif name == "int8":
        flags = ("fp16", "int8")
        calibrator = CalibratorSpec(kind="trt_entropy2")
        calibration = [{"x": np.concatenate([f["x"] for f in demo.sample_inputs(1)])}]
    elif name == "qdq_toolkit":
        flags, model = ("fp16", "int8"), FIX / "cls_qdq_int8.onnx"
    elif name == "qdq_trtcache":
        flags, model = ("fp16", "int8"), export_from_trt_cache(art)
    else:
        raise ValueError(f"unknown engine {name!r}; choose from {', '.join(ENGINES)}")
    out = art / "builds" / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    log(f"building {name}: {model.name}, flags {','.join(flags)}")
    res = build(_recipe(model, flags, art, calibrator), out_dir=out, progress=False, tactic_sources=sources,
                calibration_data=calibration)
    log(f"  built in {res.build_seconds:.1f} s")
    if name == "int8" and res.calibration_cache_path:
        (art / "cls.entropy2.cache").write_bytes(Path(res.calibration_cache_path).read_bytes())
    return res


def export_from_trt_cache(art: Path) -> Path:
    from trtwidgets import demo
    from trtwidgets.core.calibration.cache import read_cache
    from trtwidgets.core.qdq.export import QdqSpec, build_qdq, save_qdq_model

    cache = art / "cls.entropy2.cache"
    if not cache.exists():
        raise RuntimeError(f"{cache} is missing: build the int8 engine first (its ranges are used)")
    result = build_qdq(str(demo.MODEL_PATH), QdqSpec(read_cache(cache).amax))
    path = save_qdq_model(result, art / "cls_qdq_trtcache.onnx")
    log(f"  exported {path.name}: {len(result.report.quantized_layers)} quantized layers from TensorRT's ranges")
    return path


def measure(name: str, res, x, reference, labels, args) -> dict:
    from trtwidgets.core.engine.inspector_json import parse_inspector_json
    from trtwidgets.core.accuracy.metrics import compare_outputs
    from trtwidgets.trt.bench import benchmark_runner
    from trtwidgets.trt.runner import EngineRunner

    row: dict = {"engine": name, "build_seconds": res.build_seconds, "trt_version": res.trt_version,
                 "gpu": res.gpu_name, "latency": {}}
    layers = parse_inspector_json(res.inspector_json_path).layers
    row["layers"] = len(layers)
    row["int8_layers"] = sum(1 for layer in layers if layer.precision == "INT8")
    with EngineRunner(res.engine_path) as runner:
        for batch in BATCHES:
            b = benchmark_runner(runner, {"x": x[:batch]}, runs=args.runs, warmup=args.warmup)
            row["latency"][str(batch)] = b.to_dict()
        outs: Dict[str, List[np.ndarray]] = {}
        for i in range(0, len(x), 32):
            for k, v in runner.infer({"x": x[i:i + 32]}).items():
                outs.setdefault(k, []).append(v)
    cand = {k: np.concatenate(v) for k, v in outs.items()}
    metrics = compare_outputs(reference, cand, topk=(1,))
    m = next(iter(metrics.values()))
    probs = cand[next(iter(metrics))]
    row["accuracy"] = {"cosine": m.cosine, "max_abs": m.max_abs, "top1_agreement": m.topk_agreement.get(1),
                       "rotation_accuracy": float(np.mean(probs.argmax(-1) == labels)), "samples": int(len(probs))}
    return row


def summary(doc: dict, ref_accuracy: float) -> None:
    rows = {r["engine"]: r for r in doc.get("rows", [])}
    print("\n" + "=" * 118)
    print(f"demo cls model, {doc.get('gpu', '?')}, TensorRT {doc.get('trt_version', '?')}; accuracy on 64 held-back "
          f"crops vs ONNX Runtime FP32 (rotation accuracy of FP32 itself: {ref_accuracy:.3f})")
    print(f"{'engine':<13} {'b1 median ms':>12} {'b1 vs fp16':>10} {'b32 median ms':>13} {'b32 vs fp16':>11} "
          f"{'INT8 layers':>11} {'cosine':>9} {'max abs':>8} {'top-1 agr':>9} {'rot. acc':>8}")
    base = rows.get("fp16")
    for name in ENGINES:
        r = rows.get(name)
        if r is None:
            err = doc.get("errors", {}).get(name)
            if err:
                print(f"{name:<13} FAILED: {err[:90]}")
            continue
        lat = r["latency"]
        cells = []
        for b in ("1", "32"):
            ms = lat[b]["median_ms"]
            ratio = ms / base["latency"][b]["median_ms"] if base else float("nan")
            cells += [f"{ms:>12.4f}" if b == "1" else f"{ms:>13.4f}", f"{ratio:>9.2f}x" if b == "1" else f"{ratio:>10.2f}x"]
        a = r["accuracy"]
        print(f"{name:<13} {cells[0]} {cells[1]} {cells[2]} {cells[3]} {r['int8_layers']:>5}/{r['layers']:<5} "
              f"{a['cosine']:>9.5f} {a['max_abs']:>8.4f} {a['top1_agreement']:>9.3f} {a['rotation_accuracy']:>8.3f}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--engines", default=",".join(ENGINES))
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--out", default=None, help="results folder (default $TRTWIDGETS_ARTIFACTS)")
    ap.add_argument("--summary-only", action="store_true")
    ap.add_argument("--opt-level", type=int, default=1,
                    help="builder optimization level (0 takes the first tactic that runs: latency says little)")
    args = ap.parse_args(argv)
    global OPT_LEVEL
    OPT_LEVEL = args.opt_level

    art = Path(args.out or os.environ.get("TRTWIDGETS_ARTIFACTS") or ROOT / "benchmark-results")
    art.mkdir(parents=True, exist_ok=True)
    path = art / "qdq_vs_implicit.json"
    doc = json.loads(path.read_text()) if path.exists() else {"rows": [], "errors": {}}
    x, reference, labels = _held_back()
    ref_acc = float(np.mean(next(iter(reference.values())).argmax(-1) == labels))
    if args.summary_only:
        summary(doc, ref_acc)
        return 0
    os.environ.setdefault("TRTWIDGETS_NO_CUBLAS_CUDNN", "1")
    from trtwidgets.trt import tensorrt

    trt = tensorrt()
    failures = 0
    for name in [e.strip() for e in args.engines.split(",") if e.strip()]:
        try:
            res = build_engine(name, art, trt)
            row = measure(name, res, x, reference, labels, args)
        except Exception as exc:
            failures += 1
            log(f"  {name} FAILED: {exc}")
            traceback.print_exc()
            doc.setdefault("errors", {})[name] = str(getattr(exc, "message", exc))
            _write_json(path, doc)
            continue
        doc["rows"] = [r for r in doc.get("rows", []) if r["engine"] != name] + [row]
        doc.get("errors", {}).pop(name, None)
        doc["gpu"], doc["trt_version"] = row["gpu"], row["trt_version"]
        _write_json(path, doc)
        a = row["accuracy"]
        log(f"  {name}: b1 {row['latency']['1']['median_ms']:.4f} ms, b32 {row['latency']['32']['median_ms']:.4f} ms, "
            f"INT8 layers {row['int8_layers']}/{row['layers']}, cosine {a['cosine']:.5f}, top-1 {a['top1_agreement']:.3f}")
    summary(doc, ref_acc)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
