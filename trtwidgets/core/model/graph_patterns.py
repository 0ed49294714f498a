"""LayerNorm, Softmax and GELU subgraphs: the patterns Q/DQ placement keeps free of Q/DQ (rule 4)
and the range method `auto` handles by their role (:mod:`.tensor_roles`).

Found as single ops and as the decomposed ONNX patterns exporters write. Also
the graph helpers the placement rules share (a constant-folding view of the
graph, readable node labels, node keys).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import List, Optional, Sequence, Set, Tuple

import onnx

from .onnx_graph import GraphIndex

__all__ = ["PROTECTED_OPS", "PatternMatch", "ConstIndex", "node_label", "node_key", "nonconst_inputs", "single_consumer",
           "find_protected_patterns"]

#: Single ops that are whole normalisation / activation patterns (rule 4).
PROTECTED_OPS = {"LayerNormalization": "layernorm", "Softmax": "softmax", "LogSoftmax": "softmax",
                 "Gelu": "gelu"}


@dataclass(frozen=True)
class PatternMatch:
    """A LayerNorm / Softmax / GELU found in the graph (kept free of Q/DQ).

    Attributes
    ----------
    kind : str
        ``"layernorm"``, ``"softmax"`` or ``"gelu"``.
    nodes : tuple of int
        Indices of the pattern's nodes.
    node_labels : tuple of str
    internal_tensors : tuple of str
        Tensors produced and consumed inside the pattern.
    """

    kind: str
    nodes: Tuple[int, ...]
    node_labels: Tuple[str, ...]
    internal_tensors: Tuple[str, ...]

    def to_dict(self) -> dict:
        return {"kind": self.kind, "nodes": list(self.node_labels)}



def node_label(node: onnx.NodeProto) -> str:
    """A readable name for a node: its name, or ``Op(first output)`` when unnamed."""
    if node.name:
        return node.name
    out = node.output[0] if node.output else ""
    return f"{node.op_type}({out})"


# ---------------------------------------------------------------------------- patterns


_NOT_FOLDABLE = ("RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Multinomial")


class ConstIndex(GraphIndex):
    """GraphIndex that also treats tensors computed only from constants as constant.

    Paddle exports build biases as ``Reshape(Constant, Constant)``; that is a
    constant to TensorRT (it folds it) and must not be mistaken for a branch.
    """

    def __init__(self, graph: onnx.GraphProto) -> None:
        super().__init__(graph)
        folded = set(self.initializers)
        for node in graph.node:
            if node.op_type == "Constant":
                folded.update(node.output)
            elif (node.op_type not in _NOT_FOLDABLE and any(node.input)
                  and all(i in folded for i in node.input if i)):
                folded.update(o for o in node.output if o)
        self.folded = folded

    def is_constant(self, name: str) -> bool:
        return name in self.folded

    def is_direct_constant(self, name: str) -> bool:
        """An initializer or a Constant node output (a value the exporter can read)."""
        return super().is_constant(name)


def node_key(node: onnx.NodeProto) -> tuple:
    """A hashable key that identifies ``node`` in its graph (op, name, outputs, inputs)."""
    # A content key, not id(): protobuf may hand out a new wrapper object on each access.
    # Outputs are unique in a valid (SSA) graph, so this identifies the node.
    return (node.op_type, node.name, tuple(node.output), tuple(node.input))


def nonconst_inputs(node: onnx.NodeProto, index: GraphIndex) -> List[str]:
    """The inputs of ``node`` that are not constants (activations), in order."""
    return [i for i in node.input if i and not index.is_constant(i)]


def single_consumer(index: GraphIndex, tensor: str, op_types: Sequence[str]) -> Optional[onnx.NodeProto]:
    """The one node that reads ``tensor`` if it is the only reader and of one of ``op_types``, else None."""
    cons = index.consumers.get(tensor, [])
    if len(cons) == 1 and cons[0].op_type in op_types:
        return cons[0]
    return None


def _is_scalar_const(index: GraphIndex, name: str) -> bool:
    size = index.constant_size(name)
    return size is not None and size <= 1


def _match_layernorm(sub: onnx.NodeProto, index: GraphIndex) -> Optional[List[onnx.NodeProto]]:
    # x - ReduceMean(x) -> (Pow 2 | Mul self) -> ReduceMean -> Add eps -> Sqrt -> Div(d, std)
    if sub.op_type != "Sub" or len(sub.input) != 2:
        return None
    x, m = sub.input
    mean = index.producer.get(m)
    if mean is None or mean.op_type != "ReduceMean" or mean.input[0] != x:
        return None
    d = sub.output[0]
    nodes = [mean, sub]
    square = None
    div = None
    for c in index.consumers.get(d, []):
        if c.op_type == "Pow" and len(c.input) == 2 and c.input[0] == d:
            square = c
        elif c.op_type == "Mul" and list(c.input) == [d, d]:
            square = c
        elif c.op_type == "Div" and c.input[0] == d:
            div = c
    if square is None or div is None:
        return None
    var = single_consumer(index, square.output[0], ("ReduceMean",))
    add = var and single_consumer(index, var.output[0], ("Add",))
    sqrt = add and single_consumer(index, add.output[0], ("Sqrt",))
    if var is None or add is None or sqrt is None or div.input[1] != sqrt.output[0]:
        return None
    nodes += [square, var, add, sqrt, div]
    # Optional affine tail (gamma, beta) with constant operands.
    tail = div
    for op in ("Mul", "Add"):
        nxt = single_consumer(index, tail.output[0], (op,))
        if nxt is None or len(nonconst_inputs(nxt, index)) != 1:
            break
        nodes.append(nxt)
        tail = nxt
    return nodes


def _match_softmax(exp: onnx.NodeProto, index: GraphIndex) -> Optional[List[onnx.NodeProto]]:
    # [x - ReduceMax(x)] -> Exp -> ReduceSum -> Div(e, sum)
    if exp.op_type != "Exp":
        return None
    e = exp.output[0]
    rsum = div = None
    for c in index.consumers.get(e, []):
        if c.op_type == "ReduceSum":
            rsum = c
        elif c.op_type == "Div" and c.input[0] == e:
            div = c
    if rsum is None or div is None or div.input[1] != rsum.output[0]:
        return None
    nodes = [exp, rsum, div]
    sub = index.producer.get(exp.input[0])
    if sub is not None and sub.op_type == "Sub":
        rmax = index.producer.get(sub.input[1])
        if rmax is not None and rmax.op_type == "ReduceMax" and rmax.input[0] == sub.input[0]:
            nodes = [rmax, sub] + nodes
    return nodes


def _gelu_root_side(index: GraphIndex, tensor: str) -> List[str]:
    # The non-erf operand of the joining Mul is x itself or x scaled by a constant.
    roots = [tensor]
    prod = index.producer.get(tensor)
    if prod is not None and prod.op_type in ("Mul", "Div") and len(nonconst_inputs(prod, index)) == 1:
        roots.append(nonconst_inputs(prod, index)[0])
    return roots


def _match_gelu(anchor: onnx.NodeProto, index: GraphIndex) -> Optional[List[onnx.NodeProto]]:
    # Erf: x/sqrt2 -> Erf -> +1 -> *x -> *0.5 (any order of the two Muls).
    # Tanh: x + 0.044715 x^3 -> *sqrt(2/pi) -> Tanh -> +1 -> *0.5x.
    if anchor.op_type not in ("Erf", "Tanh"):
        return None
    fwd: List[onnx.NodeProto] = []
    tensor = anchor.output[0]
    join = root = None
    for _ in range(4):
        nxt = single_consumer(index, tensor, ("Add", "Mul", "Div"))
        if nxt is None:
            break
        fwd.append(nxt)
        others = [i for i in nxt.input if i != tensor and i and not index.is_constant(i)]
        if nxt.op_type == "Mul" and len(others) == 1:
            join, candidates = nxt, _gelu_root_side(index, others[0])
            root = candidates
            break
        if others:
            return None
        tensor = nxt.output[0]
    if join is None:
        return None
    # Backward from the anchor: every path must reach a root candidate through elementwise ops.
    back: List[onnx.NodeProto] = []
    seen: Set[tuple] = set()
    reached = None
    todo = deque((i, 0) for i in nonconst_inputs(anchor, index))
    allowed = ("Div", "Mul", "Add", "Pow", "Sqrt")
    while todo:
        t, depth = todo.popleft()
        if t in (root or ()):
            reached = reached or t
            if t != reached:
                return None
            continue
        prod = index.producer.get(t)
        if prod is None or prod.op_type not in allowed or depth > 5:
            return None
        if node_key(prod) in seen:
            continue
        seen.add(node_key(prod))
        back.append(prod)
        todo.extend((i, depth + 1) for i in nonconst_inputs(prod, index))
    if reached is None:
        return None
    if anchor.op_type == "Tanh" and not any(n.op_type in ("Pow", "Mul") for n in back):
        return None
    nodes = back[::-1] + [anchor] + fwd
    # x scaled by a constant on the joining side (the 0.5 x of 0.5 x (1 + erf)).
    side = [i for i in join.input if i and i not in (n.output[0] for n in nodes)]
    for s in side:
        prod = index.producer.get(s)
        if prod is not None and prod.op_type in ("Mul", "Div") and s != reached:
            nodes.append(prod)
    # A trailing constant scale (the 0.5 of x * (1 + erf) * 0.5).
    nxt = single_consumer(index, join.output[0], ("Mul",))
    if nxt is not None and len(nonconst_inputs(nxt, index)) == 1 and any(
            _is_scalar_const(index, i) for i in nxt.input if i != join.output[0]):
        nodes.append(nxt)
    return nodes


def find_protected_patterns(graph: onnx.GraphProto, index: Optional[GraphIndex] = None) -> Tuple[PatternMatch, ...]:
    """LayerNorm, Softmax and GELU subgraphs (single ops and decomposed patterns)."""
    if not isinstance(index, ConstIndex):
        index = ConstIndex(graph)
    pos = {node_key(n): i for i, n in enumerate(graph.node)}
    found: List[PatternMatch] = []
    taken: Set[int] = set()

    def add(kind: str, nodes: List[onnx.NodeProto]) -> None:
        ids = sorted({pos[node_key(n)] for n in nodes})
        if taken.intersection(ids):
            return
        taken.update(ids)
        outputs = {o for i in ids for o in graph.node[i].output}
        internal = sorted({t for i in ids for t in graph.node[i].input if t in outputs})
        found.append(PatternMatch(kind, tuple(ids), tuple(node_label(graph.node[i]) for i in ids), tuple(internal)))

    for node in graph.node:
        if node.op_type in PROTECTED_OPS and node.domain in ("", "ai.onnx"):
            add(PROTECTED_OPS[node.op_type], [node])
        elif node.op_type == "Sub":
            nodes = _match_layernorm(node, index)
            if nodes:
                add("layernorm", nodes)
        elif node.op_type == "Exp":
            nodes = _match_softmax(node, index)
            if nodes:
                add("softmax", nodes)
        elif node.op_type in ("Erf", "Tanh"):
            nodes = _match_gelu(node, index)
            if nodes:
                add("gelu", nodes)
    return tuple(sorted(found, key=lambda p: p.nodes[0]))
