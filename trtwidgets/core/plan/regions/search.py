"""The CPU half of the region search: each pattern's schemes scored on the held-back samples, as the planner scores.

:func:`score_regions` takes a finished Plan (its held-back check carries the samples, FP32's outputs and
the target), finds the model's repeated patterns over the base candidate's node set
(:func:`~.schemes.pattern_records`), and scores every non-default scheme: the whole model with the
scheme on every instance, exported with the plan's ranges and options and run in ONNX Runtime on the
held-back samples (:class:`~trtwidgets.core.plan.plan_eval.Evaluator`), judged by the plan's target. A
scheme TensorRT 8.6 cannot build as it is (rule 12) is marked so. The GPU half,
:mod:`trtwidgets.trt.region_measure`, times each scheme's sub-model and picks.
"""

from __future__ import annotations

import dataclasses
from typing import AbstractSet, List, Optional, Sequence

import onnx

from ...common.errors import UserError
from ..judge import Judge
from ..plan_artifact import Plan
from .records import PatternRecord, RegionSearch, SchemeResult
from .schemes import SCHEME_KINDS, pattern_records, rule12_layers, scheme_export

__all__ = ["base_candidate", "quantized_reads", "score_regions"]


def base_candidate(plan: Plan) -> Optional[int]:
    """The candidate whose node set the schemes change: the pick when it quantizes, else the first INT8
    candidate that meets the target (the all-INT8 export); None when no INT8 candidate meets it."""
    if plan.pick is not None and plan.pick.quantized:
        return plan.recommended
    return next((i for i, c in enumerate(plan.candidates) if c.quantized and c.meets_target), None)


def quantized_reads(proto: onnx.ModelProto, plan: Plan, nodes: AbstractSet[str]) -> AbstractSet[str]:
    """Labels of the nodes without weights that the export of ``nodes`` reads quantized."""
    from ...qdq.placement import place_qdq
    from ...model.onnx_graph import WEIGHTED_OPS

    o = plan.options
    placed = place_qdq(proto, nodes=frozenset(nodes), exclude=o.exclude, exclude_op_types=o.exclude_op_types,
                      skip_matrix_vector=False, keep_float_output_grouped_convs=o.keep_float_output_grouped_convs,
                      dense_int8=o.dense_int8, trt_version=o.trt_version)
    return {e.node_label for e in placed.edges if e.op_type not in WEIGHTED_OPS}


def _evaluator(proto: onnx.ModelProto, plan: Plan):
    from ..plan_eval import Evaluator

    check = plan.engine_check
    if check is None:
        raise ValueError("a region search needs the plan's held-back samples")
    target = check.target
    if target is not None and target.metric is not None:
        target = dataclasses.replace(target, metric_reference=check.metric_reference)
    return Evaluator(proto, [dict(f) for f in check.feeds], dict(check.outputs), options=plan.options,
                     target=target, axes=check.axes, batch=1)


def _shapes(proto: onnx.ModelProto, plan: Plan, names: Sequence[str], notes: List[str]):
    from .shapes import real_shapes

    check = plan.engine_check
    if check is None or not check.feeds or not names:
        return {}
    axes = plan.batch_axes.inputs if plan.batch_axes is not None else None
    shapes, more = real_shapes(proto, names, check.feeds[0], plan.input_shapes, axes)
    notes.extend(more)
    return shapes


def score_regions(plan: Plan, model, kinds: Sequence[str] = SCHEME_KINDS, progress: bool = False,
                  use_ort: bool = True) -> Plan:
    """The plan with its region search (``plan.regions``): patterns, schemes, each scheme's accuracy.

    Parameters
    ----------
    plan : Plan
        A plan with its held-back check (``plan.engine_check``: a plan made here, or loaded with its
        ``held_back.npz``); without one the schemes are not scored (the engines are judged on the GPU).
    model : path, onnx.ModelProto or LoadedModel
        The float model.
    kinds : sequence of str
        Region kinds to search (:data:`~.schemes.SCHEME_KINDS`).
    progress : bool
        A line per scheme on stderr.
    use_ort : bool
        False where ONNX Runtime is not at hand (a GPU machine's ``plan measure``): the schemes are not
        scored (the engine check judges the combined engine) and the shapes are shape inference's.
    """
    from ...model.load import as_model_proto

    base = base_candidate(plan)
    if base is None or plan.interrupted:
        return plan
    proto = as_model_proto(model)
    nodes = frozenset(plan.candidates[base].quantized)
    notes: List[str] = []
    reads = quantized_reads(proto, plan, nodes)
    first = pattern_records(proto, nodes, reads, kinds)
    wanted = [t for r in first for t in _rep_inputs(proto, r)]
    if use_ort:
        shapes = _shapes(proto, plan, wanted, notes)
    else:
        from ..cost_model import static_shapes

        shapes = {t: s for t, s in static_shapes(proto, plan.input_shapes).items() if t in set(wanted)}
        notes.append("the regions' input shapes come from shape inference (no ONNX Runtime here)")
    records = pattern_records(proto, nodes, reads, kinds, shapes) if shapes else first
    if plan.engine_check is not None and use_ort:
        records = _scored(proto, plan, nodes, records, progress)
    else:
        notes.append("the schemes are not scored in ONNX Runtime (no held-back samples or no ONNX Runtime here); "
                     "the engine check judges the combined candidate")
    search = RegionSearch(base, tuple(records), notes=tuple(notes))
    return dataclasses.replace(plan, regions=search)


def _rep_inputs(proto: onnx.ModelProto, rec: PatternRecord) -> List[str]:
    """Every instance's inputs (the representative is chosen by their real sizes)."""
    from ...qdq.repeated_patterns import find_regions

    for p in find_regions(proto, (rec.kind,)):
        if p.name == rec.name:
            return [t for i in p.instances for t in i.inputs]
    return []


def _scored(proto: onnx.ModelProto, plan: Plan, nodes: AbstractSet[str], records: Sequence[PatternRecord],
            progress: bool) -> List[PatternRecord]:
    import sys

    ev = _evaluator(proto, plan)
    target = plan.engine_check.target if plan.engine_check is not None else None
    judge = Judge(target) if target is not None else None
    amax = dict(plan.ranges.amax)
    base = base_candidate(plan)
    assert base is not None, "a region search starts from an INT8 candidate"
    base_cand = plan.candidates[base]

    def build(layers, choices):
        return ev.export(amax, layers, choices=choices)

    base_rule12 = rule12_layers(build(nodes, {}).report)
    out: List[PatternRecord] = []
    for rec in records:
        schemes: List[SchemeResult] = []
        for s in rec.schemes:
            if s.default:
                schemes.append(dataclasses.replace(s, accuracy=base_cand.accuracy, meets_target=base_cand.meets_target,
                                                   note="the base candidate's own placement"))
                continue
            try:
                ex, ok, note = scheme_export(build, nodes, s, base_rule12)
            except UserError as err:  # a choice this model's export cannot apply (a label its opset copy renamed)
                schemes.append(dataclasses.replace(s, buildable=False, note=f"the export refused it: {err.what}"))
                continue
            acc = ev.score_model(ex.model) if ok else None
            meets = judge.meets(acc) if (judge is not None and acc is not None) else None
            schemes.append(dataclasses.replace(s, accuracy=acc, meets_target=meets, buildable=ok, note=note))
            if progress:
                print(f"[regions] {rec.name} {s.scheme}: "
                      + (f"cosine {acc.cosine:.4f}" + (f", metric {acc.metric:.4f}" if acc.metric is not None else "")
                         if acc is not None else note), file=sys.stderr, flush=True)
        out.append(dataclasses.replace(rec, schemes=tuple(schemes)))
    return out
