"""The range method ``auto`` beside entropy, max and percentile, on the zoo and on a transformer nobody tuned on.

``python benchmarks/auto_ranges.py [--families a,b] [--json OUT]`` prints, per model, the export check of
``trtwidgets export-qdq --data HELD --trt-version 10.16`` (an FP16 float part) for each range method:
the lowest output cosine against FP32 on the held-back samples (what the check gates at 0.99) and the
family's task metric (``benchmarks/zoo_families.py``), side by side.

The statistics are collected once per model (8 calibration samples; 4 for yolo) and every method's
ranges come from them; ``auto``'s per-tensor choices read the model's graph (its tensor roles).
Families are marked by their part in choosing ``auto``'s rule: **tuned** (the rule was chosen looking
at them: vit, cls, det, captcha, resnet) or **check** (minilm, rec, vad, yolo, and ``unseen``, the
ViT of ``benchmarks/unseen_transformer.py``, first run after the rule was fixed).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

METHODS = ("entropy", "max", "percentile", "auto")
TUNED = ("vit", "cls", "det", "captcha", "resnet")
CHECK = ("minilm", "rec", "vad", "yolo", "unseen")
TRT_VERSION = "10.16"


def _files(name: str, reuse: bool) -> dict:
    import zoo_families as zf

    if name == "unseen":
        import unseen_transformer as ut

        out = zf.ZOO / "unseen"
        path = out / "float.onnx"
        if not (reuse and path.is_file()):
            path = ut.write(out)
        return {"model": str(path), "calib": str(out / "calib"), "heldback": str(out / "heldback"),
                "metric": "top1-agreement"}
    files = zf.prepare(name, reuse=reuse)
    files["metric"] = zf.FAMILIES[name]["metric"]
    return files


def measure(name: str, reuse: bool = True) -> dict:
    """``{family, part, metric, methods: {method: {cosine, metric}}, ...}`` for one model."""
    from trtwidgets.core.calibration.calibration import Calibration
    from trtwidgets.core.model.load import load_model
    from trtwidgets.core.plan.phases import evaluator
    from trtwidgets.core.plan.plan_data import read_plan_data
    from trtwidgets.core.plan.plan_target import with_metric
    from trtwidgets.core.qdq.options import QdqOptions
    from trtwidgets.core.calibration.collect import collect_stats

    t0 = time.perf_counter()
    files = _files(name, reuse)
    loaded = load_model(files["model"])
    data = read_plan_data(loaded, files["calib"], held_back=files["heldback"])
    stats = collect_stats(loaded, [dict(f) for f in data.calib], progress=False)
    cal = Calibration.fit(stats, "auto", model=loaded)
    ev, target, _ = evaluator(loaded, data.held, with_metric(None, files["metric"]),
                              QdqOptions(trt_version=TRT_VERSION), data.axes, data.run_batch())
    row = {"family": name, "part": "tuned" if name in TUNED else "check", "metric": target.metric_name,
           "metric_fp32": ev.metric_reference, "calib": len(data.calib), "held_back": len(data.held),
           "auto": cal.describe(), "methods": {}}
    for method in METHODS:
        acc, _ = ev.score(cal.refit(method=method).amax)
        row["methods"][method] = {"cosine": acc.pooled_cosine, "metric": acc.metric}
    row["seconds"] = round(time.perf_counter() - t0, 1)
    return row


def _cell(m: dict) -> str:
    metric = m.get("metric")
    return f"{m['cosine']:.4f} / " + ("-" if metric is None or not math.isfinite(metric) else f"{metric:.3f}")


def table(rows) -> str:
    """The rows as a markdown table: cosine / task metric per method."""
    head = "| model | part | task metric | " + " | ".join(METHODS) + " | auto's choices |"
    lines = [head, "|" + "---|" * (len(METHODS) + 4)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['family']} | {r.get('part', '')} | | **{r['error'][:100]}** |" + " |" * len(METHODS))
            continue
        cells = " | ".join(_cell(r["methods"][m]) for m in METHODS)
        choices = r["auto"].replace("auto ranges from the calibration ", "")
        lines.append(f"| {r['family']} | {r['part']} | {r['metric']} | {cells} | {choices} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--families", default=",".join(TUNED + CHECK))
    ap.add_argument("--json", help="also write the rows as JSON here")
    ap.add_argument("--fresh", action="store_true", help="write the sample folders (and the unseen model) again")
    args = ap.parse_args(argv)
    rows = []
    for name in args.families.split(","):
        try:
            row = measure(name, reuse=not args.fresh)
        except Exception as exc:
            row = {"family": name, "part": "tuned" if name in TUNED else "check",
                   "error": f"{type(exc).__name__}: {getattr(exc, 'message', None) or exc}"}
        rows.append(row)
        print(json.dumps(row), flush=True)
    print(f"\nexport check at TensorRT {TRT_VERSION} (FP16 float part): lowest output cosine / task metric "
          "on the held-back samples (the check passes at cosine >= 0.99)\n")
    print(table(rows))
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
