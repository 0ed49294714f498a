"""Build the demo cls model in the ways the inspector must understand, and keep what TensorRT says.

Run on the GPU machine (Python 3.9, TensorRT 8.6; numpy + onnx + tensorrt only)::

    source /tmp/trtb/env.sh && TRTWIDGETS_ARTIFACTS=$OUT/fixtures EXTRA_PYTHONPATH=$PWD \\
        $PY39 tests/gpu/make_fixtures.py [--only NAME,NAME] [--level 0|1] [--list]

Each build writes ``$TRTWIDGETS_ARTIFACTS/<name>/``: ``engine.graph.json`` (DETAILED
inspector JSON, execution context at the profile's opt shape), ``build.log.jsonl``,
``build.json`` (version, GPU, build time, phases, calibration), ``recipe.json``,
``network_layers.json``, ``calibration.cache`` where one was made or used, and
``timings.json`` (per-layer IProfiler times and CUDA-event latency at opt). The
dynamic build also writes ``inspector.nocontext.json``: the same engine inspected
without a context (TensorRT then says ``N/A due to dynamic shapes``). Engines are not
kept (GPU-specific and large). Builds that already have a folder are skipped, so
the script can be run again, a few builds per command, within a time limit.

All builds share one timing cache (``$TRTWIDGETS_ARTIFACTS/_work/timing.cache``) and
use builder optimization level 1 by default (``--level 0`` is faster, but TensorRT then
takes the first tactic that runs, ignores the timing cache, and the precisions it picks
say nothing about speed), with the cuBLAS/cuBLASLt/cuDNN tactic sources off (they are
stubs on the GPU machine). The demo model's input is ``[-1, 3, "?", "?"]``: the build
renames the two ``"?"`` dims in the copy it hands TensorRT (SHARED_DIM_NAME).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from trtwidgets import demo  # noqa: E402
from trtwidgets.core.calibration.data import CalibrationDataSpec  # noqa: E402
from trtwidgets.core.model.load import load_model  # noqa: E402
from trtwidgets.core.recipe.profiles import Profile, ShapeRange  # noqa: E402
from trtwidgets.core.recipe.recipe import CalibratorSpec, Recipe  # noqa: E402

STATIC = (1, 3, 48, 192)
DYNAMIC = ((1, 3, 48, 96), (1, 3, 48, 192), (1, 3, 48, 384))
KEEP = ("engine.graph.json", "build.log.jsonl", "build.json", "recipe.json", "network_layers.json", "calibration.cache")


def _profile(dynamic: bool) -> Profile:
    if dynamic:
        return Profile({demo.INPUT_NAME: ShapeRange(*DYNAMIC)})
    return Profile({demo.INPUT_NAME: ShapeRange.fixed(STATIC)})


LEVEL = 1


def _recipe(work: Path, model_path: Path, dynamic: bool, **kw) -> Recipe:
    return Recipe.for_model(load_model(model_path), profiles=(_profile(dynamic),), builder_optimization_level=LEVEL,
                            timing_cache=str(work / "timing.cache"), **kw)


def _qdq_model(art: Path, work: Path) -> Path:
    """The demo model with Q/DQ from TensorRT's Entropy2 cache of the implicit INT8 build.

    The cache comes from this run's ``cls_static_int8_entropy2`` build, else from the committed
    fixture of an earlier run (a fresh GPU machine keeps nothing between sessions).
    """
    from trtwidgets.core.calibration.cache import read_cache
    from trtwidgets.core.qdq.export import QdqOptions, QdqSpec, build_qdq, save_qdq_model

    candidates = [art / "cls_static_int8_entropy2" / "calibration.cache",
                  ROOT / "tests" / "fixtures" / "trt86" / "cls_static_int8_entropy2" / "calibration.cache"]
    cache = next((c for c in candidates if c.is_file()), None)
    if cache is None:
        raise SystemExit("cls_static_qdq_int8 needs TensorRT's Entropy2 cache of the demo model: build "
                         "cls_static_int8_entropy2 first (or commit its fixture)")
    amax = read_cache(cache).amax
    # rules 1-7, as the fixture was built
    export = build_qdq(load_model(demo.MODEL_PATH), QdqSpec(amax, QdqOptions(dense_int8=False)))
    print(f"Q/DQ export from {cache}: {sum(n.op_type == 'QuantizeLinear' for n in export.model.graph.node)} "
          f"QuantizeLinear nodes; kept float: {len(export.report.skipped)} node(s)")
    return save_qdq_model(export, work / "cls_qdq_int8.onnx")


BUILDS = {
    # name: (dynamic, flags, calibrator kind, Q/DQ model)
    "cls_static_fp32": (False, (), "none", False),
    "cls_static_fp16": (False, ("fp16",), "none", False),
    "cls_static_int8_entropy2": (False, ("fp16", "int8"), "trt_entropy2", False),
    "cls_static_qdq_int8": (False, ("fp16", "int8"), "none", True),
    "cls_dynamic_fp16": (True, ("fp16",), "none", False),
    "cls_dynamic_int8_entropy2": (True, ("fp16", "int8"), "trt_entropy2", False),
}


def _timings(engine_path: str, shape) -> dict:
    import numpy as np

    from trtwidgets.trt.bench import benchmark_runner
    from trtwidgets.trt.profiler import profile_layers
    from trtwidgets.trt.runner import EngineRunner

    x = demo.preprocess(demo.sample_images()[:shape[0]])
    if tuple(x.shape) != tuple(shape):
        x = np.zeros(shape, np.float32)
    out = {"shape": list(shape)}
    with EngineRunner(engine_path) as runner:
        out["latency"] = benchmark_runner(runner, {demo.INPUT_NAME: x}, runs=200, warmup=20).to_dict()
        out["layers"] = profile_layers(runner, {demo.INPUT_NAME: x}, runs=20).to_dict()
    return out


def make(name: str, art: Path, work: Path) -> None:
    from trtwidgets.trt.build import build
    from trtwidgets.trt.layer_info import engine_inspector_json

    dynamic, flags, cal, qdq = BUILDS[name]
    model_path = _qdq_model(art, work) if qdq else Path(demo.MODEL_PATH)
    kw = {"flags": flags, "calibrator": CalibratorSpec(kind=cal)}
    if cal != "none":
        kw["calibration_data"] = CalibrationDataSpec(kind="demo")
    if qdq and "tiny" in model_path.name:
        recipe = Recipe.for_model(load_model(model_path), builder_optimization_level=LEVEL,
                                  timing_cache=str(work / "timing.cache"), **kw)
    else:
        recipe = _recipe(work, model_path, dynamic, **kw)
    t0 = time.time()
    result = build(recipe, out_dir=work / "builds" / name, progress=True)
    print(f"{name}: built in {result.build_seconds:.1f} s ({time.time() - t0:.1f} s in all)\n{result.summary()}")
    dest = art / name
    tmp = Path(tempfile.mkdtemp(prefix=f".{name}.", dir=str(art)))
    for f in KEEP:
        src = Path(result.out_dir) / f
        if src.is_file():
            shutil.copy2(src, tmp / f)
    opt = DYNAMIC[1] if dynamic else STATIC
    if dynamic:
        # Without a context TensorRT cannot say formats of dynamic tensors: kept to test that case too.
        from trtwidgets.trt import tensorrt

        trt = tensorrt()
        runtime = trt.Runtime(trt.Logger(trt.Logger.WARNING))
        engine = runtime.deserialize_cuda_engine(Path(result.engine_path).read_bytes())
        (tmp / "inspector.nocontext.json").write_text(
            engine.create_engine_inspector().get_engine_information(trt.LayerInformationFormat.JSON), encoding="utf-8")
        (tmp / "inspector.max_shape.json").write_text(
            engine_inspector_json(engine, {demo.INPUT_NAME: DYNAMIC[2]}), encoding="utf-8")
    try:
        timings = _timings(result.engine_path, opt)
    except Exception as exc:
        traceback.print_exc()
        timings = {"error": f"{type(exc).__name__}: {exc}"}
    timings["build_seconds"] = result.build_seconds
    timings["phases"] = list(result.phases)
    (tmp / "timings.json").write_text(json.dumps(timings, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, dest)
    shutil.rmtree(result.out_dir, ignore_errors=True)
    print(f"{name}: wrote {sorted(p.name for p in dest.iterdir())}")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--only", default=None, help="comma-separated build names (default: all, in order)")
    ap.add_argument("--list", action="store_true", help="list the build names and exit")
    ap.add_argument("--level", type=int, choices=(0, 1), default=1, help="builder optimization level (default 1)")
    args = ap.parse_args(argv)
    global LEVEL
    LEVEL = args.level
    if args.list:
        print("\n".join(BUILDS))
        return 0
    os.environ.setdefault("TRTWIDGETS_NO_CUBLAS_CUDNN", "1")
    art = Path(os.environ.get("TRTWIDGETS_ARTIFACTS", "artifacts")).resolve()
    art.mkdir(parents=True, exist_ok=True)
    work = art / "_work"
    work.mkdir(exist_ok=True)
    names = [n.strip() for n in args.only.split(",")] if args.only else list(BUILDS)
    unknown = [n for n in names if n not in BUILDS]
    if unknown:
        print(f"unknown build(s) {unknown}; known: {list(BUILDS)}", file=sys.stderr)
        return 2
    failed = []
    for name in names:
        if (art / name).exists():
            print(f"{name}: already in {art}, skipped")
            continue
        shutil.rmtree(work / "builds" / name, ignore_errors=True)
        try:
            make(name, art, work)
        except Exception as exc:
            failed.append(name)
            print(f"{name}: FAILED\n{getattr(exc, 'message', exc)}", file=sys.stderr)
            for line in getattr(exc, "log", ())[-60:]:
                print("   ", line.format(), file=sys.stderr)
    print(f"done; failed: {failed or 'none'}; artifacts in {art}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
