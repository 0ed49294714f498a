"""Placement rule 12: sibling INT8 convolutions that all write float stay float (TensorRT 8.x cannot build them).

TensorRT 8.6 refuses a Q/DQ model in which two or more INT8 convolutions of the same kernel geometry read one
quantized tensor and none of them writes its output quantized (every output, after its fused epilogue, is read
in float or is a graph output). The build stops in the graph optimizer with::

    [graphOptimizer.cpp::chooseHigherPrecision::7079] Error Code 2: Internal Error
    (Assertion dt1 == DataType::kFLOAT || dt1 == DataType::kHALF failed. )

:func:`float_output_siblings` finds such groups in a written Q/DQ model; the export keeps their layers float and
writes again (:func:`trtwidgets.core.qdq.export.build_qdq`), for TensorRT below 10 or unknown. Siblings with
different output channel counts are grouped too. Evidence and what is untested: docs/placement.md (rule 12) and
docs/evidence.md, "sibling_layers".
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import onnx

from ..model.onnx_graph import attribute
from ..model.graph_patterns import node_label

__all__ = ["SiblingGroup", "float_output_siblings", "applies_to", "RULE_TEXT"]

#: Single-input ops TensorRT fuses into a convolution's epilogue (a Q after them is the conv's INT8 output).
_EPILOGUE = ("Relu", "Clip", "LeakyRelu", "HardSigmoid", "HardSwish", "BatchNormalization", "Sigmoid", "Tanh", "Elu",
             "Selu", "Softplus", "Identity")
RULE_TEXT = ("kept in high precision (placement rule 12): it and {others} are INT8 convolutions of one kernel "
             "geometry reading the quantized {tensor}, and none of them writes its output quantized; TensorRT 8.6 "
             "cannot build that (chooseHigherPrecision assertion)")


@dataclass(frozen=True)
class SiblingGroup:
    """INT8 convolutions on one quantized tensor, of one kernel geometry, none writing INT8.

    ``layers`` are their node labels (as reports and plans name layers); ``keys`` what an exclusion matches
    (the node's name, else its output).
    """

    tensor: str
    layers: Tuple[str, ...]
    geometry: Tuple
    keys: Tuple[str, ...] = ()


def applies_to(trt_version: Optional[str]) -> bool:
    """Rule 12 holds for TensorRT below 10, and for an unknown version (the form every TensorRT builds)."""
    if not trt_version:
        return True
    try:
        return int(str(trt_version).split(".")[0]) < 10
    except ValueError:
        return True


class _Graph:
    def __init__(self, graph: onnx.GraphProto) -> None:
        self.prod = {o: n for n in graph.node for o in n.output}
        self.cons: Dict[str, List[onnx.NodeProto]] = {}
        for n in graph.node:
            for t in n.input:
                self.cons.setdefault(t, []).append(n)
        self.inits = {t.name: t for t in graph.initializer}
        self.consts = {n.output[0]: n.attribute[0].t for n in graph.node if n.op_type == "Constant" and n.attribute}
        self.outputs = {o.name for o in graph.output}

    def dequantized(self, tensor: str) -> Optional[onnx.NodeProto]:
        p = self.prod.get(tensor)
        return p if p is not None and p.op_type == "DequantizeLinear" else None

    def source(self, tensor: str) -> Optional[str]:
        """The activation behind a DQ(Q(x)) input: ``x``; None when ``tensor`` is not dequantized activation data."""
        dq = self.dequantized(tensor)
        if dq is None:
            return None
        q = self.prod.get(dq.input[0])
        if q is None or q.op_type != "QuantizeLinear":
            return None
        return q.input[0]

    def weight_dims(self, tensor: str) -> Optional[Tuple[int, ...]]:
        """Dims of a conv's weights stored behind a DequantizeLinear (INT8 initializer, or float -> Q -> DQ)."""
        dq = self.dequantized(tensor)
        if dq is None:
            return None
        src = dq.input[0]
        q = self.prod.get(src)
        if q is not None and q.op_type == "QuantizeLinear":
            src = q.input[0]
        t = self.inits.get(src) or self.consts.get(src)
        return tuple(t.dims) if t is not None else None

    def epilogue_end(self, tensor: str) -> str:
        """The tensor a conv writes after what fuses into it: a SiLU (x * Sigmoid(x)) or single-input activations."""
        for _ in range(8):
            users = self.cons.get(tensor, [])
            kinds = sorted(u.op_type for u in users)
            if kinds == ["Mul", "Sigmoid"]:
                mul = next(u for u in users if u.op_type == "Mul")
                sig = next(u for u in users if u.op_type == "Sigmoid")
                if sig.output[0] in mul.input and tensor in mul.input:
                    tensor = mul.output[0]
                    continue
            if len(users) == 1 and users[0].op_type in _EPILOGUE and users[0].input[0] == tensor:
                tensor = users[0].output[0]
                continue
            break
        return tensor

    def writes_quantized(self, tensor: str) -> bool:
        return tensor not in self.outputs and any(u.op_type == "QuantizeLinear" for u in self.cons.get(tensor, []))


def _geometry(g: _Graph, node: onnx.NodeProto) -> Optional[Tuple]:
    dims = g.weight_dims(node.input[1])
    kernel = tuple(attribute(node, "kernel_shape", None) or (dims[2:] if dims else ()))
    if not kernel:
        return None
    rank = len(kernel)
    return (kernel, tuple(attribute(node, "strides", None) or (1,) * rank),
            tuple(attribute(node, "pads", None) or (0,) * (2 * rank)),
            tuple(attribute(node, "dilations", None) or (1,) * rank), int(attribute(node, "group", 1) or 1),
            str(attribute(node, "auto_pad", b"NOTSET")))


def float_output_siblings(model) -> List[SiblingGroup]:
    """Groups of INT8 convolutions TensorRT 8.6 cannot build (see the module docstring), in graph order.

    Parameters
    ----------
    model : onnx.ModelProto or onnx.GraphProto
        A written Q/DQ model.
    """
    graph = model.graph if isinstance(model, onnx.ModelProto) else model
    g = _Graph(graph)
    groups: Dict[Tuple[str, Tuple], List[onnx.NodeProto]] = {}
    for node in graph.node:
        if node.op_type != "Conv" or len(node.input) < 2:
            continue
        src = g.source(node.input[0])
        if src is None or g.dequantized(node.input[1]) is None:
            continue
        geom = _geometry(g, node)
        if geom is not None:
            groups.setdefault((src, geom), []).append(node)
    found = []
    for (src, geom), nodes in groups.items():
        if len(nodes) < 2:
            continue
        if any(g.writes_quantized(g.epilogue_end(n.output[0])) for n in nodes):
            continue
        found.append(SiblingGroup(src, tuple(node_label(n) for n in nodes), geom,
                                  tuple(n.name or n.output[0] for n in nodes)))
    return found
