"""The measured placement search by region on the GPU (issue 33 item 3): ``plan measure`` with the region search.

Python 3.9 with numpy, onnx and tensorrt only. Takes a plan folder written by ``benchmarks/region_search.py prepare``
(plan.json with its region search, held_back.npz) and the static batch-``B`` float model, and runs
:func:`trtwidgets.trt.plan_measure.measure_plan` as ``trtwidgets plan measure`` does, implicit INT8 left out and no
top candidates besides the region search's base (``--measure-top 0``):

1. each pattern's offered schemes: the representative instance cut out of the whole export with the scheme, built
   (FP16 + INT8, builder level ``--opt-level``, one timing cache) and timed in ``--rounds`` interleaved rounds; the
   fastest beyond the noise is chosen (:mod:`trtwidgets.trt.region_measure`);
2. one whole-model build of the combination beside the base (the all-INT8 export) and FP16, timed interleaved,
   each engine run on the held-back pages and judged by the plan's target (detection F1 against FP32).

The whole-model builds run the combination first, the base next and FP16 last (the slowest build, left out when less
than ``--fp16-needs`` seconds remain), under ``--deadline`` seconds from the start: a build left at the deadline says
so, and what was built is timed. Writes ``--out`` (JSON: the measured plan's region search and
measurements, each engine's layer summary and reformat layers from its inspector JSON) and the plan folder's
plan.json. Example (``/tmp/trtb`` from ``shared/gpu``)::

    source /tmp/trtb/env.sh && TRTWIDGETS_NO_CUBLAS_CUDNN=1 EXTRA_PYTHONPATH=$W $PY39 scripts/gpu_region_search.py \\
        --plan $W/yolo_plan --model $W/float_b32.onnx --rounds 9 --opt-level 1 --out $OUT/region_b32.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def engine_layers(cache: Path, key: str) -> dict:
    """The build's layer summary and ``[name, type, precision]`` per layer, from its inspector JSON."""
    from trtwidgets.core.engine.inspector_json import parse_inspector_json
    from trtwidgets.trt.build_phases.result import GRAPH_FILE

    path = cache / key / GRAPH_FILE
    if not key or not path.is_file():
        return {}
    graph = parse_inspector_json(str(path))
    return {"summary": graph.layer_summary(), "layers": [[la.name, la.type, la.precision] for la in graph.layers]}


def fp16_last(deadline: float, fp16_needs: float = 380.0):
    """A measurement source for the whole-model builds: the combination first, then the base, FP16 last (the slowest
    build, ~170 s at batch 32 on an H200) and only when ``fp16_needs`` seconds are left before ``deadline``
    (monotonic); the builds stop at the deadline (a build left says so)."""
    from trtwidgets.core.plan.measured.measurement import FP16
    from trtwidgets.trt.measure import measure

    def run(jobs, cache, **kw):
        if any(j.kind == FP16 for j in jobs):
            left = deadline - time.monotonic()
            qdq = sorted((j for j in jobs if j.kind != FP16), key=lambda j: "region schemes" not in j.name)
            jobs = qdq + ([j for j in jobs if j.kind == FP16] if left >= fp16_needs else [])
            kw["build_limit_s"] = max(30.0, left - 40.0)
            print(f"[region] {left:.0f} s left; whole-model builds within {kw['build_limit_s']:.0f} s: "
                  f"{[j.name for j in jobs]}", flush=True)
        return measure(jobs, cache, **kw)

    return run


def main(argv=None) -> int:
    os.environ.setdefault("TRTWIDGETS_NO_CUBLAS_CUDNN", "1")
    from trtwidgets.core.plan.engine_check import folder_check
    from trtwidgets.core.plan.plan_artifact import Plan
    from trtwidgets.trt.plan_measure import measure_plan

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--plan", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--rounds", type=int, default=9)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--opt-level", type=int, default=1)
    ap.add_argument("--cache-dir", default="/tmp/region_engines")
    ap.add_argument("--deadline", type=float, default=420.0, help="seconds from the start for everything")
    ap.add_argument("--fp16-needs", type=float, default=380.0, help="seconds FP16 and the Q/DQ builds need together")
    ap.add_argument("--out", required=True)
    a = ap.parse_args(argv)
    t0 = time.monotonic()
    folder = Path("/tmp/region_plan")
    shutil.rmtree(folder, ignore_errors=True)
    shutil.copytree(a.plan, folder)
    plan = Plan.load(folder)
    check, _ = folder_check(folder, plan.target)
    new = measure_plan(plan, a.model, work_dir=folder / "work", cache_dir=a.cache_dir, top=0, rounds=a.rounds,
                       runs=a.runs, warmup=20, opt_level=a.opt_level, implicit=False, progress=True, check=check,
                       measure_fn=fp16_last(t0 + a.deadline, a.fp16_needs), regions=True)
    cache = Path(a.cache_dir)
    doc = {"argv": sys.argv[1:], "seconds": round(time.monotonic() - t0, 1), "plan": new.to_dict(), "engines": {}}
    for m in new.measured.measurements if new.measured is not None else ():
        doc["engines"][m.name] = dict(m.to_dict(), **engine_layers(cache, m.key))
    for p in new.regions.patterns if new.regions is not None else ():
        for s in p.schemes:
            if s.timing is not None:
                doc["engines"][s.timing.name] = dict(s.timing.to_dict(), **engine_layers(cache, s.timing.key))
    out = Path(a.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, default=str))
    new.save(out.parent / "plan")
    fp16 = next((r["median_ms"] for n, r in doc["engines"].items() if n == "fp16"), None)
    print(f"{'engine':<58} {'median ms':>10} {'spread':>8} {'x FP16':>7} layers int8 reformats pointwise  build s  verdict")
    for name, r in doc["engines"].items():
        s = r.get("summary", {})
        med = r.get("median_ms")
        ratio = med / fp16 if isinstance(med, float) and isinstance(fp16, float) and fp16 > 0 else float("nan")
        verdict = (r.get("accuracy") or {})
        print(f"{name[:58]:<58} {med!s:>10.8} {r.get('spread_ms')!s:>8.6} {ratio:>7.3f} {s.get('layers', '-')} "
              f"{s.get('int8', '-')} {s.get('reformats', '-')} {s.get('pointwise', '-')}  "
              f"{r.get('build_seconds', 0):.0f}  {verdict.get('metric', '')} {verdict.get('meets', '')} "
              f"{r.get('error', '')[:200]}", flush=True)
    for p in new.regions.patterns if new.regions is not None else ():
        print(f"{p.name}: chosen {p.chosen}: {p.reason}")
    print(new.reason)
    return 0


if __name__ == "__main__":
    sys.exit(main())
