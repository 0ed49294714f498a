"""Multiply-accumulate count of a static-shape ONNX model (Conv, ConvTranspose, MatMul, Gemm).

Used to turn a measured latency into achieved TOP/s (``2 * MACs / time``) and
compare it with the GPU's peak: the question "how far is INT8 from what the
hardware can do" needs the operation count. Element-wise work is not counted
(it is memory-bound and small next to the matrix work in CNNs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Mapping, Optional, Sequence, Tuple

import numpy as np
import onnx

from ..common.errors import UserError
from .onnx_graph import WEIGHTED_OPS, GraphIndex, attribute

__all__ = ["MacCount", "count_macs"]


@dataclass(frozen=True)
class MacCount:
    """Multiply-accumulates of a model at fixed input shapes.

    Attributes
    ----------
    total : int
        Sum over counted nodes; operations (FLOPs / OPs) are ``2 * total``.
    per_node : dict
        Node name -> MACs.
    unknown : tuple of str
        Matrix nodes whose shapes could not be inferred (not in ``total``).
    """

    total: int
    per_node: Dict[str, int]
    unknown: Tuple[str, ...] = ()

    @property
    def ops(self) -> int:
        return 2 * self.total

    def tops(self, seconds: float) -> float:
        """Achieved tera-operations per second for one run taking ``seconds``."""
        return self.ops / seconds / 1e12 if seconds > 0 else float("inf")


def _shapes(proto: onnx.ModelProto, input_shapes: Optional[Mapping[str, Sequence[int]]]) -> Dict[str, Tuple[int, ...]]:
    model = onnx.ModelProto()
    model.CopyFrom(proto)
    if input_shapes:
        for inp in model.graph.input:
            if inp.name in input_shapes:
                dims = inp.type.tensor_type.shape.dim
                for d, v in zip(dims, input_shapes[inp.name]):
                    d.Clear()
                    d.dim_value = int(v)
    inferred = onnx.shape_inference.infer_shapes(model, data_prop=True)
    out: Dict[str, Tuple[int, ...]] = {}
    g = inferred.graph
    for vi in list(g.input) + list(g.value_info) + list(g.output):
        t = vi.type.tensor_type
        if t.HasField("shape") and all(d.HasField("dim_value") for d in t.shape.dim):
            out[vi.name] = tuple(int(d.dim_value) for d in t.shape.dim)
    for init in g.initializer:
        out[init.name] = tuple(int(d) for d in init.dims)
    return out


def count_macs(model, input_shapes: Optional[Mapping[str, Sequence[int]]] = None, strict: bool = True) -> MacCount:
    """MACs per node and in total at the given input shapes.

    Parameters
    ----------
    model : onnx.ModelProto, path or LoadedModel
    input_shapes : mapping, optional
        Shapes for dynamic inputs.
    strict : bool
        Raise when a matrix node's shapes are unknown; otherwise list it in ``unknown``.

    Raises
    ------
    UserError
        With ``strict``, a counted node's shapes cannot be inferred (give ``input_shapes``).
    """
    from .load import as_model_proto

    proto = as_model_proto(model)
    shapes = _shapes(proto, input_shapes)
    index = GraphIndex(proto.graph)
    per_node: Dict[str, int] = {}
    unknown = []
    for i, node in enumerate(proto.graph.node):
        if node.op_type not in WEIGHTED_OPS:
            continue
        name = node.name or f"{node.op_type}_{i}"
        out = shapes.get(node.output[0])
        a = shapes.get(node.input[0])
        b = shapes.get(node.input[1])
        if b is None:
            c = index.constant(node.input[1])
            b = tuple(c.shape) if c is not None else None
        if out is None or a is None or b is None:
            if not strict:
                unknown.append(name)
                continue
            raise UserError(f"The shapes of node {name!r} ({node.op_type}) are unknown.",
                            "Operation counts need static shapes.", "Pass input_shapes for the dynamic inputs.")
        if node.op_type == "Conv":
            group = int(attribute(node, "group", 1))
            macs = int(np.prod(out)) * (a[1] // group) * int(np.prod(b[2:]))
        elif node.op_type == "ConvTranspose":
            # Weights are (Cin, Cout/group, k...): every input value meets Cout/group * k... weights.
            macs = int(np.prod(a)) * b[1] * int(np.prod(b[2:]))
        elif node.op_type == "MatMul":
            macs = int(np.prod(out)) * a[-1]
        else:  # Gemm
            trans_a = int(attribute(node, "transA", 0))
            k = a[0] if trans_a else a[-1]
            macs = int(np.prod(out)) * k
        per_node[name] = macs
    return MacCount(total=int(sum(per_node.values())), per_node=per_node, unknown=tuple(unknown))
