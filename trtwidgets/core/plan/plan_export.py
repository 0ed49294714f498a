"""Writing a plan's pick: the Q/DQ model of a candidate, exported with the options it was scored with.

The float candidate of the rewritten graph (``Candidate.rewritten``) is written too: the float model with the
plan's exact rewrites applied and its float part as the export writes it (the ``keep_fp32`` island kept FP32), the
same export with no layer in INT8, so it is the graph the Q/DQ candidates were compared against.
"""

from __future__ import annotations

import numbers
import os
from typing import Optional, Union

from ..common.errors import UserError
from ..qdq.options import QdqOptions
from .plan_artifact import Plan

__all__ = ["export_plan", "PLAN_FILES", "PLANNER_PLACEMENT", "QDQ_FILE", "REWRITTEN_FILE", "pick_file"]

#: The placement the planner decides itself: matrix-vector layers are left to the cost model and the
#: accuracy search (which know the planned batch), not to placement rule 5 (the model's static shapes).
PLANNER_PLACEMENT = {"skip_matrix_vector": False}


#: The files of a plan folder, replaced as one set (:func:`trtwidgets.core.common.file_set.replace_file_set`).
PLAN_FILES = ("plan.json", "plan.html", "model.qdq.onnx", "model.rewritten.onnx", "held_back.npz")
#: A plan folder's pick when it quantizes layers: the Q/DQ model.
QDQ_FILE = "model.qdq.onnx"
#: A plan folder's pick when it is FP16 of the rewritten graph: a float model (no Q/DQ), built with FP16.
REWRITTEN_FILE = "model.rewritten.onnx"


def pick_file(plan: Plan) -> str:
    """The file name a plan folder holds its pick's model under: :data:`REWRITTEN_FILE` or :data:`QDQ_FILE`."""
    return REWRITTEN_FILE if plan.pick is not None and plan.pick.rewritten else QDQ_FILE


def export_plan(model, plan: Union[Plan, str, os.PathLike], out_path: Union[str, os.PathLike, None] = None, *,
                candidate: Optional[int] = None):
    """The Q/DQ model of a plan's candidate (default: the recommended one), exported as it was scored.

    The candidate "FP16 (rewritten graph)" (``Candidate.rewritten``) is written as the float model with the plan's
    exact rewrites applied, its float part as every candidate's (the plan's ``keep_fp32`` island kept FP32), and
    no Q/DQ node: build it with FP16.

    Write the pick to disk::

        plan = tw.plan(model, "samples/", held_back="heldback/", calibration=cal)
        if tw.export_plan(model, plan, "model.qdq.onnx") is None:
            print(plan.reason)            # FP16 is the pick: nothing was written

    Parameters
    ----------
    model : path, onnx.ModelProto or LoadedModel
        The float model the plan was made for.
    plan : Plan, or the path of a plan folder or plan.json (read with :meth:`Plan.load`)
    out_path : path, optional
        Where to write the model (atomically); nothing is written when None or when the candidate is FP16 of
        the graph as given (or FP16 with an FP32 island).
    candidate : int, optional
        Index in the plan's table (0 is FP16).

    Returns
    -------
    QdqExport or None
        None when the candidate quantizes nothing and is not the rewritten graph's (FP16 is best): there is no
        model to write. For the rewritten graph's FP16, an export without Q/DQ (``report.rewrites`` says what
        changed, ``report.quantized_layers`` is empty).

    Raises
    ------
    UserError
        No ``candidate`` given and the plan recommends none (no candidate meets its target, FP16 included).
    """
    from ..qdq.export import build_qdq
    from ..model.load import as_loaded
    from ..qdq.spec import QdqSpec

    plan_input = plan  # the plan as given: a path is an input the output must not replace
    if isinstance(plan, (str, os.PathLike)):
        plan = Plan.load(plan)
    elif not isinstance(plan, Plan):
        raise UserError(f"export_plan takes a Plan, not a {type(plan).__name__}.",
                        "A plan is checked once, as it is made or loaded; its data alone is not.",
                        "Pass the Plan (tw.plan(...)), Plan.load(path) / the path itself, or Plan.from_dict(data).")
    if candidate is None and plan.recommended is None:
        raise UserError("The plan recommends nothing: no candidate meets its target, not even FP16.",
                        plan.reason or "Every candidate, FP16 included, misses the target on the held-back samples.",
                        "Export a candidate anyway by its index (candidate=N, `plan export --candidate N`), keep the "
                        "nodes that break the float part in FP32 (--keep-fp32), or plan again with another target.")
    idx = plan.recommended if candidate is None else _index(candidate)
    assert idx is not None, "refused above"
    if not 0 <= idx < len(plan.candidates):
        raise UserError(f"The plan has no candidate {idx}.", f"It has {len(plan.candidates)}.",
                        "Give an index from the plan's table (0 is FP16).")
    opts = plan.options.replace(**PLANNER_PLACEMENT)
    loaded = as_loaded(model)
    source = str(plan_input) if plan_input is not plan else "the plan"
    # Another model's plan, and ranges that cannot be scales, are refused before anything is built or written.
    amax = _plan_amax(loaded, plan, source, opts)
    cand = plan.candidates[idx]
    if not cand.quantized and not cand.rewritten:
        return None
    # The candidate is its node set: its layers in INT8, every other weighted layer kept float by the plan. The
    # rewritten graph's FP16 is the empty set: the same export (rewrites, opset, float part, island), no Q/DQ.
    spec = QdqSpec(amax, opts, nodes=frozenset(cand.quantized), source=f"the ranges of {source}, candidate {idx}",
                   choices=dict(cand.choices), zero=frozenset(plan.ranges.zero))
    result = build_qdq(loaded.proto, spec)
    if out_path is not None:
        from ..common.write_rule import refuse_inputs
        from ..qdq.export import save_qdq_model

        refuse_inputs(out_path, {"the model": model, "the plan": plan_input}, f"out_path {os.fspath(out_path)}")
        save_qdq_model(result, out_path)
    return result


def _index(candidate) -> int:
    if isinstance(candidate, bool) or not isinstance(candidate, numbers.Integral):
        raise UserError(f"candidate={candidate!r} is not an index.", "Candidates are numbered in the plan's table.",
                        "Give a whole number (0 is FP16).")
    return int(candidate)


def _plan_amax(loaded, plan: Plan, source: str, opts: QdqOptions):
    """The plan's amax, checked: recorded for this model (fingerprint, tensor names), every value a usable scale."""
    from ..calibration.fingerprint import check_ranges_fit
    from ..common.notes import note
    from ..qdq.range_sources import checked_amax

    # The tensors that were zero on every sample are the model's, without a range: not another model's names.
    for text in check_ranges_fit(loaded, list(plan.ranges.amax) + list(plan.ranges.zero), source, "plan",
                                 plan.fingerprint):
        note(text)
    return checked_amax(dict(plan.ranges.amax), f"{source} (ranges.amax)", opts)
