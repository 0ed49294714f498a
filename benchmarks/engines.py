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

The explicit Q/DQ model is exported by the toolkit's ``build_qdq`` with the ranges
of the INT8 build's calibration cache, so implicit and explicit INT8 differ only in
where quantization happens, not in the ranges.

Every finished measurement is merged into ``engines.json`` in the work folder
(``--out``) at once and mirrored to ``$TRTWIDGETS_ARTIFACTS/engines/`` (with the
INT8 caches and engine references), so a command killed at its time limit keeps
what it finished. Split the run over several commands, each under 9 minutes on
the H200 (``--budget-s`` stops starting new builds after that many seconds)::

    $PY39 benchmarks/engines.py --out /tmp/eb --models cls --precisions fp32,fp16
    $PY39 benchmarks/engines.py --out /tmp/eb --models cls --precisions int8
    $PY39 benchmarks/engines.py --out /tmp/eb --models cls --precisions qdq --layer-errors
    $PY39 benchmarks/engines.py --out /tmp/eb --models resnet --precisions fp32,fp16
    $PY39 benchmarks/engines.py --out /tmp/eb --models resnet --precisions int8
    $PY39 benchmarks/engines.py --out /tmp/eb --models resnet --precisions qdq

and print the side-by-side table of all of them, anywhere (no TensorRT needed)::

    python benchmarks/engines.py --summary-only --merge run1/engines/engines.json run2/engines/engines.json ...

If the work folder did not survive between commands (a cold machine), ``--state
DIR`` seeds it from an earlier command's ``engines/`` artifacts folder; without
the TensorRT INT8 cache the Q/DQ model (and the layer-error debug build) take
max ranges measured on a FP32 debug build of the same model instead (recorded
as ``qdq_ranges`` in the row).

Builds use builder optimization level 1 (``--opt-level``): at level 0 TensorRT
takes the first tactic that runs, so FP16/INT8 engines stayed mostly FP32 on the
H200 and their latency says nothing. One timing cache is shared, and the
cuBLAS/cuBLASLt/cuDNN tactic sources are off (stubs on that machine).
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
PEAK_KEY = {"fp32": "fp32", "fp16": "fp16", "int8": "int8", "qdq": "int8"}
LABELS = {"fp32": "FP32", "fp16": "FP16", "int8": "INT8 implicit", "qdq": "INT8 Q/DQ"}
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
        self.save()

    def note(self, key: str, value) -> None:
        self.doc.setdefault("notes", {})[key] = value
        self.save()

    def save(self) -> None:
        self.doc["summary"] = summary_rows(self.doc)
        write_json_atomic(self.path, self.doc)
        mirror(self.path)

    def rows(self, model: str) -> List[dict]:
        return [r for r in self.doc["rows"] if r["model"] == model]


def mirror(path: Path) -> None:
    """Copy a result file to ``$TRTWIDGETS_ARTIFACTS/engines/`` now (a killed command keeps it)."""
    dest = os.environ.get("TRTWIDGETS_ARTIFACTS")
    if not dest or not path.exists():
        return
    d = Path(dest) / "engines"
    if d.resolve() == path.parent.resolve():
        return
    import shutil

    d.mkdir(parents=True, exist_ok=True)
    shutil.copy2(path, d / path.name)


def seed_state(art: Path, state: Optional[str]) -> None:
    """Copy an earlier command's results (engines.json, INT8 caches, references) into an empty work folder."""
    if not state:
        return
    import shutil

    src = Path(state)
    for f in sorted(src.glob("*")):
        if f.is_file() and f.suffix in (".json", ".cache", ".npz") and not (art / f.name).exists():
            shutil.copy2(f, art / f.name)
            log(f"state: {f.name} from {src}")


# -- models ---------------------------------------------------------------------------------------


def cls_setup(art: Path):
    from trtwidgets import demo
    from trtwidgets.core.recipe.profiles import Profile, ShapeRange
    from trtwidgets.core.accuracy.reference import load_reference

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
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.recipe.recipe import CalibratorSpec, Recipe
    from trtwidgets.trt.build import build

    model_path = setup["model_path"]
    calibration_data = None
    calibrator = CalibratorSpec()
    if precision == "int8":
        calibrator = CalibratorSpec(kind="trt_entropy2")
        calibration_data = setup["calibration"]
    elif precision == "qdq":
        model_path = str(export_qdq_model(setup, art, args))
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
        mirror(art / f"{setup['name']}.int8.cache")
    return res


def int8_ranges(setup: dict, art: Path, args) -> "tuple":
    """``(amax, source)``: the TensorRT Entropy2 cache of the int8 step, else max ranges from a FP32 debug build.

    The fallback keeps a command self-contained when the int8 step ran on a machine
    that has gone since: every float tensor is marked in a FP32 debug build, the
    calibration samples are run through it, and each tensor's range is its largest
    absolute value (the toolkit's "max" method, not Entropy2's).
    """
    from trtwidgets.core.calibration.cache import read_cache, write_cache

    cache = art / f"{setup['name']}.int8.cache"
    if cache.exists():
        return read_cache(cache).amax, f"tensorrt entropy2 cache ({cache.name})"
    fallback = art / f"{setup['name']}.max.cache"
    if not fallback.exists():
        import onnx

        from trtwidgets.core.accuracy.intermediates import float_intermediates
        from trtwidgets.trt.debug_build import build_debug_engine
        from trtwidgets.trt.runner import EngineRunner

        names = float_intermediates(onnx.load(setup["model_path"]))
        shapes = {k: v for k, v in setup["input_shapes"][max(setup["batches"])].items()}
        log(f"  no {cache.name}: max ranges of {len(names)} tensors from a FP32 debug build")
        dbg = build_debug_engine(setup["model_path"], mark=names, shapes=shapes, builder_optimization_level=0)
        amax: Dict[str, float] = {}
        with EngineRunner(dbg.engine) as r:
            for feed in setup["calibration"]:
                b = max(setup["batches"])
                for i in range(0, len(next(iter(feed.values()))), b):
                    part = {k: v[i:i + b] for k, v in feed.items()}
                    if len(next(iter(part.values()))) != b:
                        continue
                    outs = dict(r.infer(part), **part)
                    for k, v in outs.items():
                        if np.issubdtype(np.asarray(v).dtype, np.floating):
                            amax[k] = max(amax.get(k, 0.0), float(np.max(np.abs(v))))
        write_cache({k: v for k, v in amax.items() if v > 0}, fallback)
        mirror(fallback)
    return read_cache(fallback).amax, f"max over a FP32 debug build ({fallback.name})"


def export_qdq_model(setup: dict, art: Path, args) -> Path:
    from trtwidgets.core.qdq.export import QdqSpec, build_qdq, save_qdq_model

    amax, source = int8_ranges(setup, art, args)
    model = build_qdq(setup["model_path"], QdqSpec(amax)).model
    path = art / f"{setup['name']}.qdq.onnx"
    save_qdq_model(model, path)
    setup["qdq_ranges"] = source
    log(f"  exported Q/DQ model with {len(amax)} ranges from {source} -> {path.name}")
    return path


def measure(setup: dict, precision: str, build_res, args, results: Results, art: Path):
    from trtwidgets.core.accuracy.metrics import compare_outputs
    from trtwidgets.core.model.opcount import count_macs
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
                "opt_level": args.opt_level, "layer_precisions": layer_precision_counts(build_res),
                "peak_tops": PEAK_TOPS[PEAK_KEY[precision]],
                "peak_fraction": macs.tops(seconds) / PEAK_TOPS[PEAK_KEY[precision]],
            }
            if precision == "qdq":
                row["qdq_ranges"] = setup.get("qdq_ranges")
            if batch == max(setup["batches"]):
                t = profile_layers(runner, feeds, runs=20)
                prof = art / f"{setup['name']}-{precision}-b{batch}.profile.json"
                t.write_trt_profile(prof)
                mirror(prof)
                row["profile"] = {"path": str(prof), "layers": len(t.layers), "sum_ms": t.total_ms, "run_ms": t.run_ms,
                                  "top": [lt.to_dict() for lt in t.top(5)]}
            results.put(row)
            acc = ""
            if metrics:
                m0 = next(iter(metrics.values()))
                acc = (f"| cos {m0.cosine:.6f}  SNR {m0.snr_db:.1f} dB  top1 {m0.topk_agreement.get(1, float('nan')):.4f}"
                       f"  (vs {ref_label})")
            log(f"  {setup['name']} {precision} b{batch}: median {bench.median_ms:.4f} ms  p99 {bench.p99_ms:.4f} ms  "
                f"{bench.throughput:,.0f} samples/s  {macs.tops(seconds):.1f} TOP/s  {acc}")


def layer_precision_counts(build_res) -> Dict[str, int]:
    """How many engine layers run in each precision (from the build's inspector JSON): is FP16/INT8 really used?"""
    try:
        from trtwidgets.core.engine.inspector_json import parse_inspector_json

        graph = parse_inspector_json(build_res.inspector_json)
    except Exception as exc:
        return {"error": str(exc)}
    counts: Dict[str, int] = {}
    for layer in graph.layers:
        counts[layer.precision] = counts.get(layer.precision, 0) + 1
    return counts


def engine_reference(setup: dict, batch: int, precision: str, outputs: Dict[str, np.ndarray], art: Path):
    """For models without an ORT reference: the FP32 engine's outputs, else FP16's (kept on disk across runs)."""
    from trtwidgets.core.accuracy.reference import load_reference, save_reference

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

    from trtwidgets.core.accuracy.intermediates import float_intermediates
    from trtwidgets.core.accuracy.layer_errors import layer_errors
    from trtwidgets.core.accuracy.sweep import plan_sweep
    from trtwidgets.trt.debug_build import build_debug_engine
    from trtwidgets.trt.runner import EngineRunner

    _, source = int8_ranges(setup, art, args)
    cache = art / "cls.int8.cache"
    if not cache.exists():
        cache = art / "cls.max.cache"
    log(f"layer errors: INT8 ranges from {source}")
    proto = onnx.load(setup["model_path"])
    names = float_intermediates(proto)
    shapes = {"x": (32, 3, 48, 192)}
    feeds = {"x": setup["inputs"]["x"][:32]}
    outs = {}
    # FP32 (TF32 off) computes the same whatever the tactic: level 0 is enough and fast. INT8 needs tactics
    # that are timed, or TensorRT keeps the first (often FP32) one.
    for label, flags, cc, level in (("fp32", (), None, 0), ("int8", ("fp16", "int8"), cache, args.opt_level)):
        log(f"debug build {label} marking {len(names)} tensors (opt level {level})")
        dbg = build_debug_engine(setup["model_path"], mark=names, shapes=shapes, flags=flags, calibration_cache=cc,
                                 builder_optimization_level=level, timing_cache=art / "timing.cache")
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
    for name, rep in (("cls-int8-layer-errors.json", report), ("cls-int8-layer-errors-local.json", local)):
        write_json_atomic(art / name, dict(rep.to_dict(), ranges=source))
        mirror(art / name)
    plan = plan_sweep(local, steps=(0, 1, 2, 4, 8), mode="qdq_exclude")
    results.note("cls_layer_errors", {"added_top": report.to_rows()[:10], "local_top": local.to_rows()[:10],
                                      "sweep_plan": [s.to_dict() for s in plan]})
    for label, rep in (("added noise", report), ("local (node re-run on INT8 inputs)", local)):
        log(f"  INT8 vs FP32 per-layer error growth, {label} (top 10):")
        for row in rep.to_rows()[:10]:
            log(f"    {row['growth_db']:7.1f} dB  err {row['error_db']:7.1f} dB  {row['op_type']:<18} {row['layer']}")


def summary_rows(doc: dict) -> List[dict]:
    """One row per (model, batch, precision) with latency, accuracy, TOP/s, % of peak and the ratio to FP16."""
    rows = [r for r in doc.get("rows", []) if r.get("precision") in PRECISIONS]
    by = {(r["model"], r["batch"], r["precision"]): r for r in rows}
    out = []
    for r in sorted(rows, key=lambda r: (r["model"], r["batch"], PRECISIONS.index(r["precision"]))):
        lat = r["latency"]
        acc = next(iter(r.get("accuracy", {}).values()), {})
        fp16 = by.get((r["model"], r["batch"], "fp16"))
        peak = PEAK_TOPS[PEAK_KEY[r["precision"]]]
        top1 = acc.get("topk_agreement", {}).get("1", acc.get("topk_agreement", {}).get(1))
        out.append({
            "model": r["model"], "batch": r["batch"], "precision": r["precision"], "label": LABELS[r["precision"]],
            "median_ms": lat["median_ms"], "p90_ms": lat["p90_ms"], "p99_ms": lat["p99_ms"],
            "throughput": lat["throughput"], "gop": r.get("ops", 0) / 1e9, "tops": r.get("tops"),
            "peak_tops": peak, "peak_fraction": (r.get("tops") or 0.0) / peak,
            "vs_fp16": lat["median_ms"] / fp16["latency"]["median_ms"] if fp16 else None,
            "cosine": acc.get("cosine"), "snr_db": acc.get("snr_db"), "top1": top1,
            "reference": r.get("reference"), "layer_precisions": r.get("layer_precisions"),
            "qdq_ranges": r.get("qdq_ranges"), "build_seconds": r.get("build_seconds"),
        })
    return out


def _f(v, fmt: str, width: int) -> str:
    try:
        return format(float(v), fmt).rjust(width)
    except (TypeError, ValueError):
        return "-".rjust(width)


def summary(doc: dict) -> None:
    rows = summary_rows(doc)
    print("\n" + "=" * 150)
    print(f"{'model':<7} {'batch':>5} {'engine':<14} {'median ms':>10} {'p90 ms':>9} {'p99 ms':>9} {'samples/s':>10} "
          f"{'GOP':>7} {'TOP/s':>7} {'% peak':>7} {'x FP16':>7} {'cosine':>9} {'SNR dB':>7} {'top1':>6}  layers / reference")
    for r in rows:
        lp = r["layer_precisions"] or {}
        layers = " ".join(f"{k}:{v}" for k, v in sorted(lp.items()) if k != "error")
        print(f"{r['model']:<7} {r['batch']:>5} {r['label']:<14} {_f(r['median_ms'], '.4f', 10)} {_f(r['p90_ms'], '.4f', 9)} "
              f"{_f(r['p99_ms'], '.4f', 9)} {_f(r['throughput'], ',.0f', 10)} {_f(r['gop'], '.1f', 7)} "
              f"{_f(r['tops'], '.1f', 7)} {_f(100 * r['peak_fraction'], '.1f', 7)} {_f(r['vs_fp16'], '.2f', 7)} "
              f"{_f(r['cosine'], '.6f', 9)} {_f(r['snr_db'], '.1f', 7)} {_f(r['top1'], '.4f', 6)}  "
              f"[{layers}] vs {r['reference']}" + (f"; Q/DQ ranges: {r['qdq_ranges']}" if r["qdq_ranges"] else ""))
    print(f"% peak: of the H200's dense peak for the engine's precision ({PEAK_TOPS['fp16']:.0f} TFLOPS FP16, "
          f"{PEAK_TOPS['int8']:.0f} TOPS INT8, {PEAK_TOPS['fp32']:.0f} TFLOPS FP32); ops = 2 x MACs of the ONNX model.")
    by = {(r["model"], r["batch"], r["precision"]): r for r in rows}
    for (model, batch) in sorted({(r["model"], r["batch"]) for r in rows}):
        fp16, int8, qdq = (by.get((model, batch, p)) for p in ("fp16", "int8", "qdq"))
        if fp16 and (int8 or qdq):
            parts = []
            for label, r in (("implicit", int8), ("explicit Q/DQ", qdq)):
                if r:
                    parts.append(f"{label} {r['vs_fp16']:.2f}x the FP16 time ({1 / r['vs_fp16']:.2f}x faster)")
            print(f"{model} b{batch}: INT8 " + "; ".join(parts))
    for r in rows:
        if r["model"] == "resnet" and r["precision"] in ("int8", "qdq") and r["tops"]:
            ops = r["gop"] * 1e9
            at_peak = ops / (r["peak_tops"] * 1e12) * 1e3
            print(f"resnet b{r['batch']} {r['label']}: {r['gop']:.0f} GOP per run, {r['tops']:.0f} TOP/s = "
                  f"{100 * r['peak_fraction']:.1f}% of the {r['peak_tops']:.0f} TOPS INT8 peak "
                  f"(a run at peak: {at_peak:.3f} ms; measured {r['median_ms']:.3f} ms, {r['median_ms'] / at_peak:.1f}x)")
    errors = {k: v for k, v in doc.get("notes", {}).items() if k.startswith("error_")}
    for k, v in errors.items():
        print(f"{k}: {v}")


def merge_docs(paths: List[str]) -> dict:
    """engines.json files of several commands as one (later rows replace earlier ones with the same key)."""
    doc: dict = {"rows": [], "notes": {}}
    for p in paths:
        d = json.loads(Path(p).read_text())
        keys = {(r["model"], r["precision"], r.get("batch")) for r in d.get("rows", [])}
        doc["rows"] = [r for r in doc["rows"] if (r["model"], r["precision"], r.get("batch")) not in keys] + d.get("rows", [])
        doc["notes"].update(d.get("notes", {}))
    doc["summary"] = summary_rows(doc)
    return doc


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="cls,resnet")
    ap.add_argument("--precisions", default="fp32,fp16,int8,qdq", help="comma list, or 'none' (e.g. --layer-errors only)")
    ap.add_argument("--resnet-precisions", default=None, help="precisions for resnet (default: --precisions)")
    ap.add_argument("--opt-level", type=int, default=1,
                    help="builder optimization level (default 1; at 0 TensorRT takes the first tactic that runs, "
                         "whatever its precision)")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--layer-errors", action="store_true", help="cls: INT8 vs FP32 per-layer error growth (2 debug builds)")
    ap.add_argument("--out", default=None, help="work folder (default $TRTWIDGETS_ARTIFACTS)")
    ap.add_argument("--state", default=None, help="an earlier command's engines/ artifacts folder to continue from")
    ap.add_argument("--budget-s", type=float, default=480.0,
                    help="start no new build after this many seconds (default 480, for 10-minute commands)")
    ap.add_argument("--summary-only", action="store_true", help="print the table of --out (or --merge); no TensorRT")
    ap.add_argument("--merge", nargs="*", default=None, help="engines.json files of several commands, for the table")
    args = ap.parse_args(argv)
    t0 = time.monotonic()

    if args.summary_only and args.merge:
        doc = merge_docs(args.merge)
        summary(doc)
        if args.out:
            out = Path(args.out)
            out.mkdir(parents=True, exist_ok=True)
            write_json_atomic(out / "engines.json", doc)
            log(f"merged {len(doc['rows'])} rows into {out / 'engines.json'}")
        return 0
    art = artifacts_dir(args.out)
    seed_state(art, args.state)
    results = Results(art / "engines.json")
    if args.summary_only:
        summary(results.doc)
        return 0
    from trtwidgets.trt import tensorrt

    trt = tensorrt()
    results.note("peaks_tops", PEAK_TOPS)
    results.note("settings", {"opt_level": args.opt_level, "runs": args.runs, "warmup": args.warmup,
                              "excluded_tactic_sources": list(EXCLUDED_SOURCES), "trt": trt.__version__})
    failures = 0
    skipped: List[str] = []

    def over_budget(what: str) -> bool:
        if time.monotonic() - t0 > args.budget_s:
            skipped.append(what)
            log(f"  {what}: not started, {time.monotonic() - t0:.0f} s used of --budget-s {args.budget_s:.0f}")
            return True
        return False

    for model in [m.strip() for m in args.models.split(",") if m.strip()]:
        setup = cls_setup(art) if model == "cls" else resnet_setup(art)
        precs = args.resnet_precisions if (model == "resnet" and args.resnet_precisions) else args.precisions
        for precision in [p.strip() for p in precs.split(",") if p.strip() and p.strip() != "none"]:
            if over_budget(f"{model} {precision}"):
                continue
            try:
                res = build_one(setup, precision, art, args, trt)
                measure(setup, precision, res, args, results, art)
                if results.doc.get("notes", {}).pop(f"error_{model}_{precision}", None) is not None:
                    results.save()  # an earlier command's failure is history now
            except Exception as exc:
                failures += 1
                log(f"  {model} {precision} FAILED: {exc}")
                traceback.print_exc()
                results.note(f"error_{model}_{precision}", str(getattr(exc, "message", exc)))
        if model == "cls" and args.layer_errors and not over_budget("cls layer errors"):
            try:
                layer_errors_cls(setup, art, args, results)
            except Exception as exc:
                failures += 1
                log(f"  layer errors FAILED: {exc}")
                traceback.print_exc()
    if skipped:
        results.note("skipped_last_command", skipped)
    summary(results.doc)
    copy_results(art)
    log(f"done in {time.monotonic() - t0:.0f} s")
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
    files = [f for f in art.glob("*") if f.is_file() and f.suffix in (".json", ".cache", ".npz")]
    for f in files:
        shutil.copy2(f, d / f.name)
    log(f"copied {len(files)} result file(s) to {d}")


if __name__ == "__main__":
    sys.exit(main())
