"""``trtwidgets bench ENGINE_DIR [--shape INPUT:1x3x48x192 ...] [--runs 200] [--json]``.

Benchmarks an engine with CUDA events: per optimization profile at its opt
shapes (or at the ``--shape`` given), median / p90 / p99 over ``--runs`` timed
runs after warm-up, and throughput. ``--layers`` adds per-layer times from
TensorRT's profiler.
"""

from __future__ import annotations

import json
import os

NAME = "bench"
OUTPUTS = {"save_profile": "file"}  # files it writes: checked and reported by cli._outputs
HELP = "benchmark an engine: median/p90/p99 latency and throughput per profile shape (needs a GPU)"


def add_arguments(parser):
    parser.add_argument("engine_dir", help="build directory written by `trtwidgets build`, or an engine file")
    parser.add_argument("--shape", action="append", default=[], metavar="INPUT:DIMS",
                        help="input shape, e.g. x:32x3x48x192 (repeat per input); default: each profile's opt shapes")
    parser.add_argument("--runs", type=int, default=200, help="timed runs (>= 200, default 200)")
    parser.add_argument("--warmup", type=int, default=20, help="untimed runs first (default 20)")
    parser.add_argument("--profile", type=int, action="append", default=None,
                        help="optimization profile index (repeatable; default: every profile)")
    parser.add_argument("--all-shapes", action="store_true",
                        help="benchmark each profile at its min, opt and max shapes (default: opt only)")
    parser.add_argument("--layers", action="store_true", help="also time each layer with TensorRT's profiler")
    parser.add_argument("--save-profile", metavar="FILE", help="write per-layer times as trtexec-style profile JSON")
    parser.add_argument("--json", action="store_true", help="print results as JSON")


def format_result(r) -> str:
    shapes = ", ".join(f"{k}:{'x'.join(map(str, v))}" for k, v in r.shapes.items())
    return (f"profile {r.profile}  {shapes}\n"
            f"  median {r.median_ms:.4f} ms   p90 {r.p90_ms:.4f} ms   p99 {r.p99_ms:.4f} ms   "
            f"mean {r.mean_ms:.4f} ms   min {r.min_ms:.4f} ms\n"
            f"  throughput {r.throughput:,.1f} samples/s  (batch {r.batch}, {r.runs} runs after {r.warmup} warm-up)")


def _shape_sets(runner, shapes, all_shapes: bool):
    """The input-shape sets to time in the runner's profile: ``--shape`` values, else opt (and min, max)."""
    if shapes or not all_shapes:
        return [dict(shapes)]
    sets = []
    for k in range(3):  # min, opt, max
        s = {}
        for name in runner.input_names:
            rng = runner.profile_shapes(name)
            if rng is not None:
                s[name] = tuple(rng[k])
        if s not in sets:
            sets.append(s)
    return sets


def run(args) -> int:
    from ..core.common.errors import UserError
    from ..core.engine.latency import MIN_RUNS
    from ._engine_dir import parse_shapes, resolve

    shapes = parse_shapes(args.shape)
    if args.runs < MIN_RUNS:
        raise UserError(f"--runs {args.runs} is too few.", f"p99 needs at least {MIN_RUNS} timed runs.",
                        f"Use --runs {MIN_RUNS} or more.")
    engine_path, _ = resolve(args.engine_dir)
    from ..trt import tensorrt

    tensorrt()  # a clear TensorRTUnavailable (exit 2) before anything else
    from ..trt.bench import benchmark_runner, random_feeds
    from ..trt.profiler import profile_layers
    from ..trt.runner import EngineRunner, load_engine

    engine, runtime, logger = load_engine(engine_path)
    nprof = int(engine.num_optimization_profiles)
    profiles = args.profile if args.profile is not None else list(range(nprof))
    results, layer_results = [], []
    for p in profiles:
        with EngineRunner(engine, profile=p) as runner:
            runner._runtime, runner._logger = runtime, logger
            for shape_set in _shape_sets(runner, shapes, args.all_shapes):
                feeds = random_feeds(runner, shape_set)
                res = benchmark_runner(runner, feeds, runs=args.runs, warmup=args.warmup)
                results.append(res)
                if args.layers or args.save_profile:
                    t = profile_layers(runner, feeds, runs=min(args.runs, 50))
                    layer_results.append(t)
                    if args.save_profile:
                        base, ext = os.path.splitext(args.save_profile)
                        single = len(profiles) == 1 and not args.all_shapes
                        tag = "-".join("x".join(map(str, v)) for v in shape_set.values()) if shape_set else "opt"
                        t.write_trt_profile(args.save_profile if single
                                            else f"{base}.profile{p}.{tag}{ext or '.json'}")
    if args.json:
        doc = {"engine": engine_path, "results": [r.to_dict() for r in results]}
        if layer_results:
            doc["layers"] = [t.to_dict() for t in layer_results]
        print(json.dumps(doc, indent=2))
        return 0
    print(f"engine {engine_path}")
    for i, r in enumerate(results):
        print(format_result(r))
        if layer_results:
            t = layer_results[i]
            print(f"  layers (profiled, {t.runs} runs; sum {t.total_ms:.4f} ms of {t.run_ms or float('nan'):.4f} ms per run):")
            for lt in t.top(10):
                print(f"    {lt.mean_ms:9.4f} ms  {lt.name}")
    return 0
