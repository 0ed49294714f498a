"""Placement schemes per repeated pattern: what can be chosen at each region, as values the export understands.

For every pattern of :func:`~trtwidgets.core.qdq.repeated_patterns.find_regions` that the base node set quantizes,
the schemes are (the default, the placement rules' own answer, first):

* ``residual``: ``"skip"`` (rule 2: the shortcut read quantized, the add fused into the conv) and
  ``"both"`` (both Add inputs read quantized: the conv keeps its SiLU/HardSwish and writes INT8);
* ``concat``: ``"shared"`` (rule 9: the Concat and its Split/MaxPool/Resize feeders move INT8 at one
  scale) and ``"float"`` (they read float);
* ``branch``: ``"int8"`` (every branch as the node set says) and ``"float:k"`` (the k-th branch of every
  instance, in canonical order, kept float: which branch stays float).

A scheme is applied to every instance of its pattern; its choices are node label -> choice
(:mod:`~trtwidgets.core.qdq.region_choices`), its float layers a change of the node set. Whether TensorRT
8.6 can build a scheme is decided by the export's own rule 12 (:mod:`~trtwidgets.core.qdq.sibling_layers`):
a scheme whose export had to keep more layers float than the base export did is not buildable as it is
and is never timed nor chosen (:func:`scheme_export`).
"""

from __future__ import annotations

from typing import AbstractSet, Dict, List, Mapping, Optional, Sequence, Tuple

import onnx

from ...model.graph_patterns import ConstIndex, node_key, node_label
from ...qdq.region_choices import BOTH, FLOAT, SKIP
from ...qdq.repeated_patterns import RegionPattern, find_regions
from ...qdq.residual_adds import default_choice, fused_branch
from .records import PatternRecord, SchemeResult

__all__ = ["SCHEME_KINDS", "combined_choices", "pattern_records", "rule12_layers", "scheme_export"]

#: The region kinds whose schemes the search tries (gates have one answer: rules 5, 6 and 8 decide them).
SCHEME_KINDS = ("residual", "concat", "branch")


def _residual(pattern: RegionPattern, graph: onnx.GraphProto, index: ConstIndex, pos, nodes) -> List[SchemeResult]:
    by_label = {node_label(n): n for n in graph.node}
    anchors, default = [], None
    for inst in pattern.instances:
        found = fused_branch(index, pos, by_label[inst.anchor], {})
        if found is None or node_label(found[1]) not in nodes:
            continue
        anchors.append(inst.anchor)
        default = default or default_choice(index, by_label[inst.anchor].input[found[0]])
    if not anchors or default is None:
        return []
    other = BOTH if default == SKIP else SKIP
    return [SchemeResult(default, default=True), SchemeResult(other, tuple((a, other) for a in anchors))]


def _concat(pattern: RegionPattern, quantized_reads: AbstractSet[str]) -> List[SchemeResult]:
    joins = [j for inst in pattern.instances if any(j in quantized_reads for j in inst.joins) for j in inst.joins]
    if not joins:
        return []
    return [SchemeResult("shared", default=True), SchemeResult(FLOAT, tuple((j, FLOAT) for j in joins))]


def _branch(pattern: RegionPattern, nodes: AbstractSet[str]) -> List[SchemeResult]:
    count = max(len(inst.branches) for inst in pattern.instances)
    quantized = [k for k in range(count)
                 if any(k < len(i.branches) and set(i.branches[k]) & nodes for i in pattern.instances)]
    if len(quantized) < 2:
        return []
    out = [SchemeResult("int8", default=True)]
    for k in quantized:
        layers = tuple(x for i in pattern.instances if k < len(i.branches) for x in i.branches[k] if x in nodes)
        out.append(SchemeResult(f"float:{k}", float_layers=layers))
    return out


def pattern_records(proto: onnx.ModelProto, nodes: AbstractSet[str], quantized_reads: AbstractSet[str],
                    kinds: Sequence[str] = SCHEME_KINDS,
                    shapes: Optional[Mapping[str, Tuple[int, ...]]] = None) -> List[PatternRecord]:
    """Each pattern with more than one scheme over the node set ``nodes`` (not yet scored or timed).

    Parameters
    ----------
    proto : onnx.ModelProto
        The float model (at the opset the export writes: node labels as candidates hold them).
    nodes : set of str
        The base node set (weighted layers in INT8) the schemes change.
    quantized_reads : set of str
        Labels of the nodes without weights that the base export reads quantized (rules 2, 3, 8, 9).
    kinds : sequence of str
    shapes : mapping, optional
        Tensor -> shape at the plan's batch (real shapes); the representative instance is the one whose
        inputs are of the median size (:func:`_representative`), and its inputs' shapes are recorded.
    """
    graph = proto.graph
    index = ConstIndex(graph)
    pos = {node_key(n): i for i, n in enumerate(graph.node)}
    shapes = shapes or {}
    out: List[PatternRecord] = []
    for p in find_regions(proto, tuple(k for k in kinds if k in SCHEME_KINDS)):
        schemes = (_residual(p, graph, index, pos, nodes) if p.kind == "residual" else
                   _concat(p, quantized_reads) if p.kind == "concat" else _branch(p, nodes))
        if len(schemes) < 2:
            continue
        rep = _representative(p, shapes)
        out.append(PatternRecord(p.name, p.kind, p.description, tuple(i.anchor for i in p.instances), rep.anchor,
                                 tuple((t, tuple(shapes[t])) for t in rep.inputs if t in shapes), tuple(schemes)))
    return out


def _representative(pattern: RegionPattern, shapes: Mapping[str, Tuple[int, ...]]):
    """The instance whose inputs are of the median size among the pattern's (the upper median; graph order breaks
    ties). Not the largest: a pattern's extremes are its least typical instances (docs/evidence.md, "regions").
    """
    order = sorted(range(len(pattern.instances)),
                   key=lambda k: (sum(_volume(shapes.get(t)) for t in pattern.instances[k].inputs), k))
    return pattern.instances[order[len(order) // 2]]


def _volume(shape) -> int:
    if not shape:
        return 0
    n = 1
    for d in shape:
        n *= max(int(d), 1)
    return n


def rule12_layers(report) -> Tuple[str, ...]:
    """The layers an export's report kept float by placement rule 12."""
    return tuple(s.node_label for s in report.skipped if s.rule == 12)


def scheme_export(build, nodes: AbstractSet[str], scheme: SchemeResult, base_rule12: Sequence[str] = ()):
    """``(export, buildable, note)``: the whole model with ``scheme`` on every instance of its pattern.

    ``build(nodes, choices)`` writes a Q/DQ export (:func:`~trtwidgets.core.qdq.export.build_qdq` with the
    plan's ranges and options). A scheme is buildable when the export kept no more layers float by rule 12
    than ``base_rule12`` (the base export's): otherwise TensorRT 8.6 could not have built it as it is.
    """
    ex = build(frozenset(nodes) - set(scheme.float_layers), dict(scheme.choices))
    extra = sorted(set(rule12_layers(ex.report)) - set(base_rule12))
    if extra:
        return ex, False, (f"TensorRT 8.6 cannot build it as it is (placement rule 12 keeps {', '.join(extra[:4])}"
                           f"{' ...' if len(extra) > 4 else ''} float): not timed, not chosen")
    return ex, True, ""


def combined_choices(records: Sequence[PatternRecord], chosen: Mapping[str, str]
                     ) -> Tuple[Dict[str, str], Tuple[str, ...]]:
    """``(choices, float layers)`` of the scheme ``chosen[pattern name]`` of each pattern, together."""
    choices: Dict[str, str] = {}
    floats: List[str] = []
    for rec in records:
        s = rec.scheme(chosen.get(rec.name, "")) if rec.name in chosen else None
        if s is None:
            continue
        choices.update(dict(s.choices))
        floats.extend(s.float_layers)
    return choices, tuple(dict.fromkeys(floats))
