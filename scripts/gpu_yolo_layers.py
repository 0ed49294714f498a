"""Where the YOLO all-INT8 Q/DQ engine and the implicit INT8 engine spend their time (issue 21, batch 1).

Three builds of the same all-INT8 placement against implicit INT8 were -3%, +4.4% and +0.9% apart at
batch 1 (``benchmarks/results/trust/zoo_gpu``). This script builds each ``--builds`` times (separate engine
caches, so TensorRT times its tactics again), times every engine in interleaved rounds, and profiles each
layer (TensorRT's IProfiler), so that the difference can be placed: which fused layers (named by the ONNX
convolutions they hold) take longer in which engine.

GPU machine (Python 3.9, numpy + onnx + tensorrt only)::

    source /tmp/trtb/env.sh && TRTWIDGETS_NO_CUBLAS_CUDNN=1 EXTRA_PYTHONPATH=$PWD \\
        $PY39 scripts/gpu_yolo_layers.py --plan zoo_gpu/plans_run/yolo-b1/plan.json \\
        --model /tmp/zoo/models/yolo.onnx --out $OUT/yolo --builds 2

Writes ``<out>/yolo_layers.json``: per engine its layer summary (reformats, standalone PointWise and Scale
layers), the per-round medians of each timing session, and per fused layer its median time.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_CONV = re.compile(r"(/model\.[^ +\]]*?/(?:Conv|MatMul|Concat|Split|Resize|MaxPool|Softmax)[^ +\]]*)")


def convs_of(layer_name: str) -> tuple:
    """The ONNX compute nodes a fused layer's name holds (its identity across two engines)."""
    return tuple(sorted(set(_CONV.findall(layer_name))))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--builds", type=int, default=2)
    ap.add_argument("--candidate", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--sessions", type=int, default=1, help="timing sessions (each --rounds interleaved rounds)")
    a = ap.parse_args(argv)

    from trtwidgets.core.engine.inspector_json import parse_inspector_json
    from trtwidgets.core.plan.plan_artifact import Plan
    from trtwidgets.trt.measure import INT8_IMPLICIT, time_interleaved, measure
    from trtwidgets.trt.measure_builds import engine_in
    from trtwidgets.trt.plan_measure import _jobs
    from trtwidgets.trt.profiler import profile_layers
    from trtwidgets.trt.bench import random_feeds
    from trtwidgets.trt.runner import EngineRunner

    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    plan = Plan.load(a.plan)
    report = {"builds": {}, "plan": a.plan, "candidate": a.candidate}
    engines = {}
    for b in range(a.builds):
        work = out / f"work{b}"
        work.mkdir(parents=True, exist_ok=True)
        jobs = [j for j in _jobs(plan, a.model, work, [a.candidate], True) if j.name != "fp16"]
        t0 = time.perf_counter()
        rep = measure(jobs, work / "cache", rounds=3, runs=20, opt_level=1, progress=False, gpus=1)
        for m in rep.measurements:
            name = f"{'implicit' if m.kind == INT8_IMPLICIT else 'qdq'}#{b}"
            found = engine_in(work / "cache" / m.key) if m.key else None
            report["builds"][name] = {"build_seconds": m.build_seconds, "error": m.error, "key": m.key}
            if found is not None and not m.error:
                engines[name] = str(found)
                graphs = sorted(found.parent.glob("*.graph.json"))
                if graphs:
                    summary = parse_inspector_json(graphs[0]).layer_summary()
                    report["builds"][name]["summary"] = {k: v for k, v in summary.items() if k != "reformat_names"}
                    report["builds"][name]["reformat_names"] = summary.get("reformat_names", [])
        print(f"build set {b}: {time.perf_counter() - t0:.0f} s", {k: v["error"][:100] for k, v in report["builds"].items()},
              flush=True)
        (out / "yolo_layers.json").write_text(json.dumps(report, indent=1))
    for session in range(a.sessions):
        times, _ = time_interleaved(engines, {}, a.rounds, a.runs, 10, None, None)
        for name, t in times.items():
            med = sorted(t)[len(t) // 2]
            report["builds"][name].setdefault("sessions", []).append({"round_ms": t, "median_ms": med})
            print(f"session {session}", name, "median", round(med, 4), "rounds", [round(x, 4) for x in t], flush=True)
    # Per-layer profiles, interleaved: engine A, B, A, B... (two passes of 50 runs each).
    layers = {name: {} for name in engines}
    for _ in range(2):
        for name, path in engines.items():
            with EngineRunner(path) as runner:
                lt = profile_layers(runner, random_feeds(runner, {}, seed=0), runs=50, warmup=10)
            for layer in lt.layers:
                layers[name].setdefault(layer.name, []).append(layer.median_ms)
    for name, per in layers.items():
        report["builds"][name]["layers"] = [{"name": k, "median_ms": sorted(v)[len(v) // 2], "convs": list(convs_of(k))}
                                            for k, v in per.items()]
        report["builds"][name]["layer_sum_ms"] = sum(sorted(v)[len(v) // 2] for v in per.values())
        print(name, "layers", len(per), "sum of layer medians", round(report["builds"][name]["layer_sum_ms"], 4), flush=True)
    (out / "yolo_layers.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
