"""What stays in high precision by choice (placement rule 7): the user's exclusions, and the weighted layers a
plan keeps float (those outside a :class:`~.spec.QdqSpec`'s node set)."""

from __future__ import annotations

import re
from typing import AbstractSet, Dict, Iterable, List, Tuple

import onnx

from ..common.errors import UserError
from ..common.name_patterns import compile_pattern, match_time_limit
from ..model.onnx_graph import WEIGHTED_OPS
from ..model.graph_patterns import node_label

__all__ = ["QdqExclusionError", "match_exclusions", "kept_float_by_plan", "KEPT_BY_PLAN"]

#: The reason a weighted layer outside a spec's node set stays in high precision.
KEPT_BY_PLAN = "kept float by the plan"


class QdqExclusionError(UserError):
    """An exclusion pattern or op type matches nothing in the model."""



def match_exclusions(graph: onnx.GraphProto, exclude: Iterable[str] = (),
                     exclude_op_types: Iterable[str] = ()) -> Tuple[Dict[int, str], Tuple[str, ...]]:
    """Nodes the user keeps in high precision.

    A pattern matches a node when it equals the node's name or one of its output
    names, or when it is a regular expression that fully matches either. A pattern
    that backtracks without bound (``(a+)+$``) is refused before matching, and the
    matching of one pattern is stopped after a time limit
    (:mod:`~trtwidgets.core.common.name_patterns`).

    Returns
    -------
    (dict, tuple)
        Node index -> why it is excluded, and warnings (op types absent from the model).

    Raises
    ------
    QdqExclusionError
        A name pattern that matches no node, one that would backtrack without bound or take too
        long, or an op type that is not an ONNX op.
    """
    excluded: Dict[int, str] = {}
    warnings: List[str] = []
    for pattern in exclude:
        hits = _match_names(graph, pattern, excluded)
        if not hits:
            examples = [node_label(n) for n in graph.node if n.op_type in WEIGHTED_OPS][:5]
            raise QdqExclusionError(
                f"The exclusion {pattern!r} matches no node of the model.",
                "A pattern is compared with node names and output tensor names, exactly or as a regular expression "
                "(re.fullmatch)." + (f" Weighted nodes look like: {', '.join(examples)}." if examples else ""),
                "Fix the spelling, or use a regular expression such as 'conv5_.*' (quote it in a shell).")
    present = {n.op_type for n in graph.node}
    for op in exclude_op_types:
        if op not in present:
            if not onnx.defs.has(op):
                raise QdqExclusionError(
                    f"{op!r} is not an ONNX operator type.",
                    f"The model's op types are: {', '.join(sorted(present))}.",
                    "Op types are case sensitive, e.g. Conv, MatMul, Gemm, ConvTranspose.")
            warnings.append(f"op type {op} excluded but not present in the model")
            continue
        for i, node in enumerate(graph.node):
            if node.op_type == op:
                excluded.setdefault(i, f"excluded by the user (op type {op})")
    return excluded, tuple(warnings)


def kept_float_by_plan(graph: onnx.GraphProto, nodes: AbstractSet[str]) -> Dict[int, str]:
    """Node index -> :data:`KEPT_BY_PLAN` for each weighted layer whose label is not in ``nodes``.

    ``nodes`` are node labels (:func:`~..model.graph_patterns.node_label`: the name, or ``Op(output)``) of the
    weighted layers to run in INT8, as a plan's candidates hold them.

    Raises
    ------
    QdqExclusionError
        A label the model has no node for, or the label of a node that is not a weighted layer.
    """
    labels = {node_label(n): n for n in graph.node}
    missing = sorted(n for n in nodes if n not in labels)
    unweighted = sorted(n for n in nodes if n in labels and labels[n].op_type not in WEIGHTED_OPS)
    if missing or unweighted:
        examples = [node_label(n) for n in graph.node if n.op_type in WEIGHTED_OPS][:5]
        what = (f"{len(missing)} layer{'s' if len(missing) != 1 else ''} the model does not have "
                f"({', '.join(map(repr, missing[:5]))}{' ...' if len(missing) > 5 else ''})" if missing else "")
        if unweighted:
            shown = ", ".join(f"{n!r} ({labels[n].op_type})" for n in unweighted[:5])
            what += ("; and " if what else "") + f"nodes that are not weighted layers ({shown})"
        raise QdqExclusionError(
            f"The layers to quantize name {what}.",
            f"A Q/DQ spec's nodes are the weighted layers ({', '.join(WEIGHTED_OPS)}) to run in INT8, by node "
            "label (the node's name, or Op(output) for an unnamed node), as a plan's candidates hold them"
            + (f"; this model's look like: {', '.join(examples)}." if examples else "; this model has none."),
            "Use the plan made for this model (a plan of another model names other layers), or labels from "
            "report.quantized_layers of this model's export.")
    return {i: KEPT_BY_PLAN for i, n in enumerate(graph.node)
            if n.op_type in WEIGHTED_OPS and node_label(n) not in nodes}


def _match_names(graph: onnx.GraphProto, pattern: str, excluded: Dict[int, str]) -> int:
    """Mark the nodes ``pattern`` names; returns how many.

    A pattern that is the name of a node or output is that name: it is never run as a regular expression
    (``conv(1)+`` may be a node's name, and a name is no expression to check). Otherwise it is a regular
    expression, checked (:func:`~..common.name_patterns.compile_pattern`) and matched in bounded time.
    """
    why = f"excluded by the user (pattern {pattern!r})"
    names = [(i, [node.name] + [o for o in node.output if o]) for i, node in enumerate(graph.node)]
    exact = [i for i, ns in names if pattern in ns]
    for i in exact:
        excluded.setdefault(i, why)
    if exact:
        return len(exact)
    rx = compile_pattern(pattern, "exclusion pattern", QdqExclusionError)
    if rx is None or re.escape(pattern) == pattern:
        return 0  # no regular expression, or one that only matches itself: the names were compared
    hits = set()
    with match_time_limit(pattern, "exclusion pattern", QdqExclusionError):
        for i, ns in names:
            if i not in hits and any(n and rx.fullmatch(n) for n in ns):
                excluded.setdefault(i, why)
                hits.add(i)
    return len(hits)
