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
  ``tests/fixtures/trt86/cls_b32_measured/plan.json`` of ``scripts/gpu_measured_plan.py`` and the YOLO's
  ``benchmarks/results/regions/plan_b32*/plan_measured.json``): every measured candidate with a finite estimate;
* issue 33's zoo run beside ModelOpt (``benchmarks/results/peer/zoo_run/``, the same records as the zoo's), and
  its re-measures without peers (``zoo_run/quiet/``: ResNet-50 at batch 1 alone, 15 rounds of 300 runs).

The zoo's measured plans are estimated again with the current cost model where the model and a
held-back sample are on this machine (``$TRTWIDGETS_ZOO/families/<family>``, see zoo_families.py):
shapes that shape inference leaves open come from the sample, as in the planner. Every entry is
printed estimated beside measured, with the error, or as "cannot estimate" where the planner would
say so (:mod:`trtwidgets.core.plan.estimate_support`); the target (issue 33) is every estimate
within 30% of its measurement.

Usage (CPU; no TensorRT)::

    python benchmarks/estimate_error.py [--plans tests/fixtures/trt86/*/plan.json] [--check] [--recorded]
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


def _model_name(path: str) -> str:
    """A plan's model by its file's name; a zoo family's ``float*.onnx`` by its family's folder."""
    p = Path(path)
    return p.parent.name if p.stem.startswith("float") and p.parent.name else p.stem


def plan_entries(path: Path, doc=None, model=None):
    doc = json.loads(path.read_text()) if doc is None else doc
    measured = doc.get("measured") or {}
    settings = measured.get("settings") or {}
    cands = doc.get("candidates") or []
    for row in measured.get("rows") or []:
        i = row.get("candidate")
        if not i or row.get("kind") != "qdq" or not _ok(row.get("vs_fp16")):
            continue
        # A candidate the plan printed no number for ("cannot estimate") and the GPU measured stays in the record:
        # the target is an estimate within 30% *or* "cannot estimate", and both are checked here.
        estimated = round(row["estimate_vs_fp16"], 4) if _ok(row.get("estimate_vs_fp16")) else None
        yield {"model": model or _model_name(doc.get("model", "?")), "batch": _batch(doc), "candidate": cands[i]["name"],
               "latency_source": cands[i].get("latency_source"), "estimated_x_fp16": estimated,
               "measured_x_fp16": round(row["vs_fp16"], 4), "gpu": settings.get("gpu"), "trt": settings.get("trt"),
               "source": str(path.resolve().relative_to(ROOT)) if ROOT in path.resolve().parents else str(path),
               **({} if estimated is not None else {"cannot_estimate": "the plan printed no estimate"})}


def zoo_gpu_entries(folder: Path, again: bool = True):
    """The measured plans of ``scripts/gpu_zoo_measure.py`` (one ``<family>-b<batch>.json`` per job),
    estimated again with the current cost model where the family's model is here (``again``)."""
    for path in sorted(folder.glob("*.json")):
        rec = json.loads(path.read_text())
        if isinstance(rec, dict) and rec.get("status") == "measured":  # a job's record, not a folder's other files
            estimate = _estimator(rec.get("family"), rec["plan"]) if again else None
            for e in plan_entries(path, rec["plan"], rec.get("family")):
                if estimate is not None:
                    quantized = next(c["quantized"] for c in rec["plan"]["candidates"] if c["name"] == e["candidate"])
                    e["recorded_x_fp16"] = e["estimated_x_fp16"]
                    e.update(estimate(quantized))
                yield e


def _estimator(family, plan):
    """``quantized -> {estimated_x_fp16, cannot_estimate, recorded_x_fp16}`` with today's cost model, or None
    when the family's model or a sample of it is not on this machine."""
    try:
        import numpy as np
        import onnx

        sys.path.insert(0, str(ROOT))
        sys.path.insert(0, str(ROOT / "benchmarks"))
        from zoo_families import FAMILIES, ZOO
        from trtwidgets.core.plan.estimate_support import EstimateSupport, SupportedLatency, attention_matmuls
        from trtwidgets.core.plan.observed_shapes import observed_shapes
        from trtwidgets.core.plan.phases import latency_model, myelin_layers

        proto = onnx.load(str(FAMILIES[family]["model"]()))
        sample = dict(np.load(sorted((ZOO / "families" / family / "heldback").glob("*.npz"))[0]))
    except Exception as exc:
        print(f"  ({family}: estimated as recorded: {type(exc).__name__}: {str(exc)[:120]})", file=sys.stderr)
        return None
    shapes_in = {k: tuple(v) for k, v in plan["input_shapes"].items()}
    shapes, _ = observed_shapes(proto, shapes_in, sample, {k: 0 for k in sample})
    labels = [c for cand in plan["candidates"] for c in cand["quantized"]]
    myelin = myelin_layers(proto, labels, plan.get("trt_version") or "8.6", shapes)  # as the planner finds them
    raw = latency_model(proto, shapes_in, "h100", None, myelin, shapes)
    from trtwidgets.core.model.onnx_graph import WEIGHTED_OPS as WEIGHTED
    from trtwidgets.core.qdq.graph_patterns import node_label

    unpriced = [node_label(n) for n in proto.graph.node if n.op_type in WEIGHTED and node_label(n) not in raw.costs]

    def estimate(quantized):
        ratio = raw.estimate(quantized) / raw.estimate(()) if not unpriced else float("nan")
        # Judged against the span of the record being written (see main): only the structural reasons here.
        why = SupportedLatency(raw, EstimateSupport(0.0, 1e9, 1, 1), unpriced, attention_matmuls(proto)).why_cannot(
            quantized)
        return {"estimated_x_fp16": round(ratio, 4) if ratio == ratio else None, "cannot_estimate": why or "",
                "estimated_with": "current cost model"}

    return estimate


def _batch(doc):
    shapes = list((doc.get("input_shapes") or {}).values())
    return shapes[0][0] if shapes and shapes[0] else None


_ESTIMATED = ("recorded_x_fp16", "estimated_x_fp16", "cannot_estimate", "estimated_with")


def _as_committed(entries):
    """The entries with the estimates the committed record made with the current cost model (``--check`` on a
    machine without the zoo's models checks the rest: which candidates were measured, and how fast)."""
    try:
        committed = json.loads(OUT.read_text())["entries"]
    except (OSError, ValueError, KeyError):
        return entries
    made = {(e.get("source"), e.get("candidate"), e.get("batch")): e for e in committed if "estimated_with" in e}
    out = []
    for e in entries:
        old = made.get((e.get("source"), e.get("candidate"), e.get("batch")))
        if old is not None and "estimated_with" not in e:
            e = {**e, "recorded_x_fp16": e["estimated_x_fp16"]} | {k: old[k] for k in _ESTIMATED if k in old}
            e = {k: e[k] for k in list(old) if k in e} | {k: v for k, v in e.items() if k not in old}
        out.append(e)
    return out


def _span(entries):
    """The span of the estimates within 30% of their measurement: what the record supports."""
    from trtwidgets.core.plan.estimate_support import TOLERANCE

    ok = [e["estimated_x_fp16"] for e in entries if not e.get("cannot_estimate") and _ok(e.get("estimated_x_fp16"))
          and abs(e["estimated_x_fp16"] - e["measured_x_fp16"]) <= TOLERANCE * e["measured_x_fp16"]]
    return (min(ok), max(ok)) if ok else (float("nan"), float("nan"))


def outside_the_span(entries):
    """The entries with an estimate outside the span marked "cannot estimate", as the planner prints them
    (:mod:`trtwidgets.core.plan.estimate_support`): such a number is never shown to a user, so it does not count
    as an estimate off by its error (the zoo's captcha CRNN, all-INT8: 2.7-3.4x estimated, 1.09-1.12x measured)."""
    lo, hi = _span(entries)
    out = []
    for e in entries:
        est = e.get("estimated_x_fp16")
        if not e.get("cannot_estimate") and _ok(est) and not (lo - 0.005 <= est <= hi + 0.005):
            e = {**e, "cannot_estimate": f"outside the span {lo:.2f}-{hi:.2f}x"}
        out.append(e)
    return out


def side_by_side(entries) -> int:
    """Print every entry estimated beside measured; how many numbers are more than 30% off (the target: 0)."""
    from trtwidgets.core.plan.estimate_support import TOLERANCE

    lo, hi = _span(entries)
    print(f"{'model':<32}{'b':>3}  {'candidate':<40}{'estimated':>11}{'measured':>10}{'error':>8}  standing")
    off = 0
    for e in entries:
        est, meas = e.get("estimated_x_fp16"), e["measured_x_fp16"]
        why = e.get("cannot_estimate") or ""
        if why or not _ok(est):
            print(f"{str(e['model'])[:31]:<32}{e['batch']!s:>3}  {e['candidate'][:39]:<40}{'cannot est.':>11}"
                  f"{meas:>10.3f}{'':>8}  cannot estimate: {why[:70]}")
            continue
        err = est / meas - 1
        bad = abs(est - meas) > TOLERANCE * meas
        off += bad
        print(f"{str(e['model'])[:31]:<32}{e['batch']!s:>3}  {e['candidate'][:39]:<40}{est:>11.3f}{meas:>10.3f}"
              f"{err:>+8.0%}  {'OFF BY MORE THAN 30%' if bad else 'within 30%'}"
              + (f" (recorded {e['recorded_x_fp16']:.3f})" if e.get("recorded_x_fp16") not in (None, est) else ""))
    print(f"supported span (estimates within {TOLERANCE:.0%}): {lo:.3f}-{hi:.3f}x FP16; "
          f"{off} printed estimates more than {TOLERANCE:.0%} off")
    return off


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--zoo", default=str(ROOT / "benchmarks" / "results" / "zoo"))
    ap.add_argument("--plans", nargs="*", default=sorted(glob.glob(str(ROOT / "tests/fixtures/trt86/*/plan.json")))
                    + sorted(glob.glob(str(ROOT / "benchmarks/results/regions/plan_b32*/plan_measured.json"))))
    results = ROOT / "benchmarks" / "results"
    ap.add_argument("--zoo-gpu", nargs="*", default=[str(results / "trust" / "zoo_gpu"), str(results / "peer" / "zoo_run"),
                                                     str(results / "peer" / "zoo_run" / "quiet")])
    ap.add_argument("--check", action="store_true", help="exit 1 when the committed file differs")
    ap.add_argument("--recorded", action="store_true", help="keep the estimates the plans recorded (no models here)")
    args = ap.parse_args(argv)
    again = not (args.recorded or args.check)
    entries = list(zoo_entries(Path(args.zoo)))
    for folder in args.zoo_gpu:
        entries += list(zoo_gpu_entries(Path(folder), again))
    for p in args.plans:
        entries += list(plan_entries(Path(p)))
    if args.check or args.recorded:
        entries = _as_committed(entries)
    entries = outside_the_span(entries)
    side_by_side(entries)
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
