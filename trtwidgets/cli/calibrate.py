"""``trtwidgets calibrate MODEL --data DIR --out cal.npz``: the Calibration, its statistics and a TensorRT cache."""

from __future__ import annotations

import json
import math
import re
import sys
import time

NAME = "calibrate"
OUTPUTS = {"out": "file", "cache": "file", "stats": "file"}  # files it writes: checked and reported by cli._outputs
HELP = ("collect activation statistics with ONNX Runtime, compute int8 ranges, write the calibration (--out) and a "
        "TensorRT calibration cache")
DESCRIPTION = (HELP + ". DATA is a folder of .npy/.npz samples (one array per input), a folder of images with "
               "--preprocess, or 'demo' for the demo's labelled text lines (calibration part). A file of one "
               "sample is read as it is; a file of several is cut along each input's own batch axis "
               "(--batch-axis), and inputs without one (a scalar sample rate) are passed whole. Every method's "
               "amax is computed; --method picks the one exported (auto, the default: each tensor's own, chosen "
               "from its statistics and its role in the graph, the reason recorded): the calibration (--out, read "
               "by export-qdq --calibration and plan --calibration) records it, and the cache is written with it. "
               "Tensors whose exported range clips more than 0.1% of their values are named with what to do.")


def add_arguments(parser):
    from ..core.calibration.auto_ranges import EXPORT_METHODS

    parser.add_argument("model", help="path of the .onnx file")
    parser.add_argument("--data", required=True, help="folder of .npy/.npz samples, folder of images, or 'demo'")
    parser.add_argument("--preprocess", metavar="JSON|FILE.json", default=None,
                        help="how images become the model's input, as a JSON object or a .json file, e.g. "
                             "'{\"input\": \"x\", \"resize\": [48, 192], \"layout\": \"NCHW\", "
                             "\"mean\": [0.5, 0.5, 0.5], \"std\": [0.5, 0.5, 0.5]}'")
    parser.add_argument("--method", choices=EXPORT_METHODS, default="auto",
                        help="range method the calibration exports and the cache holds (default: auto, each "
                        "tensor's method chosen from its statistics and its role: Softmax, LayerNorm, attention, "
                        "GELU)")
    parser.add_argument("--percentile", type=float, default=99.99, help="percentile for --method percentile (default 99.99)")
    parser.add_argument("--shape", action="append", default=[], metavar="INPUT:1x3x48x192",
                        help="calibration (opt) shape of an input; repeat per input")
    parser.add_argument("--adapt", action="append", default=[], metavar="INPUT:pad|truncate|resize",
                        help="how samples of another shape are brought to --shape")
    parser.add_argument("--batch-size", type=int, default=None, help="samples per ORT run")
    parser.add_argument("--batch-axis", help="the batch axis of every input (1), of none ('none': each file is one "
                        "sample), or per input (NAME:AXIS,NAME:none); files of several samples are cut along it and "
                        "samples joined along it; default: found from the model as `trtwidgets plan` finds it (a dim "
                        "named like a batch, a dynamic dim, a batch-2 run checked against two batch-1 runs)")
    parser.add_argument("--max-samples", type=int, default=None, help="use at most this many samples")
    parser.add_argument("--providers", default=None, help="comma-separated ORT providers (default CPUExecutionProvider)")
    parser.add_argument("--out", metavar="CAL.npz", help="write the calibration: the statistics with the method, "
                        "percentile and the model's fingerprint, for export-qdq --calibration and plan --calibration")
    parser.add_argument("--cache", metavar="OUT.cache", help="write a TensorRT calibration cache")
    parser.add_argument("--trt-version", default="8600", help="version tag of the cache header (default 8600)")
    parser.add_argument("--stats", metavar="OUT.npz", help="write the activation statistics")
    parser.add_argument("--resume", metavar="STATS.npz", help="continue from earlier statistics (or a calibration, "
                        "--out) of the same model")
    parser.add_argument("--json", action="store_true", help="print a JSON object instead of a table")
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    from ._cluster import add_cluster_arguments

    add_cluster_arguments(parser, "the statistics (shards of samples, merged here into the same statistics)")


def parse_shapes(items):
    """``["x:1x3x48x192"]`` -> ``{"x": [1, 3, 48, 192]}``."""
    from ..core.common.errors import CalibrationDataError

    from ..core.calibration.shape_adapt import check_shape

    out = {}
    for item in items:
        name, sep, dims = item.rpartition(":")
        if not sep or not name or not re.fullmatch(r"[0-9]+(x[0-9]+)*", dims):
            raise CalibrationDataError(f"--shape {item!r} is not INPUT:DIMS.", "Dims are positive integers joined by 'x'.",
                                       "Write e.g. --shape x:1x3x48x192.")
        if name in out:
            raise CalibrationDataError(f"--shape gives input {name!r} twice.", "Each input has one calibration shape.",
                                       "Give one --shape per input.")
        # A zero dim used to make the batching loop spin forever; check_shape refuses it and absurd sizes.
        out[name] = list(check_shape([int(d) for d in dims.split("x")], f"--shape {name}:"))
    return out


def parse_adapt(items):
    from ..core.calibration.shape_adapt import ADAPT_MODES
    from ..core.common.errors import CalibrationDataError

    out = {}
    for item in items:
        name, sep, mode = item.rpartition(":")
        if not sep or not name or mode not in ADAPT_MODES:
            raise CalibrationDataError(f"--adapt {item!r} is not INPUT:MODE.", f"MODE is one of {', '.join(ADAPT_MODES)}.",
                                       "Write e.g. --adapt x:resize.")
        out[name] = mode
    return out


def parse_preprocess(text):
    """``--preprocess``: a JSON object, or the path of a .json file holding one (never evaluated as code)."""
    from ..core.common.errors import CalibrationDataError
    from ..core.common.paths import user_path

    if text is None:
        return None
    source = "--preprocess"
    if text.lstrip()[:1] not in ("{", "["):
        path = user_path(text)
        if not path.is_file():
            raise CalibrationDataError(f"--preprocess {text!r} is neither a JSON object nor a file.",
                                       "It must start with '{' or name a .json file that exists.",
                                       "Write e.g. --preprocess '{\"input\": \"x\", \"resize\": [48, 192]}'.")
        try:
            source, text = str(path), path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise CalibrationDataError(f"--preprocess file {path} could not be read as text.",
                                       f"{type(exc).__name__}: {exc}", "Give a UTF-8 .json file.") from None
    try:
        value = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise CalibrationDataError(f"{source} is not valid JSON.", str(exc),
                                   "Quote keys and strings with double quotes.") from None
    if not isinstance(value, dict):
        raise CalibrationDataError(f"{source} holds a {type(value).__name__}, not a JSON object.",
                                   "The preprocessing is a set of named settings.",
                                   "Give an object such as {\"input\": \"x\", \"resize\": [48, 192]}.")
    return value


def _num(v):
    return None if v is None or (isinstance(v, float) and not math.isfinite(v)) else v


def report(cal, seconds: float) -> dict:
    """The ``--json`` object: tensors (name -> amax/sqnr_db/clipped per method, the method exported and why),
    samples, seconds, the tensors whose exported range clips many values."""
    stats, ranges, choices = cal.stats, cal.ranges, cal.choices
    tensors = {}
    for name, per in ranges.items():
        t = stats.tensors[name]
        tensors[name] = {
            "amax": {m: r.amax for m, r in per.items()},
            "sqnr_db": {m: _num(r.sqnr_db) for m, r in per.items()},
            "clipped": {m: r.clipped_fraction for m, r in per.items()},
            "min": t.min, "max": t.max, "nan": t.nan_count, "inf": t.inf_count,
        }
        if name in choices:
            tensors[name]["chosen"] = {"method": choices[name].method, "reason": choices[name].reason}
    return {"tensors": tensors, "samples": stats.samples, "seconds": round(seconds, 3), "method": cal.method,
            "clipping": cal.clipping_notes(),
            "interrupted": stats.interrupted, "nonfinite": {k: {"nan": a, "inf": b} for k, (a, b) in stats.nonfinite().items()}}


def _names(names, first: int = 3) -> str:
    return ", ".join(names[:first]) + (f" and {len(names) - first} more" if len(names) > first else "")


def nonfinite_summary(stats) -> str:
    """One line for every tensor with NaN/Inf values (the counts per tensor are in ``--json``); '' when none."""
    bad = list(stats.nonfinite())
    if not bad:
        return ""
    return (f"warning: {len(bad)} of {len(stats.tensors)} tensors had NaN/Inf values, left out of their ranges "
            f"({_names(bad)}); --json gives the counts per tensor")


def run(args) -> int:
    from ..core.calibration.calibration import Calibration, resume_stats
    from ..core.calibration.collect import collect_stats
    from ..core.calibration.data import spec_for
    from ..core.calibration.shards import collect_stats_distributed
    from ..core.calibration.fingerprint import fingerprint_of
    from ..core.calibration.stats import zero_note
    from ..core.common.errors import UserError
    from ..core.common.write_rule import partial_path
    from ..core.model.load import load_model
    from ._cluster import cluster_of

    t0 = time.perf_counter()
    if not 0 < args.percentile <= 100:
        raise UserError(f"--percentile {args.percentile} is outside (0, 100].", "It is the share of |x| kept below amax.",
                        "Use e.g. --percentile 99.99.")
    model = load_model(args.model)
    opt_shapes = parse_shapes(args.shape)
    adapt = parse_adapt(args.adapt)
    spec = spec_for(args.data, preprocessing=parse_preprocess(args.preprocess))
    earlier = resume_stats(args.resume) if args.resume else None
    providers = [p.strip() for p in args.providers.split(",")] if args.providers else None
    kwargs = dict(providers=providers, stats=earlier, progress=not args.no_progress and not args.json,
                  batch_size=args.batch_size, max_samples=args.max_samples, adapt=adapt or None,
                  opt_shapes=opt_shapes or None, batch_axis=args.batch_axis)
    with cluster_of(args) as client:
        stats = collect_stats(model, spec, **kwargs) if client is None else \
            collect_stats_distributed(model, spec, client, **kwargs)
    # An interrupted run writes under its own names (stats.partial.npz, x.partial.cache): never over a complete one.
    paths = {k: (partial_path(v) if stats.interrupted else v) if v else None
             for k, v in (("out", args.out), ("stats", args.stats), ("cache", args.cache))}
    cal = Calibration.fit(stats, args.method, args.percentile, data=str(spec.path or spec.kind),
                          fingerprint=fingerprint_of(model), model=model)
    _write(cal, paths, args.trt_version)
    zeros = zero_note(stats)  # all-zero data said here, where the data is given, not later as ranges that match nothing
    if zeros:
        print(f"note: {zeros}", file=sys.stderr)
    seconds = time.perf_counter() - t0
    if args.json:
        print(json.dumps(report(cal, seconds), allow_nan=False))
    else:
        _print_table(cal, seconds, paths)
    if stats.interrupted:
        print(interrupted_note(stats.samples, args, paths), file=sys.stderr)
        return 130
    return 0


def _write(cal, paths, trt_version: str) -> None:
    """The calibration, the statistics and the cache, each where asked (``paths``: option -> path or None)."""
    from ..core.calibration.cache import METHOD_ALGORITHM, check_complete, write_cache
    from ..core.calibration.stats import save_stats

    # Saved first: the statistics are the expensive part, and survive an error below.
    if paths["out"]:
        cal.save(paths["out"])
    if paths["stats"]:
        save_stats(cal.stats, paths["stats"])
    if paths["cache"]:
        # The cache holds what every export writes: the calibration's amax.
        amax = cal.amax
        saved = paths["out"] or paths["stats"]
        check_complete(cal.stats.tensors, amax, str(paths["cache"]), f"The statistics are saved in {saved}." if saved
                       else "")
        write_cache(amax, paths["cache"], version=trt_version, algorithm=METHOD_ALGORITHM[cal.method])


def _print_table(cal, seconds: float, paths) -> None:
    from ..core.calibration.ranges import METHODS

    stats, ranges, choices = cal.stats, cal.ranges, cal.choices
    print(f"{stats.samples} samples, {len(ranges)} tensors, {seconds:.2f} s"
          + (f" (interrupted: the statistics of the {stats.samples} samples done so far)" if stats.interrupted else ""))
    width = min(48, max([len(n) for n in ranges] + [6]))
    print(f"{'tensor':<{width}}  " + "  ".join(f"{m:>10}" for m in METHODS) + f"  {'exported':>10}  {'sqnr dB':>8}  "
          f"{'clipped':>8}")
    for name, per in ranges.items():
        method = choices[name].method if name in choices else cal.method
        r = per[method]
        print(f"{name[:width]:<{width}}  " + "  ".join(f"{per[m].amax:>10.4g}" for m in METHODS)
              + f"  {method:>10}  {r.sqnr_db:>8.2f}  {r.clipped_fraction:>8.2e}")
    warning = nonfinite_summary(stats)
    if warning:
        print(warning, file=sys.stderr)
    _print_clipping(cal)
    described = cal.describe().replace(" ranges from the calibration", "")
    if paths["cache"]:
        print(f"cache ({described}) -> {paths['cache']}")
    if paths["stats"]:
        print(f"statistics -> {paths['stats']}")
    if paths["out"]:
        print(f"calibration ({described}) -> {paths['out']}")


def _print_clipping(cal, first: int = 5) -> None:
    """The tensors whose exported range clips more than the stated share of their values, with what to do."""
    notes = cal.clipping_notes()
    if not notes:
        return
    print(f"warning: {len(notes)} tensor(s) have a range that clips many of their values:", file=sys.stderr)
    for name, text in list(notes.items())[:first]:
        print(f"  {name}: {text}", file=sys.stderr)
    if len(notes) > first:
        print(f"  ... and {len(notes) - first} more (--json lists them)", file=sys.stderr)


def interrupted_note(samples: int, args, paths) -> str:
    """What an interrupted calibration kept, and where its partial result went (``paths``: option -> path)."""
    import os

    kept = [f"{p} (kept as it was)" if os.path.exists(p) else f"{p} (not written)"
            for p in (args.out, args.cache, args.stats) if p]
    wrote = [f"{what} in {paths[key]}" for what, key in (("the partial calibration", "out"),
                                                         ("the partial cache", "cache"),
                                                         ("the partial statistics", "stats")) if paths[key]]
    text = f"trtwidgets calibrate: interrupted after {samples} samples."
    if kept:
        text += " " + ", ".join(kept) + "."
    if wrote:
        text += " Wrote " + " and ".join(wrote) + " (marked partial, from those samples only)."
    resume = paths["out"] or paths["stats"]
    if resume:
        text += f" Continue with --resume {resume}."
    return text
