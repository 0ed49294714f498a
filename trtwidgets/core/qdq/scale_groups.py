"""Placement rules 9 and 10: data movement shares one scale; a Softmax-fed weighted layer stays float.

Rule 9, **data movement shares one scale.** ``Split``, ``Concat``, ``MaxPool`` and nearest
``Resize`` move values without computing new ones, so quantization commutes with them. TensorRT
moves INT8 data through them only when their inputs and outputs carry the same scale; otherwise it
writes the tensor in float and quantizes each consumer's copy separately. So the tensors they join
form a *scale group*: when any member is read quantized, every read of a member by the group's own
movement ops is quantized too, all with the group's largest range (C2f/CSP Split and Concat, SPPF's
chained MaxPools into a Concat, a neck's nearest Resize + Concat).

Excluded nodes (rule 7) are left out: ``exclude_op_types=["Split", "Concat"]`` turns the rule off
for them. A tensor without a range of its own stays float whatever its group has.

Rule 10, **a weighted layer that reads a Softmax stays float** (YOLOv8's DFL head and similar
expectation heads): INT8 loses the small probabilities and the layer is tiny. Attention's ``P·V``
(a MatMul of two activations, no weights) is not affected: TensorRT's MHA fusion wants it quantized.
Evidence: docs/placement.md.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Sequence, Set, Tuple

import onnx

from ..model.onnx_graph import GraphIndex
from .dense_int8 import conv_feature_map
from ..model.graph_patterns import node_key, node_label
from .placement_records import QuantEdge, Skip, WeightSite

__all__ = ["MOVEMENT_OPS", "scale_group_edges", "softmax_fed_layers_float"]

#: Ops that move values without computing new ones (quantization commutes with them).
#: (Reshapes and transposes are left out: rules 1-3 already look through them, and a Q/DQ on both sides of a
#: Reshape is one too many.)
MOVEMENT_OPS = ("Split", "Concat", "MaxPool", "Resize", "Upsample")
_COPY = ("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Identity")
_SOFTMAX = ("Softmax", "LogSoftmax")


def _moves(node: onnx.NodeProto) -> bool:
    if node.op_type not in MOVEMENT_OPS or node.domain not in ("", "ai.onnx"):
        return False
    if node.op_type in ("Resize", "Upsample"):
        mode = next((a.s for a in node.attribute if a.name == "mode"), b"nearest")
        return mode in (b"nearest", "nearest")  # linear interpolation computes new values
    return True


def _data_io(node: onnx.NodeProto) -> Tuple[List[int], List[str]]:
    """Input indices that carry the moved data, and the outputs that carry it."""
    if node.op_type == "Concat":
        return [k for k, x in enumerate(node.input) if x], [node.output[0]]
    outs = list(node.output) if node.op_type == "Split" else [node.output[0]]
    return [0], [o for o in outs if o]


class _Groups:
    """Union-find over tensor names."""

    def __init__(self) -> None:
        self.parent: Dict[str, str] = {}

    def find(self, t: str) -> str:
        self.parent.setdefault(t, t)
        while self.parent[t] != t:
            self.parent[t] = self.parent[self.parent[t]]
            t = self.parent[t]
        return t

    def union(self, a: str, b: str) -> None:
        self.parent[self.find(a)] = self.find(b)

    def members(self) -> Dict[str, List[str]]:
        out: Dict[str, List[str]] = {}
        for t in self.parent:
            out.setdefault(self.find(t), []).append(t)
        return out


def _movement_nodes(graph: onnx.GraphProto, index: GraphIndex, excluded: Mapping[int, str],
                    internal: Mapping[str, str]) -> List[int]:
    found = []
    for i, n in enumerate(graph.node):
        if i in excluded or not _moves(n):
            continue
        ks, outs = _data_io(n)
        tensors = [n.input[k] for k in ks] + outs
        if any(t in internal for t in tensors) or any(index.is_constant(n.input[k]) for k in ks):
            continue
        if conv_feature_map(index, tensors[0]) or any(conv_feature_map(index, o) for o in outs):
            found.append(i)
    return found


def scale_group_edges(graph: onnx.GraphProto, index: GraphIndex, pos: Dict[tuple, int], edges: Sequence[QuantEdge],
                      excluded: Mapping[int, str], internal: Mapping[str, str]
                      ) -> Tuple[List[QuantEdge], Tuple[Tuple[str, ...], ...]]:
    """Rule 9: the reads to quantize inside each quantized scale group, and the groups (tensors sharing a scale)."""
    movers = _movement_nodes(graph, index, excluded, internal)
    groups = _Groups()
    for i in movers:
        n = graph.node[i]
        ks, outs = _data_io(n)
        for t in [n.input[k] for k in ks] + outs:
            groups.union(t, n.input[ks[0]])
    quantized = {e.tensor for e in edges}
    done = {(e.node, e.input_index) for e in edges}
    mover_set = set(movers)
    new: List[QuantEdge] = []
    shared: List[Tuple[str, ...]] = []
    for members in groups.members().values():
        if len(members) < 2 or not quantized & set(members):
            continue
        member_set = set(members)
        for t in members:
            for c in index.consumers.get(t, []):
                ci = pos[node_key(c)]
                if ci not in mover_set:
                    continue
                ks, _ = _data_io(c)
                for k in ks:
                    if c.input[k] == t and (ci, k) not in done:
                        done.add((ci, k))
                        new.append(QuantEdge(t, ci, k, node_label(c), c.op_type,
                                             "data movement: one scale through Split/Concat/MaxPool/Resize"))
        if any(graph.node[i].op_type != "MaxPool" for c_t in members for i in
               (pos[node_key(c)] for c in index.consumers.get(c_t, [])) if i in mover_set):
            # Pools alone keep their own scales: TensorRT's INT8 pooling rescales on the way
            # (pool_classifier in tests/gpu/test_qdq_blocks.py); Split/Concat/Resize move bytes as they are.
            shared.append(tuple(sorted(member_set & (quantized | {e.tensor for e in new}))))
    return new, tuple(g for g in shared if len(g) > 1)


def _reads_softmax(index: GraphIndex, tensor: str) -> bool:
    t = tensor
    for _ in range(8):
        prod = index.producer.get(t)
        if prod is None:
            return False
        if prod.op_type in _SOFTMAX:
            return True
        if prod.op_type not in _COPY:
            return False
        t = prod.input[0]
    return False


def softmax_fed_layers_float(graph: onnx.GraphProto, index: GraphIndex, edges: List[QuantEdge],
                             weights: List[WeightSite], patterns) -> Tuple[List[QuantEdge], List[WeightSite], List[Skip]]:
    """Rule 10: drop the Q/DQ of weighted layers (constant weights) that read a Softmax's output."""
    softmax_outs: Set[str] = {n.output[0] for p in patterns if p.kind == "softmax" for n in
                              (graph.node[i] for i in p.nodes) if n.op_type == "Div"}
    weighted = {w.node for w in weights}
    drop: Set[int] = set()
    for e in edges:
        if e.rule == "weighted-op input" and e.node in weighted and (
                _reads_softmax(index, e.tensor) or e.tensor in softmax_outs):
            drop.add(e.node)
    skips = [Skip(node_label(graph.node[i]), graph.node[i].op_type,
                  "kept in high precision: it reads a Softmax's probabilities (a DFL / expectation head); INT8 "
                  "loses the small bins and the layer is too small to gain speed", rule=10) for i in sorted(drop)]
    return ([e for e in edges if e.node not in drop], [w for w in weights if w.node not in drop], skips)
