"""``trtwidgets export-qdq MODEL --calibration CAL.npz --out OUT.onnx``: explicit quantization.

Writes a Q/DQ ONNX model from a calibration (``trtwidgets calibrate --out``; a statistics
file of ``--stats`` is read as one; ``--data DIR`` calibrates on those samples first), as
``trtwidgets.export_qdq`` does, or from a TensorRT calibration cache; prints what was quantized
and what was left in high precision and why, and the tensors whose range clips many of their
values. Without ``--trt-version`` and without TensorRT installed it writes for TensorRT 10 and 11
(an FP16 float part) and says so.

With ``--held-back DIR`` the model is judged before it is written, by the same target as
``trtwidgets plan`` (``--target-cosine``, default 0.99 on the worst channel group of every output;
``--metric`` with ``--max-metric-drop``; NaN/Inf where FP32 is finite always fails) and linted for
the target TensorRT. When the check fails, nothing is written (``--write-failed`` writes it
anyway), the FAILED line names each part that failed, and what to change is named (another
range, tensors kept float, or the float part's nodes kept FP32), verified by checking the export
again with those changes.
"""

from __future__ import annotations

import json
import sys
from typing import Any, Dict, List, Optional

NAME = "export-qdq"
OUTPUTS = {"out": "file"}  # files it writes: checked and reported by cli._outputs
HELP = "write an explicitly quantized (Q/DQ) ONNX model from a calibration"
DESCRIPTION = __doc__


def add_arguments(parser):
    from ..core.calibration.auto_ranges import EXPORT_METHODS
    from ..core.model.trt_version import DEFAULT_TARGET
    from ..core.qdq.options import QdqOptions

    defaults = QdqOptions()  # the one set of defaults the API, the planner and the App share
    parser.add_argument("model", help="path of the float .onnx model")
    src = parser.add_mutually_exclusive_group()
    src.add_argument("--calibration", metavar="CAL.npz", help="the calibration (from `trtwidgets calibrate --out`): "
                     "its method, percentile and amax overrides are exported")
    src.add_argument("--stats", metavar="STATS.npz", help="activation statistics (`trtwidgets calibrate --stats`), "
                     "exported with --method (default auto)")
    src.add_argument("--cache", help="a TensorRT calibration cache to take the ranges from instead")
    parser.add_argument("--method", default=None, help=f"export this range method ({', '.join(EXPORT_METHODS)}) "
                        "instead of the calibration's own (auto: each tensor's from its statistics and role; its "
                        "overrides still win; the report names the one used)")
    parser.add_argument("--amax", nargs="+", default=[], metavar="TENSOR=AMAX",
                        help="set the range of these tensors by hand (amax overrides; what a failed check advises)")
    parser.add_argument("--percentile", type=float, default=None,
                        help="the percentile for --method percentile, instead of the calibration's")
    parser.add_argument("--exclude", nargs="+", default=[], metavar="PATTERN",
                        help="keep these nodes in high precision: node or output names, or regular expressions")
    parser.add_argument("--exclude-op-type", nargs="+", default=[], metavar="OP", dest="exclude_op_types",
                        help="keep every node of these op types in high precision (e.g. MatMul)")
    parser.add_argument("--fp8", action="store_true", help="FP8 E4M3 Q/DQ (opset 19, TensorRT 10+, Hopper/Ada)")
    parser.add_argument("--no-rewrites", action="store_true",
                        help="write the graph as it is: no exact graph rewrites before placement (default: "
                             f"{', '.join(defaults.rewrites)}; docs/placement.md, 'Graph rewrites')")
    parser.add_argument("--per-tensor-weights", action="store_true", help="one scale per weight tensor "
                        "instead of per output channel (FP8 always uses per-tensor scales)")
    parser.add_argument("--quantize-float-output-grouped-convs", action="store_false",
                        dest="keep_float_output_grouped_convs",
                        help="also quantize grouped (depthwise) convolutions whose output is read in float (e.g. by "
                        "a squeeze-excite pool): by default they stay float, because TensorRT 8.6 cannot fuse them "
                        "and computed wrong results on that path")
    parser.add_argument("--dense-int8", action="store_true", dest="dense_int8",
                        help="quantize the way an implicit INT8 engine runs (placement rule 8, the default, as in "
                        "`trtwidgets plan` and the API): depthwise convs with a Q/DQ on their output, squeeze-excite "
                        "gates written in INT8, every point-wise reader of a quantized tensor reading it quantized; "
                        "fewer reformat layers")
    parser.add_argument("--no-dense-int8", action="store_false", dest="dense_int8",
                        help="place Q/DQ by rules 1-7 only (a depthwise conv read in float stays float)")
    parser.set_defaults(dense_int8=defaults.dense_int8)
    parser.add_argument("--high-precision", choices=("auto", "fp32", "fp16", "bf16"), default=defaults.high_precision,
                        help="type of the non-quantized part: auto (default) is FP32 for TensorRT 8.x (its parser "
                        "reads FP32 scales; the FP16 flag lowers it) and FP16 for 10/11 (strongly typed: the "
                        "model's type is the precision)")
    parser.add_argument("--out", required=True, help="where to write the Q/DQ model (atomically)")
    from ._judged import add_deprecated, add_flags

    add_flags(parser, ("--data",), data=dict(help="calibration samples to calibrate on first (instead of "
                                                   "--calibration/--stats/--cache): a folder of .npy/.npz files "
                                                   "or images, or 'demo'"))
    add_flags(parser, ("--held-back", "--max-samples", "--target-cosine", "--target-snr", "--metric",
                       "--max-metric-drop", "--labels", "--keep-fp32"), max_samples=dict(default=64, help=
                      "read at most this many samples of --held-back (and of --data; default 64)"))
    parser.add_argument("--trt-version", default=defaults.trt_version,
                        help=f"target TensorRT: decides the float part's type and what lint checks (default: the "
                        f"installed one, else {DEFAULT_TARGET} and 11: an FP16 float part; --trt-version 8.6 writes "
                        "the FP32 float part TensorRT 8.6 reads)")
    parser.add_argument("--write-failed", action="store_true", help="write the model even when its check on "
                        "--held-back fails (exit 1 still)")
    parser.add_argument("--no-advice", action="store_true", help="when the check fails, do not measure what to change")
    parser.add_argument("--min-float-cosine", type=float, default=None, help="the exporter's own check of an "
                        "FP16/BF16 float part (with --held-back): the lowest cosine against the same Q/DQ model with "
                        "an FP32 float part, every quantizer held at its integers; below it nothing is written "
                        "(default 0.998). Not an accuracy target: the target judges the model")
    add_flags(parser, ("--no-progress", "--json"))
    add_deprecated(parser, "--min-cosine", "--target-cosine")
    add_deprecated(parser, "--samples", "--max-samples")


def target_version(args) -> tuple:
    """``(the TensorRT the export is for, a note when it was not asked for)``: --trt-version, the installed one,
    else TensorRT 10 and 11 (an FP16 float part)."""
    from ..core.model.trt_version import DEFAULT_TARGET, installed_trt_version

    if args.trt_version:
        return str(args.trt_version), ""
    installed = installed_trt_version()
    if installed is not None:
        return str(installed), f"for the installed TensorRT {installed}"
    return DEFAULT_TARGET, ("for TensorRT 10 and 11 (no TensorRT installed here; --trt-version 8.6 writes the FP32 "
                            "float part TensorRT 8.6 reads)")


def options(args):
    """The :class:`~trtwidgets.core.qdq.options.QdqOptions` these arguments ask for."""
    from ..core.qdq.options import QdqOptions

    return QdqOptions(precision="fp8" if args.fp8 else "int8",
                      dense_int8=args.dense_int8, high_precision=args.high_precision,
                      trt_version=target_version(args)[0], keep_fp32=tuple(args.keep_fp32),
                      exclude=args.exclude, exclude_op_types=args.exclude_op_types,
                      weights_per_channel=False if args.per_tensor_weights else None,
                      keep_float_output_grouped_convs=args.keep_float_output_grouped_convs,
                      rewrites=() if args.no_rewrites else QdqOptions().rewrites)


def parse_amax(items):
    """``["t=1.5"]`` -> ``{"t": 1.5}`` (each a finite positive amax), or a UserError naming the item."""
    from ..core.calibration.calibration import override_value
    from ..core.common.errors import UserError

    out = {}
    for item in items:
        name, sep, value = item.rpartition("=")
        if not sep or not name:
            raise UserError(f"--amax {item!r} is not TENSOR=AMAX.", "Each override names a tensor and its range.",
                            "Write e.g. --amax conv1_out=6.5 (quote names with spaces).")
        try:
            out[name] = override_value(name, float(value))
        except ValueError:
            raise UserError(f"--amax {item!r}: {value!r} is not a number.", "An amax is a positive number.",
                            "Write e.g. --amax conv1_out=6.5.") from None
    return out


def calibration(args, loaded, opts):
    """``(what export_qdq is given, the ranges in words or None)``: the calibration, or a cache's checked amax.

    ``--calibration`` exports its own method unless ``--method``; ``--stats`` is read with ``--method``
    (default auto), as statistics say none; ``--data`` is calibrated on first. ``--amax`` overrides are
    applied to either.
    """
    from ..core.calibration.calibration import Calibration
    from ..core.qdq.range_sources import checked_cache_ranges

    amax = parse_amax(args.amax)
    if args.cache:
        ranges, described = checked_cache_ranges(loaded, args.cache, opts)
        ranges.update(amax)
        return ranges, described + (f", {len(amax)} set by --amax" if amax else "")
    if args.stats:
        cal = Calibration.load(args.stats, method=args.method or "auto", percentile=args.percentile)
    elif args.calibration:
        cal = Calibration.load(args.calibration, method=args.method, percentile=args.percentile)
    else:
        from ..core.calibrate.step import calibrate

        cal = calibrate(loaded, args.data, method=args.method or "auto", percentile=args.percentile or 99.99,
                        max_samples=args.max_samples, progress=not (args.no_progress or args.json))
    return (cal.refit(overrides=dict(cal.overrides, **amax)) if amax else cal), None


def _check_arguments(args) -> None:
    """Bad numbers, a missing source and options that need another: exit 2 before any work."""
    import math

    from ..core.common.errors import UserError

    if not (args.calibration or args.stats or args.cache or args.data):
        raise UserError("export-qdq needs the ranges.", "Nothing says where the ranges come from.",
                        "Give --calibration CAL.npz (trtwidgets calibrate --out), --stats, --cache, or --data DIR "
                        "to calibrate on those samples.")
    if args.data and (args.calibration or args.stats or args.cache) and not args.held_back:
        # The old spelling: --data named the held-back samples of the check.
        print("note: --data beside --calibration/--stats/--cache is deprecated for the held-back samples: use "
              "--held-back (--data is calibration data on every command; the old meaning goes in the next "
              "release)", file=sys.stderr)
        args.held_back, args.data = args.data, None
    if args.max_samples < 1:
        raise UserError(f"--max-samples {args.max_samples} is not a number of samples.",
                        "The check compares the two models on at least one held-back sample.",
                        "Use --max-samples 64 (the default), or leave --held-back out to skip the check.")
    if args.target_cosine is not None and not (math.isfinite(args.target_cosine) and -1.0 <= args.target_cosine <= 1):
        raise UserError(f"--target-cosine {args.target_cosine} is not a cosine threshold.",
                        "A cosine similarity lies between -1 and 1.", "Use e.g. --target-cosine 0.99.")
    for flag, value in (("--labels", args.labels), ("--metric", args.metric), ("--target-cosine", args.target_cosine),
                        ("--target-snr", args.target_snr), ("--max-metric-drop", args.max_metric_drop)):
        if value is not None and value != [] and not args.held_back:
            raise UserError(f"{flag} needs --held-back.", "The check runs on the held-back samples.",
                            "Add --held-back demo or --held-back FOLDER (samples not calibrated on).")


def _check(args, loaded, opts):
    """The check on --held-back (the target of the flags), or None without it."""
    if not args.held_back:
        return None
    from ..core.qdq.held_back_check import HeldBackCheck, held_back_feeds
    from ._judged import target

    goal = target(args, labels_alone=True)
    feeds = held_back_feeds(loaded, args.held_back, args.max_samples)
    shown = None
    if args.labels and not args.metric:
        from ..core.qdq.validate import label_accuracy, load_labels

        print("note: --labels without --metric only shows the top-1 accuracy (deprecated: add --metric top1 to "
              "judge by it, as every command does)", file=sys.stderr)
        shown = label_accuracy(load_labels(args.labels), loaded.summary, len(feeds))
    labels = goal.labels
    return HeldBackCheck(loaded, feeds, goal, labels, shown, opts.trt_version, "fp8" if args.fp8 else "int8")


def run(args) -> int:
    from ..core.model.load import load_model
    from ..core.qdq.export import build_qdq, export_qdq, save_qdq_model
    from ..core.qdq.export_check import DEFAULT_MIN_COSINE, check_source_model

    import dataclasses

    _check_arguments(args)
    opts = options(args)
    loaded = load_model(args.model)
    check_source_model(loaded.proto)  # the model's own fault first, before its ranges are judged against it
    # Read and check the held-back data and the metric before anything is computed or written.
    check = _check(args, loaded, opts)
    given, described = calibration(args, loaded, opts)
    result = export_qdq(loaded, given, options=opts)  # what trtwidgets.export_qdq does; written below, checked
    if described:
        result = dataclasses.replace(result, report=dataclasses.replace(result.report, ranges=described))
    validation = advice = None
    if check is not None:
        validation = check(result, lint=True)
    failed = validation is not None and not validation.passed
    if failed and validation is not None and validation.accuracy_failed and not args.no_advice:
        from ..core.qdq.export_advice import advise_export

        quiet = args.json or args.no_progress
        advice = advise_export(loaded, result, given, check.feeds, check.outcome, build_qdq, opts,
                               progress=None if quiet else lambda t: print(f"  ... {t}", file=sys.stderr),
                               float_check=check.float_part)
    path = None
    checks: Optional[List[Any]] = None
    if not failed or args.write_failed:
        min_float = DEFAULT_MIN_COSINE if args.min_float_cosine is None else args.min_float_cosine
        checks = []

        # The float model gives the end-to-end note its context (how far the quantization itself moves the outputs).
        path = save_qdq_model(result, args.out, feeds=check.feeds if check is not None else None,
                              min_cosine=min_float, original=loaded.proto, on_check=checks.append,
                              refuse=not args.write_failed)
    _print(args, result, validation, advice, checks, path)
    if not result.report.quantized_layers:
        print(f"warning: no layer was quantized: {_why_nothing(result)}", file=sys.stderr)
        return 1
    # Exit 1 (findings) when the check fails (the target, non-finite outputs or a lint error), so scripts can gate.
    return 1 if failed or (checks and not checks[0].passed) else 0


def _why_nothing(result) -> str:
    """Why an export quantized no layer, from its report (ranges missing or zero, exclusions, placement)."""
    skipped = result.report.skipped
    reasons: Dict[str, List[str]] = {}

    for sk in skipped:
        reasons.setdefault(sk.reason, []).append(sk.node_label)
    if not reasons:
        return "the model has no layer the placement rules quantize"
    top = sorted(reasons.items(), key=lambda kv: -len(kv[1]))[:3]
    return "; ".join(f"{len(v)} layer(s): {k}" for k, v in top)


def _print(args, result, validation, advice, checks, path) -> None:
    """The report, the check, the advice and what was written: as text, or one JSON object (--json)."""
    target = target_version(args)[1]
    if args.json:
        out = {"out": str(path) if path else None, "report": result.report.to_dict()}
        if target:
            out["target"] = target
        if checks:
            out["check"] = checks[0].to_dict()
        if validation is not None:
            out["validation"] = validation.to_dict()
        if advice is not None:
            out["advice"] = advice.to_dict()
        print(json.dumps(out, indent=2))
        return
    print(result.report.summary())
    if target:
        print(f"written {target}")
    if checks and checks[0].summary():
        print(checks[0].summary())
    if validation is not None:
        print(validation.summary())
    if advice is not None:
        print(advice.summary())
    if path is not None:
        print(f"wrote {path}")
    else:
        print(f"nothing written to {args.out}: the check failed (--write-failed writes it anyway)")
    if checks and not checks[0].passed:
        print(f"written although the float part's check failed (--write-failed): {'; '.join(checks[0].failures)}")
