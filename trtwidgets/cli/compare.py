"""``trtwidgets compare ENGINE_DIR --held-back DIR [--json]``: engine outputs vs ONNX Runtime FP32, judged.

The engine is judged by the one verdict, as the planner and export-qdq judge (``--target-cosine``,
default 0.99 on the worst channel group; ``--metric``; NaN/Inf where FP32 is finite fails): exit 1
when it misses the target.

The reference runs in ONNX Runtime on the CPU. Where ONNX Runtime and TensorRT
are not in the same Python (TensorRT 8.6 needs Python <= 3.10), compute the
reference once with ``--save-reference FILE`` (no TensorRT needed) and compare
with ``--reference FILE`` where the engine runs (no ONNX Runtime needed).
"""

from __future__ import annotations

import json
import math

NAME = "compare"
OUTPUTS = {"save_reference": "file"}  # files it writes: checked and reported by cli._outputs
HELP = "compare an engine's outputs with ONNX Runtime FP32 (cosine, abs error, SNR, top-k)"


def add_arguments(parser):
    from ._judged import add_deprecated, add_flags

    parser.add_argument("engine_dir", help="build directory written by `trtwidgets build`, or an engine file")
    add_flags(parser, ("--held-back",))
    parser.add_argument("--reference", metavar="NPZ", help="inputs and FP32 outputs saved with --save-reference")
    parser.add_argument("--save-reference", metavar="NPZ", help="write the ORT reference (inputs + outputs) here")
    parser.add_argument("--model", help="the ONNX model (default: the one in the build's recipe.json)")
    add_flags(parser, ("--max-samples", "--target-cosine", "--target-snr", "--metric", "--max-metric-drop",
                       "--labels"))
    parser.add_argument("--batch", type=int, default=None, help="samples per engine run (default: the engine's largest)")
    parser.add_argument("--topk", type=int, action="append", default=None, help="k for top-k agreement (default 1 and 5)")
    add_flags(parser, ("--json",))
    add_deprecated(parser, "--data", "--held-back")


def _fmt(v: float, spec: str) -> str:
    return format(v, spec) if math.isfinite(v) else str(v)


def format_metrics(metrics) -> str:
    lines = [f"{'output':<32} {'cosine':>10} {'SNR dB':>8} {'max abs':>10} {'mean abs':>10}  top-k"]
    for name, m in metrics.items():
        topk = "  ".join(f"top{k} {v:.4f}" for k, v in sorted(m.topk_agreement.items())) or "-"
        flag = "" if m.ok else f"   !! {m.nonfinite_mismatch} NaN/inf where the reference has none"
        lines.append(f"{name:<32} {_fmt(m.cosine, '10.6f')} {_fmt(m.snr_db, '8.2f')} {_fmt(m.max_abs, '10.3g')} "
                     f"{_fmt(m.mean_abs, '10.3g')}  {topk}{flag}")
    return "\n".join(lines)


def run(args) -> int:
    from ..core.common.errors import UserError
    from ..core.accuracy.metrics import compare_outputs
    from ..core.accuracy.reference import load_reference, make_reference, save_reference
    from ._engine_dir import resolve

    if not args.held_back and not args.reference:
        raise UserError("compare needs inputs.", "Neither --held-back nor --reference was given.",
                        "Pass --held-back DIR (with ONNX Runtime installed) or --reference FILE.npz.")
    from ._judged import target

    goal = target(args)  # a bad target is refused before any engine runs
    engine_path, model_path = resolve(args.engine_dir)
    model_path = args.model or model_path
    trt_ok = True
    if not args.save_reference:
        from ..trt import tensorrt

        tensorrt()  # TensorRTUnavailable (exit 2) before the reference is computed
    else:
        from ..trt import available

        trt_ok = available()

    if args.reference:
        ref = load_reference(args.reference)
    else:
        from ..core.common.ort import is_available

        if not is_available():
            raise UserError("ONNX Runtime is not installed, so the FP32 reference cannot be computed here.",
                            "compare --data runs the model in ONNX Runtime on the CPU.",
                            "pip install onnxruntime, or compute the reference elsewhere with --save-reference "
                            "and pass it here with --reference.")
        if not model_path:
            raise UserError("The build directory names no model.", "Its recipe.json is missing or has no model_path.",
                            "Pass --model MODEL.onnx.")
        from ..core.calibration.data import iter_feeds
        from ..core.model.load import load_model

        model = load_model(model_path)
        feeds = iter_feeds(args.held_back, model.summary, max_samples=args.max_samples)
        ref = make_reference(model, feeds)
    if args.save_reference:
        save_reference(args.save_reference, ref.inputs, ref.outputs, dict(ref.meta, model=str(model_path)))
        if not trt_ok:
            print(f"reference ({ref.samples} samples) written to {args.save_reference}; "
                  "TensorRT is not available here, so no engine was run.")
            return 0
        from ..trt import tensorrt

        tensorrt()

    inputs = ref.inputs
    if args.max_samples:
        inputs = {k: v[:args.max_samples] for k, v in inputs.items()}
    n = int(next(iter(inputs.values())).shape[0])
    from ..trt.runner import EngineRunner, run_samples

    with EngineRunner(engine_path) as runner:
        cand, usable = run_samples(runner, inputs, args.batch)
    reference = {k: v[:usable] for k, v in ref.outputs.items()}
    metrics = compare_outputs(reference, cand, topk=tuple(args.topk or (1, 5)))
    verdict = _verdict(cand, reference, goal)
    if args.json:
        print(json.dumps({"engine": engine_path, "samples": usable, "verdict": verdict.to_dict(),
                          "target": goal.to_dict(), "outputs": {k: m.to_dict() for k, m in metrics.items()}}, indent=2))
    else:
        print(f"engine {engine_path}  vs ONNX Runtime FP32  ({usable} samples)")
        if usable < n:
            print(f"note: {n - usable} sample(s) left out (they do not fill the engine's static batch)")
        print(format_metrics(metrics))
        print(("meets" if verdict.meets else "FAILED: " + "; ".join(verdict.why)) + f" (target: {goal.describe()})")
    return 0 if verdict.meets else 1


def _verdict(candidate, reference, goal):
    """The engine judged by the one verdict (:func:`~trtwidgets.core.accuracy.verdict.evaluate`) and ``goal``."""
    from ..core.accuracy.verdict import evaluate

    bound, _ = goal.bound(reference)
    return evaluate(candidate, reference, bound)
