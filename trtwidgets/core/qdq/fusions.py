"""What TensorRT fuses into a convolution: epilogues and residual adds (placement rules 2 and 6).

Placement must know which tensor a convolution finally writes once TensorRT has
fused BatchNormalization, activations (also decomposed HardSwish / Swish),
constant bias / scale ops and a residual add into it, and which branch of an add
can live in a convolution's epilogue.
"""

from __future__ import annotations

from collections import deque
from typing import Dict, Mapping, Optional, Sequence, Set

import onnx

from ..model.onnx_graph import GraphIndex
from ..model.graph_patterns import node_key, nonconst_inputs, single_consumer

# Ops TensorRT fuses into a convolution's epilogue ahead of an elementwise add.
_FUSIBLE_EPILOGUE = ("BatchNormalization", "Relu", "LeakyRelu", "PRelu", "Clip")
# What TensorRT fuses into a convolution's output (rule 6). Kept to ops known to fuse: an op
# missing here only makes rule 6 keep a grouped conv float, never quantize a broken one.
_EPILOGUE_OPS = ("BatchNormalization", "Relu", "Clip", "LeakyRelu", "PRelu", "Sigmoid", "HardSigmoid", "HardSwish")

def fused_conv(index: GraphIndex, tensor: str, excluded: Mapping[int, str], pos: Mapping[tuple, int]
                ) -> Optional[onnx.NodeProto]:
    """The Conv whose output reaches ``tensor`` through fusible epilogue ops only, and nothing else."""
    if len(index.consumers.get(tensor, [])) != 1:
        return None  # the branch output is needed elsewhere too: it cannot live only in the conv's epilogue
    t = tensor
    for _ in range(5):
        prod = index.producer.get(t)
        if prod is None:
            return None
        if prod.op_type in ("Conv", "ConvTranspose"):
            return None if pos[node_key(prod)] in excluded else prod
        gate_src = _gate_source(index, prod)
        fusible = prod.op_type in _FUSIBLE_EPILOGUE or gate_src is not None or (
            prod.op_type in ("Add", "Mul") and len(nonconst_inputs(prod, index)) == 1)
        if not fusible:
            return None
        if gate_src is not None:  # x feeds the gate and the Mul: both are the conv's epilogue
            t = gate_src
            continue
        src = nonconst_inputs(prod, index)[0]
        # A conv output that also feeds another layer cannot be fused with the add.
        if len(index.consumers.get(src, [])) != 1:
            return None
        t = src
    return None


def _gate_source(index: GraphIndex, mul: onnx.NodeProto) -> Optional[str]:
    """``x`` when ``mul`` is the join of a gated activation on ``x`` (SiLU ``x * Sigmoid(x)``, HardSwish), else None."""
    if mul.op_type != "Mul" or len(mul.input) != 2:
        return None
    for x in mul.input:
        if _gated_join(index, x, index.consumers.get(x, [])) is mul:
            return x
    return None


def _ancestor_distances(index: GraphIndex, tensor: str, limit: int = 2000) -> Dict[str, int]:
    dist = {tensor: 0}
    todo = deque([tensor])
    while todo and len(dist) < limit:
        t = todo.popleft()
        prod = index.producer.get(t)
        if prod is None:
            continue
        for i in nonconst_inputs(prod, index):
            if i not in dist:
                dist[i] = dist[t] + 1
                todo.append(i)
    return dist


def longer_branch(index: GraphIndex, a: str, b: str) -> int:
    """0 if ``a`` is on the longer path from the two tensors' lowest common ancestor, else 1."""
    da, db = _ancestor_distances(index, a), _ancestor_distances(index, b)
    common = set(da) & set(db)
    if not common:
        return 1
    lca = min(common, key=lambda t: da[t] + db[t])
    return 0 if da[lca] > db[lca] else 1


def _gated_join(index: GraphIndex, tensor: str, cons: Sequence[onnx.NodeProto]) -> Optional[onnx.NodeProto]:
    """The ``Mul(x, f(x))`` of a decomposed gated activation (HardSwish, Swish) reading ``tensor``, or None.

    ``tensor`` must feed exactly the joining Mul and one chain of single-consumer
    elementwise ops (``x + 3 -> Clip(0, 6)``, ``HardSigmoid``, ``Sigmoid``) that ends
    in the same Mul: TensorRT fuses such a pattern into the convolution's epilogue.
    """
    if len(cons) != 2:
        return None
    for join, gate in ((cons[0], cons[1]), (cons[1], cons[0])):
        if join.op_type != "Mul" or len(join.input) != 2 or tensor not in join.input:
            continue
        other = join.input[1] if join.input[0] == tensor else join.input[0]
        if other == tensor or len(index.consumers.get(other, [])) != 1:
            continue
        node = gate
        for _ in range(4):
            if not _elementwise_epilogue(node, index):
                break
            if node.output[0] == other:
                return join
            nxt = single_consumer(index, node.output[0], _EPILOGUE_OPS + ("Add", "Sub", "Mul", "Div"))
            if nxt is None:
                break
            node = nxt
    return None


def _elementwise_epilogue(node: onnx.NodeProto, index: GraphIndex) -> bool:
    """An activation, or an elementwise op with one non-constant input (bias, scale)."""
    if node.op_type in _EPILOGUE_OPS:
        return len(nonconst_inputs(node, index)) == 1
    return node.op_type in ("Add", "Sub", "Mul", "Div") and len(nonconst_inputs(node, index)) == 1


def epilogue_end(index: GraphIndex, tensor: str, fused_adds: Set[tuple], through_gates: bool = True) -> str:
    """Follow a convolution's output through what TensorRT fuses into it; the tensor it finally writes.

    Fused: BatchNormalization, activations (also a decomposed HardSwish / Swish unless
    ``through_gates`` is False), constant bias / scale ops, and the residual adds in
    ``fused_adds`` (node keys).
    """
    t = tensor
    for _ in range(12):
        cons = index.consumers.get(t, [])
        if len(cons) == 1 and (_elementwise_epilogue(cons[0], index) or node_key(cons[0]) in fused_adds):
            t = cons[0].output[0]
            continue
        join = _gated_join(index, t, cons) if through_gates else None
        if join is None:
            return t
        t = join.output[0]
    return t


def gated_branch(index: GraphIndex, tensor: str) -> bool:
    """Whether ``tensor`` is written by a gated activation: a SiLU (``x * Sigmoid(x)``), a decomposed HardSwish
    (``x * Clip(x + 3, 0, 6) / 6``, ``x * HardSigmoid(x)``) or a HardSwish node.

    TensorRT 8.6 keeps such an activation in a convolution's epilogue only while nothing else (a residual add
    read in INT8) is fused after it (``benchmarks/results/peer``: the C2f bottleneck adds).
    """
    prod = index.producer.get(tensor)
    if prod is None:
        return False
    if prod.op_type == "HardSwish":
        return True
    if prod.op_type in ("Div", "Mul") and len(nonconst_inputs(prod, index)) == 1:
        src = index.producer.get(nonconst_inputs(prod, index)[0])  # x * gate / 6: the Mul before the constant Div
        return src is not None and _gate_source(index, src) is not None
    return _gate_source(index, prod) is not None
