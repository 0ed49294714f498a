"""Calibration speed and memory: trtwidgets vs ONNX Runtime's calibrators, side by side.

Each measurement runs in its own subprocess (clean peak RSS, from ``ru_maxrss``):

* ``ort-entropy``: ``onnxruntime.quantization.calibrate.create_calibrator`` with
  ``CalibrationMethod.Entropy`` (``num_bins=2048, num_quantized_bins=128``, symmetric),
  ``collect_data`` + ``compute_data``;
* ``ort-minmax``: the same with ``CalibrationMethod.MinMax``;
* ``tw-entropy`` / ``tw-max``: ``collect_stats`` + ``compute_ranges`` with that method.

Cases: the bundled cls model on ``--crops`` real crops (``demo.skimage_crops``), and a deep
residual CNN (``deep_conv_model.py``, 331 activations, 480x480 input) on ``--deep-samples``
images.  Then trtwidgets' peak RSS at 10x the samples (target: < 10 % growth).

Targets: >= 10x faster than ORT's Entropy calibrator end to end; <= 1/5 of its peak RSS.

    python benchmarks/calibration.py [--crops 200] [--deep-samples 16] [--skip-deep] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent


# --------------------------------------------------------------------------- workers (one per subprocess)

def _feeds(case: str, n: int, model_dir: str):
    if case == "cls":
        from trtwidgets import demo

        x = demo.preprocess(demo.skimage_crops(n, seed=0))
        return str(demo.MODEL_PATH), [{"x": x[i:i + 1]} for i in range(len(x))]
    sys.path.insert(0, str(HERE))
    import deep_conv_model

    path = os.path.join(model_dir, "deep_resnet.onnx")
    if not os.path.exists(path):
        import onnx

        onnx.save(deep_conv_model.build(), path)
    # A generator: the images themselves are never all in memory, for either side.
    return path, deep_conv_model.iter_inputs(n)


def _worker(side: str, case: str, n: int, model_dir: str) -> dict:
    model, feeds = _feeds(case, n, model_dir)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    if side.startswith("ort-"):
        from onnxruntime.quantization.calibrate import CalibrationDataReader, CalibrationMethod, create_calibrator

        class Reader(CalibrationDataReader):
            def __init__(self, it):
                self.it = iter(it)

            def get_next(self):
                return next(self.it, None)

        method = CalibrationMethod.Entropy if side == "ort-entropy" else CalibrationMethod.MinMax
        options = {"num_bins": 2048, "num_quantized_bins": 128, "symmetric": True} if side == "ort-entropy" \
            else {"symmetric": True}
        with tempfile.TemporaryDirectory() as tmp:
            cal = create_calibrator(model, None, augmented_model_path=os.path.join(tmp, "augmented.onnx"),
                                    calibrate_method=method, extra_options=options)
            cal.collect_data(Reader(feeds))
            ranges = cal.compute_data()
            tensors = len(ranges.data) if hasattr(ranges, "data") else len(ranges)
    else:
        from trtwidgets.core.calibration.collect import collect_stats
        from trtwidgets.core.calibration.ranges import compute_ranges

        stats = collect_stats(model, feeds, progress=False)
        ranges = compute_ranges(stats, methods=(side[3:],))
        tensors = len(ranges)
    seconds = time.perf_counter() - t0
    return {"side": side, "case": case, "samples": n, "seconds": seconds, "tensors": tensors,
            "peak_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "rss_before_mib": rss_before}


def _run(side: str, case: str, n: int, model_dir: str) -> dict:
    cmd = [sys.executable, __file__, "--worker", side, "--case", case, "--samples", str(n), "--model-dir", model_dir]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode:
        raise RuntimeError(f"{side} {case} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


# --------------------------------------------------------------------------- report

def _table(case: str, results: dict) -> str:
    lines = [f"\n== {case}: {results['tw-entropy']['samples']} samples, {results['tw-entropy']['tensors']} tensors ==",
             f"{'side':<12} {'seconds':>9} {'peak RSS MiB':>13} {'RSS before MiB':>15}"]
    for side in ("ort-entropy", "ort-minmax", "tw-entropy", "tw-max"):
        r = results[side]
        lines.append(f"{side:<12} {r['seconds']:>9.2f} {r['peak_rss_mib']:>13.0f} {r['rss_before_mib']:>15.0f}")
    e, m = results["ort-entropy"], results["ort-minmax"]
    te, tm = results["tw-entropy"], results["tw-max"]
    lines.append(f"speed-up vs ORT Entropy: {e['seconds'] / te['seconds']:.1f}x (target >= 10x); "
                 f"peak RSS {te['peak_rss_mib'] / e['peak_rss_mib']:.3f} of ORT's (target <= 0.2)")
    lines.append(f"speed-up vs ORT MinMax:  {m['seconds'] / tm['seconds']:.1f}x; "
                 f"peak RSS {tm['peak_rss_mib'] / m['peak_rss_mib']:.3f} of ORT's")
    return "\n".join(lines)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--crops", type=int, default=200)
    p.add_argument("--deep-samples", type=int, default=16)
    p.add_argument("--growth-case", choices=("cls", "deep"), default="deep")
    p.add_argument("--skip-deep", action="store_true")
    p.add_argument("--json", help="also write all figures to this JSON file")
    p.add_argument("--worker", help=argparse.SUPPRESS)
    p.add_argument("--case", help=argparse.SUPPRESS)
    p.add_argument("--samples", type=int, help=argparse.SUPPRESS)
    p.add_argument("--model-dir", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args.worker, args.case, args.samples, args.model_dir)))
        return 0
    figures = {}
    with tempfile.TemporaryDirectory() as model_dir:
        cases = [("cls", args.crops)] + ([] if args.skip_deep else [("deep", args.deep_samples)])
        for case, n in cases:
            results = {side: _run(side, case, n, model_dir) for side in ("tw-entropy", "tw-max", "ort-minmax", "ort-entropy")}
            figures[case] = results
            print(_table(case, results), flush=True)
        case = args.growth_case if not (args.skip_deep and args.growth_case == "deep") else "cls"
        n = args.crops if case == "cls" else args.deep_samples
        small = figures.get(case, {}).get("tw-entropy") or _run("tw-entropy", case, n, model_dir)
        big = _run("tw-entropy", case, n * 10, model_dir)
        growth = big["peak_rss_mib"] / small["peak_rss_mib"] - 1
        figures["growth"] = {"small": small, "big": big, "growth": growth}
        print(f"\n== RSS growth, trtwidgets, {case}: {n} -> {n * 10} samples ==\n"
              f"peak RSS {small['peak_rss_mib']:.0f} -> {big['peak_rss_mib']:.0f} MiB: {growth * 100:+.1f} % (target < 10 %); "
              f"time {small['seconds']:.1f} -> {big['seconds']:.1f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
