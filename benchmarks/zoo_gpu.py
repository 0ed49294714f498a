"""The GPU side of the zoo benchmark (issue 14): build, time and run each (model, batch, variant).

Runs on the GPU machine under the TensorRT bundle's Python 3.9 with numpy, onnx and
tensorrt only (trtwidgets.trt and core modules; see DEVELOPERS.md, "The GPU machine")::

    source /tmp/trtb/env.sh && EXTRA_PYTHONPATH=$PWD $PY39 benchmarks/zoo_gpu.py \\
        --zoo .zoo --work /tmp/zoo_work --out /tmp/zoo_out \\
        --jobs resnet:32:fp16,resnet:32:int8_implicit,resnet:32:first_export
    # or the cross product: --models cls,det --batches 1,32 --variants fp16,int8_implicit,first_export,plan_pick

Variants (each one build, FP16+INT8 flags for the INT8 ones):

``fp16``           the float model, FP16 flag.
``int8_implicit``  the float model, FP16+INT8, the toolkit's entropy ranges as a calibration
                   cache (``<model>/model.cache`` from ``zoo.py first``): TensorRT picks INT8 per layer.
``first_export``   ``<model>/first.qdq.onnx``: the toolkit's Q/DQ export at commit 3adb33c.
``plan_pick``      ``<model>/plan_b<B>/model.qdq.onnx``, else ``<model>/plan/model.qdq.onnx``
                   (``--plan-dir``, default the zoo folder): the planner's recommended Q/DQ model
                   (``trtwidgets plan``, benchmarks/zoo_plan.sh). Where only ``plan.json`` travelled,
                   the pick is exported here from ``<model>/float.onnx`` (a transformer's Q/DQ model is
                   as large as its float model).
``plan_prev``      ``<model>/plan_prev_b<B>/model.qdq.onnx``: a pick measured, then superseded by a planner
                   change (the evidence for it).
``x_NAME``         ``<model>/x/NAME.onnx``: an experiment's Q/DQ model (FP16+INT8).

Models are built at a static shape: ``zoo_shapes.with_batch`` makes the batch-B copy of
the batch-1 file on this machine; the ResNet-50 shape is generated here
(benchmarks/resnet50.py, seed 0; its sha256 is recorded). Builds use builder
optimization level 1 and leave the cuBLAS/cuBLASLt/cuDNN tactic sources off (stubs
on that machine), one timing cache per work folder. A variant whose file is missing
is skipped and said so; a failed build records TensorRT's error text and the run goes
on. Engines stay in ``--work`` (``/tmp`` on that machine) and a job whose result is
already in ``--out`` is not built again, so back-to-back commands continue a run.

Per job, in ``--out``: ``<model>-b<B>-<variant>.json`` (build seconds, latency: CUDA-event
median/p90/p99 over ``--runs``, layer precision counts, engine size, model sha256, or
the error), ``.graph.json`` (the engine inspector's JSON), ``.outputs.npz`` (engine
outputs on every held-back input, run B at a time) and ``.timings.json`` (per-layer IProfiler
times); for ``int8_implicit`` also ``.oracle/``, a saved build for ``trtwidgets plan --oracle``.
(The committed baselines predate the per-layer times.) ``benchmarks/zoo_report.py``
compares them with ONNX Runtime on the CPU.

Plan-pick runbook (FP16 again beside each pick: engine-to-engine timing differs by up to
~10% on the launch-bound models, so compare within one run)::

    benchmarks/zoo_plan.sh resnet cls                        # CPU: /work/zoo/<m>/plan_b{1,32}/
    python benchmarks/zoo.py pack --models resnet,cls --no-first --dest .zoo   # .zoo is git-ignored
    # device: the bundle's 11 parts (DEVELOPERS.md, "The GPU machine"), then one call carrying [".zoo"]:
    #   rm -rf /tmp/zoo && cp -r .zoo /tmp/zoo
    # and, back to back (each call <= 10 min; --budget-s stops starting builds):
    export EXTRA_PYTHONPATH=$PWD && source /tmp/trtb/env.sh && $PY39 benchmarks/zoo_gpu.py --zoo /tmp/zoo \\
        --out /tmp/zoo_out --budget-s 300 \\
        --jobs resnet:32:fp16,resnet:32:plan_pick,cls:32:fp16,cls:32:plan_pick,cls:1:fp16,cls:1:plan_pick
    tar czf $OUT/zoo.tgz -C /tmp zoo_out
    # CPU: unpack, then
    python benchmarks/zoo_report.py --runs benchmarks/results/zoo/h100_trt86 RUN/zoo_out \\
        --fixtures benchmarks/results/zoo/h100_trt86 --readme

The committed baselines were built with trtwidgets at 3adb33c (``EXTRA_PYTHONPATH`` pointing
at a copy of that commit's package), since the working tree's TensorRT layer was being
rewritten at the time; every run records which ``trtwidgets`` it imported.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
import traceback
from pathlib import Path
from typing import Dict, List, Optional, Tuple

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
# Appended, not prepended: a trtwidgets on PYTHONPATH wins (the GPU runs used 3adb33c's copy, see the report).
sys.path.append(str(ROOT))

from trtwidgets.core.common.atomic import write_text_atomic  # noqa: E402  (numpy-only: runs under the bundle)

VARIANTS = ("fp16", "int8_implicit", "first_export", "plan_pick", "plan_pin", "plan_v1", "plan_v1_pin", "plan_prev")
FLAGS = {"fp16": ("fp16",), "int8_implicit": ("fp16", "int8"), "first_export": ("fp16", "int8"),
         "plan_pick": ("fp16", "int8"), "plan_pin": ("fp16", "int8"), "plan_v1": ("fp16", "int8"),
         "plan_v1_pin": ("fp16", "int8")}
STUBBED_TACTIC_SOURCES = ("CUBLAS", "CUBLAS_LT", "CUDNN")
#: Builder optimization level (--opt-level; 1 keeps mid-size CNN builds within minutes on this TensorRT).
OPT_LEVEL = 1
#: Outputs larger than this many elements are saved as float16 (the recognizer's 64x40x6625 softmax).
MAX_FP32_ELEMENTS = 4_000_000


def flags_of(variant: str) -> Tuple[str, ...]:
    """Builder flags: FP16 for ``fp16``, FP16+INT8 for the rest (``x_*`` experiments are Q/DQ models)."""
    return FLAGS.get(variant, ("fp16", "int8"))


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def write_json_atomic(path: Path, doc) -> None:
    """``doc`` as JSON through the toolkit's one atomic write (core.common.atomic)."""
    write_text_atomic(path, json.dumps(doc, indent=1, allow_nan=True))


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def weights_sha256(path: Path) -> str:
    """sha256 over the initializers (name, raw bytes) in name order: equal weights, whatever the serializer."""
    import onnx
    from onnx import numpy_helper

    h = hashlib.sha256()
    for t in sorted(onnx.load(str(path)).graph.initializer, key=lambda t: t.name):
        h.update(t.name.encode())
        h.update(np.ascontiguousarray(numpy_helper.to_array(t)).tobytes())
    return h.hexdigest()


def job_id(model: str, batch: int, variant: str) -> str:
    return f"{model}-b{batch}-{variant}"


def parse_jobs(args) -> List[Tuple[str, int, str]]:
    """``--jobs m:b:v,...`` in that order, else the cross product of --models, --batches, --variants."""
    jobs = []
    if args.jobs:
        for item in args.jobs.split(","):
            parts = item.strip().split(":")
            if len(parts) != 3:
                raise SystemExit(f"--jobs item {item!r} is not MODEL:BATCH:VARIANT")
            jobs.append((parts[0], int(parts[1]), parts[2]))
    else:
        for m in args.models.split(","):
            for b in args.batches.split(","):
                for v in args.variants.split(","):
                    jobs.append((m.strip(), int(b), v.strip()))
    for _, _, v in jobs:
        if v not in VARIANTS and not (v.startswith("x_") and len(v) > 2):
            raise SystemExit(f"unknown variant {v!r}; choose from {', '.join(VARIANTS)} or x_NAME")
    return jobs


def source_file(zoo: Path, plan_dir: Path, model: str, variant: str, batch: int = 1) -> Optional[Path]:
    """The batch-1 ONNX file a variant builds from (None: generated here, for the ResNet-50 shape's float model).

    ``plan_pick`` takes ``<model>/plan_b<batch>/model.qdq.onnx`` (benchmarks/zoo_plan.sh plans per batch,
    since the cost model depends on it), else ``<model>/plan/model.qdq.onnx``.
    """
    if variant in ("fp16", "int8_implicit"):
        return None if model == "resnet" else zoo / model / "float.onnx"
    if variant == "first_export":
        return zoo / model / "first.qdq.onnx"
    if variant.startswith("x_"):
        # An experiment's Q/DQ model, named by the variant: <plan_dir>/<model>/x/<name>.onnx (batch 1).
        return plan_dir / model / "x" / f"{variant[2:]}.onnx"
    if variant == "plan_prev":
        # A pick measured and then superseded by a planner change (kept: it is the evidence for the change).
        return plan_dir / model / f"plan_prev_b{batch}" / "model.qdq.onnx"
    if variant in ("plan_v1", "plan_v1_pin"):
        # The planner's pick before its border cost was calibrated on these runs (kept: it is the evidence).
        return plan_dir / model / f"plan_v1_b{batch}" / "model.qdq.onnx"
    # plan_pick and plan_pin build the same model (plan_pin pins its float part to FP16).
    per_batch = plan_dir / model / f"plan_b{batch}" / "model.qdq.onnx"
    return per_batch if per_batch.exists() else plan_dir / model / "plan" / "model.qdq.onnx"


def regenerate_pick(zoo: Path, model: str, dest: Path) -> None:
    """Write the plan's Q/DQ pick from ``<model>/float.onnx`` and ``plan.json`` (numpy + onnx only).

    A transformer's Q/DQ model is as large as its float model (~90 MB for MiniLM): carrying
    the plan instead halves what travels to the GPU machine. The export is deterministic
    (the weights' sha256 is recorded with the result, to compare with the CPU's file).
    """
    import onnx

    from trtwidgets.core.qdq.export import save_qdq_model
    from trtwidgets.core.plan.planner import export_plan

    plan_json, float_onnx = dest.parent / "plan.json", zoo / model / "float.onnx"
    if not plan_json.exists() or not float_onnx.exists():
        return
    ex = export_plan(onnx.load(str(float_onnx)), plan_json)
    if ex is not None:
        save_qdq_model(ex, dest)
        log(f"{model}: wrote the plan's pick {dest} from {float_onnx.name} + plan.json")


def static_model(zoo: Path, plan_dir: Path, work: Path, model: str, batch: int, variant: str) -> Path:
    """The ONNX file to build: the variant's model pinned to ``batch`` (written under ``work``)."""
    import onnx

    from zoo_shapes import with_batch

    kind = "float" if variant in ("fp16", "int8_implicit") else variant
    out = work / model / f"{kind}_b{batch}.onnx"
    out.parent.mkdir(parents=True, exist_ok=True)
    src = source_file(zoo, plan_dir, model, variant, batch)
    if src is None:
        from resnet50 import resnet50

        proto = resnet50(batch=batch)
    else:
        if not src.exists():
            raise FileNotFoundError(str(src))
        proto = with_batch(onnx.load(str(src)), batch)
    from trtwidgets.core.common.atomic import write_bytes_atomic

    write_bytes_atomic(out, proto.SerializeToString())
    return out


def heldback(zoo: Path, model: str) -> Dict[str, np.ndarray]:
    with np.load(zoo / model / "heldback16.npz", allow_pickle=False) as f:
        return {k: (f[k].astype(np.float32) if f[k].dtype == np.float16 else f[k]) for k in f.files}


def run_heldback(runner, feeds: Dict[str, np.ndarray], batch: int) -> Dict[str, np.ndarray]:
    """Engine outputs for every held-back sample; a last partial batch is padded with the first rows, then cut."""
    n = len(next(iter(feeds.values())))
    outs: Dict[str, list] = {}
    for i in range(0, n, batch):
        part = {k: v[i:i + batch] for k, v in feeds.items()}
        got = len(next(iter(part.values())))
        if got < batch:
            part = {k: np.concatenate([v, feeds[k][:batch - got]]) for k, v in part.items()}
        for k, v in runner.infer(part).items():
            outs.setdefault(k, []).append(np.asarray(v)[:got])
    return {k: np.concatenate(v) for k, v in outs.items()}


def precision_counts(inspector_json: str) -> Dict[str, int]:
    from trtwidgets.core.engine.inspector_json import parse_inspector_json

    counts: Dict[str, int] = {}
    graph = parse_inspector_json(inspector_json)
    for layer in graph.layers:
        counts[layer.precision] = counts.get(layer.precision, 0) + 1
    counts["reformat_layers"] = sum(1 for layer in graph.layers if "reformat" in layer.layer_type.lower())
    counts["layers"] = len(graph.layers)
    return counts


def build_job(model: str, batch: int, variant: str, path: Path, zoo: Path, work: Path, trt,
              plan_json: Optional[Path] = None):
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.recipe.recipe import CalibratorSpec, Recipe
    from trtwidgets.trt.build import build

    calibrator = CalibratorSpec()
    if variant == "int8_implicit":
        cache = zoo / model / "model.cache"
        if not cache.exists():
            raise FileNotFoundError(str(cache))
        calibrator = CalibratorSpec(kind="toolkit", cache_path=str(cache))
    pins = {}
    if variant in ("plan_pin", "plan_v1_pin"):
        # The plan's pick with its float part pinned to FP16 (precision constraints 'prefer'): the weakly
        # typed way to the FP16 float part that TensorRT 8.6's parser cannot read from the model.
        import onnx

        from trtwidgets.core.plan.plan_artifact import Plan
        from trtwidgets.core.qdq.float_part.layer_pins import float_part_nodes, float_part_pattern
        from trtwidgets.core.recipe.fields import LayerPrecision

        pick = Plan.load(plan_json).pick.quantized if plan_json is not None and plan_json.exists() else ()
        names = float_part_nodes(onnx.load(str(path)), pick)
        if names:
            pins = {"precision_constraints": "prefer",
                    "layer_precisions": (LayerPrecision(float_part_pattern(names)[0], "fp16", regex=True),)}
    recipe = Recipe.for_model(load_model(str(path)), flags=flags_of(variant), calibrator=calibrator,
                              builder_optimization_level=OPT_LEVEL, timing_cache=str(work / "timing.cache"), **pins)
    sources = [n for n in trt.TacticSource.__members__ if n not in STUBBED_TACTIC_SOURCES]
    out = work / "builds" / job_id(model, batch, variant)
    if out.exists():
        shutil.rmtree(out)
    return build(recipe, out_dir=out, progress=False, tactic_sources=sources)


def save_layer_times(runner, feeds, bench, res, out: Path, jid: str, variant: str, runs: int) -> None:
    """``<jid>.timings.json`` (CUDA-event latency + IProfiler per-layer times); for implicit INT8 also
    ``<jid>.oracle/`` (``engine.graph.json`` + ``timings.json``): a saved build that ``trtwidgets plan
    --oracle`` reads as TensorRT's per-layer choices and times."""
    from trtwidgets.trt.profiler import profile_layers

    doc = {"latency": bench.to_dict(), "layers": profile_layers(runner, feeds, runs=runs).to_dict()}
    text = json.dumps(doc, indent=1, allow_nan=True) + "\n"
    write_text_atomic(out / f"{jid}.timings.json", text)
    if variant == "int8_implicit":
        oracle = out / f"{jid}.oracle"
        oracle.mkdir(exist_ok=True)
        write_text_atomic(oracle / "engine.graph.json", res.inspector_json)
        write_text_atomic(oracle / "timings.json", text)


def error_text(exc: BaseException) -> str:
    """The exception's message plus TensorRT's own error lines, when the toolkit attached its log."""
    lines = [str(getattr(exc, "message", None) or exc)]
    for ln in list(getattr(exc, "log", ()) or ())[-15:]:
        lines.append(ln.format() if hasattr(ln, "format") else str(ln))
    return "\n".join(lines)


def run_job(model: str, batch: int, variant: str, args, trt) -> dict:
    from trtwidgets.trt.bench import benchmark_runner
    from trtwidgets.trt.runner import EngineRunner

    zoo, work, out = Path(args.zoo), Path(args.work), Path(args.out)
    plan_dir = Path(args.plan_dir) if args.plan_dir else zoo
    jid = job_id(model, batch, variant)
    row: dict = {"model": model, "batch": batch, "variant": variant, "flags": list(flags_of(variant)),
                 "opt_level": OPT_LEVEL}
    if variant in ("plan_pick", "plan_pin"):
        # Into the per-batch folder whose plan.json travelled (source_file falls back to plan/ while it is empty).
        per_batch = plan_dir / model / f"plan_b{batch}" / "model.qdq.onnx"
        if not per_batch.exists():
            regenerate_pick(zoo, model, per_batch)
    src = source_file(zoo, plan_dir, model, variant, batch)
    if src is not None and not src.exists():
        if variant in ("plan_pick", "plan_pin") and (src.parent / "plan.json").exists():
            row["skipped"] = f"{src.parent / 'plan.json'}: the pick is FP16 (no Q/DQ model); the fp16 job stands for it"
        else:
            row["skipped"] = f"{src} is missing"
        log(f"{jid}: skipped, {row['skipped']}")
        return row
    if variant == "int8_implicit" and not (zoo / model / "model.cache").exists():
        row["skipped"] = f"{zoo / model / 'model.cache'} is missing"
        log(f"{jid}: skipped, no model.cache")
        return row
    path = static_model(zoo, plan_dir, work, model, batch, variant)
    row["source"] = str(src) if src is not None else "benchmarks/resnet50.py"
    row["model_sha256"] = sha256(path)
    row["weights_sha256"] = weights_sha256(path)
    log(f"{jid}: building {path.name} ({path.stat().st_size / 1e6:.1f} MB), flags {','.join(flags_of(variant))}")
    res = build_job(model, batch, variant, path, zoo, work, trt, plan_json=src.parent / "plan.json" if src else None)
    row.update(build_seconds=res.build_seconds, engine_bytes=res.engine_bytes, trt_version=res.trt_version,
               gpu=res.gpu_name, warnings=[ln.format() for ln in res.log if ln.severity in ("WARNING", "ERROR")][-20:])
    write_text_atomic(out / f"{jid}.graph.json", res.inspector_json)
    row["layer_precisions"] = precision_counts(res.inspector_json)
    log(f"{jid}: built in {res.build_seconds:.1f} s; layers {row['layer_precisions']}")
    feeds = heldback(zoo, model)
    with EngineRunner(res.engine_path) as runner:
        bench = benchmark_runner(runner, {k: v[:batch] for k, v in feeds.items()}, runs=args.runs, warmup=args.warmup)
        outputs = run_heldback(runner, feeds, batch)
        if args.profile_runs > 0:  # last: the profiler stays attached to the context
            try:
                save_layer_times(runner, {k: v[:batch] for k, v in feeds.items()}, bench, res, out, jid, variant,
                                 args.profile_runs)
            except Exception as exc:
                row["profile_error"] = f"{type(exc).__name__}: {exc}"
    row["latency"] = bench.to_dict()
    saved = {k: (v.astype(np.float16) if v.size > MAX_FP32_ELEMENTS and v.dtype == np.float32 else v)
             for k, v in outputs.items()}
    row["outputs_saved_as"] = {k: str(v.dtype) for k, v in saved.items()}
    np.savez_compressed(out / f"{jid}.outputs.npz", **saved)
    log(f"{jid}: median {bench.median_ms:.4f} ms, p99 {bench.p99_ms:.4f} ms over {bench.runs} runs")
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", default=str(ROOT / ".zoo"), help="the packed zoo (zoo.py pack)")
    ap.add_argument("--plan-dir", default=None, help="folder with <model>/plan/model.qdq.onnx (default --zoo)")
    ap.add_argument("--work", default="/tmp/zoo_work", help="engines, static models, timing cache")
    ap.add_argument("--out", default=None, help="results folder (default $OUT/zoo)")
    ap.add_argument("--jobs", default=None, help="MODEL:BATCH:VARIANT,... in this order")
    ap.add_argument("--models", default="resnet,cls,det,rec,minilm")
    ap.add_argument("--batches", default="1,32")
    ap.add_argument("--variants", default="fp16,int8_implicit,first_export")
    ap.add_argument("--opt-level", type=int, default=1, help="builder optimization level (default 1)")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=50)
    ap.add_argument("--profile-runs", type=int, default=20, help="IProfiler runs for per-layer times (0: none)")
    ap.add_argument("--budget-s", type=float, default=480.0, help="start no build after this many seconds")
    ap.add_argument("--redo", action="store_true", help="build again even when --out has the job's result")
    ap.add_argument("--dry-run", action="store_true", help="resolve jobs and files, build nothing (no TensorRT)")
    args = ap.parse_args(argv)
    global OPT_LEVEL
    OPT_LEVEL = int(args.opt_level)
    args.out = args.out or os.path.join(os.environ.get("OUT", "/tmp"), "zoo")
    out, work = Path(args.out), Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    jobs = parse_jobs(args)
    t0 = time.monotonic()
    if args.dry_run:
        plan_dir = Path(args.plan_dir) if args.plan_dir else Path(args.zoo)
        for m, b, v in jobs:
            src = source_file(Path(args.zoo), plan_dir, m, v, b)
            state = "generated (resnet50.py)" if src is None else (str(src) + (" ok" if src.exists() else " MISSING"))
            done = (out / f"{job_id(m, b, v)}.json").exists()
            print(f"{job_id(m, b, v):<28} {state}{' (done)' if done else ''}")
            if src is not None and src.exists():
                static_model(Path(args.zoo), plan_dir, work, m, b, v)
            if (Path(args.zoo) / m / "heldback16.npz").exists():
                heldback(Path(args.zoo), m)
        return 0
    os.environ.setdefault("TRTWIDGETS_NO_CUBLAS_CUDNN", "1")
    from trtwidgets.trt import tensorrt

    trt = tensorrt()
    import trtwidgets

    log(f"trtwidgets from {Path(trtwidgets.__file__).parent}, TensorRT {trt.__version__}")
    failures = 0
    for m, b, v in jobs:
        jid = job_id(m, b, v)
        dest = out / f"{jid}.json"
        if dest.exists() and not args.redo:
            log(f"{jid}: done earlier ({dest})")
            continue
        if time.monotonic() - t0 > args.budget_s:
            log(f"{jid}: not started, {time.monotonic() - t0:.0f} s used of --budget-s {args.budget_s:.0f}")
            continue
        t1 = time.monotonic()
        try:
            row = run_job(m, b, v, args, trt)
        except Exception as exc:
            failures += 1
            row = {"model": m, "batch": b, "variant": v, "error": error_text(exc)}
            log(f"{jid}: FAILED: {row['error'][:2000]}")
            traceback.print_exc()
        row["job_seconds"] = time.monotonic() - t1
        row["trtwidgets"] = str(Path(trtwidgets.__file__).parent)
        if "error" in row:  # kept apart, so that the next command tries the job again
            write_json_atomic(out / f"{jid}.error.json", row)
        elif "skipped" not in row:
            write_json_atomic(dest, row)
    log(f"done in {time.monotonic() - t0:.0f} s; results in {out}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
