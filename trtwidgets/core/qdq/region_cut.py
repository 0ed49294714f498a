"""One region cut out of a written Q/DQ model: a sub-model TensorRT builds and times as the region runs in context.

The measured placement search times a scheme on one instance of its pattern, not on the whole model.
The instance is cut out of the whole model's Q/DQ export (written with the scheme), so it keeps exactly
the borders it has there: the Q/DQ pairs on its inputs, the choices inside it, and on each output the
quantize its readers outside apply (a tensor the next layer reads in INT8 is written INT8 by the region,
as in the whole engine). Inputs take the real shapes given (the plan's batch, from a sample run).
"""

from __future__ import annotations

from typing import Dict, List, Mapping, Sequence, Set

import onnx
from onnx import helper

from ..common.errors import UserError
from ..model.graph_patterns import node_label

__all__ = ["RegionCutError", "cut_region"]

_QDQ = ("QuantizeLinear", "DequantizeLinear")


class RegionCutError(UserError):
    """A region cannot be cut out as a model of its own."""


def _outputs(graph: onnx.GraphProto, region: Set[str], outputs: Sequence[str], cons) -> List[str]:
    """The sub-model's outputs: a region output as its outside readers read it (through their Q/DQ, or float)."""
    graph_outputs = {o.name for o in graph.output}
    out: List[str] = []
    for t in outputs:
        quantized = [dq.output[0] for q in cons.get(t, []) if q.op_type == "QuantizeLinear"
                     for dq in cons.get(q.output[0], []) if dq.op_type == "DequantizeLinear"
                     and any(node_label(r) not in region for r in cons.get(dq.output[0], []))]
        float_read = t in graph_outputs or any(node_label(c) not in region and c.op_type not in _QDQ
                                               for c in cons.get(t, []))
        out.extend(quantized)
        if float_read or not quantized:
            out.append(t)
    return list(dict.fromkeys(out))


def cut_region(qdq: onnx.ModelProto, nodes: Sequence[str], inputs: Sequence[str], outputs: Sequence[str],
               input_shapes: Mapping[str, Sequence[int]], name: str = "region") -> onnx.ModelProto:
    """The region of ``nodes`` (labels of the float model's nodes) out of the Q/DQ model ``qdq``.

    Parameters
    ----------
    qdq : onnx.ModelProto
        The whole model's Q/DQ export.
    nodes, inputs, outputs : sequence of str
        The region's node labels, the activations it reads and the tensors it writes for outside
        (:class:`~.repeated_patterns.RegionInstance`).
    input_shapes : mapping
        Input tensor -> its real shape (every input needs one).
    name : str
        The sub-model's graph name.

    Raises
    ------
    RegionCutError
        An input without a shape, or a region whose outputs need nodes outside it (other than its Q/DQ pairs
        and constants).
    """
    graph = qdq.graph
    missing = [t for t in inputs if t not in input_shapes]
    if missing:
        raise RegionCutError(f"No shape for the region input {missing[0]!r}.",
                             "A sub-model is built at its real input shapes.",
                             "Give every input's shape (from a sample run at the plan's batch).")
    cons: Dict[str, list] = {}
    for n in graph.node:
        for t in n.input:
            cons.setdefault(t, []).append(n)
    prod = {o: n for n in graph.node for o in n.output if o}
    region = set(nodes)
    outs = _outputs(graph, region, outputs, cons)
    stop = set(inputs)
    keep: Set[int] = set()
    pos = {id(n): i for i, n in enumerate(graph.node)}
    todo = list(outs)
    while todo:
        t = todo.pop()
        p = prod.get(t)
        if t in stop or p is None or pos[id(p)] in keep:
            continue
        if p.op_type not in _QDQ + ("Constant",) and node_label(p) not in region:
            raise RegionCutError(f"The region needs {node_label(p)}, which is outside it.",
                                 f"Its outputs {', '.join(outs)} depend on more than its nodes and inputs.",
                                 "Cut a region whose inputs are all listed.")
        keep.add(pos[id(p)])
        todo.extend(i for i in p.input if i)
    kept = [graph.node[i] for i in sorted(keep)]
    used = {t for n in kept for t in n.input}
    dtypes = {vi.name: vi.type.tensor_type.elem_type for vi in list(graph.input) + list(graph.value_info)}
    g = helper.make_graph(
        kept, name,
        [helper.make_tensor_value_info(t, dtypes.get(t) or onnx.TensorProto.FLOAT, [int(d) for d in input_shapes[t]])
         for t in inputs],
        [helper.make_tensor_value_info(t, 0, None) for t in outs],
        [init for init in graph.initializer if init.name in used])
    model = helper.make_model(g, opset_imports=list(qdq.opset_import), producer_name="trtwidgets-region")
    model.ir_version = qdq.ir_version
    done = onnx.shape_inference.infer_shapes(model).graph
    inferred = {vi.name: vi for vi in list(done.value_info) + list(done.output) if vi.type.tensor_type.elem_type}
    for o in model.graph.output:
        if o.name in inferred:
            o.type.CopyFrom(inferred[o.name].type)
        else:
            o.type.CopyFrom(helper.make_tensor_type_proto(onnx.TensorProto.FLOAT, None))
    onnx.checker.check_model(model)
    return model
