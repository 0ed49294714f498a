"""``trtwidgets plan MODEL --data DIR --out DIR``: the quantization plan.

Searches, on the CPU, for the fastest explicit quantization that keeps an accuracy
target (see :mod:`trtwidgets.core.plan.planner`): the statistics are collected once,
range methods and the layers kept in high precision are chosen with ONNX Runtime on
held-back samples, and where INT8 pays comes from a cost model (an estimate) or, with
``--oracle``, from an implicit INT8+FP16 TensorRT build of the same model.

Writes ``DIR/plan.json`` (every candidate, the pick and why), ``DIR/plan.html`` (the
Pareto chart of accuracy against latency, offline) and, unless FP16 is the answer,
``DIR/model.qdq.onnx`` (the pick; ``DIR/model.rewritten.onnx``, a float model to build with FP16, when the
pick is FP16 of the rewritten graph), replacing an earlier plan's files as one set
(other files in DIR stay). An interrupted search writes what it measured to
``DIR.partial/`` and leaves DIR as it was. Prints the table. Exit 0 when a candidate meets the
target, 1 when none does (not even FP16), 2 on bad input. With ``--build`` (needs
TensorRT and a GPU) the pick is built and timed.

With ``--measure`` (TensorRT and a GPU; checked before the search) FP16, implicit INT8
and the top candidates are built (once per placement, cached) and timed in interleaved
rounds, each engine judged on the held-back samples; the pick goes by measured time among
the engines that meet the target and plan.json holds each measurement beside its estimate. Ctrl-C keeps what was measured (exit 130). Without a GPU, plan here and run
``trtwidgets plan measure DIR`` on a GPU machine.
"""

from __future__ import annotations

import json
import sys

NAME = "plan"
OUTPUTS = {"out": "dir"}
#: The plan's files, replaced as one set (see :mod:`trtwidgets.core.common.file_set`); checked against the inputs.
OUTPUT_FILES = {"out": ("plan.json", "plan.html", "model.qdq.onnx", "model.rewritten.onnx")}
HELP = "find the fastest Q/DQ quantization that keeps an accuracy target (FP16 when INT8 does not pay)"
DESCRIPTION = __doc__


def add_arguments(parser):
    from ..core.qdq.options import QdqOptions

    defaults = QdqOptions()  # the one set of defaults the API, export-qdq and the App share
    parser.add_argument("model", help="path of the float .onnx model")
    from ._judged import add_flags

    add_flags(parser, ("--data",), data=dict(required=True, help="samples: a folder of .npy/.npz/images, or 'demo'; "
                                             "all of them calibrate when --held-back is given, else a seeded random "
                                             "--holdout fraction is held back (the file names of each side are "
                                             "written to plan.json)"))
    add_flags(parser, ("--held-back",))
    parser.add_argument("--calibration", metavar="CAL.npz", help="plan with this calibration (`trtwidgets calibrate "
                        "--out`: its statistics, method, percentile and amax overrides) instead of collecting "
                        "statistics on --data; --data is then only split for held-back samples")
    parser.add_argument("--holdout", type=float, default=0.25, help="fraction of --data held back (default 0.25)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random held-back split (default 0)")
    parser.add_argument("--batch-axis", help="the batch axis of every tensor (1), of none ('none': samples run one "
                        "at a time), or per tensor (NAME:AXIS,NAME:none); default: found from the model (a dim "
                        "named like a batch, a dynamic dim, a batch-2 run checked against two batch-1 runs)")
    add_flags(parser, ("--max-samples",), max_samples=dict(help="read at most this many samples of --data"))
    tgt = parser.add_argument_group("target (default: --target-cosine 0.99)")
    add_flags(tgt, ("--target-cosine", "--target-snr", "--metric", "--max-metric-drop", "--labels"))
    add_flags(parser, ("--keep-fp32",))
    parser.add_argument("--trt-version", help="target TensorRT (decides the float part's type; default: installed, "
                        "else 10 and 11: an FP16 float part; --trt-version 8.6 writes the FP32 float part 8.6 reads)")
    parser.add_argument("--high-precision", choices=("auto", "fp32", "fp16", "bf16"), default=defaults.high_precision,
                        help="type of the non-quantized part (auto: FP32 for 8.x, FP16 for 10/11)")
    parser.add_argument("--batch", type=int, help="the batch the engine will run at (latency estimated there)")
    parser.add_argument("--gpu", default="h100", help="the cost model's GPU: h100 (default), h200, a100, l4")
    parser.add_argument("--oracle", help="an implicit INT8+FP16 build folder of the same model, built on the GPU "
                        "the engine will run on (TensorRT's choices differ between GPUs): its per-layer choices and "
                        "times replace the cost model")
    parser.add_argument("--no-dense-int8", action="store_false", dest="dense_int8",
                        help="place Q/DQ by rules 1-7 only: a depthwise conv read in float stays float (default: "
                        "rule 8, quantize INT8 regions the way an implicit INT8 engine runs them)")
    parser.set_defaults(dense_int8=defaults.dense_int8)
    parser.add_argument("--no-rewrites", action="store_true",
                        help="plan on the graph as it is: no exact graph rewrites in the candidates' exports (default: "
                             f"{', '.join(defaults.rewrites)}; docs/placement.md, 'Graph rewrites')")
    parser.add_argument("--build", action="store_true", help="build and time the pick (TensorRT and a GPU)")
    from .plan_measure import add_measure_arguments

    add_measure_arguments(parser.add_argument_group("measure (TensorRT and a GPU)"), flag=True)
    parser.add_argument("--out", required=True, help="folder for plan.json, plan.html and model.qdq.onnx")
    add_flags(parser, ("--no-progress", "--json"))
    from ._cluster import add_cluster_arguments

    add_cluster_arguments(parser, "the statistics and the search's questions (the same candidates and pick)")


def target(args):
    """The :class:`~trtwidgets.core.accuracy.target.Target` these arguments ask for (cosine >= 0.99 by default;
    a metric alone is the target when no cosine or SNR is given)."""
    from ._judged import target as judged_target

    return judged_target(args, default_cosine=not args.metric)


def options(args):
    """The :class:`~trtwidgets.core.qdq.options.QdqOptions` these arguments ask for (its defaults otherwise)."""
    from ..core.qdq.options import QdqOptions

    return QdqOptions(trt_version=args.trt_version, high_precision=args.high_precision, dense_int8=args.dense_int8,
                      rewrites=() if args.no_rewrites else QdqOptions().rewrites, keep_fp32=tuple(args.keep_fp32))


def _data(args):
    if args.data == "demo":
        from ..demo.labelled_set import labelled_set

        # Samples the demo model reads (rendered text lines, upright and turned), none of them calibration samples
        # of the notebooks: the planner splits them into its own calibration and held-back samples.
        return labelled_set("held_back").feeds(1)[:64]
    return args.data


def run(args) -> int:
    from pathlib import Path

    from ..core.common.errors import UserError
    from ..core.model.load import load_model
    from ..core.plan.plan_export import export_plan
    from ..plan_api import plan
    from ._cluster import cluster_of
    from ._plan_folder import write_plan_folder

    if not 0 < args.holdout < 1:
        raise UserError(f"--holdout {args.holdout} is not a fraction.", "It is the share of samples held back.",
                        "Use a value between 0 and 1, e.g. 0.25.")
    goal = target(args)
    measure = False
    if args.measure:
        from .plan_measure import measure_source

        measure = measure_source(args, Path(args.out) / "candidates")  # checks TensorRT and a GPU first
    loaded = load_model(args.model)
    cal = None
    if args.calibration:
        from ..core.calibration.calibration import Calibration

        cal = Calibration.load(args.calibration)
    with cluster_of(args) as client:
        result = plan(loaded, _data(args), target=goal, calibration=cal, options=options(args),
                      held_back=args.held_back, holdout=args.holdout, seed=args.seed, max_samples=args.max_samples,
                      batch_axis=args.batch_axis, batch_size=args.batch, gpu=args.gpu, oracle=args.oracle,
                      measure=measure, progress=not args.no_progress, client=client)
    out = Path(args.out)
    exported = export_plan(loaded, result) if result.pick is not None else None
    final = write_plan_folder(result, exported, out)
    if args.json:
        print(json.dumps(result.to_dict(), indent=1))  # plan.json's own text
    else:
        _print(result, final, exported is not None)
    if args.build and exported is not None and not result.interrupted:
        from ..core.plan.plan_export import pick_file

        _build(final / pick_file(result), out, quantized=bool(result.pick.quantized))
    if result.interrupted:
        print(f"interrupted: {final} holds the candidates measured so far; {out} was kept as it was",
              file=sys.stderr)
        return 130
    if result.measured is not None and result.measured.interrupted:
        print("interrupted while measuring: the files hold the candidates and the measurements so far", file=sys.stderr)
        return 130
    if result.pick is None:
        print("no candidate meets the target, not even FP16: nothing is recommended", file=sys.stderr)
        return 1
    return 0


def _print(result, final, exported: bool) -> None:
    print(f"target: {result.target.describe()}")
    print(result.table())
    print(result.reason)
    acc = result.pick.accuracy if result.pick is not None else None
    if acc is not None and acc.worst_group and result.held_back is not None:
        held = result.held_back
        print(f"accuracy of the pick: worst channel group {acc.worst_group} at cosine {acc.cosine:.4f} "
              f"(pooled output cosine {acc.pooled_cosine:.4f}); held back: {len(held.held_back)} "
              f"samples ({held.source}, names in plan.json)")
    for n in result.notes:
        print(f"note: {n}")
    secs = result.seconds
    if secs:
        print(f"searched in {secs.get('total', 0):.1f} s ("
              + ", ".join(f"{k} {v:.1f} s" for k, v in secs.items() if k != "total") + ")")
    from ..core.plan.plan_export import pick_file

    model = final / pick_file(result)
    print(f"wrote {final / 'plan.json'}, {final / 'plan.html'}" + (f", {model}" if exported else
                                                                    f" (no Q/DQ model: {_float_pick(result)})"))
    if exported and not result.pick.quantized:
        print(f"{_float_pick(result)}: {model}")


def _float_pick(result) -> str:
    """What to build when the plan writes no Q/DQ model: FP16, FP16 with its FP32 island, or nothing."""
    if result.pick is None:
        return "nothing is recommended"
    island = result.options.keep_fp32
    if result.pick.rewritten:
        return (f"{result.pick.name} is the pick: build model.rewritten.onnx (the float model with the plan's exact "
                "graph rewrites, no Q/DQ" + (f", its {len(island)} island nodes kept FP32" if island else "")
                + ") with FP16")
    if island and result.recommended:
        return (f"{result.pick.name} is the pick: build the float model with FP16, its {len(island)} island nodes "
                "kept FP32 (plan.json options.keep_fp32: export-qdq --keep-fp32 writes them FP32 for TensorRT 10/11; "
                "on 8.x give them FP32 layer precisions)")
    return "FP16 is the pick"


def _build(path, out, quantized: bool = True) -> None:
    from ..core.model.load import load_model
    from ..core.recipe.recipe import Recipe
    from ..trt import build as trt_build

    # The rewritten graph's FP16 holds no Q/DQ: built as FP16 alone, like the FP16 candidate.
    recipe = Recipe.for_model(load_model(path), flags=("fp16", "int8") if quantized else ("fp16",))
    res = trt_build.build(recipe, out_dir=out / "build")
    print(f"built {res.out_dir} in {res.build_seconds:.0f} s")
