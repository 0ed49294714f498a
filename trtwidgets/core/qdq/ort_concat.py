"""A Concat between quantizers in an FP16/BF16 float part, written so that ONNX Runtime's default session loads it.

ONNX Runtime's extended optimizer (on in a default ``SessionOptions``) fuses ``DequantizeLinear -> Concat ->
QuantizeLinear`` into its ``QLinearConcat``. The rule (``onnxruntime/core/optimizer/qdq_transformer/
selectors_actions``: ``VariadicOpQDQRules``, ``VariadicNodeGroupSelector``) matches a Concat whose every input
is a DequantizeLinear and whose every reader is a QuantizeLinear, all of one integer type; it checks no scale
type, and ``QLinearConcat`` takes FP32 scales only, so an export whose scales are FP16 fails to load
(``Type 'tensor(float16)' of input parameter (...) of operator (QLinearConcat) ... is invalid``: the PP-OCRv4
text detector exported for TensorRT 10, issue 44). ONNX Runtime 1.32's other fusions of such nodes (Add, Mul,
the pools, Sigmoid, Softmax, Conv, MatMul) load with FP16 scales (``tests/core/qdq/test_ort_default_session.py``).

:func:`fp32_concat_quantizers` writes each QuantizeLinear that reads such a Concat in FP32: its input through a
``Cast`` to FP32, its scale an FP32 initializer holding the same value (every FP16 or BF16 number is an FP32
number). The Concat's reader is then a Cast, the rule does not match, and the model computes what it did: the
Cast widens exactly, and the quantizer divides by the same scale. This is the form ModelOpt's PyTorch export
writes for every quantizer of an FP16 model (``trt_high_precision_dtype="Float"``: ``Cast`` to FP32, then
QuantizeLinear with an FP32 scale).

What TensorRT builds stays the same, by its Q/DQ rules. TensorRT 10 builds these exports weakly typed (the FP16
and INT8 flags): there a model's float types are not precisions, the Q/DQ layers alone fix where INT8 runs, and
a float-to-float Cast constrains no layer (Torch-TensorRT's mixed-precision guide: weakly typed TensorRT ran the
layers a model casts to FP16 in FP32). The Concat's QuantizeLinear is still moved backward over the Concat, each
``DequantizeLinear -> QuantizeLinear`` pair of equal scales it meets there is removed (ModelOpt's
``get_concat_eliminated_tensors`` describes this elimination), and scales are compared by value, which the FP32
copy keeps. ``tests/gpu/test_ort_concat_forms.py`` builds both forms and compares every layer's precision; a
strongly typed build (TensorRT 11) honours the Cast's type, so there it is a layer of its own unless TensorRT
fuses it into the quantizer.
"""

from __future__ import annotations

from typing import Dict, List, Tuple

import numpy as np
import onnx
from onnx import helper, numpy_helper

from ..model.graph_patterns import node_label
from .low_precision_storage import fresh_name

__all__ = ["ORT_CONCAT_REASON", "fp32_concat_quantizers"]

#: Why such a QuantizeLinear is written in FP32 (a row of the float part's ``kept_fp32``).
ORT_CONCAT_REASON = ("reads a Concat of dequantized tensors: ONNX Runtime's default session fuses DequantizeLinear -> "
                     "Concat -> QuantizeLinear into QLinearConcat, which takes FP32 scales only; the same scale in "
                     "FP32 and a Cast keep the pattern unfused (what TensorRT builds is the same)")


def _values(graph: onnx.GraphProto) -> Dict[str, onnx.TensorProto]:
    values = {t.name: t for t in graph.initializer}
    for n in graph.node:
        if n.op_type == "Constant" and n.output:
            for a in n.attribute:
                if a.name == "value":
                    values[n.output[0]] = a.t
    return values


def _fused_concats(graph: onnx.GraphProto, values: Dict[str, onnx.TensorProto]) -> Dict[str, List[onnx.NodeProto]]:
    """Concat output -> the QuantizeLinears reading it, for each Concat ONNX Runtime's rule would fuse with a
    scale that is not FP32 (an FP32 export matches too, and loads: QLinearConcat takes its scales)."""
    made_by = {o: n for n in graph.node for o in n.output}
    readers: Dict[str, List[onnx.NodeProto]] = {}
    for n in graph.node:
        for x in n.input:
            readers.setdefault(x, []).append(n)
    outputs = {v.name for v in graph.output}

    def low_scale(n: onnx.NodeProto) -> bool:
        t = values.get(n.input[1]) if len(n.input) > 1 else None
        return t is not None and t.data_type != onnx.TensorProto.FLOAT

    out = {}
    for n in graph.node:
        if n.op_type != "Concat" or n.output[0] in outputs:
            continue
        read = [x for x in n.input if x]
        dqs = [d for x in read if (d := made_by.get(x)) is not None]
        qs = readers.get(n.output[0], [])
        if dqs and qs and len(dqs) == len(read) and all(d.op_type == "DequantizeLinear" for d in dqs) \
                and all(q.op_type == "QuantizeLinear" for q in qs) and any(map(low_scale, dqs + qs)):
            out[n.output[0]] = qs
    return out


def fp32_concat_quantizers(graph: onnx.GraphProto) -> List[Tuple[str, str]]:
    """Write each QuantizeLinear that reads a Concat of DequantizeLinears in FP32 (see the module docstring).

    Parameters
    ----------
    graph : onnx.GraphProto
        A Q/DQ model's graph with its float part converted; changed in place (Casts inserted before the
        QuantizeLinears, in topological order; an FP32 copy of each scale they read).

    Returns
    -------
    list of (str, str)
        Each QuantizeLinear written in FP32 (its label) and why.
    """
    values = _values(graph)
    fused = _fused_concats(graph, values)
    if not fused:
        return []
    taken = {t.name for t in graph.initializer} | {o for n in graph.node for o in n.output}
    taken |= {v.name for v in graph.input}
    casts: Dict[str, onnx.NodeProto] = {}  # Concat output -> its Cast to FP32
    wide: Dict[str, str] = {}              # low-precision scale -> its FP32 copy
    rows = []
    nodes = []
    for n in graph.node:
        qs = fused.get(n.input[0]) if n.op_type == "QuantizeLinear" else None
        if qs is not None and any(q is n for q in qs):
            src, scale = n.input[0], n.input[1]
            if src not in casts:
                out = fresh_name(f"{src}__fp32", taken)
                casts[src] = helper.make_node("Cast", [src], [out], name=fresh_name(f"{out}_Cast", taken),
                                              to=onnx.TensorProto.FLOAT)
                nodes.append(casts[src])
            if values[scale].data_type != onnx.TensorProto.FLOAT and scale not in wide:
                wide[scale] = fresh_name(f"{scale}__fp32", taken)
                arr = numpy_helper.to_array(values[scale]).astype(np.float32)  # exact: FP16/BF16 fit in FP32
                graph.initializer.append(numpy_helper.from_array(arr, wide[scale]))
            n.input[0], n.input[1] = casts[src].output[0], wide.get(scale, scale)
            rows.append((node_label(n), ORT_CONCAT_REASON))
        nodes.append(n)
    del graph.node[:]
    graph.node.extend(nodes)
    return rows
