"""Small read-only helpers over an ONNX graph: constants, producers, consumers.

Lint, the model summary and the Q/DQ exporter all ask the same questions of a
graph ("is this input a constant?", "who produces this tensor?"); they live here
once.
"""

from __future__ import annotations

from typing import Dict, Iterable, List, Optional, Set

import numpy as np
import onnx
from onnx import numpy_helper

#: Ops with weights: the layers INT8 quantizes (their activation and weight inputs), the planner
#: chooses among, the cost model counts and the latency oracle charges. The one spelling of the set.
WEIGHTED_OPS = ("Conv", "ConvTranspose", "Gemm", "MatMul")


class GraphIndex:
    """Lookup tables over one (top-level) ONNX graph.

    Parameters
    ----------
    graph : onnx.GraphProto
        The graph to index. It is not copied; do not mutate it while the index is used.
    """

    def __init__(self, graph: onnx.GraphProto) -> None:
        self.graph = graph
        self.initializers: Dict[str, onnx.TensorProto] = {t.name: t for t in graph.initializer}
        self.producer: Dict[str, onnx.NodeProto] = {}
        self.consumers: Dict[str, List[onnx.NodeProto]] = {}
        for node in graph.node:
            for out in node.output:
                if out:
                    self.producer[out] = node
            for inp in node.input:
                if inp:
                    self.consumers.setdefault(inp, []).append(node)

    def constant(self, name: str) -> Optional[np.ndarray]:
        """Value of ``name`` if it is an initializer or a ``Constant`` node output, else None."""
        if name in self.initializers:
            return numpy_helper.to_array(self.initializers[name])
        node = self.producer.get(name)
        if node is not None and node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    return numpy_helper.to_array(attr.t)
                if attr.name == "value_float":
                    return np.array(attr.f, dtype=np.float32)
                if attr.name == "value_floats":
                    return np.array(list(attr.floats), dtype=np.float32)
                if attr.name == "value_int":
                    return np.array(attr.i, dtype=np.int64)
                if attr.name == "value_ints":
                    return np.array(list(attr.ints), dtype=np.int64)
        return None

    def constant_value(self, name: str) -> np.ndarray:
        """:meth:`constant`, for a tensor known to be constant.

        Raises
        ------
        ValueError
            ``name`` is not an initializer or a ``Constant`` node output.
        """
        value = self.constant(name)
        if value is None:
            raise ValueError(f"{name!r} is not a constant of the graph")
        return value

    def is_constant(self, name: str) -> bool:
        """True when ``name`` is an initializer or produced by a ``Constant`` node."""
        if name in self.initializers:
            return True
        node = self.producer.get(name)
        return node is not None and node.op_type == "Constant"

    def constant_dtype(self, name: str) -> Optional[int]:
        """ONNX element type of a constant without converting it to numpy (fp8 safe)."""
        if name in self.initializers:
            return self.initializers[name].data_type
        node = self.producer.get(name)
        if node is not None and node.op_type == "Constant":
            for attr in node.attribute:
                if attr.name == "value":
                    return attr.t.data_type
        return None

    def constant_size(self, name: str) -> Optional[int]:
        """Number of elements of a constant, or None if ``name`` is not constant."""
        tensor = self.initializers.get(name)
        if tensor is None:
            node = self.producer.get(name)
            if node is None or node.op_type != "Constant":
                return None
            for attr in node.attribute:
                if attr.name == "value":
                    tensor = attr.t
                elif attr.name in ("value_floats", "value_ints"):
                    return len(attr.floats) or len(attr.ints)
                elif attr.name in ("value_float", "value_int"):
                    return 1
            if tensor is None:
                return None
        return int(np.prod(tensor.dims)) if len(tensor.dims) else 1


def attribute(node: onnx.NodeProto, name: str, default=None):
    """Value of a node attribute by name, or ``default``."""
    for attr in node.attribute:
        if attr.name == name:
            return onnx.helper.get_attribute_value(attr)
    return default


def default_opset(model: onnx.ModelProto) -> int:
    """The model's default-domain (``ai.onnx``) opset, 0 when it imports none."""
    for o in model.opset_import:
        if o.domain in ("", "ai.onnx"):
            return int(o.version)
    return 0


def dtype_name(elem_type: int) -> str:
    """Lower-case name of an ONNX element type, e.g. ``float32``, ``int8``, ``float8e4m3fn``."""
    try:
        np_dtype = onnx.helper.tensor_dtype_to_np_dtype(elem_type)
        name = np.dtype(np_dtype).name
    except (KeyError, TypeError, ValueError):
        name = onnx.TensorProto.DataType.Name(elem_type).lower()
    # ml_dtypes-backed fp8 types come back as e.g. "float8_e4m3fn"; ONNX spells them without "_".
    onnx_name = onnx.TensorProto.DataType.Name(elem_type).lower()
    if onnx_name.startswith("float8") or onnx_name in ("bfloat16", "int4", "uint4", "float4e2m1"):
        return onnx_name
    return name


def subgraph_reads(nodes: Iterable[onnx.NodeProto]) -> Set[str]:
    """Names read inside the If/Loop/Scan bodies of ``nodes``, nested bodies included (outer-scope values)."""
    read: Set[str] = set()
    for node in nodes:
        for attr in node.attribute:
            for g in list(attr.graphs) + ([attr.g] if attr.HasField("g") else []):
                read.update(i for n in g.node for i in n.input)
                read.update(subgraph_reads(g.node))
    return read


def graph_values(graph: onnx.GraphProto) -> Dict[str, onnx.TensorProto]:
    """Name -> value of every initializer and ``Constant`` output (its ``value`` attribute) of ``graph``."""
    values = {t.name: t for t in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant" and n.output:
            for a in n.attribute:
                if a.name == "value":
                    values[n.output[0]] = a.t
    return values
