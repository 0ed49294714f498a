"""``trtwidgets plan export PLAN_DIR --out FILE``: write a plan's candidate as a Q/DQ model.

The recommended candidate by default, or ``--candidate N`` (its index in the plan's table;
0 is FP16), exported from the float model exactly as the planner scored it: the plan's ranges
and Q/DQ options (:func:`trtwidgets.core.plan.plan_export.export_plan`, what ``tw.export_plan``
calls). The float model is the one plan.json names, or ``--model PATH``; a model the plan was not
made for is refused (its fingerprint and tensor names). A candidate that quantizes nothing (FP16)
has no Q/DQ model: nothing is written and the line says so. The candidate "FP16 (rewritten graph)" is
written as the float model with the plan's exact graph rewrites (no Q/DQ; build it with FP16).

Also spelled ``trtwidgets plan-export``. Exit 0 when written (or when the candidate is FP16), 2 on bad
input.
"""

from __future__ import annotations

import sys
from pathlib import Path

NAME = "plan-export"
OUTPUTS = {"out": "file"}
HELP = "write a plan's pick (or --candidate N) as a Q/DQ model (also: plan export PLAN_DIR --out FILE)"
DESCRIPTION = __doc__


def add_arguments(parser):
    parser.add_argument("plan_dir", help="the folder `trtwidgets plan --out` wrote (or its plan.json)")
    parser.add_argument("--candidate", type=int, help="the candidate's index in the plan's table (default: the "
                        "recommended one, refused when the plan recommends none; 0 is FP16)")
    parser.add_argument("--model", help="the float model (default: the path in plan.json)")
    parser.add_argument("--out", required=True, help="the Q/DQ .onnx model to write")


def run(args) -> int:
    import os

    from ..core.common.errors import UserError
    from ..core.plan.plan_artifact import PLAN_FILE, Plan
    from ..core.plan.plan_export import export_plan

    source = Path(args.plan_dir)
    plan_file = source / PLAN_FILE if source.is_dir() else source
    plan = Plan.load(plan_file)
    model = args.model or plan.model
    if not model or not os.path.isfile(os.path.expanduser(model)):
        raise UserError(f"The plan's float model is not at {model or '(no path in plan.json)'}.",
                        "A candidate is exported from the float model it was planned for.",
                        "Give the float model's path: --model PATH.")
    from ..core.common.write_rule import refuse_inputs
    from ..core.plan.plan_export import PLAN_FILES

    refuse_inputs(args.out, {"the plan": plan_file, "the model": model}, "--out")
    out = Path(os.path.expanduser(args.out))
    if out.name in PLAN_FILES and os.path.realpath(out.parent) == os.path.realpath(plan_file.parent):
        raise UserError(f"--out {args.out} is a file of the plan folder.",
                        "A plan folder's files are one set that `plan` and `plan measure` write together; another "
                        "candidate written over its model.qdq.onnx would no longer be what plan.json recommends.",
                        f"Write the candidate elsewhere, e.g. --out candidate{args.candidate or 'N'}.qdq.onnx.")
    exported = export_plan(model, plan_file, args.out, candidate=args.candidate)  # the file: messages name it
    index = plan.recommended if args.candidate is None else args.candidate
    assert index is not None, "export_plan refuses a plan that recommends nothing"

    cand = plan.candidates[index]
    if not cand.meets_target:
        print(f"note: candidate {index} ({cand.name}) misses the plan's target: {plan.target.describe()}",
              file=sys.stderr)
    if exported is None:
        kept = " (the file already there is from before)" if os.path.lexists(args.out) else ""
        print(f"candidate {index} ({cand.name}) quantizes nothing: no Q/DQ model to write, {args.out} was not "
              f"written{kept}. Build the float model with FP16.", file=sys.stderr)
        return 0
    if cand.rewritten:
        print(f"wrote {args.out}: candidate {index} ({cand.name}), the float model with "
              f"{len(exported.report.rewrites)} exact graph rewrites and no Q/DQ: build it with FP16")
        return 0
    print(f"wrote {args.out}: candidate {index} ({cand.name}), {len(exported.report.quantized_layers)} INT8 layers")
    return 0
