"""Build FP16, implicit INT8 and Q/DQ engines of a model and time them interleaved (GPU machine).

A thin front to :func:`trtwidgets.trt.measure.measure` for whole models that are not in the
repository (issue 21's YOLO check, issue 24's zoo): each engine is built once (cached by
placement under ``--cache-dir``, so a second call finds what the first built), timed in
``--rounds`` interleaved rounds, and its inspector layers are counted (reformats, standalone
PointWise, Scale, INT8). Python 3.9 with numpy, onnx and tensorrt only::

    source /tmp/trtb/env.sh && EXTRA_PYTHONPATH=$PWD $PY39 scripts/gpu_measure_models.py \\
        --fp16 yolo.onnx --implicit yolo.onnx:yolo.cache --qdq dense=yolo.qdq.onnx \\
        --opt-level 1 --cache-dir /tmp/engines --out $OUT/yolo_b1.json [--build-only]

``--build-only`` builds (or finds) the engines and stops: a long list of builds can be split
over several calls while the machine stays warm; the last call times them all.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


def _counts(engine_path: str) -> dict:
    from trtwidgets.core.engine.inspector_json import parse_inspector_json

    from trtwidgets.trt.build_phases.result import GRAPH_FILE

    path = Path(engine_path).parent / GRAPH_FILE
    return parse_inspector_json(str(path)).layer_summary() if path.is_file() else {}


def main(argv=None) -> int:
    from trtwidgets.core.plan.measured.measurement import FP16, INT8_IMPLICIT, QDQ
    from trtwidgets.trt.measure import MeasureJob, measure

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--fp16", required=True, help="the float model")
    p.add_argument("--implicit", help="MODEL:CACHE, implicit INT8 with this calibration cache")
    p.add_argument("--qdq", action="append", default=[], help="NAME=MODEL, a Q/DQ export (repeatable)")
    p.add_argument("--shape", action="append", default=[], help="INPUT:1x3x640x640 (default: the model's own)")
    p.add_argument("--opt-level", type=int, default=None)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--cache-dir", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--build-only", action="store_true")
    args = p.parse_args(argv)
    jobs = [MeasureJob("fp16", FP16, args.fp16)]
    if args.implicit:
        model, cache = args.implicit.rsplit(":", 1)
        jobs.append(MeasureJob("int8_implicit", INT8_IMPLICIT, model, calibration_cache=cache))
    for item in args.qdq:
        name, model = item.split("=", 1)
        jobs.append(MeasureJob(name, QDQ, model))
    shapes = {}
    for item in args.shape:
        name, dims = item.rsplit(":", 1)
        shapes[name] = tuple(int(d) for d in dims.split("x"))
    # --build-only still goes through measure() (its cache and keys), timing 3 rounds of a single run.
    report = measure(jobs, args.cache_dir, shapes=shapes, rounds=max(3, args.rounds),
                     runs=1 if args.build_only else args.runs, warmup=1 if args.build_only else 10,
                     opt_level=args.opt_level)
    rows = []
    for m in report.measurements:
        row = m.to_dict()
        engine = Path(args.cache_dir) / m.key / "engine.plan"
        row.update(_counts(str(engine)) if engine.is_file() else {})
        rows.append(row)
    out = {"report": report.to_dict(), "engines": rows, "build_only": args.build_only}
    Path(args.out).write_text(json.dumps(out, indent=1, default=str))
    ref = next((r.get("median_ms") for r in rows if r.get("name") == "fp16"), None)  # the reference run
    for r in rows:
        ratio = r.get("median_ms", float("nan")) / ref if ref else float("nan")
        print(f"{r.get('name'):<16} median {r.get('median_ms', float('nan')):.4f} ms  {ratio:.3f}x FP16  "
              f"spread {r.get('spread_ms', float('nan')):.4f}  "
              f"layers {r.get('layers', '?')} reformats {r.get('reformats', '?')} pointwise {r.get('pointwise', '?')} "
              f"scale {r.get('scale', '?')} int8 {r.get('int8', '?')}  built {r.get('build_seconds', 0):.0f}s "
              f"{r.get('error', '')[:200]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
