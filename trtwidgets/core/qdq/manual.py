"""Hand-made quantization of single tensors in a float model, for experiments and teaching.

The exporter (:mod:`.export`) places Q/DQ where TensorRT fuses it. To see what one
choice does on its own (one conv's weights per tensor instead of per channel, one
activation with a zero point), these functions change exactly one thing in a copy
of the float model: :func:`replace_constant` swaps a weight for its fake-quantized
value, :func:`insert_qdq` puts a QuantizeLinear/DequantizeLinear pair behind one
activation. The input model is never modified.
"""

from __future__ import annotations

from typing import Iterable, Mapping, Tuple

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..common.errors import UserError
from ..model.load import as_model_proto


def replace_constant(model, name: str, value: np.ndarray) -> onnx.ModelProto:
    """A copy of ``model`` whose initializer or ``Constant`` output ``name`` holds ``value``.

    Raises
    ------
    UserError
        When ``name`` is neither an initializer nor a Constant node's output, or the shape differs.
    """
    proto = onnx.ModelProto()
    proto.CopyFrom(as_model_proto(model))
    value = np.asarray(value)
    for i, init in enumerate(proto.graph.initializer):
        if init.name == name:
            _check_shape(name, tuple(init.dims), value)
            proto.graph.initializer[i].CopyFrom(numpy_helper.from_array(value.astype(
                numpy_helper.to_array(init).dtype), name))
            return proto
    for node in proto.graph.node:
        if node.op_type == "Constant" and name in node.output:
            for attr in node.attribute:
                if attr.name == "value":
                    _check_shape(name, tuple(attr.t.dims), value)
                    attr.t.CopyFrom(numpy_helper.from_array(value.astype(numpy_helper.to_array(attr.t).dtype)))
                    return proto
    raise UserError(f"{name!r} is not a constant of the model.", "Only initializers and Constant outputs can be replaced.",
                    "Pick a weight's name (e.g. a Conv's second input).")


def _check_shape(name: str, dims: Tuple[int, ...], value: np.ndarray) -> None:
    if dims != value.shape:
        raise UserError(f"{name!r} has shape {dims}, the new value {value.shape}.",
                        "A replaced constant must keep its shape.", "Pass an array of the same shape.")


def insert_qdq(model, params: Mapping[str, Tuple[float, int]], opset: int = 13) -> onnx.ModelProto:
    """A copy of ``model`` with ``QuantizeLinear -> DequantizeLinear`` behind each tensor of ``params``.

    Parameters
    ----------
    model : LoadedModel, onnx.ModelProto or path
    params : mapping
        Tensor name -> ``(scale, zero_point)``, per tensor, int8 (zero point in [-128, 127]).
    opset : int
        The default-domain opset is raised to at least this (13: int8 Q/DQ everywhere).

    Every reader of a tensor reads its dequantized value; graph outputs keep the float value.
    """
    proto = onnx.ModelProto()
    proto.CopyFrom(as_model_proto(model))
    produced = {o for n in proto.graph.node for o in n.output} | {i.name for i in proto.graph.input}
    missing = [t for t in params if t not in produced]
    if missing:
        raise UserError(f"No tensor {missing[0]!r} in the model.", "Q/DQ goes behind a tensor a node produces.",
                        "Use an activation's name (see the model's node outputs).")
    for imp in proto.opset_import:
        if imp.domain in ("", "ai.onnx") and imp.version < opset:
            imp.version = opset
    pairs = {}
    for tensor, (scale, zero_point) in params.items():
        s, z, q, dq = (f"{tensor}__manual_{k}" for k in ("scale", "zp", "q", "dq"))
        proto.graph.initializer.extend([numpy_helper.from_array(np.array(scale, np.float32), s),
                                        numpy_helper.from_array(np.array(zero_point, np.int8), z)])
        pairs[tensor] = [helper.make_node("QuantizeLinear", [tensor, s, z], [q], name=f"{tensor}__manual_Q"),
                         helper.make_node("DequantizeLinear", [q, s, z], [dq], name=f"{tensor}__manual_DQ")]
        _rewire(proto.graph.node, tensor, dq)
    # Each pair right behind its producer (graph inputs: first), so the node order stays topological.
    nodes = [n for t in pairs if t not in {o for n in proto.graph.node for o in n.output} for n in pairs[t]]
    for node in proto.graph.node:
        nodes.append(node)
        nodes += [n for out in node.output if out in pairs for n in pairs[out]]
    del proto.graph.node[:]
    proto.graph.node.extend(nodes)
    return proto


def _rewire(nodes: Iterable[onnx.NodeProto], tensor: str, new: str) -> None:
    for node in nodes:
        for i, name in enumerate(node.input):
            if name == tensor:
                node.input[i] = new
