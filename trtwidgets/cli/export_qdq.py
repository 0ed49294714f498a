"""``trtwidgets export-qdq MODEL --calibration CAL.npz --out OUT.onnx``: explicit quantization.

Writes a Q/DQ ONNX model from a calibration (``trtwidgets calibrate --out``; a statistics
file of ``--stats`` is read as one), as ``trtwidgets.export_qdq`` does, or from a TensorRT
calibration cache; prints what was quantized and what was left in high
precision and why, and, with ``--data``, how close the Q/DQ model stays to the
float model on held-back data (ONNX Runtime) plus lint for the target TensorRT;
with ``--labels`` also the top-1 accuracy of both models against the labels.
When validation fails, the FAILED line names each check that failed.
"""

from __future__ import annotations

import json
import sys

NAME = "export-qdq"
OUTPUTS = {"out": "file"}  # files it writes: checked and reported by cli._outputs
HELP = "write an explicitly quantized (Q/DQ) ONNX model from a calibration"
DESCRIPTION = __doc__


def add_arguments(parser):
    from ..core.calibration.ranges import METHODS
    from ..core.qdq.options import QdqOptions

    defaults = QdqOptions()  # the one set of defaults the API, the planner and the App share
    parser.add_argument("model", help="path of the float .onnx model")
    src = parser.add_mutually_exclusive_group(required=True)
    src.add_argument("--calibration", metavar="CAL.npz", help="the calibration (from `trtwidgets calibrate --out`): "
                     "its method, percentile and amax overrides are exported")
    src.add_argument("--stats", metavar="STATS.npz", help="activation statistics (`trtwidgets calibrate --stats`), "
                     "exported with --method (default entropy)")
    src.add_argument("--cache", help="a TensorRT calibration cache to take the ranges from instead")
    parser.add_argument("--method", default=None, help=f"export this range method ({', '.join(METHODS)}) instead of "
                        "the calibration's own (its overrides still win; the report names the one used)")
    parser.add_argument("--percentile", type=float, default=None,
                        help="the percentile for --method percentile, instead of the calibration's")
    parser.add_argument("--exclude", nargs="+", default=[], metavar="PATTERN",
                        help="keep these nodes in high precision: node or output names, or regular expressions")
    parser.add_argument("--exclude-op-type", nargs="+", default=[], metavar="OP", dest="exclude_op_types",
                        help="keep every node of these op types in high precision (e.g. MatMul)")
    parser.add_argument("--fp8", action="store_true", help="FP8 E4M3 Q/DQ (opset 19, TensorRT 10+, Hopper/Ada)")
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
    parser.add_argument("--data", help="held-back data to validate on: 'demo' (fresh scikit-image crops) or a "
                        "folder of .npy/.npz/images")
    parser.add_argument("--samples", type=int, default=64, help="held-back samples to validate on (default 64)")
    parser.add_argument("--labels", metavar="FILE", help="integer class labels of the held-back samples (.npy, or .npz "
                        "with one array or one named 'labels'; labels[i] belongs to the i-th sample, in data order): "
                        "adds top-1 accuracy of the float and the Q/DQ model (needs --data)")
    parser.add_argument("--trt-version", default=defaults.trt_version,
                        help="target TensorRT: decides the float part's type and what lint checks (default: the "
                        "installed one, else FP32 Q/DQ that every version reads, linted for 8.6)")
    parser.add_argument("--min-cosine", type=float, default=0.99, help="validation threshold: exit 1 below it "
                        "(default 0.99)")
    parser.add_argument("--min-float-cosine", type=float, default=None, help="with --data and an FP16/BF16 float "
                        "part: the lowest cosine against the same Q/DQ model with an FP32 float part, every "
                        "quantizer held at its integers (per output and per quantizer input); below it nothing is "
                        "written (default 0.998)")
    parser.add_argument("--json", action="store_true", help="print the report (and validation) as JSON")


def options(args):
    """The :class:`~trtwidgets.core.qdq.options.QdqOptions` these arguments ask for."""
    from ..core.qdq.options import QdqOptions

    return QdqOptions(precision="fp8" if args.fp8 else "int8",
                      dense_int8=args.dense_int8, high_precision=args.high_precision, trt_version=args.trt_version,
                      exclude=args.exclude, exclude_op_types=args.exclude_op_types,
                      weights_per_channel=False if args.per_tensor_weights else None,
                      keep_float_output_grouped_convs=args.keep_float_output_grouped_convs)


def calibration(args, loaded, opts):
    """``(what export_qdq is given, the ranges in words or None)``: the calibration, or a cache's checked amax.

    ``--calibration`` exports its own method unless ``--method``; ``--stats`` is read with ``--method``
    (default entropy), as statistics say none.
    """
    from ..core.calibration.calibration import Calibration
    from ..core.qdq.range_sources import checked_cache_ranges

    if args.cache:
        return checked_cache_ranges(loaded, args.cache, opts)
    if args.stats:
        return Calibration.load(args.stats, method=args.method or "entropy", percentile=args.percentile), None
    return Calibration.load(args.calibration, method=args.method, percentile=args.percentile), None


def _lint_version(opts):
    from ..core.model.trt_version import installed_trt_version

    return opts.trt_version or installed_trt_version() or "8.6"


def _held_back(args, loaded):
    if args.data == "demo":
        from .. import demo

        return list(demo.iter_skimage_inputs(args.samples, batch_size=1, seed=12345))
    from ..core.calibration.data import iter_feeds
    from ..core.calibration.sample_axes import SampleAxes

    # Read as calibrate and the planner read samples: each input cut along its own batch axis, found from the model.
    return list(iter_feeds(args.data, loaded.summary, max_samples=args.samples,
                           axes=SampleAxes(loaded.summary, model=loaded)))


def _samples(feeds) -> int:
    # One sample per feed: the demo crops come one at a time, and a folder is read at a batch of 1, each input
    # cut along its own batch axis (axis 0 of the first input is not the samples of every model).
    return len(feeds)


def run(args) -> int:
    from ..core.common.errors import UserError
    from ..core.model.load import load_model
    from ..core.qdq.export import export_qdq, save_qdq_model

    import dataclasses
    import math

    if args.samples < 1:
        raise UserError(f"--samples {args.samples} is not a number of samples.",
                        "Validation compares the two models on at least one held-back sample.",
                        "Use --samples 64 (the default), or leave --data out to skip validation.")
    if not (math.isfinite(args.min_cosine) and -1.0 <= args.min_cosine <= 1.0):
        raise UserError(f"--min-cosine {args.min_cosine} is not a cosine threshold.",
                        "A cosine similarity lies between -1 and 1.", "Use e.g. --min-cosine 0.99.")
    if args.labels and not args.data:
        raise UserError("--labels needs --data.", "The labels belong to the held-back samples that --data names.",
                        "Add --data demo or --data FOLDER (the samples the labels are for).")
    labels = None
    if args.labels:
        from ..core.qdq.validate import load_labels

        labels = load_labels(args.labels)
    opts = options(args)
    loaded = load_model(args.model)
    from ..core.qdq.export_check import check_source_model

    check_source_model(loaded.proto)  # the model's own fault first, before its ranges are judged against it
    given, described = calibration(args, loaded, opts)
    result = export_qdq(loaded, given, options=opts)  # what trtwidgets.export_qdq does; written below, checked
    if described:
        result = dataclasses.replace(result, report=dataclasses.replace(result.report, ranges=described))
    # Read and check the held-back data and labels before writing, so bad input keeps an earlier output.
    feeds = _held_back(args, loaded) if args.data else None
    task = {}
    if labels is not None:
        from ..core.qdq.validate import label_accuracy

        metric, metric_name = label_accuracy(labels, loaded.summary, _samples(feeds))
        task = {"task_metric": metric, "task_metric_name": metric_name}
    from ..core.qdq.export_check import DEFAULT_MIN_COSINE

    min_float = DEFAULT_MIN_COSINE if args.min_float_cosine is None else args.min_float_cosine
    # The float model gives the end-to-end note its context (how far the quantization itself moves the outputs).
    checks = []
    path = save_qdq_model(result, args.out, feeds=feeds, min_cosine=min_float, original=loaded.proto,
                          on_check=checks.append)
    validation = None
    if feeds is not None:
        from ..core.qdq.validate import validate_qdq

        validation = validate_qdq(loaded, result.model, feeds, trt_version=_lint_version(opts),
                                  precision=result.report.precision, min_cosine=args.min_cosine, **task)
    if args.json:
        out = {"out": str(path), "report": result.report.to_dict()}
        if checks:
            out["check"] = checks[0].to_dict()
        if validation is not None:
            out["validation"] = validation.to_dict()
        print(json.dumps(out, indent=2))
    else:
        print(result.report.summary())
        if checks and checks[0].summary():
            print(checks[0].summary())
        print(f"wrote {path}")
        if validation is not None:
            print(validation.summary())
    if not result.report.quantized_layers:
        print("warning: no layer was quantized (no ranges matched the model's tensors?)", file=sys.stderr)
        return 1
    # Exit 1 (findings) when validation fails (a threshold, non-finite outputs or a lint error), so scripts can gate on it.
    return 1 if validation is not None and not validation.passed else 0
