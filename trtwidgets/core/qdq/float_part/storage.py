"""A low-precision float part as TensorRT's FP16/BF16 kernels hold it, runnable by ONNX Runtime's CPU provider.

ONNX Runtime's CPU provider has no FP16 kernel for most ops (Add, Mul, Conv, MatMul, Softmax...): it runs
them in FP32 and drops the Casts it put around them, so a chain of such ops is computed in FP32 and rounded
to FP16 only where an op with an FP16 kernel (QuantizeLinear, DequantizeLinear, LayerNormalization, Cast)
reads or writes it (``tests/core/qdq/test_float_part_storage.py`` shows it on a Mul -> Add chain). A
check that runs the FP16 model as it is therefore sees less rounding than TensorRT, whose FP16 kernels
write every tensor in FP16.

:func:`storage_emulation` writes the same model in FP32 arithmetic with every tensor that the model holds in
FP16 (BF16) rounded to it where it is written: an explicit ``Cast`` to the low type and back after each
producer, which ONNX Runtime keeps. Constants keep the values the conversion wrote (FP16 values widened
exactly), Casts to the low type become Casts to FP32 followed by the rounding, so the graph and its values
are the export's own. What it does not model: rounding inside a kernel (TensorRT's FP16 kernels accumulate
in FP32), and the tensors TensorRT keeps in FP32 inside a fused INT8 kernel (a DequantizeLinear's output
read by a quantized convolution, a convolution's epilogue before its QuantizeLinear): it rounds those too,
so it rounds at least as often as TensorRT does.
"""

from __future__ import annotations

from typing import Dict, Set, Tuple

import numpy as np
import onnx
from onnx import helper, numpy_helper

__all__ = ["LOW_TYPES", "NotEmulable", "fresh_name", "storage_emulation", "tensor_types"]

#: Float types a float part may be written in, below FP32.
LOW_TYPES: Dict[int, str] = {onnx.TensorProto.FLOAT16: "FP16", onnx.TensorProto.BFLOAT16: "BF16"}
_FLOAT = onnx.TensorProto.FLOAT
_SUBGRAPH = (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS)


class NotEmulable(ValueError):
    """The model holds low-precision tensors where the emulation cannot follow them (a subgraph)."""


def _widened(t: onnx.TensorProto) -> onnx.TensorProto:
    return numpy_helper.from_array(numpy_helper.to_array(t).astype(np.float32), t.name)


def tensor_types(model: onnx.ModelProto) -> Dict[str, int]:
    """Tensor name -> element type, as the model declares or ONNX's shape inference infers them."""
    try:
        inferred = onnx.shape_inference.infer_shapes(model)
    except Exception:
        inferred = model
    g = inferred.graph
    types = {v.name: v.type.tensor_type.elem_type for v in (*g.value_info, *g.input, *g.output)
             if v.type.HasField("tensor_type")}
    types.update({t.name: t.data_type for t in g.initializer})
    for n in g.node:
        if n.op_type == "Constant" and n.output:
            for a in n.attribute:
                if a.name == "value" and a.type == onnx.AttributeProto.TENSOR:
                    types[n.output[0]] = a.t.data_type
    return types


def _low_inside(attr: onnx.AttributeProto) -> bool:
    """Whether a subgraph attribute holds a tensor of a low type."""
    graphs = [attr.g] if attr.type == onnx.AttributeProto.GRAPH else list(attr.graphs)
    for g in graphs:
        if any(t.data_type in LOW_TYPES for t in g.initializer):
            return True
        if any(v.type.tensor_type.elem_type in LOW_TYPES for v in (*g.input, *g.output, *g.value_info)):
            return True
        for n in g.node:
            for a in n.attribute:
                if a.type == onnx.AttributeProto.TENSOR and a.t.data_type in LOW_TYPES:
                    return True
                if a.name in ("to", "dtype") and a.type == onnx.AttributeProto.INT and a.i in LOW_TYPES:
                    return True
                if a.type in _SUBGRAPH and _low_inside(a):
                    return True
    return False


def storage_emulation(model: onnx.ModelProto) -> Tuple[onnx.ModelProto, int, str]:
    """``(emulation, tensors rounded, the low type's name)`` of ``model`` (see the module docstring).

    The emulation's inputs and outputs are FP32 where the model's are FP16 (BF16).
    ``model`` is not changed. A model without low-precision tensors comes back as a copy, 0 rounded.

    Raises
    ------
    NotEmulable
        When an If/Loop/Scan body holds a low-precision tensor (the conversion keeps subgraphs in FP32, so
        this is a model converted elsewhere).
    """
    out = onnx.ModelProto()
    out.CopyFrom(model)
    g = out.graph
    types = tensor_types(model)
    low_name = ""
    for n in g.node:
        for a in n.attribute:
            if a.type in _SUBGRAPH and _low_inside(a):
                raise NotEmulable(f"node {n.name or n.op_type} holds a low-precision tensor in its subgraph")
    for t in g.initializer:
        if t.data_type in LOW_TYPES:
            low_name = low_name or LOW_TYPES[t.data_type]
            t.CopyFrom(_widened(t))
    for v in (*g.input, *g.output, *g.value_info):
        if v.type.HasField("tensor_type") and v.type.tensor_type.elem_type in LOW_TYPES:
            v.type.tensor_type.elem_type = _FLOAT
    taken: Set[str] = {x for n in g.node for x in (*n.input, *n.output)} | {t.name for t in g.initializer} | \
        {v.name for v in g.input}
    nodes = []
    rounded = 0
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.TENSOR and a.t.data_type in LOW_TYPES:
                a.t.CopyFrom(_widened(a.t))
            elif a.name in ("to", "dtype") and a.type == onnx.AttributeProto.INT and a.i in LOW_TYPES:
                a.i = _FLOAT  # Cast / EyeLike / Random*: the rounding below gives the value the low type
        nodes.append(n)
        if n.op_type == "Constant":
            continue  # its value is the low type's already, widened exactly
        for k, name in enumerate(list(n.output)):
            low = types.get(name)
            if low not in LOW_TYPES or not name:
                continue
            low_name = low_name or LOW_TYPES[low]
            written, held = fresh_name(f"{name}__as_written", taken), fresh_name(f"{name}__{LOW_TYPES[low].lower()}", taken)
            n.output[k] = written
            nodes += [helper.make_node("Cast", [written], [held], to=low, name=fresh_name(f"{held}_cast", taken)),
                      helper.make_node("Cast", [held], [name], to=_FLOAT, name=fresh_name(f"{name}_widen", taken))]
            rounded += 1
    del g.node[:]
    g.node.extend(nodes)
    return out, rounded, low_name


def fresh_name(name: str, taken: Set[str]) -> str:
    """``name``, lengthened with ``_`` until it is not in ``taken``; then taken."""
    while name in taken:
        name += "_"
    taken.add(name)
    return name

