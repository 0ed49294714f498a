"""The peer on the GPU (issue 33): FP16, the toolkit's all-INT8 export and ModelOpt's INT8 model, timed interleaved.

Builds (TensorRT 8.6, builder optimization level ``--opt-level``, cuBLAS/cuDNN tactic sources off, one build after
the other so that no build times its tactics beside another) and times in ``--rounds`` interleaved rounds in one
run (:func:`trtwidgets.trt.measure.measure`): FP16 of the float model, and each ``--qdq NAME=MODEL`` with FP16 +
INT8. Per engine it prints the median, the spread of the round medians, the ratio to FP16, its layers, INT8
layers, reformat layers (with their names in the JSON), standalone PointWise and Scale layers
(:meth:`~trtwidgets.core.engine.engine_graph.EngineGraph.layer_summary`), and writes ``--out`` (JSON: the
measurements, each engine's summary and its layers with their precisions, for ``benchmarks/yolo_borders.py``).

``--float NAME=MODEL`` adds further float models built as FP16 (a rewritten graph beside the model as given), and
``--profile RUNS`` profiles every engine's layers after the timing (TensorRT's IProfiler, two passes interleaved
across engines; each layer's median lands in the JSON): where one engine spends its time against another
(``benchmarks/results/peer/b32_variants``, ``benchmarks/results/rewrites``).

``--parse MODEL ...`` only parses further files with TensorRT 8.6's ONNX parser (ModelOpt's files of other zoo
models: does TensorRT 8.6 read them at all), recording the parser's errors. Python 3.9 with numpy, onnx and
tensorrt only::

    source /tmp/trtb/env.sh && TRTWIDGETS_NO_CUBLAS_CUDNN=1 EXTRA_PYTHONPATH=$PWD $PY39 scripts/gpu_peer_yolo.py \\
        --fp16 w/yolo320_b32.onnx --qdq toolkit=w/toolkit_b32.onnx --qdq modelopt=w/modelopt_b32.onnx \\
        --rounds 5 --runs 50 --opt-level 1 --cache-dir /tmp/peer_engines --out $OUT/peer_b32.json
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def parse_only(path: Path) -> dict:
    """TensorRT 8.6's ONNX parser on ``path``: ``{file, parsed, errors, layers}``."""
    import tensorrt as trt

    logger = trt.Logger(trt.Logger.ERROR)
    builder = trt.Builder(logger)
    net = builder.create_network(1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH))
    parser = trt.OnnxParser(net, logger)
    ok = parser.parse_from_file(str(path))
    return {"file": str(path), "parsed": bool(ok), "layers": net.num_layers,
            "errors": [str(parser.get_error(i)) for i in range(parser.num_errors)]}


def engine_layers(engine_path: str) -> dict:
    """The engine's layer summary and ``[name, type, precision]`` per layer, from the build folder's inspector JSON."""
    from trtwidgets.core.engine.inspector_json import parse_inspector_json
    from trtwidgets.trt.build_phases.result import GRAPH_FILE

    path = Path(engine_path).parent / GRAPH_FILE
    if not path.is_file():
        return {}
    graph = parse_inspector_json(str(path))
    return {"summary": graph.layer_summary(), "layers": [[la.name, la.type, la.precision] for la in graph.layers]}


def profile(engines: dict, cache_dir: str, runs: int) -> None:
    """Per-layer median ms of each built engine (``engines[name]["profile"]``), two passes interleaved across engines.

    The profiler adds its own per-layer overhead, so the sum of the layers is read beside the engine's timed median,
    not in place of it; what it tells is where one engine spends its time against another.
    """
    from trtwidgets.trt.bench import random_feeds
    from trtwidgets.trt.profiler import profile_layers
    from trtwidgets.trt.runner import EngineRunner

    per = {name: {} for name, r in engines.items() if r.get("key") and not r.get("error")}
    for _ in range(2):
        for name in per:
            path = Path(cache_dir) / engines[name]["key"] / "engine.plan"
            if not path.is_file():
                continue
            with EngineRunner(str(path)) as runner:
                lt = profile_layers(runner, random_feeds(runner, {}, seed=0), runs=runs, warmup=10)
            for layer in lt.layers:
                per[name].setdefault(layer.name, []).append(layer.median_ms)
    for name, layers in per.items():
        rows = [[k, sorted(v)[len(v) // 2]] for k, v in layers.items()]
        engines[name]["profile"] = rows
        total = sum(ms for _, ms in rows)
        top = sorted(rows, key=lambda r: -r[1])[:8]
        print(f"profile {name}: {len(rows)} layers, sum {total:.4f} ms; slowest: "
              + "; ".join(f"{n[:70]} {ms:.4f}" for n, ms in top), flush=True)


def main(argv=None) -> int:
    os.environ.setdefault("TRTWIDGETS_NO_CUBLAS_CUDNN", "1")
    try:  # moved by the typed-plan work (issue 30)
        from trtwidgets.core.plan.measured.measurement import FP16, QDQ
    except ImportError:
        from trtwidgets.core.engine.measured import FP16, QDQ
    from trtwidgets.trt.measure import MeasureJob, measure

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fp16", help="the float model (FP16 engine)")
    ap.add_argument("--qdq", action="append", default=[], help="NAME=MODEL, a Q/DQ model (repeatable)")
    ap.add_argument("--float", action="append", default=[], dest="floats",
                    help="NAME=MODEL, another float model built as FP16 (repeatable: a rewritten graph beside --fp16)")
    ap.add_argument("--parse", nargs="*", default=[], help="only parse these files with TensorRT 8.6")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--opt-level", type=int, default=1)
    ap.add_argument("--cache-dir", default="/tmp/peer_engines")
    ap.add_argument("--out", required=True)
    ap.add_argument("--profile", type=int, default=0, metavar="RUNS",
                    help="after timing, profile each engine's layers (TensorRT's IProfiler) over RUNS runs, two passes "
                         "interleaved across engines; the JSON gets each layer's median ms")
    a = ap.parse_args(argv)
    doc: dict = {"argv": sys.argv[1:]}
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    if a.parse:
        doc["parse"] = [parse_only(Path(p)) for p in a.parse]
        for r in doc["parse"]:
            print(f"parse {Path(r['file']).name:<40} {'ok' if r['parsed'] else 'FAILED'} layers {r['layers']} "
                  + " | ".join(e[:300] for e in r["errors"][:3]), flush=True)
        out.write_text(json.dumps(doc, indent=1))
    if not a.fp16:
        return 0
    jobs = ([MeasureJob("fp16", FP16, a.fp16)] + [MeasureJob(n, FP16, m) for n, m in (q.split("=", 1) for q in a.floats)]
            + [MeasureJob(n, QDQ, m) for n, m in (q.split("=", 1) for q in a.qdq)])
    t0 = time.perf_counter()
    report = measure(jobs, a.cache_dir, rounds=a.rounds, runs=a.runs, warmup=20, opt_level=a.opt_level, gpus=1)
    doc["seconds"] = round(time.perf_counter() - t0, 1)
    doc["report"] = report.to_dict()
    engines = {}
    for m in report.measurements:
        rec = m.to_dict()
        engine = Path(a.cache_dir) / m.key / "engine.plan" if m.key else None
        if engine is not None and engine.is_file():
            rec.update(engine_layers(str(engine)))
        engines[m.name] = rec
    doc["engines"] = engines
    out.write_text(json.dumps(doc, indent=1, default=str))
    if a.profile:
        profile(engines, a.cache_dir, a.profile)
        out.write_text(json.dumps(doc, indent=1, default=str))
    ref = engines.get("fp16", {}).get("median_ms")
    print(f"{'engine':<10} {'median ms':>10} {'x FP16':>7} {'spread':>8} {'rounds':<40} layers int8 reformats pointwise "
          "scale  build s", flush=True)
    for name, r in engines.items():
        s = r.get("summary", {})
        med = float(r.get("median_ms") or "nan")
        rounds = " ".join(f"{x:.3f}" for x in r.get("round_ms", r.get("rounds_ms", [])))
        print(f"{name:<10} {med:>10.4f} {med / ref if ref else float('nan'):>7.3f} {float(r.get('spread_ms') or 'nan'):>8.4f} "
              f"{rounds:<40} {s.get('layers', '-')} {s.get('int8', '-')} {s.get('reformats', '-')} "
              f"{s.get('pointwise', '-')} {s.get('scale', '-')}  {r.get('build_seconds', 0):.0f} {r.get('error', '')[:300]}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
