"""Placement rule 8, dense INT8 regions: what an implicit INT8 engine quantizes, as Q/DQ.

Helpers of :func:`~.placement.place_qdq` (``dense_int8=True``), in the order it applies
them: a Q/DQ on what a quantized grouped conv writes (:func:`grouped_output_edges`), on
what a quantized conv writes for point-wise readers only (:func:`conv_output_reads`),
and the same Q/DQ for every point-wise, pooling or Concat reader of a quantized
feature map (:func:`shared_reads`). See the rules in :mod:`.placement`.
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Sequence, Set

import onnx

from ..model.onnx_graph import GraphIndex
from ..model.graph_patterns import node_key, node_label
from .placement_records import QuantEdge

__all__ = ["INT8_READERS", "conv_feature_map", "grouped_output_edges", "conv_output_reads", "shared_reads"]

#: Pooling ops that run in INT8 between quantized tensors (rule 3).
POOL_OPS = ("MaxPool", "AveragePool", "GlobalAveragePool", "GlobalMaxPool")
#: Readers that TensorRT runs in INT8 between quantized tensors (rule 8's shared reads).
INT8_READERS = POOL_OPS + ("Add", "Sub", "Mul", "Div", "Max", "Min", "Relu", "Clip", "LeakyRelu", "Sigmoid",
                           "HardSigmoid", "HardSwish", "Concat")


_CONVS = ("Conv", "ConvTranspose")
# What lies between a convolution and the feature map it finally writes: its epilogue, pooling, reshapes.
_FEATURE_PATH = INT8_READERS + ("BatchNormalization", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity")


def conv_feature_map(index: GraphIndex, tensor: str, depth: int = 12) -> bool:
    """Whether ``tensor`` is a convolution's feature map: read by a conv, or written by one through point-wise ops.

    Rule 8 stays inside convolutional regions, where its evidence is (CNN engines on
    TensorRT 8.6); a transformer's residual stream and attention keep rules 1-4.
    """
    if any(c.op_type in _CONVS for c in index.consumers.get(tensor, [])):
        return True
    todo = [tensor]
    seen: Set[str] = set()
    while todo and len(seen) < 64:
        t = todo.pop()
        prod = index.producer.get(t)
        if prod is None or t in seen:
            continue
        seen.add(t)
        if prod.op_type in _CONVS:
            return True
        if prod.op_type in _FEATURE_PATH and len(seen) <= depth:
            todo.extend(i for i in prod.input if i and i in index.producer
                        and index.producer[i].op_type != "Constant")
    return False


def _float_reads(index: GraphIndex, pos: Dict[tuple, int], tensor: str, done: set):
    """``(node index, input index, node)`` of each read of ``tensor`` not yet quantized (shape reads left out)."""
    for c in index.consumers.get(tensor, []):
        if c.op_type in ("Shape", "Size"):
            continue
        ci = pos[node_key(c)]
        for k, t in enumerate(c.input):
            if t == tensor and (ci, k) not in done:
                yield ci, k, c


def grouped_output_edges(graph: onnx.GraphProto, index: GraphIndex, pos: Dict[tuple, int],
                         edges: Sequence[QuantEdge], dense: Mapping[int, str],
                         keep_float: Mapping[int, str]) -> List[QuantEdge]:
    """Rule 8: a Q/DQ on every float read of what each grouped conv in ``dense`` writes (conv -> tensor)."""
    quantized = {e.node for e in edges if e.rule == "weighted-op input"}
    done = {(e.node, e.input_index) for e in edges}
    out: List[QuantEdge] = []
    for i, tensor in sorted(dense.items()):
        if i in keep_float or i not in quantized:
            continue
        conv = node_label(graph.node[i])
        for ci, k, c in list(_float_reads(index, pos, tensor, done)):
            done.add((ci, k))
            out.append(QuantEdge(tensor, ci, k, node_label(c), c.op_type,
                                 f"grouped conv output (fuses {conv} INT8 in and out)"))
    return out


def conv_output_reads(graph: onnx.GraphProto, index: GraphIndex, pos: Dict[tuple, int],
                      edges: Sequence[QuantEdge], ends: Mapping[int, str],
                      internal: Mapping[str, str]) -> List[QuantEdge]:
    """Rule 8: a quantized conv's output read in float only by INT8-capable layers gets a Q/DQ.

    ``ends`` maps each quantized layer to the tensor it finally writes (after what
    TensorRT fuses into it, gated activations included). A layer that writes a graph
    output, or is read by anything else in float, is left alone.
    """
    done = {(e.node, e.input_index) for e in edges}
    outputs = {o.name for o in graph.output}
    out: List[QuantEdge] = []
    for i, tensor in sorted(ends.items()):
        if graph.node[i].op_type not in _CONVS or tensor in outputs or tensor in internal:
            continue
        floats = list(_float_reads(index, pos, tensor, done))
        if not floats or any(c.op_type not in INT8_READERS or c.domain not in ("", "ai.onnx") for _, _, c in floats):
            continue
        layer = node_label(graph.node[i])
        for ci, k, c in floats:
            done.add((ci, k))
            out.append(QuantEdge(tensor, ci, k, node_label(c), c.op_type,
                                 f"layer output read by INT8 layers (written quantized by {layer})"))
    return out


def shared_reads(graph: onnx.GraphProto, index: GraphIndex, pos: Dict[tuple, int], edges: Sequence[QuantEdge],
                 excluded: Mapping[int, str], internal: Mapping[str, str]) -> List[QuantEdge]:
    """Rule 8: the point-wise, pooling and Concat readers of a quantized tensor read it quantized too.

    A tensor read both through a Q and in float makes TensorRT write it in float and quantize it in a
    layer of its own (docs/evidence.md, "dense_int8").
    """
    done = {(e.node, e.input_index) for e in edges}
    out: List[QuantEdge] = []
    for tensor in dict.fromkeys(e.tensor for e in edges):
        if tensor in internal or not conv_feature_map(index, tensor):
            continue
        for ci, k, c in list(_float_reads(index, pos, tensor, done)):
            if c.op_type not in INT8_READERS or ci in excluded or c.domain not in ("", "ai.onnx"):
                continue
            done.add((ci, k))
            out.append(QuantEdge(tensor, ci, k, node_label(c), c.op_type, "shared read (the producer writes INT8 once)"))
    return out
