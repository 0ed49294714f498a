"""Regenerate ``trtwidgets/core/plan/measured/estimate_error.json``: how far the planner's latency has been off.

Each entry is one planned INT8 engine that was also built and timed on a GPU: its
estimated time relative to FP16 (the plan's ``speedup_vs_fp16``) beside its measured
one (same run as its FP16 engine). A CPU-only plan quotes them (``plan.json``'s
``measured.text``). Sources, all committed:

* ``benchmarks/results/zoo/<model>.json`` rows of the planner's pick (``plan.predicted_x_fp16``
  against ``x_fp16``), FP16 picks left out (they say nothing about the estimate of INT8);
* the zoo's measured plans (``benchmarks/results/trust/zoo_gpu/<family>-b<batch>.json`` of
  ``scripts/gpu_zoo_measure.py``): every measured candidate with a finite estimate;
* measured plans (``plan.json`` with ``measured.rows``, e.g. the fixture
  ``tests/fixtures/trt86/cls_b32_measured/plan.json`` of ``scripts/gpu_measured_plan.py``):
  every measured candidate with a finite estimate.

Usage (CPU; no TensorRT)::

    python benchmarks/estimate_error.py [--plans tests/fixtures/trt86/*/plan.json] [--check]
"""

from __future__ import annotations

import argparse
import glob
import json
import math
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OUT = ROOT / "trtwidgets" / "core" / "plan" / "measured" / "estimate_error.json"
ABOUT = ("How far the planner's latency has been off: per planned INT8 engine built and timed on a GPU, the "
         "estimated time relative to FP16 beside the measured one (same run). Regenerate with "
         "`python benchmarks/estimate_error.py`; never edit the numbers by hand.")


def _ok(v) -> bool:
    return isinstance(v, (int, float)) and math.isfinite(v) and v > 0


def zoo_entries(folder: Path):
    for path in sorted(folder.glob("*.json")):
        doc = json.loads(path.read_text())
        for row in doc.get("rows", []) if isinstance(doc, dict) else []:
            plan = row.get("plan") or {}
            if plan.get("fp16_pick") or not _ok(plan.get("predicted_x_fp16")) or not _ok(row.get("x_fp16")):
                continue
            yield {"model": row.get("model"), "batch": row.get("batch"), "candidate": plan.get("pick"),
                   "latency_source": plan.get("latency_source"), "estimated_x_fp16": round(plan["predicted_x_fp16"], 4),
                   "measured_x_fp16": round(row["x_fp16"], 4), "gpu": row.get("gpu"), "trt": row.get("trt_version"),
                   "source": str(path.relative_to(ROOT))}


def plan_entries(path: Path, doc=None, model=None):
    doc = json.loads(path.read_text()) if doc is None else doc
    measured = doc.get("measured") or {}
    settings = measured.get("settings") or {}
    cands = doc.get("candidates") or []
    for row in measured.get("rows") or []:
        i = row.get("candidate")
        if not i or row.get("kind") != "qdq" or not _ok(row.get("estimate_vs_fp16")) or not _ok(row.get("vs_fp16")):
            continue
        yield {"model": model or Path(doc.get("model", "?")).stem, "batch": _batch(doc), "candidate": cands[i]["name"],
               "latency_source": cands[i].get("latency_source"), "estimated_x_fp16": round(row["estimate_vs_fp16"], 4),
               "measured_x_fp16": round(row["vs_fp16"], 4), "gpu": settings.get("gpu"), "trt": settings.get("trt"),
               "source": str(path.resolve().relative_to(ROOT)) if ROOT in path.resolve().parents else str(path)}


def zoo_gpu_entries(folder: Path):
    """The measured plans of ``scripts/gpu_zoo_measure.py`` (one ``<family>-b<batch>.json`` per job)."""
    for path in sorted(folder.glob("*.json")):
        rec = json.loads(path.read_text())
        if rec.get("status") == "measured":
            yield from plan_entries(path, rec["plan"], rec.get("family"))


def _batch(doc):
    shapes = list((doc.get("input_shapes") or {}).values())
    return shapes[0][0] if shapes and shapes[0] else None


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zoo", default=str(ROOT / "benchmarks" / "results" / "zoo"))
    ap.add_argument("--plans", nargs="*", default=sorted(glob.glob(str(ROOT / "tests/fixtures/trt86/*/plan.json"))))
    ap.add_argument("--zoo-gpu", default=str(ROOT / "benchmarks" / "results" / "trust" / "zoo_gpu"))
    ap.add_argument("--check", action="store_true", help="exit 1 when the committed file differs")
    args = ap.parse_args(argv)
    entries = list(zoo_entries(Path(args.zoo))) + list(zoo_gpu_entries(Path(args.zoo_gpu)))
    for p in args.plans:
        entries += list(plan_entries(Path(p)))
    text = json.dumps({"about": ABOUT, "entries": entries}, indent=1) + "\n"
    if args.check:
        same = OUT.exists() and OUT.read_text() == text
        print("up to date" if same else f"{OUT} is stale: run python benchmarks/estimate_error.py")
        return 0 if same else 1
    OUT.write_text(text)
    print(f"wrote {OUT}: {len(entries)} entries")
    return 0


if __name__ == "__main__":
    sys.exit(main())
