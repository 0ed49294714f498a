"""Writing a plan's pick: the Q/DQ model of a candidate, exported with the options it was scored with."""

from __future__ import annotations

import numbers
import os
from typing import Any, Mapping, Optional, Union

from ..common.errors import UserError
from ..qdq.options import QdqOptions
from .plan_check import check_plan_doc
from .plan_values import Plan

__all__ = ["export_plan", "plan_options", "PLANNER_PLACEMENT"]

#: The placement the planner decides itself: matrix-vector layers are left to the cost model and the
#: accuracy search (which know the planned batch), not to placement rule 5 (the model's static shapes).
PLANNER_PLACEMENT = {"skip_matrix_vector": False}


def plan_options(doc: Mapping[str, Any]) -> QdqOptions:
    """The options a plan's candidates were scored with (a plan.json older than ``options``: its own fields).

    Raises
    ------
    UserError
        The plan's placement or options are not what the planner writes.
    """
    recorded = doc.get("options")
    if recorded:
        if not isinstance(recorded, Mapping):
            raise UserError("The plan's options are not what the planner writes.",
                            f"plan.json has options {recorded!r}; it should be an object of Q/DQ options.",
                            "Run the planner again, or restore the plan.json it wrote.")
        return QdqOptions.from_dict(recorded).replace(**PLANNER_PLACEMENT)
    placement = doc.get("placement") or {}
    if not isinstance(placement, Mapping) or not isinstance(placement.get("dense_int8", False), bool):
        raise UserError("The plan's placement is not what the planner writes.",
                        f"plan.json has placement {placement!r}; it should be {{\"dense_int8\": true}} or false.",
                        "Run the planner again, or restore the plan.json it wrote.")
    # Before options were recorded, a plan without placement was scored with rules 1-7.
    return QdqOptions(high_precision=doc.get("high_precision") or "fp32", trt_version=doc.get("trt_version") or None,
                      dense_int8=bool(placement.get("dense_int8", False)), **PLANNER_PLACEMENT)


#: The files of a plan folder, replaced as one set (:func:`trtwidgets.core.common.file_set.replace_file_set`).
PLAN_FILES = ("plan.json", "plan.html", "model.qdq.onnx", "held_back.npz")


def export_plan(model, plan_: Union[Plan, Mapping, str, os.PathLike], out_path: Union[str, os.PathLike, None] = None,
                *, candidate: Optional[int] = None):
    """The Q/DQ model of a plan's candidate (default: the recommended one), exported as it was scored.

    Write the pick to disk::

        plan = tw.plan(model, "samples/", held_back="heldback/", calibration=cal)
        if tw.export_plan(model, plan, "model.qdq.onnx") is None:
            print(plan.reason)            # FP16 is the pick: nothing was written

    Parameters
    ----------
    model : path, onnx.ModelProto or LoadedModel
        The float model the plan was made for.
    plan_ : Plan, a plan.json's data (:func:`~.plan_values.load_plan`), or the path of a plan.json
    out_path : path, optional
        Where to write the Q/DQ model (atomically); nothing is written when None or when
        the candidate is FP16.
    candidate : int, optional
        Index in the plan's table (0 is FP16).

    Returns
    -------
    QdqExport or None
        None when the candidate quantizes nothing (FP16 is best): there is no Q/DQ model to write.
    """
    from ..qdq.export import build_qdq
    from ..qdq.range_sources import as_loaded
    from ..qdq.graph_patterns import node_label
    from .plan_eval import exclusion_key

    plan_input = plan_  # the plan as given: a path is an input the output must not replace
    source = "the plan given"
    if isinstance(plan_, (str, os.PathLike)):
        from .plan_values import load_plan

        source = str(plan_)
        plan_ = load_plan(plan_)
    doc = check_plan_doc(plan_.to_dict() if isinstance(plan_, Plan) else plan_, source)
    idx = doc["recommended"] if candidate is None else _index(candidate)
    if not 0 <= idx < len(doc["candidates"]):
        raise UserError(f"The plan has no candidate {idx}.", f"It has {len(doc['candidates'])}.",
                        "Give an index from the plan's table (0 is FP16).")
    opts = plan_options(doc)
    loaded = as_loaded(model)
    # Another model's plan, and ranges that cannot be scales, are refused before anything is built or written.
    amax = _plan_amax(loaded, doc, source, opts)
    cand = doc["candidates"][idx]
    if not cand["quantized"]:
        return None
    proto = loaded.proto
    quantized = set(cand["quantized"])
    weighted = [n for n in proto.graph.node if n.op_type in ("Conv", "ConvTranspose", "MatMul", "Gemm")]
    exclude = [exclusion_key(n) for n in weighted if node_label(n) not in quantized]
    result = build_qdq(proto, amax, opts, exclude=tuple(opts.exclude) + tuple(exclude))
    if out_path is not None:
        from ..common.write_rule import refuse_inputs
        from ..qdq.export import save_qdq_model

        refuse_inputs(out_path, {"the model": model, "the plan": plan_input}, f"out_path {os.fspath(out_path)}")
        save_qdq_model(result.model, out_path, reference=result.float32_model)
    return result


def _index(candidate) -> int:
    if isinstance(candidate, bool) or not isinstance(candidate, numbers.Integral):
        raise UserError(f"candidate={candidate!r} is not an index.", "Candidates are numbered in the plan's table.",
                        "Give a whole number (0 is FP16).")
    return int(candidate)


def _plan_amax(loaded, doc: Mapping[str, Any], source: str, opts: QdqOptions):
    """The plan's amax, checked: recorded for this model (fingerprint, tensor names), every value a usable scale."""
    from ..calibration.fingerprint import ModelFingerprint, check_ranges_fit
    from ..common.notes import note
    from ..qdq.range_sources import checked_amax

    recorded = ModelFingerprint.from_dict(doc["fingerprint"], source) if doc.get("fingerprint") else None
    for text in check_ranges_fit(loaded, doc["ranges"]["amax"], source, "plan", recorded):
        note(text)
    return checked_amax(doc["ranges"]["amax"], f"{source} (ranges.amax)", opts)
