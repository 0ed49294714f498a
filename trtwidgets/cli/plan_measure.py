"""``trtwidgets plan measure PLAN_DIR``: build and time a plan's candidates on this GPU, and pick again.

A plan made on a laptop (``trtwidgets plan ... --out PLAN_DIR``) holds every candidate
with its estimated latency. On the GPU machine this command first runs the region search
(unless ``--no-regions``): each repeated pattern's placement schemes, scored by the planner,
are timed on a sub-model cut out of the export, the fastest beyond the noise is chosen, and
the candidate that combines the choices is built whole beside FP16 and the base candidate
(plan.json's ``regions``). Then it builds FP16, implicit INT8
(where the installed TensorRT has it) and the plan's top candidates, once per distinct
export (engines cached by what makes them: a second run rebuilds nothing),
times them interleaved (five rounds by default: a candidate is picked over FP16 only when it wins
the paired rounds by a one-sided sign test at p < 0.05, which fewer rounds cannot reach), runs each
engine on the plan's held-back
samples (``PLAN_DIR/held_back.npz``, judged by the plan's target), and writes the
measurements into ``PLAN_DIR/plan.json`` (atomically), ``plan.html`` and
``model.qdq.onnx`` (the fastest Q/DQ export that meets the target on its engine; removed
when FP16 is the pick; ``model.rewritten.onnx`` instead when FP16 of the rewritten graph is). Implicit INT8 is the pick where its engine meets the target and
it is the fastest and wins the paired rounds (plan.json names its calibration cache). Progress
shows builds done and left.

The folder is replaced only if it still holds the plan that was read: a ``plan --out`` of the
same folder that finished meanwhile is kept (exit 2, nothing written; run again, the engines are
cached). ``held_back.npz`` must be the plan's own (another plan's, or one holding other than it
declares, is refused). plan.json names its metric; a metric of your own
(``package.module:function``) is imported only when you type it: ``--metric
package.module:function`` (a plan folder never chooses code to import).

Also spelled ``trtwidgets plan-measure``. Exit 0 when measured, 130 when Ctrl-C stopped
it (what was measured is written, marked partial), 2 on bad input or without TensorRT
or a GPU.
"""

from __future__ import annotations

import sys
from pathlib import Path

NAME = "plan-measure"
HELP = "build and time a plan's candidates on this GPU and pick again (also: plan measure PLAN_DIR)"
DESCRIPTION = __doc__


#: The builds' share of a measured plan's 15 minutes: on TensorRT 8.6 an implicit INT8 build of a mid-size
#: detector (PP-OCRv4 det) ran past 16 minutes while its FP16 and Q/DQ builds took one to two.
DEFAULT_BUILD_LIMIT_S = 720.0


def add_measure_arguments(group, flag: bool = False) -> None:
    """The measurement options shared by ``plan --measure`` and ``plan measure``."""
    from ..core.plan.measured.paired import PAIRED_MIN_ROUNDS
    from ..core.plan.measured.repick import MEASURE_TOP
    from ..trt.measure import MIN_ROUNDS

    if flag:
        group.add_argument("--measure", action="store_true", help="build FP16, implicit INT8 and the top candidates "
                           "on this GPU, time them interleaved and pick by measured time")
    group.add_argument("--measure-top", type=int, default=MEASURE_TOP,
                       help=f"candidates to build and time besides FP16 and implicit INT8 (default {MEASURE_TOP})")
    group.add_argument("--rounds", type=int, default=PAIRED_MIN_ROUNDS,
                       help=f"interleaved timing rounds (default {PAIRED_MIN_ROUNDS}, the fewest in which a candidate "
                            f"can win FP16's paired rounds by the sign test; at least {MIN_ROUNDS})")
    group.add_argument("--runs", type=int, default=100, help="timed runs per engine per round (default 100)")
    group.add_argument("--opt-level", type=int, help="TensorRT builder optimization level (default TensorRT's; "
                       "lower builds faster)")
    group.add_argument("--engine-cache", help="engine cache folder (default $TRTWIDGETS_ENGINE_CACHE or "
                       "~/.cache/trtwidgets/engines)")
    group.add_argument("--no-implicit", action="store_true", help="do not build implicit INT8 (a reference)")
    group.add_argument("--no-regions", action="store_true", help="no region search: do not time each repeated "
                       "pattern's placement schemes on sub-models before building the candidates")
    group.add_argument("--build-limit", type=float, default=DEFAULT_BUILD_LIMIT_S, metavar="SECONDS",
                       help=f"stop the builds after this many seconds and time what was built; builds left say so "
                            f"(default {DEFAULT_BUILD_LIMIT_S:.0f}, so a measured plan ends within 15 minutes; "
                            "0: no limit)")


def _check(args) -> None:
    from ..core.common.errors import UserError
    from ..trt.measure import MIN_ROUNDS

    if args.rounds < MIN_ROUNDS:
        raise UserError(f"--rounds {args.rounds} is too few.", "Interleaved rounds tell a steady difference from a "
                        f"drifting clock; {MIN_ROUNDS} is the least.", f"Use --rounds {MIN_ROUNDS} or more.")
    if not args.build_limit >= 0:
        raise UserError(f"--build-limit {args.build_limit} is not a number of seconds.", None,
                        "Use e.g. --build-limit 600, or 0 for no limit.")
    if args.measure_top < 0 or args.runs < 1:
        raise UserError("--measure-top must be 0 or more and --runs 1 or more.", None,
                        "Use e.g. --measure-top 3 --runs 100.")


def measure_keywords(args) -> dict:
    """The keywords of :func:`trtwidgets.trt.plan_measure.measure_plan` these arguments ask for."""
    return {"cache_dir": args.engine_cache, "top": args.measure_top, "rounds": args.rounds, "runs": args.runs,
            "opt_level": args.opt_level, "implicit": not args.no_implicit, "regions": not args.no_regions,
            "build_limit_s": args.build_limit or None,
            "progress": not args.no_progress}


def measure_source(args, work_dir: Path):
    """``plan --measure``'s measurement source, after checking the options, TensorRT and a GPU."""
    from ..trt.plan_measure import gpu_source

    _check(args)
    return gpu_source("plan --measure", work_dir=work_dir, **measure_keywords(args))


def add_arguments(parser):
    parser.add_argument("plan_dir", help="the folder `trtwidgets plan --out` wrote (with plan.json)")
    parser.add_argument("--model", help="the float model (default: the path in plan.json)")
    from ._judged import add_flags

    add_flags(parser, ("--metric",), metric=dict(help="the plan's own metric, when plan.json names one of yours "
                                                 "(package.module:function): its module is imported because you "
                                                 "typed it here (plan.json only names a metric; a plan folder never "
                                                 "imports code)"))
    add_measure_arguments(parser)
    add_flags(parser, ("--no-progress",))
    from ._cluster import add_cluster_arguments

    add_cluster_arguments(parser, "the builds and the timing (each comparison's rounds on one GPU)", gpu=True)


def run(args) -> int:
    from ..core.common.write_rule import inside_output
    from ..core.plan.plan_artifact import Plan
    from ..core.plan.plan_export import export_plan
    from ..trt.plan_measure import measure_plan, require_measurable
    from ._cluster import gpu_cluster_of
    from ._plan_folder import plan_state, write_plan_folder

    out = Path(args.plan_dir)
    state = plan_state(out)  # before reading: a plan written after this is never replaced by this one measured
    plan = Plan.load(out)
    # Before any work: the candidates are written into PLAN_DIR/candidates/, never through a link placed there.
    work = inside_output(out, "candidates", "candidates", label=f"the plan folder {out}").parent
    _check(args)
    _register_metric(args.metric, plan)
    check, check_bytes = _engine_check(out, plan)  # bad input first: the check is read before TensorRT is needed
    with gpu_cluster_of(args) as client:
        if client is None:  # else the workers build and time, not this process
            require_measurable("trtwidgets plan measure")
        new = measure_plan(plan, args.model, work_dir=work, check=check, client=client, **measure_keywords(args))
    exported = export_plan(args.model or new.model, new)
    # One set, as `plan` writes it: a kill leaves the earlier plan's files or the measured plan's, never a mix.
    write_plan_folder(new, exported, out, check_bytes, partial=False, expect=state)
    print(new.table())
    from ..core.plan.regions.pick import region_lines

    for line in region_lines(new.regions):
        print(line)
    print(new.reason)
    for n in new.notes:
        print(f"note: {n}")
    from ..core.plan.plan_export import pick_file

    print(f"wrote {out / 'plan.json'}, {out / 'plan.html'}" + (f", {out / pick_file(new)}" if exported else ""))
    if new.measured is not None and new.measured.interrupted:
        print("interrupted: plan.json holds the measurements so far (marked partial)", file=sys.stderr)
        return 130
    return 0


def _register_metric(text, plan) -> None:
    """``--metric``: the plan's own ``package.module:function``, imported because the user typed it."""
    if not text:
        return
    from ..core.accuracy.task_metrics import import_metric, is_function_text
    from ..core.common.errors import UserError

    spec = plan.target.metric_spec
    if text.strip() != spec:
        named = f"names the metric {spec!r}" if spec else "names no metric of its own"
        raise UserError(f"--metric {text} is not the plan's metric: plan.json {named}.",
                        "The engines are judged by the target the candidates were searched with.",
                        f"Give --metric {spec}, or leave --metric out." if spec else "Leave --metric out.")
    if is_function_text(spec):
        import_metric(spec)


def _engine_check(out: Path, plan):
    """The plan folder's held-back check and its bytes, or ``(None, None)`` with a line saying the engines go unjudged."""
    from ..core.plan.engine_check import CHECK_FILE, folder_check

    check, data = folder_check(out, plan)
    if check is None:
        print(f"note: {out / CHECK_FILE} is missing (a plan written before this version): the engines are timed, "
              "not judged on the held-back samples, and implicit INT8 stays a reference; plan again to judge them",
              file=sys.stderr)
    return check, data
