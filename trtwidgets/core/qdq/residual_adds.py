"""Placement rule 2, residual adds: which inputs of ``Add(conv branch, shortcut)`` are read quantized.

``"skip"`` quantizes the shortcut only: TensorRT fuses the add into the convolution of the other branch
(its epilogue reads the shortcut in INT8). ``"both"`` quantizes both inputs: the convolution writes INT8
after its own epilogue and the add runs as an INT8 point-wise layer. Which one a residual Add gets is
its placement choice (:mod:`.region_choices`), else the rule's default (:func:`default_choice`).
"""

from __future__ import annotations

from typing import Callable, Dict, List, Mapping, Optional, Set, Tuple

import onnx

from ..model.onnx_graph import GraphIndex
from .fusions import fused_conv, gated_branch, longer_branch
from ..model.graph_patterns import node_key, node_label
from .placement_records import QuantEdge, Skip
from .region_choices import BOTH, FLOAT, SKIP

__all__ = ["default_choice", "fused_branch", "place_residual_adds"]


def default_choice(index: GraphIndex, branch: str) -> str:
    """Rule 2's own answer for an add whose fused branch writes ``branch``: ``"both"`` when the branch ends in a
    gated activation (SiLU, HardSwish), else ``"skip"``.

    After a gated activation, quantizing both inputs lets the conv keep its activation and write INT8;
    after a linear or BN branch the add fuses into the conv with the shortcut alone quantized.
    Evidence: docs/placement.md, "Rule 2's two schemes".
    """
    return BOTH if gated_branch(index, branch) else SKIP


def fused_branch(index: GraphIndex, pos: Dict[tuple, int], node: onnx.NodeProto,
                 excluded: Mapping[int, str]) -> Optional[Tuple[int, onnx.NodeProto]]:
    """``(input index, convolution)`` of the branch of a residual ``Add`` that fuses into a convolution, or None.

    When both branches are such convolutions the one on the longer path from their lowest common ancestor is
    fused (as ModelOpt does) and the shorter, the shortcut, is the other input.
    """
    if node.op_type != "Add" or len(node.input) != 2:
        return None
    a, b = node.input
    if index.is_constant(a) or index.is_constant(b) or a == b:
        return None
    convs = [fused_conv(index, a, excluded, pos), fused_conv(index, b, excluded, pos)]
    if not any(convs):
        return None
    fused = longer_branch(index, a, b) if all(convs) else (0 if convs[0] is not None else 1)
    conv = convs[fused]
    return (fused, conv) if conv is not None else None


def place_residual_adds(graph: onnx.GraphProto, index: GraphIndex, pos: Dict[tuple, int], excluded: Dict[int, str],
                        protected_nodes: Set[int], edge: Callable[[int, int, str], bool], edges: List[QuantEdge],
                        skipped: List[Skip], fused_adds: Dict[int, Set[tuple]], choices: Mapping[int, str]) -> None:
    """Rule 2 over every residual add, as its choice says (``fused_adds``: conv index -> adds fused into it)."""
    for i, node in enumerate(graph.node):
        found = None if i in protected_nodes else fused_branch(index, pos, node, excluded)
        if found is None:
            continue
        label = node_label(node)
        if i in excluded:
            skipped.append(Skip(label, "Add", excluded[i], rule=7))
            continue
        fused, fused_node = found
        skip = 1 - fused
        conv = node_label(fused_node)
        if not any(e.node == pos[node_key(fused_node)] for e in edges):
            skipped.append(Skip(label, "Add", f"the fused convolution {conv} is not quantized", rule=2))
            continue
        choice = choices.get(i) or default_choice(index, node.input[fused])
        if choice == FLOAT:
            skipped.append(Skip(label, "Add", "reads its inputs in float (its placement choice)", rule=2))
        elif choice == BOTH:
            edge(i, skip, f"residual add: skip input (both inputs quantized, {conv} writes INT8)")
            edge(i, fused, f"residual add: branch input (both inputs quantized, {conv} writes INT8)")
        elif edge(i, skip, f"residual add: skip input (fuses into {conv})"):
            fused_adds.setdefault(pos[node_key(fused_node)], set()).add(node_key(node))
