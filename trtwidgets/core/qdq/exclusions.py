"""User exclusions: the nodes a user keeps in high precision (placement rule 7)."""

from __future__ import annotations

import re
from typing import Dict, Iterable, List, Tuple

import onnx

from ..common.errors import UserError
from ..model.onnx_graph import WEIGHTED_OPS
from .graph_patterns import node_label

__all__ = ["QdqExclusionError", "match_exclusions"]


class QdqExclusionError(UserError):
    """An exclusion pattern or op type matches nothing in the model."""



def match_exclusions(graph: onnx.GraphProto, exclude: Iterable[str] = (),
                     exclude_op_types: Iterable[str] = ()) -> Tuple[Dict[int, str], Tuple[str, ...]]:
    """Nodes the user keeps in high precision.

    A pattern matches a node when it equals the node's name or one of its output
    names, or when it is a regular expression that fully matches either.

    Returns
    -------
    (dict, tuple)
        Node index -> why it is excluded, and warnings (op types absent from the model).

    Raises
    ------
    QdqExclusionError
        A name pattern that matches no node, or an op type that is not an ONNX op.
    """
    excluded: Dict[int, str] = {}
    warnings: List[str] = []
    for pattern in exclude:
        try:
            rx = re.compile(pattern)
        except re.error:
            rx = None
        hits = 0
        for i, node in enumerate(graph.node):
            names = [node.name] + [o for o in node.output if o]
            if any(n == pattern or (rx is not None and n and rx.fullmatch(n)) for n in names):
                excluded.setdefault(i, f"excluded by the user (pattern {pattern!r})")
                hits += 1
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
