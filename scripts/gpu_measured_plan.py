"""Measure the demo classifier's CPU plan at batch 32 on the GPU: the fixture ``tests/fixtures/trt86/cls_b32_measured``.

Runs with Python 3.9 + numpy + onnx + tensorrt only (the GPU machine's bundle, see
DEVELOPERS.md, "The GPU machine"). It reads the committed CPU plan
``tests/fixtures/plans/cls_b32_cpu/plan.json`` (made on a CPU by
``trtwidgets plan trtwidgets/demo/ch_ppocr_mobile_v2.0_cls_infer.onnx --data demo --batch 32
--trt-version 8.6``), does what ``trtwidgets plan measure`` does (FP16, implicit INT8 and the
plan's top candidates built once per placement, timed interleaved, the pick made again by
measured time) and writes into ``--out``:

* ``plan.json``: the measured plan (``measured``: every engine's rounds, median, spread and
  estimate side by side; the measured pick and why);
* ``measurements.json``: per build its name, kind, cache key, per-round medians, median,
  spread, rounds, build seconds, whether it came from the cache, and its layer precision
  counts (INT8 / FP16 / FP32 layers and reformat layers, from the engine inspector), plus
  the GPU, TensorRT, settings, the pick and the wall time.

No ``*.graph.json`` is written there (the folder must not read as a saved build).
Builder optimization level 0 by default: the builds are what costs GPU time (on this
TensorRT the classifier took 80-180 s per build at level 1).

On the GPU machine (after the bundle is unpacked, see DEVELOPERS.md, "The GPU machine")::

    source /tmp/trtb/env.sh && EXTRA_PYTHONPATH=$PWD $PY39 scripts/gpu_measured_plan.py --out $OUT/cls_b32_measured

then, on the CPU, copy the folder to ``tests/fixtures/trt86/cls_b32_measured/`` and run
``python benchmarks/estimate_error.py`` to add its estimated-against-measured ratios to
``trtwidgets/core/plan/measured/estimate_error.json``.
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
CPU_PLAN = ROOT / "tests" / "fixtures" / "plans" / "cls_b32_cpu" / "plan.json"
FIXTURE = ROOT / "tests" / "fixtures" / "trt86" / "cls_b32_measured"


def layer_counts(build_dir: Path) -> dict:
    """INT8 / FP16 / FP32 ... layer counts and reformat layers of one cached build (its engine inspector JSON)."""
    from trtwidgets.core.engine.inspector_json import parse_inspector_json

    found = sorted(build_dir.glob("*.graph.json")) if build_dir.is_dir() else []
    if not found:
        return {}
    summary = parse_inspector_json(found[0]).layer_summary()
    return {"precisions": dict(sorted(summary["precisions"].items())), "reformat_layers": summary["reformats"],
            "layers": summary["layers"]}


def measurements_record(plan, cache_dir: Path, seconds: float) -> dict:
    """``measurements.json``: a measured :class:`~trtwidgets.core.plan.plan_artifact.Plan`'s builds, each with its
    layer precisions, the pick and the wall time."""
    doc = plan.to_dict()  # this writes a JSON record: the plan's own serialization, with layer counts added
    measured = doc["measured"]
    builds = []
    for m in measured["measurements"]:
        builds.append(dict(name=m["name"], kind=m["kind"], candidate=m.get("candidate"), key=m["key"],
                           round_ms=m["round_ms"], median_ms=m["median_ms"], spread_ms=m["spread_ms"],
                           rounds=len(m["round_ms"]), estimate_ms=m["estimate_ms"], build_seconds=m["build_seconds"],
                           cached=m["cached"], error=m["error"],
                           layers=layer_counts(cache_dir / m["key"]) if m["key"] else {}))
    pick = measured.get("pick") or {}
    cands = doc["candidates"]
    return {"model": doc["model"], "input_shapes": doc["input_shapes"], "settings": measured["settings"],
            "status": measured["status"], "rounds": measured["rounds"], "built": measured["built"],
            "cached": measured["cached"], "builds": builds, "rows": measured["rows"],
            "pick": dict(pick, candidate_name=cands[doc["recommended"]]["name"]), "reason": doc["reason"],
            "estimate_pick": cands[measured["estimate_pick"]]["name"], "wall_seconds": round(seconds, 1)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--plan", default=str(CPU_PLAN), help="the CPU plan to measure (default: the committed one)")
    ap.add_argument("--out", default=str(FIXTURE), help="the fixture folder to write")
    ap.add_argument("--engine-cache",
                    help="engine cache (default $TRTWIDGETS_ENGINE_CACHE or ~/.cache/trtwidgets/engines)")
    ap.add_argument("--opt-level", type=int, default=0, help="builder optimization level (default 0: fast builds)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--top", type=int, default=3, help="candidates besides FP16 and implicit INT8")
    ap.add_argument("--no-implicit", action="store_true", help="skip implicit INT8 (the slowest build)")
    args = ap.parse_args(argv)
    # The GPU machine's cuBLAS/cuDNN are load-time stubs: leave those tactic sources off (DEVELOPERS.md).
    os.environ.setdefault("TRTWIDGETS_NO_CUBLAS_CUDNN", "1")
    import tempfile

    import dataclasses

    from trtwidgets.core.common.atomic import write_text_atomic
    from trtwidgets.core.plan.plan_artifact import Plan
    from trtwidgets.trt.plan_measure import default_cache_dir, measure_plan, require_measurable

    from trtwidgets.core.common.errors import UserError

    try:
        require_measurable("scripts/gpu_measured_plan.py")
    except UserError as err:
        print(err.message, file=sys.stderr)
        return 2
    plan = Plan.load(args.plan)
    model = Path(plan.model) if Path(plan.model).is_absolute() else ROOT / plan.model
    cache = Path(args.engine_cache) if args.engine_cache else default_cache_dir()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-measured-plan-") as work:
        new = measure_plan(plan, str(model), work_dir=work, cache_dir=cache, top=args.top, rounds=args.rounds,
                           runs=args.runs, opt_level=args.opt_level, implicit=not args.no_implicit, progress=True)
    seconds = time.perf_counter() - t0
    new = dataclasses.replace(new, model=plan.model)  # the repository-relative path, as the CPU plan had it
    new.save_json(out / "plan.json")
    write_text_atomic(out / "measurements.json", json.dumps(measurements_record(new, cache, seconds), indent=1))
    print(new.table())
    print(new.reason)
    for n in new.notes[-6:]:
        print(f"note: {n}")
    print(f"wrote {out / 'plan.json'} and {out / 'measurements.json'} in {seconds:.0f} s")
    return 130 if new.measured is not None and new.measured.interrupted else 0


if __name__ == "__main__":
    sys.exit(main())
